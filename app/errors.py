"""The one exception type shown to users: a message that says what happened and what to do.

Rendered once at each edge: the CLI prints it without a traceback, the HTTP API returns it as
``{"error": "..."}`` with a 4xx status, the dashboard shows it with ``st.error``.
"""


class CliffwatchError(Exception):
    """A user-facing error; ``str(err)`` is the whole message."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status
