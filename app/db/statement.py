"""Which statements ad-hoc SQL may run, decided by DuckDB's own parser.

A plain read (SELECT, WITH ... SELECT, FROM, VALUES, SUMMARIZE, DESCRIBE, SHOW) runs as sent.
``EXPLAIN`` runs the statement inside it (``EXPLAIN ANALYZE COPY ... TO 'metrics.jsonl'``
overwrote a log, ``EXPLAIN ANALYZE SET memory_limit='4MB'`` starved ingest), yet DuckDB reports
every EXPLAIN with one type, whatever it wraps. So the EXPLAIN is taken apart with DuckDB's
tokenizer, the statement inside must itself parse as one SELECT, and what runs is an EXPLAIN
rebuilt from that checked SELECT and the options understood here, never the text as sent::

    read_statement("/* hi */ explain (analyze, format json) SELECT 1")
    -> Statement(run="EXPLAIN (ANALYZE, FORMAT json) SELECT 1", read="SELECT 1")
    read_statement("EXPLAIN ANALYZE SET memory_limit='4MB'")   -> CliffwatchError (403)
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..errors import CliffwatchError

_ANALYZE = {"analyze", "analyse"}
_FORMATS = {"text", "json", "html", "graphviz", "yaml", "mermaid"}
_BOOLEANS = {"true": True, "false": False, "on": True, "off": False, "1": True, "0": False}
_READS = "SELECT, WITH ... SELECT, or EXPLAIN [ANALYZE] of a SELECT"


@dataclass(frozen=True)
class Statement:
    run: str  # what to execute
    read: str  # the plain read it runs (itself, or the SELECT inside an EXPLAIN)


def read_statement(sql: str) -> Statement:
    """The statement to run for ``sql``: the plain read as sent, or an EXPLAIN rebuilt around
    the checked read inside it; a CliffwatchError says why ``sql`` is refused."""
    kind = _single_type(sql)
    if kind == duckdb.StatementType.SELECT:
        return Statement(sql, sql)
    if kind != duckdb.StatementType.EXPLAIN:
        raise _refused(kind.name)
    prefix, inner = _split_explain(sql)
    inner_kind = _single_type(inner)
    if inner_kind != duckdb.StatementType.SELECT:
        raise _refused(f"EXPLAIN of {inner_kind.name}")
    rebuilt = prefix + inner
    if _single_type(rebuilt) != duckdb.StatementType.EXPLAIN:  # a prefix that fused with inner
        raise _refused("this EXPLAIN")
    return Statement(rebuilt, inner)


def _single_type(sql: str) -> duckdb.StatementType:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise CliffwatchError(f"SQL syntax error: {str(exc).strip().splitlines()[0]}") \
            from None
    if not statements:
        raise CliffwatchError("empty query; write a SELECT statement")
    if len(statements) > 1:
        raise CliffwatchError("send one statement at a time (found "
                              f"{len(statements)} separated by ';')")
    return statements[0].type


def _refused(what: str) -> CliffwatchError:
    return CliffwatchError(f"only read queries are allowed ({_READS}), not {what}", status=403)


def _tokens(sql: str) -> list[tuple[int, str]]:
    """(position, lower-cased text) of each token DuckDB's tokenizer finds, comments left out."""
    found = duckdb.tokenize(sql)
    ends = [pos for pos, _ in found[1:]] + [len(sql)]
    pairs = zip(found, ends, strict=True)
    return [(pos, sql[pos:end].strip().lower()) for (pos, kind), end in pairs
            if kind != duckdb.token_type.comment]


def _split_explain(sql: str) -> tuple[str, str]:
    """("EXPLAIN <options> ", the text of the statement inside) for an EXPLAIN statement."""
    tokens = _tokens(sql)
    if len(tokens) < 2 or tokens[0][1] != "explain":
        raise _refused("this EXPLAIN")
    head = tokens[1][1]
    if head in _ANALYZE:
        return "EXPLAIN ANALYZE ", _rest(sql, tokens, 2)
    if head == "(" and len(tokens) > 2 and (tokens[2][1] in _ANALYZE or tokens[2][1] == "format"):
        close = next((i for i, (_, text) in enumerate(tokens) if text == ")"), None)
        if close is None:
            raise _refused("this EXPLAIN")
        return _options([text for _, text in tokens[2:close]]), _rest(sql, tokens, close + 1)
    return "EXPLAIN ", sql[tokens[1][0]:]


def _rest(sql: str, tokens: list[tuple[int, str]], index: int) -> str:
    if index >= len(tokens):
        raise CliffwatchError("EXPLAIN needs a SELECT statement after it")
    return sql[tokens[index][0]:]


def _options(words: list[str]) -> str:
    """The canonical text of the EXPLAIN options understood here: ANALYZE [bool], FORMAT name."""
    analyze, fmt, i = False, None, 0
    words = [w for w in words if w != ","]
    while i < len(words):
        if words[i] in _ANALYZE:
            analyze, i = True, i + 1
            if i < len(words) and words[i] in _BOOLEANS:
                analyze, i = _BOOLEANS[words[i]], i + 1
        elif words[i] == "format" and i + 1 < len(words) and words[i + 1] in _FORMATS:
            fmt, i = words[i + 1], i + 2
        else:
            raise CliffwatchError(f"EXPLAIN option {words[i]!r} is not supported; use "
                                  "EXPLAIN, EXPLAIN ANALYZE or EXPLAIN (ANALYZE, FORMAT json)",
                                  status=403)
    options = (["ANALYZE"] if analyze else []) + ([f"FORMAT {fmt}"] if fmt else [])
    return f"EXPLAIN ({', '.join(options)}) " if options else "EXPLAIN "
