"""`python -m app COMMAND ...`; see app/cli/main.py."""

from app.cli.main import main

raise SystemExit(main())
