"""The optimizers the algorithms accept by name, built the fastest way the device allows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["OPTIMIZERS", "make_optimizer"]

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


def make_optimizer(name: str, params: Iterable[Any], lr: float, device: torch.device | str) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (tensors or parameter groups). On CUDA, Adam and AdamW use their fused
    kernel: one launch per step for all parameters instead of about ten per parameter group, which is what an update
    of small networks on a GPU is bounded by. On the CPU the default implementation is kept (results unchanged)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {name!r}")
    fused = name in ("adam", "adamw") and torch.device(device).type == "cuda"
    return OPTIMIZERS[name](params, lr=lr, **({"fused": True} if fused else {}))
