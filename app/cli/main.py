"""Command line: ``python -m app {serve,ingest,sql,replay,demo,diagnose,validate,alerts,export}``.

Every user mistake ends as one line on stderr and exit status 2, never a traceback::

    $ python -m app sql "DROP TABLE runs" --logdir runs
    cliffwatch: only read queries are allowed (SELECT, WITH ... SELECT, EXPLAIN), not DROP
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from .. import settings as settings_mod
from ..errors import CliffwatchError


def _logdir_args(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--logdir", type=Path, default=None if required else Path("runs"),
                        required=required, help="folder holding one sub-folder per run")
    parser.add_argument("--db", type=Path, help="DuckDB file (default LOGDIR/.cliffwatch/)")


def _rebuild_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rebuild", action="store_true",
                        help="move the database file aside (kept as NAME.corrupt-TIME, never "
                        "deleted) and read every log again into a new one, e.g. when the file "
                        "is damaged; loses what only the database holds (alert history, "
                        "silences, the delivery log)")


def build_parser() -> argparse.ArgumentParser:
    prog = "cliffwatch" if __package__.startswith("cliffwatch.") else "python -m app"
    parser = argparse.ArgumentParser(prog=prog, description=(
        "cliffwatch: watch ML training runs live (dashboard, SQL, alerts, diagnosis) from the "
        f"logs they write. Start with `{prog} demo`, or `{prog} serve --logdir runs` and open "
        f"http://127.0.0.1:8501; `{prog} COMMAND --help` tells more."))
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="ingest, dashboard and HTTP API in one process")
    _logdir_args(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    serve.add_argument("--port", type=int, default=8501)
    serve.add_argument("--poll", action="store_true",
                       help="poll for changes (network filesystems without inotify)")
    _rebuild_arg(serve)
    settings_mod.add_arguments(serve)

    ingest = sub.add_parser("ingest", help="read new lines into the database")
    _logdir_args(ingest)
    ingest.add_argument("--once", action="store_true",
                        help="catch up and exit; without it, keep following the files (the "
                        "server does this too, and also answers queries)")
    ingest.add_argument("--poll", action="store_true", help="poll instead of inotify")
    _rebuild_arg(ingest)
    settings_mod.add_arguments(ingest)

    sql = sub.add_parser("sql", help="run a read-only SQL query, or a named one (--query)")
    sql.add_argument("text", nargs="?", help="SQL text, e.g. \"SELECT step, loss FROM metrics\"")
    sql.add_argument("--query", dest="name", help="a named query from queries/, e.g. time_gaps")
    sql.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                     help="a parameter of the named query (repeatable)")
    _logdir_args(sql, required=False)
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table")
    settings_mod.add_arguments(sql)

    replay = sub.add_parser("replay", help="re-play a log as if it were being written now")
    replay.add_argument("src", type=Path, help="a run folder or a .jsonl file")
    replay.add_argument("--to", type=Path, required=True, dest="dest", help="run folder to write")
    replay.add_argument("--speed", type=float, default=1.0, help="time compression factor")
    replay.add_argument("--force", action="store_true", help="overwrite files in --to")

    demo = sub.add_parser("demo", help="a live run watched at http://127.0.0.1:8501")
    demo.add_argument("--logdir", type=Path, default=Path("runs"))
    demo.add_argument("--port", type=int, default=8501)

    diagnose = sub.add_parser("diagnose", help="incidents and their likely causes")
    # every other command takes --logdir: a new user's `diagnose --logdir runs` is the same
    folder = diagnose.add_mutually_exclusive_group(required=True)
    folder.add_argument("path", type=Path, nargs="?",
                        help="a run folder or a log directory (or --logdir DIR)")
    folder.add_argument("--logdir", type=Path, help="the same as PATH")
    diagnose.add_argument("--db", type=Path, help="DuckDB file (default LOGDIR/.cliffwatch/)")
    diagnose.add_argument("--json", action="store_true", help="a list of objects, not a report")
    settings_mod.add_arguments(diagnose)

    validate = sub.add_parser("validate", help="check a run folder against log format v1")
    validate.add_argument("run_dir", type=Path)

    export = sub.add_parser("export", help="write the runs' tables as a Parquet archive, "
                            "partitioned by run; again: only what is new (docs/export.md)")
    _logdir_args(export)
    export.add_argument("--to", type=Path, required=True, dest="dest",
                        help="archive folder, outside the log directory (created if missing)")
    settings_mod.add_arguments(export)
    _alerts_parser(sub)
    return parser


def _alerts_parser(sub) -> None:
    alerts = sub.add_parser("alerts", help="check rules; silences and test messages (server)")
    action = alerts.add_subparsers(dest="action", required=True)
    check = action.add_parser("check", help="validate a rules file (default LOGDIR/alerts.toml)")
    check.add_argument("path", type=Path, nargs="?", help="rules file")
    check.add_argument("--logdir", type=Path, default=Path("runs"))
    silence = action.add_parser("silence", help="mute a rule's notifications for a while")
    silence.add_argument("rule", help="rule name or glob, e.g. stall or 'loss-*'")
    silence.add_argument("--run", default="*", help="glob on run names (default every run)")
    silence.add_argument("--for", dest="duration", required=True, help="e.g. 30m, 2h, 1d")
    silence.add_argument("--comment", help="why (shown in `alerts list`)")
    unsilence = action.add_parser("unsilence", help="end a silence now")
    unsilence.add_argument("id", type=int, help="the silence's number (`alerts list`)")
    action.add_parser("test", help="send a test message to every webhook and print results")
    listing = action.add_parser("list", help="rules, states, silences, recent notifications")
    listing.add_argument("--json", action="store_true", help="the /api/alerts object")
    for parser in (silence, unsilence, action.choices["test"], listing):
        _logdir_args(parser, required=False)
        settings_mod.add_arguments(parser)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        code = _dispatch(args)
    except CliffwatchError as exc:
        print(f"cliffwatch: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if args.command == "serve" and argv is None:  # serve's `with` closed the database
            _stopped(130)
        print("cliffwatch: stopped (Ctrl-C)", file=sys.stderr)
        return 130
    except SystemExit as exc:  # the demo's own signal handlers end it so
        if args.command != "demo" or argv is not None:
            raise
        _stopped(exc.code if isinstance(exc.code, int) else 1)
    if args.command == "serve" and argv is None:  # serve returns only once stopped
        _stopped(code)
    return code


def _stopped(code: int) -> None:
    """A server stopped by Ctrl-C or SIGTERM has closed its database and workers (its
    lifespan's end) in 0.1 s; Python's own finalization then took 5 s more, for nothing it
    owes anyone. Say so and leave at once."""
    print("cliffwatch: stopped; the database is closed (the same command starts it again)",
          file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in ("serve", "ingest", "demo"):  # before --rebuild moves a database aside
        from ..reach import refuse_if_served

        refuse_if_served(args.logdir, getattr(args, "db", None), settings_mod.resolve(args),
                         args.command)
    if getattr(args, "rebuild", False):
        _rebuild(args.logdir, args.db)
    if args.command == "serve":
        return _serve(args)
    if args.command == "ingest":
        from .ingest import ingest_follow, ingest_once

        settings = settings_mod.resolve(args)
        if args.once:
            return ingest_once(args.logdir, args.db, settings)
        return ingest_follow(args.logdir, args.db, settings, args.poll)
    if args.command == "sql":
        from .sql import sql_command

        return sql_command(args.text, args.name, args.param, args.logdir, args.db, args.format,
                           settings_mod.resolve(args))
    if args.command == "diagnose":
        from .diagnose import diagnose_command

        return diagnose_command(args.path or args.logdir, args.db, args.json,
                                settings_mod.resolve(args))
    if args.command == "replay":
        from .replay import replay

        replay(args.src, args.dest, speed=args.speed, force=args.force)
        return 0
    if args.command == "alerts":
        return _alerts(args)
    if args.command == "export":
        from .export import export_command

        return export_command(args.logdir, args.db, args.dest, settings_mod.resolve(args))
    if args.command == "demo":
        from .demo import demo

        return demo(args.logdir, args.port)
    from ..logformat import validate_run

    problems = validate_run(args.run_dir)
    for problem in problems:
        print(problem)
    print(f"{args.run_dir}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


def _serve(args: argparse.Namespace) -> int:
    from ..ingest.formats import ahead
    from ..ingest.reads import chunk_of
    from ..monitor import default_db

    settings = settings_mod.resolve(args)
    if not Path(args.db or default_db(Path(args.logdir).resolve())).exists():
        # a first start: big event files are decoded while the server imports (ahead.py)
        ahead.start(Path(args.logdir).resolve(), chunk_of(settings.chunk_bytes))
    try:
        from ..server.serve import serve

        serve(args.logdir, args.db, args.host, args.port, args.poll, settings)
    finally:
        ahead.finish()
    return 0


def _rebuild(logdir: Path, db: Path | None) -> None:
    from ..db.database import set_aside
    from ..db.loss import REBUILD_LOSES
    from ..monitor import default_db

    path = Path(db or default_db(Path(logdir).resolve()))
    moved = set_aside(path)
    if not moved:
        print(f"cliffwatch: --rebuild: no database at {path} yet; reading the logs into a new "
              "one", file=sys.stderr)
        return
    kept = ", ".join(str(p) for p in moved)
    print(f"cliffwatch: --rebuild: the old database is kept as {kept} (delete it yourself once "
          f"done with it); reading every log again into a new {path.name}, without what only "
          f"the old one held: {REBUILD_LOSES}", file=sys.stderr)


def _alerts(args: argparse.Namespace) -> int:
    from . import alerts

    if args.action == "check":
        return alerts.check(args.path, args.logdir)
    settings = settings_mod.resolve(args)
    if args.action == "silence":
        return alerts.silence(args.logdir, args.db, settings, args.rule, args.run,
                              args.duration, args.comment)
    if args.action == "unsilence":
        return alerts.unsilence(args.logdir, args.db, settings, args.id)
    if args.action == "test":
        return alerts.send_test(args.logdir, args.db, settings)
    return alerts.list_alerts(args.logdir, args.db, settings, args.json)
