"""`sql "QUERY"`: ask the running server over HTTP when one holds the database; otherwise open
the file read-only ourselves (reach.py decides). DuckDB lets only one process hold a file, so
this is the one way to query while a server runs.

    $ python -m app sql "SELECT step, loss FROM metrics WHERE run = 'demo' LIMIT 2"
    step  loss
    ----  ------
    1     6.2101
    3     6.0132
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

import orjson

from ..db import queries
from ..db.database import Database
from ..db.readonly import jsonable, run_readonly
from ..errors import CliffwatchError
from ..reach import Server, open_target
from ..read.known_runs import unknown_run


def sql_command(text: str | None, name: str | None, params: list[str], logdir: Path,
                db: Path | None, fmt: str, settings) -> int:
    if bool(text) == bool(name):
        raise CliffwatchError('give either SQL text or --query NAME (see `ls queries/`), e.g. '
                              'sql --query time_gaps --param run=demo')
    if db is None and not Path(logdir).exists():
        raise CliffwatchError(f"{logdir} does not exist; pass --logdir with the folder that "
                              "`serve` or `ingest` reads (default runs), or --db FILE")
    named = None
    if name:
        query = queries.load(name)
        named = (name, query.bind(query.convert(_pairs(params))))
    result = run_query(text, logdir, db, settings, named)
    if not result["rows"]:
        _say_unknown_run(_run_named(text, named), logdir, db, settings, strict=bool(named))
    sys.stdout.write(render(result, fmt))
    if result["truncated"]:
        reason = result.get("truncated_reason") or (
            f"stopped at {len(result['rows'])} rows; add LIMIT or raise --sql-max-rows")
        print(f"cliffwatch: output truncated: {reason}", file=sys.stderr)
    return 0


RUN_LITERAL = re.compile(r"\brun\s*=\s*'((?:[^']|'')*)'", re.IGNORECASE)


def _run_named(text: str | None, named: tuple[str, dict] | None) -> str | None:
    """The run an empty answer was about: the named query's run, or the one run SQL text
    compares with (``WHERE run = 'demo'``); None for none or several."""
    if named:
        run = named[1].get("run")
        return run if isinstance(run, str) else None
    found = {m.replace("''", "'") for m in RUN_LITERAL.findall(text or "")}
    return found.pop() if len(found) == 1 else None


def _say_unknown_run(run: str | None, logdir: Path, db: Path | None, settings,
                     strict: bool) -> None:
    """An empty answer about a run that does not exist says which runs do: an error for a
    named query's --param run, a note on stderr for SQL text (whose query was right)."""
    if run is None:
        return
    found = run_query(None, logdir, db, settings, ("run_known", {"run": run}))
    problem = unknown_run(dict(zip(found["columns"], found["rows"][0], strict=True)), run)
    if problem and strict:
        raise CliffwatchError(f"{problem}; pass --param run=NAME with one of them")
    if problem:
        print(f"cliffwatch: {problem}", file=sys.stderr)


def _pairs(params: list[str]) -> dict[str, str]:
    pairs = {}
    for item in params:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliffwatchError(f"--param takes NAME=VALUE, got {item!r}")
        pairs[key] = value
    return pairs


def run_query(query: str | None, logdir: Path, db: Path | None, settings,
              named: tuple[str, dict] | None = None) -> dict:
    """The result as the API's JSON shape: {"columns", "rows", "truncated", ...}. ``named``
    is (query name, bound parameters) instead of SQL text."""
    target = open_target(logdir, db, settings, command="sql")
    if isinstance(target, Server):
        return _named_http(target, *named) if named else _over_http(target, query)
    try:
        return _local(target, query, settings, named)
    finally:
        target.close()


def _over_http(server: Server, query: str) -> dict:
    return server.call("POST", "/api/sql", json={"sql": query}, timeout=None)


def _named_http(server: Server, name: str, params: dict) -> dict:
    texts = {k: "null" if v is None else str(v) for k, v in params.items()}
    return server.call("GET", f"/api/query/{name}", params=texts, timeout=None)


def _local(db: Database, query: str | None, settings, named=None) -> dict:
    params = None
    if named:
        query, params = queries.load(named[0]).text(), named[1]
    return run_readonly(db.cursor(), query, params=params, max_rows=settings.sql_max_rows,
                        time_limit=settings.sql_time_limit,
                        max_bytes=settings.sql_max_bytes).to_json()


def render(result: dict, fmt: str) -> str:
    columns, rows = result["columns"], result["rows"]
    if fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        return orjson.dumps(records, option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        import io

        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(columns)
        writer.writerows(rows)
        return buffer.getvalue()
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    if not rows:  # a header alone reads as if something failed
        lines.append("(0 rows)")
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _cell(value) -> str:
    value = jsonable(value)
    return "NULL" if value is None else str(value)
