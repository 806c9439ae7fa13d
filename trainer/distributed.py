"""Process group set-up for `torchrun --nproc-per-node N -m trainer ...` (gloo on CPU).

Without torchrun's environment (WORLD_SIZE unset or 1) everything here is a no-op, so the
single-process trainer needs no launcher.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def init(device: torch.device) -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=timedelta(minutes=10))
    return Dist(rank=dist.get_rank(), world=dist.get_world_size())


def barrier(info: Dist) -> None:
    if info.world > 1:
        dist.barrier()


def all_sum(info: Dist, values: list[float]) -> list[float]:
    """Element-wise sum over ranks (a tiny gloo all-reduce)."""
    if info.world == 1:
        return values
    tensor = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(tensor)
    return tensor.tolist()


def shutdown(info: Dist) -> None:
    if info.world > 1 and dist.is_initialized():
        dist.destroy_process_group()
