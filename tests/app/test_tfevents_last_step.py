"""The last step of a TensorBoard file that is no longer written is read. The tailer holds a
file's last step until the file has been still for a moment (the rest of that step's scalars
may still be coming), and only a later tick read it: ``ingest --once`` never came back, so
every closed or copied event file lost its last step (9 of 10 steps, 999,999 of 1,000,000),
and said it ended "in an unfinished line"."""

from __future__ import annotations

import os
import time

from tensorboardX import SummaryWriter

from tests.conftest import run_cli


def test_ingest_once_reads_the_last_step_of_a_finished_event_file(tmp_path):
    logs = tmp_path / "logs"
    writer = SummaryWriter(str(logs / "tb"))
    for step in range(10):
        writer.add_scalar("loss", 1.0 / (step + 1), step)
        writer.add_scalar("lr", 3e-4, step)
    writer.close()
    an_hour_ago = time.time() - 3600  # written and closed before cliffwatch looked
    for event_file in (logs / "tb").iterdir():
        os.utime(event_file, (an_hour_ago, an_hour_ago))
    done = run_cli("ingest", "--logdir", str(logs), "--once")
    assert done.returncode == 0 and "unfinished" not in done.stdout + done.stderr, done
    told = run_cli("sql", "--logdir", str(logs), "--format", "csv",
                   "SELECT count(*), max(step), count(lr) FROM metrics").stdout
    assert told.strip().splitlines()[-1] == "10,9,10", told
