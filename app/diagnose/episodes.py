"""Incidents whose episode may still grow: each kind and metric's last episode end (a line
inside it starts no new incident), the open ones (their episode reaches the newest line), and
a gradient norm's last spike (a burst of them is one incident)."""

from __future__ import annotations

import numpy as np

from .recent import RecentLines
from .rules import BURST, NONFINITE, Incident, is_grad_norm
from .yardstick import SpikeYardstick


class Episodes:
    def __init__(self, lines: RecentLines, yardstick: SpikeYardstick):
        self.lines, self.yardstick = lines, yardstick
        self.open: dict[tuple[str, str], Incident] = {}
        self.last_end: dict[tuple[str, str], int] = {}
        self.latest: dict[str, Incident] = {}  # per gradient norm, its last spike (BURST)

    def inside(self, kind: str, metric: str, line: int) -> bool:
        """Whether ``line`` lies in the last episode of ``kind`` on ``metric``."""
        return line <= self.last_end.get((kind, metric), -1)

    def extend(self, incident: Incident, n: int) -> None:
        """Grow the episode over the lines known so far; it stays open if it reaches the
        newest line."""
        first = line = incident.end_line + 1
        while line < n and self._beyond(incident, self.lines.pos(line)):
            self.note_worst(incident, line)
            line += 1
        incident.end_line = line - 1
        incident.end_step = self.lines.step(incident.end_line)
        incident.open = line == n
        key = (incident.kind, incident.metric)
        if incident.kind == "spike":
            self.yardstick.hush(incident.metric, first - 1, incident.end_line)
            if is_grad_norm(incident.metric):
                self.latest[incident.metric] = incident
        self.last_end[key] = incident.end_line
        if incident.open:
            self.open[key] = incident
        else:
            self.open.pop(key, None)

    def grow(self, n: int) -> list[Incident]:
        """The open incidents grown (or ended) by the lines up to ``n``."""
        grown = []
        for incident in list(self.open.values()):
            before = incident.end_line
            self.extend(incident, n)
            if (incident.end_line != before or not incident.open) and not incident.within:
                grown.append(incident)
        return grown

    def burst(self, metric: str, line: int, within: bool) -> Incident | None:
        """A gradient norm's last spike, when this one (at ``line``) follows it closely: the
        burst is one incident, grown over this spike's lines. One outside a loss spike is
        reported, so it never joins a spike that was part of one (``within``)."""
        last = self.latest.get(metric)
        if last is None or line - last.end_line > BURST or (last.within and not within):
            return None
        self.note_worst(last, line)
        last.end_line = line
        return last

    def _beyond(self, incident: Incident, p: int) -> bool:
        frame = self.lines.frame
        if incident.kind == "nonfinite":
            if not self.lines.has_nonfinite(incident.metric):
                return False
            flag = frame[NONFINITE + incident.metric].iat[p]
            return bool(flag) if isinstance(flag, (bool, np.bool_)) else False
        value = frame[incident.metric].iat[p]
        if not np.isfinite(value):
            return True
        return value < incident.level if incident.kind == "cliff" else value > incident.level

    def note_worst(self, incident: Incident, line: int) -> None:
        """Keep the episode's worst finite value and its step (a non-finite line is the
        nonfinite kind's incident, not a size)."""
        if incident.kind not in ("spike", "cliff", "divergence"):
            return
        value = float(self.lines.frame[incident.metric].iat[self.lines.pos(line)])
        worse = value < incident.value if incident.kind == "cliff" else value > incident.value
        if np.isfinite(value) and worse:
            incident.value, incident.worst_step = value, self.lines.step(line)
