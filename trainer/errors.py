"""The one exception type for mistakes a user can fix; `python -m trainer` prints it without a
traceback, e.g. ``error: unknown preset 'demoo'; choose one of: demo, fixed, tiny``."""


class TrainerError(Exception):
    """A user-facing error: the message says what happened and which flag changes it."""
