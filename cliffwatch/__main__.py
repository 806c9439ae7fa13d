"""`python -m cliffwatch COMMAND ...`, the same as the `cliffwatch` command."""

from .command import main

raise SystemExit(main())
