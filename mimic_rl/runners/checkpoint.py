"""Checkpoints that a crash cannot corrupt, and the random-number state an exact resume needs."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["capture_rng_state", "latest_checkpoint", "load_checkpoint", "restore_rng_state", "save_checkpoint"]


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` atomically: a temporary file in the same folder, fsync, then rename.

    A crash (or an exception) at any point leaves the previous file at ``path`` intact.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by ``save_checkpoint`` (or any ``torch.save`` dict)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} not found")
    try:
        return torch.load(path, map_location=device, weights_only=False)
    except Exception as exc:
        raise RuntimeError(f"checkpoint {path} cannot be read ({type(exc).__name__}: {exc})") from exc


def latest_checkpoint(log_dir: str | Path) -> Path | None:
    """The ``model_<iteration>.pt`` with the highest iteration in ``log_dir`` (None if there is none)."""
    found = []
    for p in Path(log_dir).glob("model_*.pt"):
        stem = p.stem.removeprefix("model_")
        if stem.isdigit():
            found.append((int(stem), p))
    return max(found)[1] if found else None


def capture_rng_state() -> dict[str, Any]:
    """Python, NumPy and torch (CPU and CUDA) random states."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    """Inverse of ``capture_rng_state``."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
