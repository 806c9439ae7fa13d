"""`python -m app COMMAND ...`; see app/cli/main.py."""

from .cli.main import main

raise SystemExit(main())
