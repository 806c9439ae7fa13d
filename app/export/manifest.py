"""The archive's memory: per table and run, how far the last export went. It is written last
(and every few seconds during a long export), so it never counts a file that is not
complete; a part written after it was saved is written again by the next export::

    {"format": 1, "database": "2026-11-30 04:52:15.123",
     "tables": {"metrics": {"sweep/lr 1e-4": {"mark": 999999, "rows": 1000000, "parts": 1}},
                "incidents": {"sweep/lr 1e-4": {"mark": 8815…, "rows": 3, "parts": 1}}}}

``mark`` is the highest row id written (``line_id`` for metrics) or, for a table whose rows
change in place, the fingerprint of the rows written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from ..command import COMMAND
from ..errors import CliffwatchError
from . import layout

FORMAT = 1


@dataclass
class Manifest:
    path: Path
    database: str | None = None
    tables: dict[str, dict[str, dict]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path) -> Manifest:
        path = root / layout.MANIFEST
        try:
            saved = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return cls(path)
        except (OSError, orjson.JSONDecodeError) as exc:
            raise CliffwatchError(f"cannot read {path} ({exc}); it records what the archive "
                                  "holds: export to a new --to folder instead") from None
        if saved.get("format") != FORMAT:
            raise CliffwatchError(f"{path} has format {saved.get('format')!r}, not {FORMAT}; "
                                  "export to a new --to folder")
        return cls(path, saved.get("database"), saved.get("tables", {}))

    def check_database(self, database: str | None) -> None:
        """An archive continues the database it was started from: another one (rebuilt by a
        new `ingest`) numbers its rows again from 0, and its new rows would be skipped."""
        if self.database is None:
            self.database = database
        elif database != self.database:
            raise CliffwatchError(
                f"{self.path.parent} was exported from another database (created "
                f"{self.database}; this one was created {database}); its rows are numbered "
                f"anew, so continuing would skip or repeat rows. Export to a new --to folder, "
                f"or `{COMMAND} export` from the database the archive was started from")

    def done(self, table: str, run: str) -> dict:
        return self.tables.get(table, {}).get(run, {"mark": None, "rows": 0, "parts": 0})

    def record(self, table: str, run: str, mark, rows: int, parts: int) -> None:
        self.tables.setdefault(table, {})[run] = {"mark": mark, "rows": rows, "parts": parts}

    def save(self) -> None:
        layout.write_manifest({"format": FORMAT, "database": self.database, "tables": self.tables},
                          self.path)
