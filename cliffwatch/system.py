"""The system sampler: what the machine was doing, one `system.jsonl` line every few seconds.

    sampler = system.start(run.dir, rank=0, last_step=lambda: run.last_step, sample_s=2.0)
    ...
    sampler.stop()  # a last sample, then the thread ends

One line (docs/log-format.md, "system.jsonl"):

    {"time": 1795939212.04, "elapsed_s": 12.0, "step": 40, "host": "gpu-box-1", "pid": 4242,
     "sample_s": 2.0, "cpu_percent": 37.5, "cpu_max_core_percent": 100.0, "cpu_count": 16,
     "proc_cpu_percent": 99.1, "proc_rss_bytes": 2147483648, "mem_used_bytes": 51539607552,
     "mem_total_bytes": 137438953472, "swap_used_bytes": 0, "disk": "nvme0n1",
     "disk_read_bps": 0.0, "disk_write_bps": 157286400.0, "disk_read_bytes": 0,
     "disk_write_bytes": 314572800, "net_recv_bps": 1024.0, "net_sent_bps": 2048.0,
     "gpus": [{"index": 0, "util_percent": 98.0, ...}]}

Every rate is a counter's change over the wall time actually measured since the previous
sample (`sample_s`), so a late wake-up skews no number. The thread never raises into the
training loop: a section that cannot be read is left out of the line, and a problem (a full
disk, a deleted run folder) is said once on stderr. psutil is imported here only, NVML only in
the sampler's thread (cliffwatch/gpu.py): `import cliffwatch` needs neither.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cliffwatch import disks
from cliffwatch.gpu import Gpus

FILE = "system.jsonl"
OFF = "cliffwatch: system metrics are off: pip install 'cliffwatch[system]'"
FIRST_S = 0.5  # the first sample comes this soon, so a short run or an early stall has one
JOIN_S = 10.0  # stop() waits this long for the last sample (a hung NVML call must not hang exit)


def start(run_dir: Path, *, rank: int, last_step: Callable[[], int | None],
          sample_s: float = 2.0) -> Sampler | None:
    """A running sampler writing ``run_dir/system.jsonl``; None on a process that does not
    sample (only one per host does) or, after one stderr line, when psutil is missing."""
    if not sample_s > 0:
        raise ValueError(f"sample_s must be a positive number of seconds, not {sample_s!r}")
    if not samples_here(rank):
        return None
    try:
        import psutil
    except ImportError:
        print(OFF, file=sys.stderr, flush=True)
        return None
    sampler = Sampler(Path(run_dir), Probe(psutil, Path(run_dir)), last_step, sample_s)
    sampler.begin()
    return sampler


def samples_here(rank: int) -> bool:
    """One process per host samples: local rank 0 under torchrun, else global rank 0."""
    local = os.environ.get("LOCAL_RANK", "").strip()
    return int(local) == 0 if local.isdigit() else rank == 0


class Sampler:
    """The thread that writes one line per ``sample_s`` seconds, and a last one at stop()."""

    def __init__(self, run_dir: Path, probe: Probe, last_step: Callable[[], int | None],
                 sample_s: float) -> None:
        self.path = run_dir / FILE
        self.probe, self.last_step, self.sample_s = probe, last_step, sample_s
        self.started = time.monotonic()
        self.said: set[str] = set()  # problems already said on stderr
        self.torn = False  # the last write stopped inside its line
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="cliffwatch-system",
                                       daemon=True)

    def begin(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Write a last sample and end the thread (again: nothing more)."""
        self.stopping.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(JOIN_S)

    def _loop(self) -> None:
        self._guarded("opening the GPUs", self.probe.open_gpus)
        due = time.monotonic() + min(FIRST_S, self.sample_s)
        # a fixed cadence: a slow sample does not push every later one back
        while not self.stopping.wait(max(0.0, due - time.monotonic())):
            self._guarded("a sample", self.sample)
            due = max(due + self.sample_s, time.monotonic())
        self._guarded("the last sample", self.sample)
        self._guarded("closing the GPUs", self.probe.close)

    def sample(self) -> None:
        line = {"time": round(time.time(), 3),
                "elapsed_s": round(time.monotonic() - self.started, 3),
                "step": self._step(), "host": socket.gethostname(), "pid": os.getpid()}
        line.update(self.probe.read(self._say_once))
        self._write(line)

    def _step(self) -> int | None:
        try:
            step = self.last_step()
        except Exception:  # the run's own state is not ours to fail on
            return None
        return step if isinstance(step, int) else None

    def _write(self, line: dict) -> None:
        # the whole line in one os.write on an O_APPEND descriptor, never mixed with another
        # writer's; opened each time, so a deleted run folder is noticed and a replaced file
        # followed. After a write that stopped inside its line (a disk filling up), a "\n"
        # first ends that fragment: it is one bad line, and this one is whole.
        data = (("\n" if self.torn else "") + json.dumps(line) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            wrote = 0
            try:
                while wrote < len(data):
                    wrote += os.write(fd, data[wrote:])
            finally:
                os.close(fd)
                self.torn = self.torn if wrote == 0 else wrote < len(data)
        except OSError as err:
            self._say_once(f"cliffwatch: cannot write {self.path} ({err.strerror or err}); "
                           "system metrics are not recorded until it can be, training goes on")

    def _guarded(self, what: str, call: Callable[[], Any]) -> None:
        try:
            call()
        except Exception as err:  # never into the training loop
            self._say_once(f"cliffwatch: system metrics: {what} failed "
                           f"({type(err).__name__}: {err}); sampling goes on")

    def _say_once(self, message: str) -> None:
        key = message.split(" (", 1)[0]
        if key in self.said:
            return
        self.said.add(key)
        with contextlib.suppress(Exception):  # a closed stderr is no reason to stop
            print(message, file=sys.stderr, flush=True)


class Probe:
    """psutil's and NVML's counters, turned into one line's fields per read()."""

    def __init__(self, psutil: Any, run_dir: Path) -> None:
        self.psutil = psutil
        self.process = psutil.Process()
        self.disk = disks.disk_of(run_dir, self._disk_counters_all())
        self.gpus: Gpus | None = None
        self.previous = self._counters()

    def open_gpus(self) -> None:
        self.gpus = Gpus()

    def close(self) -> None:
        if self.gpus is not None:
            self.gpus.close()

    def read(self, say: Callable[[str], None]) -> dict:
        now = self._counters(say)
        before, self.previous = self.previous, now
        span = max(now["wall"] - before["wall"], 1e-6)

        def change(name: str, fields: Callable[..., dict]) -> dict:
            if before[name] is None or now[name] is None:  # not read, said in _counters
                return {}
            return fields(before[name], now[name], span)

        parts = {"CPU": lambda: change("CPU", cpu_fields), "memory": self._memory,
                 "disk": lambda: {"disk": self.disk, **change("disk", disk_fields)},
                 "network": lambda: change("network", net_fields),
                 "GPUs": lambda: {"gpus": self.gpus.read() if self.gpus is not None else []}}
        line: dict = {"sample_s": round(span, 3)}
        for name, part in parts.items():
            try:
                line.update(part())
            except Exception as err:
                say(f"cliffwatch: system metrics: cannot read {name} ({err}); left out")
        return line

    def _counters(self, say: Callable[[str], None] | None = None) -> dict:
        """Every cumulative counter at one instant; a section that fails reads None."""
        reads = {"CPU": self._cpu, "disk": self._disk, "network": self._net}
        counters: dict = {"wall": time.monotonic()}
        for name, read in reads.items():
            try:
                counters[name] = read()
            except Exception as err:
                counters[name] = None
                if say is not None:
                    say(f"cliffwatch: system metrics: cannot read {name} ({err}); left out")
        return counters

    def _cpu(self) -> dict:
        proc = self.process.cpu_times()
        return {"cores": self.psutil.cpu_times(percpu=True), "proc": proc.user + proc.system}

    def _disk(self) -> tuple[int, int] | None:
        if self.disk == disks.ALL:
            io = self.psutil.disk_io_counters(perdisk=False)
        else:
            io = self._disk_counters_all().get(self.disk)
        return None if io is None else (io.read_bytes, io.write_bytes)

    def _disk_counters_all(self) -> dict:
        try:
            return self.psutil.disk_io_counters(perdisk=True) or {}
        except Exception:  # no /proc/diskstats (a locked-down container)
            return {}

    def _net(self) -> tuple[int, int]:
        # loopback is not the network: a local data server would read as heavy traffic
        nics = self.psutil.net_io_counters(pernic=True)
        real = [io for nic, io in nics.items() if nic != "lo"]
        return sum(io.bytes_recv for io in real), sum(io.bytes_sent for io in real)

    def _memory(self) -> dict:
        vm = self.psutil.virtual_memory()
        return {"proc_rss_bytes": self.process.memory_info().rss,
                # used = what is not available: page cache the kernel can drop is not "used"
                "mem_used_bytes": vm.total - vm.available, "mem_total_bytes": vm.total,
                "swap_used_bytes": self.psutil.swap_memory().used}



def cpu_fields(before: dict, now: dict, span: float) -> dict:
    cores = [(busy_total(b)[0] - busy_total(a)[0], busy_total(b)[1] - busy_total(a)[1])
             for a, b in zip(before["cores"], now["cores"], strict=False)]
    busy, total = sum(c[0] for c in cores), sum(c[1] for c in cores)
    per_core = [min(100.0, max(0.0, 100 * b / t)) for b, t in cores if t > 0]
    return {"cpu_percent": round(100 * busy / total, 1) if total > 0 else None,
            "cpu_max_core_percent": round(max(per_core), 1) if per_core else None,
            "cpu_count": len(now["cores"]),
            # like top's %CPU: 200.0 is two cores' worth of this process's threads
            "proc_cpu_percent": round(100 * (now["proc"] - before["proc"]) / span, 1)}


def busy_total(times: Any) -> tuple[float, float]:
    """(busy, total) seconds of one core; guest time is already inside user time on Linux."""
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


def disk_fields(before: tuple[int, int], now: tuple[int, int], span: float) -> dict:
    read, write = (max(0, b - a) for a, b in zip(before, now, strict=True))
    return {"disk_read_bps": round(read / span, 1), "disk_write_bps": round(write / span, 1),
            "disk_read_bytes": read, "disk_write_bytes": write}


def net_fields(before: tuple[int, int], now: tuple[int, int], span: float) -> dict:
    recv, sent = (max(0, b - a) for a, b in zip(before, now, strict=True))
    return {"net_recv_bps": round(recv / span, 1), "net_sent_bps": round(sent / span, 1)}
