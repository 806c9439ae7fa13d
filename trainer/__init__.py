"""cliffwatch's bundled trainer: a small DFlash-style drafter pipeline writing log format v1.

Run it with `python -m trainer --out runs/NAME --preset demo`; see docs/trainer.md.
"""
