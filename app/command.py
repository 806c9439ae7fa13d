"""How a user runs cliffwatch, for messages that tell them what to type: ``cliffwatch`` when
installed (``pip install .``: this package is ``cliffwatch.app``), ``python -m app`` in a
checkout."""

COMMAND = "cliffwatch" if (__package__ or "").startswith("cliffwatch.") else "python -m app"
