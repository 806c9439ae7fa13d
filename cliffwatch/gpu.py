"""This host's GPUs through NVML (`nvidia-ml-py`'s `pynvml`), never by parsing nvidia-smi.

One reading, as it goes into system.jsonl's `gpus`:

    [{"index": 0, "util_percent": 98.0, "mem_used_bytes": 80530636800,
      "mem_total_bytes": 150323855360, "power_w": 412.3, "temp_c": 61.0}]

Without pynvml, without the NVML library (no NVIDIA driver) or with no GPU, the list is `[]`:
a CPU machine is a normal case, not an error. A field a GPU does not report (power on some
boards, utilisation under MIG) is `null`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Gpus:
    def __init__(self) -> None:
        self.nvml, self.handles = opened()

    def read(self) -> list[dict]:
        return [self.one(index, handle) for index, handle in enumerate(self.handles)]

    def one(self, index: int, handle: Any) -> dict:
        nvml = self.nvml
        util = asked(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        memory = asked(lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
        power_mw = asked(lambda: nvml.nvmlDeviceGetPowerUsage(handle))
        temp = asked(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
        return {
            "index": index,
            "util_percent": None if util is None else float(util),
            "mem_used_bytes": None if memory is None else int(memory.used),
            "mem_total_bytes": None if memory is None else int(memory.total),
            "power_w": None if power_mw is None else round(power_mw / 1000, 1),
            "temp_c": None if temp is None else float(temp),
        }

    def close(self) -> None:
        if self.nvml is not None:
            asked(self.nvml.nvmlShutdown)
            self.nvml, self.handles = None, []


def opened() -> tuple[Any, list]:
    """(pynvml, one handle per GPU), or (None, []) where NVML cannot be had."""
    try:
        import pynvml  # lazily: the base install has no dependency at all

        pynvml.nvmlInit()
    except Exception:  # ImportError, NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None, []
    try:
        count = pynvml.nvmlDeviceGetCount()
        return pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    except Exception:
        asked(pynvml.nvmlShutdown)
        return None, []


def asked(call: Callable[[], Any]) -> Any:
    """``call()``, or None when NVML cannot answer it (NVMLError_NotSupported, a lost GPU)."""
    try:
        return call()
    except Exception:
        return None
