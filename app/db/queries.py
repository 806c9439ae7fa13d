"""Named SQL queries, loaded from ``queries/NAME.sql``.

Each file starts with a ``--`` header that documents it, for example::

    -- title: Time gaps
    -- description: Seconds and steps between consecutive logged lines.
    -- param run: run id (example: 'seed-cliff')
    -- identifier table: table to alter (example: metric_rows)

Values are always bound as DuckDB ``$name`` parameters. The only text ever substituted is an
``identifier`` (a table or column name, which SQL cannot bind), and it is quoted first.
"""

from __future__ import annotations

import functools
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CliffwatchError

QUERY_DIR = Path(__file__).resolve().parents[2] / "queries"
_HEADER = re.compile(r"^--\s*(title|description|param|identifier)\s*(\w*)\s*:\s*(.*)$")
_EXAMPLE = re.compile(r"\(example:\s*(.*)\)\s*$")


@dataclass(frozen=True)
class Param:
    name: str
    help: str
    example: str | None  # SQL literal text, used by tests and `sql --query NAME --help`

    @property
    def optional(self) -> bool:
        """A parameter documented with "(default: ...)" may be left out (bound as NULL; the
        query's coalesce() supplies the default)."""
        return "(default:" in self.help

    def convert(self, text: str):
        """A value typed in a URL or on the command line, typed like the example
        (``?min_ratio=5`` binds 5.0, ``?run=123`` stays the string "123")."""
        example = (self.example or "").strip()
        if text.lower() == "null":
            return None
        try:
            if example[:1].isdigit() or example[:1] == "-":
                return float(text) if "." in example or "." in text else int(text)
        except ValueError:
            raise CliffwatchError(f"parameter {self.name} must be a number, got {text!r}") \
                from None
        return text


@dataclass(frozen=True)
class Query:
    name: str
    title: str
    description: str
    sql: str
    params: dict[str, Param] = field(default_factory=dict)
    identifiers: dict[str, Param] = field(default_factory=dict)

    def text(self, identifiers: dict[str, str] | None = None) -> str:
        sql = self.sql
        for name in self.identifiers:
            if not identifiers or name not in identifiers:
                raise CliffwatchError(f"query {self.name!r} needs identifier {name!r}")
            sql = sql.replace("{" + name + "}", quote_identifier(identifiers[name]))
        return sql

    def convert(self, texts: dict[str, str]) -> dict:
        """Typed values from text (HTTP query string, CLI --param); unknown names are kept so
        that bind() can name them in its error."""
        return {k: self.params[k].convert(v) if k in self.params else v
                for k, v in texts.items()}

    def bind(self, values: dict) -> dict:
        """Only the declared parameters, each present; a missing one is a user error."""
        missing = [p for p, d in self.params.items() if p not in values and not d.optional]
        if missing:
            names = ", ".join(f"{p} ({self.params[p].help})" for p in missing)
            raise CliffwatchError(f"query {self.name!r} needs parameter(s): {names}; pass "
                                  f"them as --param NAME=VALUE or ?NAME=VALUE")
        unknown = sorted(set(values) - set(self.params))
        if unknown:
            raise CliffwatchError(f"query {self.name!r} has no parameter(s) "
                                  f"{', '.join(unknown)}; it takes: {', '.join(self.params)}")
        return {p: values.get(p) for p in self.params}


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse(name: str, text: str) -> Query:
    meta = {"title": name, "description": ""}
    params: dict[str, Param] = {}
    identifiers: dict[str, Param] = {}
    for key, pname, value in _header_entries(text):
        if key in ("param", "identifier"):
            example = _EXAMPLE.search(value)
            target = params if key == "param" else identifiers
            help_text = _EXAMPLE.sub("", value).strip()
            target[pname] = Param(pname, help_text, example.group(1) if example else None)
        else:
            meta[key] = value.strip()
    return Query(name, meta["title"], meta["description"], text, params, identifiers)


def _header_entries(text: str) -> list[tuple[str, str, str]]:
    """(key, name, value) of each header entry; an indented ``--`` line continues the entry
    above it (a description over several lines is read whole)."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        match = _HEADER.match(stripped)
        if match:
            entries.append(list(match.groups()))
        elif stripped.startswith("--  ") and entries:
            entries[-1][2] += " " + stripped[2:].strip()
        elif stripped and not stripped.startswith("--"):
            break
    return [tuple(e) for e in entries]


@functools.cache
def load(name: str) -> Query:
    path = QUERY_DIR / f"{name}.sql"
    if not re.fullmatch(r"[a-z0-9_]+(/[a-z0-9_]+)?", name) or not path.is_file():
        known = ", ".join(names())
        raise CliffwatchError(f"no query named {name!r}; known queries: {known}", status=404)
    return parse(name, path.read_text())


def execute(cursor, name: str, params: dict | None = None,
            identifiers: dict | None = None):
    """Run a named query on a DuckDB cursor with its parameters bound; the DuckDB result."""
    query = load(name)
    return cursor.execute(query.text(identifiers), query.bind(params or {}))


def arrow(cursor, name: str, params: dict | None = None):
    """A named query's result as an Arrow table (the relational API: no extra copy)."""
    query = load(name)
    return cursor.sql(query.text(), params=query.bind(params or {})).to_arrow_table()


# DuckDB warns that fetching Arrow from a DB-API result copies the rows once more; for the
# bounded reads of arrow_small() that copy is nothing beside planning the query twice.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result",
                        category=UserWarning, module=__name__)


def arrow_small(cursor, name: str, params: dict | None = None):
    """A named query with a bounded result (a chart's ~1,000 rows) as an Arrow table. The
    DB-API call plans the query once where the relational API of arrow() plans it twice: 4-8 ms
    less on each of the Run page's dozen reads."""
    query = load(name)
    return cursor.execute(query.text(), query.bind(params or {})).to_arrow_table()


def names() -> list[str]:
    """The named queries users may run (not migrations)."""
    return sorted(p.stem for p in QUERY_DIR.glob("*.sql"))


def all_files() -> list[str]:
    """Every query the app runs, internal ones included (``ingest/files_update_batch``), not
    migrations."""
    found = QUERY_DIR.glob("**/*.sql")
    return sorted(str(p.relative_to(QUERY_DIR).with_suffix("")) for p in found
                  if p.parent.name != "migrations")


def migrations() -> list[tuple[str, str]]:
    return [(p.stem, p.read_text()) for p in sorted((QUERY_DIR / "migrations").glob("*.sql"))]
