"""Per-step means of collection-time scalars (style reward, intrinsic reward, teacher share, ...)."""

from __future__ import annotations

import torch

__all__ = ["StepMeans"]


class StepMeans:
    """Sums scalars on their device as they come (no host sync); ``pop`` returns the means and starts over."""

    def __init__(self) -> None:
        self._sums: dict[str, torch.Tensor] = {}
        self._counts: dict[str, int] = {}

    def add(self, key: str, value: torch.Tensor) -> None:
        """Add one step's value of ``key``."""
        self._sums[key] = self._sums.get(key, 0.0) + value.detach()
        self._counts[key] = self._counts.get(key, 0) + 1

    def pop(self, prefix: str = "") -> dict[str, float]:
        """``{prefix + key: mean}`` since the last call (one host read per key), then forget everything."""
        out = {f"{prefix}{k}": float(v / self._counts[k]) for k, v in self._sums.items()}
        self._sums, self._counts = {}, {}
        return out
