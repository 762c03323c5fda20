"""Checkpoints for the runners: safe, atomic files (``mimic_rl.serialization``) and the random state an exact resume
needs."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

from mimic_rl.serialization import (
    checkpoint_kind,
    latest_checkpoint,
    load_checkpoint,
    remove_orphan_checkpoints,
    save_checkpoint,
)

__all__ = [
    "capture_rng_state",
    "checkpoint_kind",
    "latest_checkpoint",
    "load_checkpoint",
    "remove_orphan_checkpoints",
    "restore_rng_state",
    "save_checkpoint",
]


def capture_rng_state() -> dict[str, Any]:
    """Python, NumPy and torch (CPU and CUDA) random states, as plain data (tensors, ints, strings, lists)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of ``capture_rng_state``."""
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((str(kind), keys.cpu().numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
