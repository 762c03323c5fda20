"""Helpers for multi-GPU / multi-node training with ``torch.distributed`` (NCCL on GPU, gloo on CPU).

Shared by MMPPO and Distillation: parameters are broadcast from rank 0 at start, gradients are averaged in bounded
buckets after every backward, scalars (KL, non-finite flags) are averaged, and normalizers all-reduce their own
statistics. Launch with ``torchrun --nproc_per_node=G ...``; ``multi_gpu_config_from_env`` reads its variables.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = [
    "MultiGPUConfig",
    "all_reduce_gradients",
    "all_reduce_mean",
    "broadcast_modules",
    "init_distributed",
    "multi_gpu_config_from_env",
    "placement",
]


@dataclass(frozen=True)
class MultiGPUConfig:
    """Where this process sits in the job."""

    global_rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @classmethod
    def from_any(cls, cfg: Any) -> MultiGPUConfig | None:
        """Accept None, a MultiGPUConfig, or a dict with ``global_rank``, ``local_rank``, ``world_size``."""
        if cfg is None or isinstance(cfg, cls):
            return cfg
        if isinstance(cfg, dict):
            unknown = set(cfg) - {"global_rank", "local_rank", "world_size"}
            if unknown:
                raise ValueError(f"multi_gpu_cfg: unknown key(s) {sorted(unknown)}")
            return cls(**{k: int(v) for k, v in cfg.items()})
        raise TypeError(f"multi_gpu_cfg must be None, a dict or MultiGPUConfig, got {type(cfg).__name__}")


def placement(multi_gpu_cfg: Any) -> tuple[MultiGPUConfig | None, bool, int, int]:
    """(config, whether several processes train together, global rank, world size) of an algorithm's
    ``multi_gpu_cfg`` (None, a dict or a MultiGPUConfig)."""
    cfg = MultiGPUConfig.from_any(multi_gpu_cfg)
    if cfg is None:
        return None, False, 0, 1
    return cfg, cfg.world_size > 1, cfg.global_rank, cfg.world_size


def multi_gpu_config_from_env() -> MultiGPUConfig | None:
    """The config ``torchrun`` describes through RANK / LOCAL_RANK / WORLD_SIZE, or None for a single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return None
    return MultiGPUConfig(int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0")), world)


def init_distributed(cfg: MultiGPUConfig, device: str | torch.device) -> None:
    """Initialize the default process group (NCCL for CUDA devices, gloo otherwise) if it is not yet initialized."""
    if torch.distributed.is_initialized():
        return
    device = torch.device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(cfg.local_rank)
    torch.distributed.init_process_group(backend=backend, rank=cfg.global_rank, world_size=cfg.world_size)


def broadcast_modules(modules: Iterable[nn.Module | None], src: int = 0) -> None:
    """Copy every parameter and buffer of ``modules`` from rank ``src`` to all ranks."""
    for module in modules:
        if module is None:
            continue
        for tensor in module.state_dict().values():
            if isinstance(tensor, torch.Tensor):
                torch.distributed.broadcast(tensor, src=src)


def all_reduce_gradients(params: Iterable[nn.Parameter], world_size: int, bucket_mb: float = 25.0) -> None:
    """Average gradients across ranks, packing them into buckets of at most ``bucket_mb`` MiB per all-reduce.

    A parameter without a gradient on this rank contributes zeros, so every rank issues the same collectives.
    """
    grads = []
    for p in params:
        if not p.requires_grad:
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    limit = max(1, int(bucket_mb * 1024 * 1024))
    bucket: list[torch.Tensor] = []
    size = 0
    for g in grads:
        nbytes = g.numel() * g.element_size()
        if bucket and size + nbytes > limit:
            _reduce_bucket(bucket, world_size)
            bucket, size = [], 0
        bucket.append(g)
        size += nbytes
    if bucket:
        _reduce_bucket(bucket, world_size)


def _reduce_bucket(bucket: list[torch.Tensor], world_size: int) -> None:
    flat = torch.cat([g.reshape(-1) for g in bucket])
    torch.distributed.all_reduce(flat)
    flat /= world_size
    offset = 0
    for g in bucket:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def all_reduce_mean(tensor: torch.Tensor, world_size: int) -> torch.Tensor:
    """In-place average of ``tensor`` across ranks (returns it)."""
    torch.distributed.all_reduce(tensor)
    tensor /= world_size
    return tensor
