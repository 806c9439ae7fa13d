"""The pages' state in their URL's query parameters, so a link reproduces what is on
screen::

    /run?run=seed-cliff&from=1900&to=2100&metrics=loss,grad_norm&x=elapsed&smooth=0.8
    -> RunView(run="seed-cliff", lo=1900, hi=2100, metrics=["loss", "grad_norm"],
               x="elapsed", smooth=0.8), problems=[]
    /run?run=seed-cliff&from=abc&x=hours
    -> RunView(run="seed-cliff", lo=None, ...), problems=["from must be a whole step number
       such as 1200, not 'abc'; showing the whole run", "x must be step, elapsed or time ..."]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import streamlit as st

X_UNITS = ("step", "elapsed", "time")
MAX_STEP = 2**63 - 1  # a step is a BIGINT: a larger from/to is no step at all
# no smoothing unless asked: the page exists to show spikes, and an EMA drew the seed's loss
# spike to 13 as 2.5 (issue 20)
DEFAULT_SMOOTH = 0.0
MAX_SMOOTH = 0.99


@dataclass
class RunView:
    """What the Run page shows, as its URL says; lo/hi are steps (inclusive, None = open)."""
    run: str | None = None
    lo: int | None = None
    hi: int | None = None
    metrics: list[str] | None = None  # None: the default panels the run has
    x: str = "step"
    smooth: float = DEFAULT_SMOOTH
    step: int | None = None  # the old alert link's /?run=R&step=S
    problems: list[str] = field(default_factory=list)


def parse_step(params: Mapping, name: str, problems: list[str]) -> int | None:
    text = (params.get(name) or "").strip()
    if not text:
        return None
    try:
        value = int(float(text)) if float(text).is_integer() else None
    except ValueError:
        value = None
    if value is None or not 0 <= value <= MAX_STEP:
        problems.append(f"{name} must be a whole step number such as 1200, not {text!r}; "
                        "showing the whole run")
        return None
    return value


def parse_run_view(params: Mapping) -> RunView:
    """The Run page's state from its query parameters; each bad value becomes a message in
    ``problems`` and its default is used instead."""
    problems: list[str] = []
    view = RunView(run=(params.get("run") or "").strip() or None, problems=problems)
    view.lo, view.hi = parse_step(params, "from", problems), parse_step(params, "to", problems)
    if view.lo is not None and view.hi is not None and view.lo > view.hi:
        problems.append(f"from ({view.lo}) is after to ({view.hi}); showing the whole run")
        view.lo = view.hi = None
    view.step = parse_step(params, "step", problems)
    names = [m.strip() for m in (params.get("metrics") or "").split(",") if m.strip()]
    view.metrics = names or None
    x = (params.get("x") or "step").strip()
    if x not in X_UNITS:
        problems.append(f"x must be one of {', '.join(X_UNITS)}, not {x!r}; using step")
        x = "step"
    view.x = x
    view.smooth = parse_smooth(params.get("smooth"), problems)
    return view


def parse_smooth(text, problems: list[str]) -> float:
    if text is None or not str(text).strip():
        return DEFAULT_SMOOTH
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= MAX_SMOOTH:
        problems.append(f"smooth must be a number from 0 (raw) to {MAX_SMOOTH}, not {text!r}; "
                        f"using {DEFAULT_SMOOTH}")
        return DEFAULT_SMOOTH
    return value


def parse_list(params: Mapping, name: str) -> list[str]:
    return [v.strip() for v in (params.get(name) or "").split(",") if v.strip()]


def around(step: int) -> tuple[int, int]:
    """The range the old alert link /?run=R&step=S opens (the same rule as the new link)."""
    from ..alerts.webhook import around as webhook_around

    return webhook_around(step)


def set_params(**values) -> None:
    """Write page state to the URL: None or "" removes a parameter."""
    for name, value in values.items():
        if value is None or value == "" or value == []:
            st.query_params.pop(name, None)
        elif isinstance(value, list | tuple):
            st.query_params[name] = ",".join(str(v) for v in value)
        else:
            st.query_params[name] = str(value)


def run_url(run: str, lo: int | None = None, hi: int | None = None) -> str:
    """A relative link to the Run page (relative, so a base path or proxy still works)."""
    from urllib.parse import quote, urlencode

    params = {"run": run}
    if lo is not None:
        params["from"] = int(lo)
    if hi is not None:
        params["to"] = int(hi)
    # %20, not +: the Runs table shows the link's run=... decoded, and "+" would stay a "+"
    return f"./run?{urlencode(params, quote_via=quote)}"
