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
        first.wait()                  # the tick's own error, if it raised one
        worker.follow()
"""

from __future__ import annotations

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

    def wait(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error

    def __enter__(self) -> CatchUp:
        self.thread.start()
        return self

    def __exit__(self, kind, exc, trace) -> None:
        # a mistake found meanwhile (the alert rules) waits for the tick: the database is
        # closed only once no statement runs on it. Ctrl-C does not wait: closing the
        # database interrupts the statement, and an uncommitted tick stores nothing
        if kind is None or issubclass(kind, Exception):
            self.thread.join()
