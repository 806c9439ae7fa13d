"""Text from outside (run and metric names, URL parameters, errors quoting a query) made
safe for the pages' Markdown, and times of day as the pages print them::

    md("**x** [a](https://b)")  ->  "\\*\\*x\\*\\* \\[a\\]\\(https://b\\)"
    clock(0)                    ->  "1970-01-01 00:00:00 UTC"
"""

from __future__ import annotations

import re

# What Markdown (CommonMark, GFM, Streamlit's :color[] and $math$) reads in running text: a
# backslash before any of them shows it as itself. "-", "+", "=", "." and ")" mean something only
# at the start of a line (one is all md() leaves), so names like "lr-0.1" stay readable.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#|~$!])")
_LINE_START = re.compile(r"^(\s*\d*)([-+=.)])")  # a list item ("- ", "1. ") or a rule


def md(text) -> str:
    """Text from outside (a run or metric name, a URL parameter, an error that quotes a query)
    made safe for st.error/st.title/st.metric/help=...: those render Markdown, so a run named
    ``[login](https://evil.example)`` or ``![](https://evil.example/p.png)`` would become a link
    or an image loaded from another host. Escaped, it shows as typed, on one line::

        md("**x** [a](https://b)")  ->  "\\*\\*x\\*\\* \\[a\\]\\(https://b\\)"

    A bare URL in the text (https://b, www.b.c) is still made a link by Streamlit's GFM
    autolinking, which works on the text after escapes: its target is the text shown.
    """
    text = " ".join(str(text).splitlines())
    text = _MARKDOWN.sub(r"\\\1", text)
    return _LINE_START.sub(r"\1\\\2", text)


def clock(unix_s: float) -> str:
    """A time of day as the pages print it: 24-hour UTC, with the date."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(unix_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
