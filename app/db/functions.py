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
- a read ``json_serialize_sql`` cannot serialize (PIVOT, for one) is refused: fail closed.

DuckDB 2.0 has no setting that disables functions (``duckdb_settings()`` lists
``disabled_filesystems``, ``disabled_optimizers``, never functions), so this check is the
lock; the plan check, the read-only transaction and the locked configuration stay behind it.
"""

from __future__ import annotations

import orjson

from ..errors import CliffwatchError
from . import queries

# Table functions a read may call, each reviewed in DuckDB 2.0 (SELECT DISTINCT function_name
# FROM duckdb_functions() WHERE function_type IN ('table', 'table_macro')): all only read, and
# file readers stay inside allowed_directories. Left out on purpose: query (runs a string as
# SQL), json_execute_serialized_sql, checkpoint, force_checkpoint, *_external_resource*,
# enable_/disable_logging, enable_/disable_profiling, truncate_duckdb_logs (change state);
# arrow_scan, arrow_scan_dumb, python_arrow_scan, pandas_scan, python_map_function (read
# process memory by pointer); read_duckdb (opens a database file); seq_scan (internal);
# duckdb_secrets, which_secret, duckdb_secret_types, duckdb_secret_type_parameters (secrets);
# duckdb_external_resources (its discover option calls list functions of resource types).
TABLE_FUNCTIONS = frozenset({
    # generators
    "range", "generate_series", "unnest", "repeat", "repeat_row", "test_all_types",
    "test_vector_types",
    # files, inside allowed_directories only
    "read_csv", "read_csv_auto", "read_single_csv_file", "sniff_csv", "read_json",
    "read_json_auto", "read_json_objects", "read_json_objects_auto", "read_ndjson",
    "read_ndjson_auto", "read_ndjson_objects", "read_single_json_file", "read_parquet",
    "parquet_scan", "read_single_parquet_file", "parquet_metadata", "parquet_schema",
    "parquet_file_metadata", "parquet_kv_metadata", "parquet_full_metadata",
    "parquet_bloom_probe", "read_text", "read_blob", "glob",
    # JSON
    "json_each", "json_tree",
    # catalog and status readers
    "duckdb_columns", "duckdb_constraints", "duckdb_databases", "duckdb_dependencies",
    "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_schemas",
    "duckdb_sequences", "duckdb_settings", "duckdb_tables", "duckdb_types", "duckdb_views",
    "duckdb_triggers", "duckdb_variables", "duckdb_optimizers", "duckdb_extensions",
    "duckdb_memory", "duckdb_temporary_files", "duckdb_approx_database_count",
    "duckdb_connection_count", "duckdb_available_metrics", "duckdb_dialects",
    "duckdb_coordinate_systems", "duckdb_table_sample", "duckdb_prepared_statements",
    "duckdb_logs", "duckdb_log_contexts", "duckdb_logs_parsed", "duckdb_profiling_settings",
    "duckdb_external_resource_types",
    "pragma_table_info", "pragma_show", "pragma_version", "pragma_database_size",
    "pragma_storage_info", "pragma_metadata_info", "pragma_platform", "pragma_user_agent",
    "pragma_collations", "pg_timezone_names", "icu_calendar_names",
    # SUMMARIZE and histograms (query_table reads a table named by a constant, planned in the
    # same plan, so the plan check and the transaction still see it)
    "summary", "histogram", "histogram_values", "query_table",
})

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
    "python_map_function", "read_duckdb",
})


def check_functions(cursor, read: str) -> None:
    """Refuse ``read`` if it calls a table function off the allow list or any refused
    function, or if DuckDB cannot serialize its parse tree (so it cannot be checked)."""
    tree = orjson.loads(queries.execute(cursor, "db/serialize_sql", {"sql": read}).fetchone()[0])
    if tree.get("error"):
        raise CliffwatchError(
            "this query cannot be checked for side effects, so it is refused ("
            f"{tree.get('error_message', 'DuckDB could not serialize it')}); rewrite it as a "
            "plain SELECT (PIVOT, for one, can be written with GROUP BY)", status=403)
    tables, called = called_functions(tree)
    refused = sorted((called & REFUSED_FUNCTIONS) | (tables - TABLE_FUNCTIONS))
    if refused:
        raise CliffwatchError(
            f"only read queries are allowed; this one calls {', '.join(refused)}, which "
            "may change data or settings or run other SQL (see docs/architecture.md, "
            "Read-only SQL)", status=403)


def called_functions(tree) -> tuple[set[str], set[str]]:
    """(table function names, every function name) found anywhere in a serialized tree,
    lower-cased (DuckDB resolves function names case-insensitively)."""
    tables: set[str] = set()
    called: set[str] = set()
    pending = [tree]
    while pending:  # a loop, not recursion: a deep tree must not hit the recursion limit
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        name = node.get("function_name")
        if isinstance(name, str):
            called.add(name.lower())
        function = node.get("function")
        if node.get("type") == "TABLE_FUNCTION" and isinstance(function, dict):
            tables.add(str(function.get("function_name", "")).lower())
        pending.extend(node.values())
    return tables, called
