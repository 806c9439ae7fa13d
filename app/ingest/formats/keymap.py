"""Extra key mappings for other trainers' JSONL logs, per run glob, for keys the defaults in
keys.py do not know. A TOML file (``--keys``, default ``LOGDIR/keys.toml`` if it exists)::

    [[map]]
    runs = "lightning/*"            # run ids it applies to (a glob; the first match wins)
    step = "trainer/global_step"    # the key that holds the step ("/" reaches into objects)
    elapsed_s = "time/elapsed"      # seconds since the start, or H:MM:SS
    time = "wall"                   # Unix seconds, or ISO 8601 text
    rename = { "train/loss_step" = "loss" }   # a key (after flattening) -> the name stored

makes ``{"trainer": {"global_step": 40}, "train": {"loss_step": 2.1}, "wall": 1.7e9}`` in
the run ``lightning/v3`` the v1 line ``{"step": 40, "loss": 2.1, "time": 1.7e9}``. Each
mapped key is tried before the default aliases of its kind.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import CliffwatchError

FIELDS = ("runs", "step", "elapsed_s", "time", "rename")
FILE = "keys.toml"  # looked for in the log directory when --keys is not given


@dataclass(frozen=True)
class KeyMap:
    runs: str = "*"
    step: str | None = None
    elapsed_s: str | None = None
    time: str | None = None
    rename: dict[str, str] = field(default_factory=dict)

    def lifted(self, obj: dict) -> dict:
        """``obj`` with each mapped key that reaches into objects (``a/b``) also at the top
        level under that name, where the aliases look."""
        paths = [p for p in (self.step, self.elapsed_s, self.time) if p and "/" in p]
        if not paths:
            return obj
        out = dict(obj)
        for path in paths:
            value = _get(obj, path.split("/"))
            if value is not None:
                out[path] = value
        return out


def _get(obj: object, parts: list[str]) -> object:
    for part in parts:
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def path_for(setting: str, logdir: Path) -> Path | None:
    """The mappings file: ``--keys`` if given, else ``LOGDIR/keys.toml`` if it exists."""
    if setting:
        return Path(setting)
    default = Path(logdir) / FILE
    return default if default.is_file() else None


def load(path: Path | None) -> list[KeyMap]:
    """The mappings in ``path`` (none if None); a CliffwatchError says what is wrong where."""
    if path is None:
        return []
    try:
        tables = tomllib.loads(path.read_text()).get("map", [])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CliffwatchError(f"{path}: cannot read the key mappings ({exc}); fix the file or "
                              "pass --keys with another one") from None
    if not isinstance(tables, list):
        raise CliffwatchError(f"{path}: 'map' must be an array of tables ([[map]])")
    return [_one(path, i, table) for i, table in enumerate(tables, 1)]


def _one(path: Path, number: int, table: object) -> KeyMap:
    where = f"{path}: [[map]] {number}"
    if not isinstance(table, dict):
        raise CliffwatchError(f"{where} is not a table")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise CliffwatchError(f"{where}: unknown field(s) {', '.join(unknown)}; the fields are "
                              f"{', '.join(FIELDS)}")
    for name in FIELDS[:4]:
        if name in table and not (isinstance(table[name], str) and table[name]):
            raise CliffwatchError(f"{where}: '{name}' must be a non-empty string")
    rename = table.get("rename", {})
    if not isinstance(rename, dict) or not all(isinstance(v, str) and v
                                               for v in rename.values()):
        raise CliffwatchError(f"{where}: 'rename' must map keys to names, e.g. "
                              '{ "train/loss_step" = "loss" }')
    return KeyMap(**{k: v for k, v in table.items() if k != "rename"}, rename=dict(rename))


def for_run(maps: list[KeyMap], run: str) -> KeyMap | None:
    """The first mapping whose glob matches the run id."""
    return next((m for m in maps if fnmatch.fnmatchcase(run, m.runs)), None)
