"""The archive's memory: per table and run, how far the last export went. It is written last
(and every few seconds during a long export), so it never counts a file that is not
complete; a part written after it was saved is written again by the next export::

    {"format": 1, "archive": "9f1c2e7a…", "database": "2026-11-30 04:52:15.123",
     "tables": {"metrics": {"sweep/lr 1e-4": {"mark": 999999, "rows": 1000000, "parts": 1}},
                "incidents": {"sweep/lr 1e-4": {"mark": 8815…, "rows": 3, "parts": 1}}}}

``mark`` is the highest row id written (``line_id`` for metrics) or, for a table whose rows
change in place, the fingerprint of the rows written. ``archive`` is a random id written into
every part's Parquet metadata: an export removes a part only if it carries this id (see
layout.clear_unrecorded), so a file of someone else's in the folder is never touched.
"""

from __future__ import annotations

import secrets
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
    archive: str = field(default_factory=lambda: secrets.token_hex(16))

    @classmethod
    def load(cls, root: Path) -> Manifest:
        path = root / layout.MANIFEST
        try:
            saved = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            return cls._new(path)
        except (OSError, orjson.JSONDecodeError) as exc:
            raise CliffwatchError(f"cannot read {path} ({exc}); it records what the archive "
                                  "holds: export to a new --to folder instead") from None
        if saved.get("format") != FORMAT:
            raise CliffwatchError(f"{path} has format {saved.get('format')!r}, not {FORMAT}; "
                                  "export to a new --to folder")
        # an archive written before ids existed gets one now; its older parts are never removed
        return cls(path, saved.get("database"), saved.get("tables", {}),
                   saved.get("archive") or secrets.token_hex(16))

    @classmethod
    def _new(cls, path: Path) -> Manifest:
        """A new archive's manifest, saved before any part: the parts of a killed first export
        carry its id, so the next export can tell them from files that are not its own (the
        CLI refuses a --to folder holding other files, cli/export.py)."""
        manifest = cls(path)
        manifest.save()
        return manifest

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
        layout.write_manifest({"format": FORMAT, "archive": self.archive,
                               "database": self.database, "tables": self.tables}, self.path)
