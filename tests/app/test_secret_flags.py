"""Secrets stay out of `ps` (issue 18, 15c), through the real CLI and the real server.

Every user of a machine reads every process's arguments (`ps -ef`), so a token or a webhook
URL given as a flag is warned about; the environment variable (CLIFFWATCH_TOKEN) and a file
(--token-file, CLIFFWATCH_TOKEN_FILE) are not, and a token read from a file is the one the
server requires. Neither secret is ever echoed: not in the settings line, the log, health or
an error.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from tests.conftest import Server, run_cli

TOKEN = "tok-from-a-file-5b1e9"
WEBHOOK = "http://127.0.0.1:9/hooks/webhook-secret-77f2"
FLAG_WARNING = "--token is visible to every user of this machine through `ps`"


def secret_file(tmp_path: Path, name: str, text: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(mode)
    return path


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLIFFWATCH_")}
    return {**env, **extra}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server whose token and webhook come from files."""
    root = tmp_path_factory.mktemp("secrets")
    logdir = root / "logs"
    (logdir / "r").mkdir(parents=True)
    (logdir / "r" / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    token = secret_file(root, "token", f"{TOKEN}\n")
    hooks = secret_file(root, "hooks", f"{WEBHOOK}\n")
    srv = Server(logdir, "--token-file", str(token), "--webhook-file", str(hooks),
                 headers={"Authorization": f"Bearer {TOKEN}"})
    srv.logdir, srv.token_file = logdir, token
    yield srv
    srv.stop()


def cli_sql(server, *extra: str, env: dict[str, str] | None = None):
    return run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "csv", "--logdir",
                   str(server.logdir), *extra, env=env or clean_env())


def test_the_token_from_a_file_is_the_one_the_server_requires(server):
    sql = {"sql": "SELECT count(*) FROM runs"}
    assert httpx.post(server.url + "/api/sql", json=sql).status_code == 401
    answer = httpx.post(server.url + "/api/sql", json=sql,
                        headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200, answer.text
    log = Path(server.log.name).read_text()
    assert "token=(set)" in log and "webhook=(set)" in log
    assert "visible to every user" not in log and "warning" not in log


def test_the_server_never_echoes_a_secret(server):
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    answers = [httpx.get(server.url + "/api/health", headers=bearer),
               httpx.get(server.url + "/api/alerts", headers=bearer),
               httpx.get(server.url + "/api/health"),
               httpx.post(server.url + "/api/sql", json={"sql": "SELEC"}, headers=bearer),
               httpx.post(server.url + "/api/sql", json={"sql": "SELECT 1"},
                          headers={"Authorization": f"Bearer {TOKEN}x"})]
    texts = [a.text for a in answers] + [Path(server.log.name).read_text(),
                                         (server.logdir / ".cliffwatch" / "server.json")
                                         .read_text()]
    for text in texts:
        assert TOKEN not in text and "webhook-secret" not in text, text[:300]


@pytest.mark.parametrize("how", ["file flag", "file env", "env"])
def test_a_secret_from_a_file_or_the_environment_is_not_warned_about(server, how):
    given = {"file flag": (["--token-file", str(server.token_file)], clean_env()),
             "file env": ([], clean_env(CLIFFWATCH_TOKEN_FILE=str(server.token_file))),
             "env": ([], clean_env(CLIFFWATCH_TOKEN=TOKEN))}
    extra, env = given[how]
    done = cli_sql(server, *extra, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", "1"] and "warning" not in done.stderr, done.stderr


def test_a_secret_given_as_a_flag_is_warned_about(server):
    done = cli_sql(server, "--token", TOKEN, "--webhook", WEBHOOK)
    assert done.returncode == 0 and done.stdout.split() == ["n", "1"], done.stderr
    assert f"{FLAG_WARNING}; use CLIFFWATCH_TOKEN or --token-file" in done.stderr
    assert "--webhook is visible to every user of this machine through `ps`; use " \
           "CLIFFWATCH_WEBHOOK or --webhook-file" in done.stderr
    assert TOKEN not in done.stderr and "webhook-secret" not in done.stderr


def test_serve_warns_about_secret_flags_before_anything_else(tmp_path):
    done = run_cli("serve", "--logdir", str(tmp_path / "missing"), "--token", TOKEN,
                   env=clean_env())
    assert done.returncode == 2 and FLAG_WARNING in done.stderr, done.stderr
    assert "log directory" in done.stderr and TOKEN not in done.stderr


@pytest.mark.parametrize(("text", "mode", "says"), [
    (None, 0o600, "cannot read --token-file"),
    ("", 0o600, "is empty"),
    ("one\ntwo\n", 0o600, "holds more than one line"),
    (f"{TOKEN}\n", 0o644, "other users can read or change --token-file"),
])
def test_a_bad_token_file_is_named(tmp_path, text, mode, says):
    path = tmp_path / "token"
    if text is not None:
        secret_file(tmp_path, "token", text, mode)
    done = run_cli("serve", "--logdir", str(tmp_path / "missing"), "--token-file", str(path),
                   env=clean_env())
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, \
        done.stderr
    assert TOKEN not in done.stderr


def test_a_flag_and_a_file_for_one_secret_are_refused(tmp_path):
    path = secret_file(tmp_path, "token", TOKEN)
    done = run_cli("serve", "--logdir", str(tmp_path), "--token", TOKEN, "--token-file",
                   str(path), env=clean_env())
    assert done.returncode == 2 and "give --token or --token-file, not both" in done.stderr
