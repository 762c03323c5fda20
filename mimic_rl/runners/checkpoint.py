"""Checkpoints for the runners: safe, atomic files (``mimic_rl.serialization``), the random state an exact resume
needs, and the rule that picks a run's best checkpoint (``model_best.pt``)."""

from __future__ import annotations

import math
import random
from pathlib import Path
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
    "BEST_BY",
    "BEST_CHECKPOINT",
    "beats_best",
    "best_record",
    "capture_rng_state",
    "checkpoint_kind",
    "latest_checkpoint",
    "load_checkpoint",
    "read_best_record",
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


BEST_CHECKPOINT = "model_best.pt"
"""The checkpoint of a run's best evaluation from the clips' start (``runner.keep_best``), beside ``model_<N>.pt``."""


BEST_BY = ("mean", "worst_clip")
"""The rules of ``runner.best_by``: rank evaluations by the mean success over clips, or by the lowest clip's first."""


def best_record(iteration: int, total_steps: int, scalars: dict[str, float]) -> dict[str, float]:
    """What ``model_best.pt`` records of its evaluation (``best_eval``): when, and its mean and lowest clip's success,
    share of the clips reached and global MPJPE."""
    success = float(scalars["eval/success_rate"])
    return {
        "iteration": int(iteration),
        "total_steps": int(total_steps),
        "success_rate": success,
        "worst_clip_success_rate": float(scalars.get("eval/worst_clip_success_rate", success)),
        "episode_length_fraction": float(scalars["eval/episode_length_fraction"]),
        "global_mpjpe_mm": float(scalars["eval/global_mpjpe_mm"]),
    }


def beats_best(record: dict[str, float], best: dict[str, float] | None, by: str = "mean") -> bool:
    """Whether evaluation ``record`` is better than ``best`` (None: no best yet): a higher mean success from the
    clips' start (``by="worst_clip"``: a higher lowest clip's success first, then the mean); at the same success, a
    larger share of the clips reached; then a lower global MPJPE (a NaN MPJPE ranks below any number). A tie keeps
    ``best``; a ``best`` recorded without the lowest clip's success (before it was recorded) counts its mean."""
    if by not in BEST_BY:
        raise ValueError(f"best_by must be one of {', '.join(BEST_BY)}, found {by!r}")
    if best is None:
        return True

    def ranks(r: dict[str, float]) -> tuple[float, ...]:
        mean = (r["success_rate"], r["episode_length_fraction"])
        return (r.get("worst_clip_success_rate", r["success_rate"]), *mean) if by == "worst_clip" else mean

    for mine, theirs in zip(ranks(record), ranks(best)):
        if mine != theirs:
            return mine > theirs
    mine, theirs = record["global_mpjpe_mm"], best["global_mpjpe_mm"]
    return not math.isnan(mine) and (math.isnan(theirs) or mine < theirs)


def read_best_record(path: str | Path) -> dict[str, float] | None:
    """The ``best_eval`` record of the checkpoint at ``path``; None when there is no file, or it has no record."""
    if not Path(path).is_file():
        return None
    record = load_checkpoint(path, "cpu", str(path)).get("best_eval")
    return dict(record) if isinstance(record, dict) else None
