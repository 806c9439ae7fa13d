"""cliffwatch, installed: the checkout's app/, trainer/, queries/ and the demo's sample under
one name (see setup.py), so ``pip install .`` adds no generic top-level name such as ``app``.

The command is ``cliffwatch`` (``python -m cliffwatch`` too); a checkout runs the same code
as ``python -m app``.
"""
