"""The server's first catch-up, begun before the web stack is imported (issue 23).

Importing Streamlit and the server's workers takes most of a second of one core, and holds
the GIL; DuckDB reads the logs without it. (pandas, a third of a second more, is imported
later by the threads that need it, once the server answers: tests/app/test_server_start.py.)
So ``serve`` opens the database, starts the ingest worker's first tick in this thread, and
only then imports the rest. The lifespan waits for the tick before the server answers, as it
waited for the tick it ran itself before::

    with CatchUp(worker) as first:   # worker.catch_up() runs in a thread from here
        app = build(...)              # Streamlit imports meanwhile
        ...                           # in the lifespan:
        if first.wait():              # the tick's own error, if it raised one; False: a
            worker.follow()           # Ctrl-C halted it, and the server stops
"""

from __future__ import annotations

import signal
import threading

from ..ingest.worker import IngestWorker


class CatchUp:
    def __init__(self, worker: IngestWorker):
        self.worker = worker
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="cliffwatch-catch-up",
                                       daemon=True)

    def _run(self) -> None:
        try:
            self.worker.catch_up()
        except BaseException as exc:  # raised again in the lifespan, where the tick ran before
            self.error = exc

    def wait(self) -> bool:
        """Wait for the tick; False if a Ctrl-C or SIGTERM stopped it early. The web server
        (uvicorn) takes those signals as its own from App.run on, and waits for the lifespan's
        start before it stops: without this, a Ctrl-C did nothing until the whole catch-up was
        read (minutes on a big folder). The tick ends at its next transaction's edge; what it
        committed is kept and the next start reads on."""
        halt = self.worker.tailer.halt
        if _server_stopping():  # a signal uvicorn took before this wait began
            halt.set()
        before = _chain(halt)
        try:
            self.thread.join()
        finally:
            _restore(before)
        if self.error is not None:
            raise self.error
        return not halt.is_set()

    def __enter__(self) -> CatchUp:
        self.thread.start()
        return self

    def __exit__(self, kind, exc, trace) -> None:
        # the database is closed only once no statement runs on it: a mistake found meanwhile
        # (the alert rules) waits for the tick; a Ctrl-C before the web server took the
        # signals halts it at its next transaction's edge first (closing the database under
        # a running statement could abort the process inside DuckDB). A second Ctrl-C here
        # does not wait.
        if kind is not None and not issubclass(kind, Exception):
            self.worker.tailer.halt.set()
        self.thread.join()


def _server_stopping() -> bool:
    """Whether the SIGINT handler in place is uvicorn's and has recorded a signal."""
    owner = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
    return bool(getattr(owner, "should_exit", False))


def _chain(halt: threading.Event) -> dict:
    """SIGINT and SIGTERM set ``halt``, then go to the handler they had (uvicorn's, which
    records them and stops the server once its start is over; or Python's); returns the
    handlers replaced, for ``_restore``. Nothing outside the main thread (a test's
    in-process server), where signal handlers cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    before = {sig: h for sig, h in before.items() if h not in (signal.SIG_IGN, None)}

    def handler(sig, frame):
        halt.set()
        previous = before[sig]
        if callable(previous):
            previous(sig, frame)
        else:  # SIG_DFL: what the signal would have done
            signal.signal(sig, previous)
            signal.raise_signal(sig)

    for sig in before:
        signal.signal(sig, handler)
    return before


def _restore(before: dict) -> None:
    for sig, previous in before.items():
        signal.signal(sig, previous)
