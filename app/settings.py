"""One registry of the monitor's settings: name, default, help.

Each setting can be overridden by a command-line flag (``--sql-time-limit 30``) or an environment
variable (``CLIFFWATCH_SQL_TIME_LIMIT=30``); the flag wins. ``serve`` prints the effective values
at start-up, e.g.::

    cliffwatch settings: sql_time_limit=10.0 sql_max_rows=10000 scan_interval=120.0 ...

A secret (``token``, ``webhook``) is better given by its environment variable or a file
(``--token-file PATH``, or ``CLIFFWATCH_TOKEN_FILE``), read once at start: every user of the
machine can read a flag's value with ``ps``, so a secret given as a flag is warned about.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    default: float | int | str
    help: str
    secret: bool = False  # never printed, never in a repr
    repeatable: bool = False  # a flag given more than once joins its values with commas
    env_aliases: tuple[str, ...] = ()  # other environment variables read when `env` is unset

    @property
    def env(self) -> str:
        return "CLIFFWATCH_" + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def file_flag(self) -> str:  # secrets only: the file that holds the value
        return self.flag + "-file"


REGISTRY = [
    Setting("sql_time_limit", 10.0, "seconds before an ad-hoc SQL query is interrupted"),
    Setting("sql_max_rows", 10_000, "rows returned by an ad-hoc SQL query before truncating"),
    Setting("sql_max_bytes", 32 * 1024 * 1024,
            "bytes of an ad-hoc SQL result before it is cut off (raise for bigger exports)"),
    Setting("max_request_bytes", 1024 * 1024, "largest HTTP request body the API accepts"),
    Setting("scan_interval", 120.0, "seconds for one safety sweep over every tracked file and "
            "folder of the log directory, spread over the ticks: watchdog events are acted on "
            "at once, the sweep finds what no event reported (lower it on a filesystem that "
            "sends no events, or use --poll)"),
    Setting("tick_interval", 1.0, "seconds between ingest ticks when no file event arrives "
            "(an event starts a tick at once; live runs' files are looked at every tick, "
            "for filesystems whose appends send no event)"),
    Setting("partial_line_timeout", 30.0, "seconds an unfinished last line waits for its newline"),
    Setting("chunk_bytes", 64 * 1024 * 1024, "bytes read from one file per ingest transaction"),
    Setting("max_metric_columns", 1000,
            "metric columns per table before further keys go to the overflow column "
            "`extra_metrics`; never more than memory_limit / 512 KiB (an insert pins a 256 KiB "
            "block per column: 488 columns at the default 256MB)"),
    Setting("run_json_max_bytes", 1024 * 1024, "largest run.json read; bigger ones are reported"),
    Setting("memory_limit", "256MB", "DuckDB memory limit of the monitor process; it also "
            "caps the metric columns (memory_limit / 512 KiB, see max_metric_columns)"),
    Setting("max_temp_size", "4GB", "disk DuckDB may spill to when a query or a write does not "
            "fit in memory_limit (a private folder beside the database), and never more than "
            "half the free space there at start: a query needing more fails with a message "
            "instead of filling the disk (DuckDB's own default is 90%% of the free space)"),
    Setting("allowed_hosts", "",
            "extra host names the server answers to, comma-separated (besides its own address "
            "and localhost); any other Host header gets 403"),
    Setting("token", "", "bearer token the server requires on /api/* and the page (required "
            "off loopback; generated when not given); the CLI sends it", secret=True),
    Setting("session_hours", 12.0, "hours a browser's sign-in (one visit with ?token=) opens "
            "the dashboard off loopback; it opens the page and its websocket only (/api and "
            "/metrics take the bearer token), and ends sooner at /_cliffwatch/logout or when "
            "the server stops"),
    Setting("keys", "", "key mappings file for other trainers' JSONL logs, per run glob "
            "(default LOGDIR/keys.toml if it exists; docs/formats.md)"),
    Setting("rules", "", "alert rules file (default LOGDIR/alerts.toml if it exists, else the "
            "built-in rules: stall, nonfinite, incident)"),
    Setting("webhook", "", "Slack-style incoming webhook URL(s), comma-separated; the flag may "
            "be repeated (env also CLIFFWATCH_WEBHOOK_URL)", secret=True, repeatable=True,
            env_aliases=("CLIFFWATCH_WEBHOOK_URL",)),
    Setting("webhook_format", "slack", "payload of webhook messages: slack, generic or "
            "alertmanager (--webhook is then an Alertmanager's base URL, e.g. "
            "http://alertmanager:9093, or its /api/v2/alerts)"),
    Setting("alertmanager_resend", 60.0, "seconds between re-sends of the alerts still firing "
            "to Alertmanager (--webhook-format alertmanager); each carries endsAt = now + 4 x "
            "this, so an alert cliffwatch stops sending resolves there within that"),
    Setting("public_url", "", "address of the dashboard that messages link to (default the "
            "server's own)"),
    Setting("webhook_timeout", 10.0, "seconds one webhook request may take before it is retried"),
    Setting("webhook_give_up", 24 * 3600.0,
            "seconds a notification is retried before it is marked expired"),
    Setting("loss_metrics", "loss,*loss*,grad_norm",
            "metrics watched for spikes (comma-separated names or globs, case-blind)"),
    Setting("accuracy_metrics", "accuracy,*acc*",
            "metrics watched for cliffs (comma-separated names or globs, case-blind)"),
    Setting("metrics_export", "*throughput*,*per_sec*,*per_second*,*per_s,*/s,mfu",
            "metrics GET /metrics exports besides loss_metrics and accuracy_metrics "
            "(comma-separated names or globs; throughput-like by default)"),
    Setting("metrics_grace", 900.0, "seconds a run that ended (run_end) stays on GET /metrics "
            "after its logs were last written"),
    Setting("metrics_silence", 6 * 3600.0, "seconds a run without run_end stays on GET "
            "/metrics after its logs were last written (a crashed or stalled run: long enough "
            "for an alert on cliffwatch_run_seconds_since_last_line to fire)"),
    Setting("metrics_max_runs", 500, "most runs on GET /metrics, the most recently written "
            "first (bounds the series Prometheus stores)"),
    Setting("idle_after", 300.0, "seconds a run from another trainer (whose log writes no "
            "run_end) stays live on the Runs page after its log last grew; then it is "
            "finished if its log marks the end of training, else idle"),
]


# The typed settings object, built from the registry so each default is written once.
Settings = make_dataclass(
    "Settings",
    [(s.name, type(s.default), field(default=s.default, repr=not s.secret)) for s in REGISTRY],
    frozen=True,
)
SECRETS = frozenset(s.name for s in REGISTRY if s.secret)


def describe(settings) -> str:
    return " ".join(f"{f.name}={_shown(f.name, getattr(settings, f.name))}"
                    for f in fields(settings))


def _shown(name: str, value) -> object:
    if name in SECRETS:
        return "(set)" if value else "(none)"
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one flag per setting; defaults are resolved later so env vars can apply."""
    for setting in REGISTRY:
        parser.add_argument(
            setting.flag,
            dest=setting.name,
            type=type(setting.default),
            default=None,
            action="append" if setting.repeatable else "store",
            help=f"{setting.help} ({_default_text(setting.default)}, env {setting.env})" + (
                f"; every user sees a flag's value in `ps`: prefer {setting.env} or "
                f"{setting.file_flag}" if setting.secret else ""),
        )
        if setting.secret:  # the flag's value shows in `ps`: offer a file, read once
            lines = " (one per line)" if setting.repeatable else ""
            parser.add_argument(
                setting.file_flag, dest=f"{setting.name}_file", type=Path, default=None,
                metavar="PATH", help=f"file holding the {setting.name}{lines}, read once at "
                f"start; other users cannot see it in `ps` (env {setting.env}_FILE)")


def _default_text(default) -> str:
    """``default 8501``; ``no default`` for an empty one ("(default , env ...)" read as a typo)."""
    return f"default {default}" if default not in ("", None) else "no default"


def resolve(args: argparse.Namespace | None = None):
    """Flag, else environment variable, else default; a secret also from a file (its file
    flag, else its file environment variable when its own is unset)."""
    values = {}
    for setting in REGISTRY:
        value = getattr(args, setting.name, None) if args is not None else None
        if isinstance(value, list):  # a repeatable flag: --webhook A --webhook B
            value = ",".join(value)
        if setting.secret:
            value = _secret(setting, value, getattr(args, f"{setting.name}_file", None))
        for env in (setting.env, *setting.env_aliases):
            if value is None and env in os.environ:
                value = _convert(setting, os.environ[env], env)
        values[setting.name] = setting.default if value is None else value
    return Settings(**values)


def _convert(setting: Setting, raw: str, env: str):
    from .errors import CliffwatchError

    try:
        return type(setting.default)(raw)
    except ValueError:
        kind = type(setting.default).__name__
        raise CliffwatchError(f"{env}={raw!r} is not a valid {kind}") from None


_SECRET_FILE_MAX = 64 * 1024  # bytes: a token or a few webhook URLs, never a whole log


def _secret(setting: Setting, value: str | None, path: Path | None) -> str | None:
    """A secret's flag value (warned about: `ps` shows it to every user), else the content of
    its file flag, else of the file its ``_FILE`` variable names if no variable holds it."""
    from .errors import CliffwatchError

    if value is not None and path is not None:
        raise CliffwatchError(f"give {setting.flag} or {setting.file_flag}, not both")
    if value is not None:
        print(f"cliffwatch: warning: {setting.flag} is visible to every user of this machine "
              f"through `ps`; use {setting.env} or {setting.file_flag}", file=sys.stderr)
        return value
    if path is not None:
        return _read_secret(setting, path, setting.file_flag)
    named = os.environ.get(f"{setting.env}_FILE")
    if named and not any(env in os.environ for env in (setting.env, *setting.env_aliases)):
        return _read_secret(setting, Path(named), f"{setting.env}_FILE")
    return None


def _read_secret(setting: Setting, path: Path, source: str) -> str:
    """The file's non-blank lines (joined with commas where the setting takes a list)."""
    from .errors import CliffwatchError

    try:
        with open(path, "rb") as handle:
            mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
            raw = handle.read(_SECRET_FILE_MAX + 1)
    except OSError as exc:
        raise CliffwatchError(f"cannot read {source} {path}: {exc.strerror}; give a file "
                              f"that holds the {setting.name}") from None
    lines = [line.strip() for line in raw.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    problem = ("is empty" if not lines
               else f"is over {_SECRET_FILE_MAX} bytes" if len(raw) > _SECRET_FILE_MAX
               else "holds more than one line" if len(lines) > 1 and not setting.repeatable
               else None)
    if problem:
        alone = "one per line" if setting.repeatable else "alone"
        raise CliffwatchError(f"{source} {path} {problem}; write the {setting.name} in it, "
                              f"{alone}")
    if mode & 0o077:
        print(f"cliffwatch: warning: other users can read or change {source} {path} (mode "
              f"{mode:o}); chmod 600 {path}", file=sys.stderr)
    return ",".join(lines)
