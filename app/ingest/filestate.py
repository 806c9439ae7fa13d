"""One tracked log file's position, as stored in the ``files`` table.

A ``FileState`` mirrors one row of ``files``; the tailer changes it in memory only after the
transaction that stores it has committed::

    FileState(file_id=3, run="demo", path="demo/metrics.jsonl", kind="metrics",
              inode=1234, size=81920, offset=81920, attempt=1, last_step=400, lines=200)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FileState:
    file_id: int
    run: str
    path: str
    kind: str
    inode: int | None = None
    size: int = 0
    offset: int = 0
    head: str | None = None
    attempt: int = 0
    last_step: int | None = None
    lines: int = 0
    mtime: float | None = None
    state: str = "ok"
    crlf_reported: bool = False
    partial_reported: int | None = None

    @property
    def rank(self) -> int | None:
        from app.ingest.scan import LogFile

        return LogFile(self.path, self.run, self.kind).rank
