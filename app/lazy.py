"""A module imported on its first use, for what only some paths need::

    np = LazyModule("numpy")   # nothing imported yet
    np.cumsum([1, 2])          # numpy is imported here, once

``ingest --once`` on logs that DuckDB reads itself (ingest/fast.py) never touches numpy or
pyarrow, whose import was ~90 ms of a one-second catch-up of a million lines
(bench/ingest.py). Not put in ``sys.modules``: other importers see the real module or none.
"""

from __future__ import annotations

import importlib


class LazyModule:
    def __init__(self, name: str):
        self._lazy_name = name

    def __getattr__(self, attr: str):
        value = getattr(importlib.import_module(self._lazy_name), attr)
        setattr(self, attr, value)  # a plain attribute from now on: no second lookup
        return value

    def __repr__(self) -> str:
        return f"<module {self._lazy_name!r}, imported on first use>"
