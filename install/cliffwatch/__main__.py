"""`python -m cliffwatch COMMAND ...`, the same as the `cliffwatch` command."""

from .app.cli.main import main

raise SystemExit(main())
