"""Which functions ad-hoc SQL may call, read from DuckDB's own parse tree.

The plan check (``readonly.check_plan``) sees only what the planner sees, and some functions
do their work out of its sight: ``json_execute_serialized_sql(...)`` planned as one opaque
operator, then ran a ``WITH x AS (DELETE ...)`` on a connection of its own that committed
outside the read-only transaction and past the time limit; ``destroy_external_resource
('checkpoint', ...)`` ran a checkpoint; ``setval`` broke ingest across restarts. So every
function a read names is listed from ``json_serialize_sql`` (subqueries, CTEs, lateral joins
and lambdas included) and checked:

- a table function must be on ``TABLE_FUNCTIONS``, a reviewed list of pure readers (an allow
  list: a function added by a new DuckDB or an extension is refused until reviewed);
- any function on ``REFUSED_FUNCTIONS`` (side effects, or runs SQL chosen at run time) is
  refused wherever it appears;
- a read ``json_serialize_sql`` cannot serialize (PIVOT, for one) is refused: fail closed;
- no file is read (``FILE_FUNCTIONS``, a table named like a file, ``FROM 'x.csv'``, or a table
  argument of ``query_table`` or ``histogram`` that is not a plain name) and no path is shown
  (``PATH_FUNCTIONS``, ``current_setting`` of anything but ``SHOWN_SETTINGS``): DuckDB adds
  the database file, its WAL and its temp folder to ``allowed_directories`` by itself, so
  ``read_blob`` of the database file worked, and ``duckdb_settings()`` named every path
  (issue 18, 15). Ad-hoc SQL reads the tables, not files::

      check_functions(cursor, "SELECT size FROM read_blob('cw.duckdb')")  -> CliffwatchError
      check_functions(cursor, "SELECT current_setting('temp_directory')")  -> CliffwatchError

DuckDB 2.0 has no setting that disables functions (``duckdb_settings()`` lists
``disabled_filesystems``, ``disabled_optimizers``, never functions), so this check is the
lock; the plan check, the read-only transaction and the locked configuration stay behind it.
"""

from __future__ import annotations

import re

import orjson

from ..errors import CliffwatchError
from . import queries

# Table functions a read may call, each reviewed in DuckDB 2.0 (SELECT DISTINCT function_name
# FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')): all only read, and
# none reads a file or shows a path (FILE_FUNCTIONS, PATH_FUNCTIONS). Left out on purpose:
# query (runs a string as SQL), json_execute_serialized_sql, checkpoint, force_checkpoint,
# *_external_resource*, enable_/disable_logging, enable_/disable_profiling,
# truncate_duckdb_logs (change state); arrow_scan, arrow_scan_dumb, python_arrow_scan,
# pandas_scan, python_map_function (read process memory by pointer); seq_scan (internal);
# duckdb_secrets, which_secret, duckdb_secret_types, duckdb_secret_type_parameters (secrets);
# duckdb_external_resources (its discover option calls list functions of resource types).
TABLE_FUNCTIONS = frozenset({
    # generators
    "range", "generate_series", "unnest", "repeat", "repeat_row", "test_all_types",
    "test_vector_types",
    # JSON
    "json_each", "json_tree",
    # catalog and status readers
    "duckdb_columns", "duckdb_constraints", "duckdb_dependencies", "duckdb_functions",
    "duckdb_indexes", "duckdb_keywords", "duckdb_schemas", "duckdb_sequences",
    "duckdb_tables", "duckdb_types", "duckdb_views", "duckdb_triggers", "duckdb_variables",
    "duckdb_optimizers", "duckdb_memory", "duckdb_approx_database_count",
    "duckdb_connection_count", "duckdb_available_metrics", "duckdb_dialects",
    "duckdb_coordinate_systems", "duckdb_table_sample", "duckdb_prepared_statements",
    "duckdb_logs", "duckdb_log_contexts", "duckdb_logs_parsed", "duckdb_external_resource_types",
    "pragma_table_info", "pragma_show", "pragma_version", "pragma_database_size",
    "pragma_storage_info", "pragma_metadata_info", "pragma_platform", "pragma_user_agent",
    "pragma_collations", "pg_timezone_names", "icu_calendar_names",
    # SUMMARIZE and histograms (query_table reads a table named by a constant, planned in the
    # same plan, so the plan check and the transaction still see it; the name must be plain,
    # see TABLE_NAME_FUNCTIONS)
    "summary", "histogram", "histogram_values", "query_table",
})

# Table functions that read files, refused in ad-hoc SQL: "inside allowed_directories" was no
# bound, since DuckDB adds the database file, its WAL and its temp folder to them by itself
# (read_blob read the database file whole, issue 18, 15). Ingest runs read_json on its scratch
# copies through its own named queries (queries/ingest/), never through this check.
FILE_FUNCTIONS = frozenset({
    "read_csv", "read_csv_auto", "read_single_csv_file", "sniff_csv", "read_json",
    "read_json_auto", "read_json_objects", "read_json_objects_auto", "read_ndjson",
    "read_ndjson_auto", "read_ndjson_objects", "read_single_json_file", "read_parquet",
    "parquet_scan", "read_single_parquet_file", "parquet_metadata", "parquet_schema",
    "parquet_file_metadata", "parquet_kv_metadata", "parquet_full_metadata",
    "parquet_bloom_probe", "read_text", "read_blob", "glob", "read_duckdb",
})

# Functions whose rows name this machine's paths: the database file and its WAL
# (duckdb_databases, also behind the views pragma_database_list, pg_database and SHOW
# DATABASES), the temp folder, allowed_directories and the home folder (duckdb_settings, also
# behind pg_settings and duckdb_profiling_settings), spill files, installed extensions.
PATH_FUNCTIONS = frozenset({
    "duckdb_settings", "duckdb_databases", "duckdb_temporary_files", "duckdb_extensions",
    "duckdb_profiling_settings",
})

# The settings current_setting may read: numbers, switches and names, never a path, a user
# name or a password (home_directory, temp_directory, allowed_paths, http_proxy_password ...).
SHOWN_SETTINGS = frozenset({
    "memory_limit", "max_memory", "threads", "worker_threads", "max_temp_directory_size",
    "enable_external_access", "lock_configuration", "search_path", "schema", "timezone",
    "calendar", "access_mode", "default_order", "default_null_order", "null_order",
    "preserve_insertion_order", "checkpoint_threshold", "wal_autocheckpoint",
    "arrow_lossless_conversion", "max_expression_depth", "integer_division",
    "default_collation", "errors_as_json",
})

# Table functions whose first argument names a table, and that read a file when it names one
# instead (query_table('x.csv'), histogram('x.csv', a)): that argument must be a plain name,
# as a constant or a bare identifier, never an expression (concat(...) is folded later).
TABLE_NAME_FUNCTIONS = frozenset({"query_table", "histogram", "histogram_values"})
_SOURCE_PARAMETERS = {"source", "table_name", "table_names"}
# A name DuckDB cannot take for a file: a replacement scan (FROM 'x.csv') needs an extension or
# a path, so no dot, slash, colon or glob character
_PLAIN_NAME = re.compile(r"[\w$ -]*")

# Table functions reviewed and left out, though they change nothing: not needed by a read of
# metrics, and they show internals (secrets, caches, repositories) or are internal (seq_scan).
LEFT_OUT = frozenset({
    "seq_scan", "duckdb_secrets", "which_secret", "duckdb_secret_types",
    "duckdb_secret_type_parameters", "duckdb_external_resources", "duckdb_eviction_queues",
    "duckdb_external_file_cache", "duckdb_extension_repositories", "duckdb_grammar_extensions",
})

# Functions refused wherever they appear: they change a sequence, a setting, the log or the
# random seed, sleep, or run SQL on a connection of their own. From duckdb_functions() WHERE
# has_side_effects, plus the table functions above left out on purpose.
REFUSED_FUNCTIONS = frozenset({
    "nextval", "setval", "setseed", "write_log", "sleep_ms", "pg_sleep",
    "json_execute_serialized_sql", "query", "checkpoint", "force_checkpoint",
    "create_external_resource", "destroy_external_resource", "register_external_resource",
    "deregister_external_resource", "register_external_resource_type", "enable_logging",
    "disable_logging", "enable_profiling", "disable_profiling", "truncate_duckdb_logs",
    "arrow_scan", "arrow_scan_dumb", "python_arrow_scan", "pandas_scan",
    "python_map_function",
})


def check_functions(cursor, read: str) -> None:
    """Refuse ``read`` if it reads a file, shows a path, calls a table function off the allow
    list or any refused function, or if DuckDB cannot serialize its parse tree (so it cannot
    be checked)."""
    tree = orjson.loads(queries.execute(cursor, "db/serialize_sql", {"sql": read}).fetchone()[0])
    if tree.get("error"):
        raise CliffwatchError(
            "this query cannot be checked for side effects, so it is refused ("
            f"{tree.get('error_message', 'DuckDB could not serialize it')}); rewrite it as a "
            "plain SELECT (PIVOT, for one, can be written with GROUP BY)", status=403)
    nodes = list(_nodes(tree))
    tables, called = called_functions(nodes)
    check_scans(called)
    _refuse_file_names(nodes)
    _refuse_hidden_settings(nodes)
    refused = sorted(tables - TABLE_FUNCTIONS)
    if refused:
        raise _changes(refused)


def check_scans(names) -> None:
    """Refuse functions (or, from the plan check, operators: DuckDB names each table function's
    operator after it) that read files, show paths or change state. The plan check calls this
    too, for what the parse tree does not show: views (pragma_database_list, pg_settings) and
    macros call their functions only once bound."""
    lowered = {str(name).lower() for name in names}
    if lowered & FILE_FUNCTIONS:
        raise _no_files(f"{', '.join(sorted(lowered & FILE_FUNCTIONS))} reads files")
    if lowered & PATH_FUNCTIONS:
        raise CliffwatchError(
            f"{', '.join(sorted(lowered & PATH_FUNCTIONS))} shows this machine's paths (the "
            "database file, its temp folder), so ad-hoc SQL may not call it; read a setting "
            "with current_setting('memory_limit'), list the tables with SHOW TABLES",
            status=403)
    if lowered & REFUSED_FUNCTIONS:
        raise _changes(sorted(lowered & REFUSED_FUNCTIONS))


def _changes(names: list[str]) -> CliffwatchError:
    return CliffwatchError(
        f"only read queries are allowed; this one calls {', '.join(names)}, which may change "
        "data or settings or run other SQL (see docs/architecture.md, Read-only SQL)",
        status=403)


def _no_files(what: str) -> CliffwatchError:
    return CliffwatchError(
        f"{what}; ad-hoc SQL reads the tables ingest filled (metrics, runs, events, ...: SHOW "
        "TABLES lists them), never files", status=403)


def _refuse_file_names(nodes) -> None:
    """A table reference DuckDB would read as a file: FROM 'x.csv' (a replacement scan),
    DESCRIBE 'x.csv', query_table('x.csv'), histogram('x.csv', a)."""
    for node in nodes:
        for name in _table_names(node):
            if not isinstance(name, str) or not _PLAIN_NAME.fullmatch(name):
                shown = f"{name!r}" if isinstance(name, str) else "an expression"
                raise _no_files(f"the table name {shown} is not a plain name (a dot, slash or "
                                "colon makes DuckDB read a file)")


def _table_names(node: dict) -> list:
    """What ``node`` names as a table: strings, or None where it is an expression."""
    if node.get("type") == "SHOW_REF" and node.get("show_type") == "SHOW_SPECIAL":
        return []  # SHOW TABLES, SHOW DATABASES: a keyword, no table (the plan check sees it)
    if node.get("type") in ("BASE_TABLE", "SHOW_REF"):
        return [node.get(key) or "" for key in ("catalog_name", "schema_name", "table_name")]
    function = node.get("function")
    if node.get("type") != "TABLE_FUNCTION" or not isinstance(function, dict):
        return []
    if str(function.get("function_name", "")).lower() not in TABLE_NAME_FUNCTIONS:
        return []
    arguments = function.get("arguments") or []
    unnamed = [a for a in arguments if not a.get("name")][:1]
    sources = [a for a in arguments if a.get("name") in _SOURCE_PARAMETERS] + unnamed
    return [name for a in sources for name in _names(a.get("expression") or {})]


def _names(expression: dict) -> list:
    """The table names an argument spells: a string constant, a bare identifier, or a list of
    string constants; None for anything else (its value is known only once bound)."""
    if expression.get("class") == "COLUMN_REF":
        return [".".join(expression.get("column_names") or [""])]
    if expression.get("function_name") == "list_value":
        return [n for a in expression.get("arguments") or []
                for n in _names(a.get("expression") or {})]
    literal = expression.get("literal") if expression.get("class") == "CONSTANT" else None
    if isinstance(literal, dict) and literal.get("kind") == "STRING":
        return [literal.get("text")]
    return [None]


def _refuse_hidden_settings(nodes) -> None:
    """current_setting only of a setting on SHOWN_SETTINGS, named by a string constant."""
    for node in nodes:
        if str(node.get("function_name", "")).lower() != "current_setting":
            continue
        arguments = node.get("arguments") or [{}]
        (name,) = _names(arguments[0].get("expression") or {})[:1] or [None]
        if not isinstance(name, str) or name.lower() not in SHOWN_SETTINGS:
            shown = repr(name) if isinstance(name, str) else "an expression"
            raise CliffwatchError(
                f"current_setting({shown}) is refused: other settings can name paths or "
                f"users; ad-hoc SQL may read these: {', '.join(sorted(SHOWN_SETTINGS))}",
                status=403)


def called_functions(nodes) -> tuple[set[str], set[str]]:
    """(table function names, every function name) found among the nodes of a serialized
    tree, lower-cased (DuckDB resolves function names case-insensitively)."""
    tables: set[str] = set()
    called: set[str] = set()
    for node in nodes:
        name = node.get("function_name")
        if isinstance(name, str):
            called.add(name.lower())
        function = node.get("function")
        if node.get("type") == "TABLE_FUNCTION" and isinstance(function, dict):
            tables.add(str(function.get("function_name", "")).lower())
    return tables, called


def _nodes(tree):
    """Every object in a serialized tree, depth first."""
    pending = [tree]
    while pending:  # a loop, not recursion: a deep tree must not hit the recursion limit
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            yield node
            pending.extend(node.values())
