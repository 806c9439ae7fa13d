"""Byte counts as people read them: memory and disk space in binary units, as PyTorch's
out-of-memory errors, nvidia-smi and ``df -h`` say them (bytes written stay SI where
diagnosis quotes a disk's rate: app/diagnose/system.py's ``size``)."""

from __future__ import annotations


def binary(n: float) -> str:
    """1023 B, 48.0 MiB, 135.4 GiB, 3.0 TiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
