"""Per-step means of collection-time scalars (style reward, intrinsic reward, teacher share, ...) and per-mini-batch
means of an update's loss terms."""

from __future__ import annotations

import torch

__all__ = ["StepMeans", "TermMeans"]


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


class TermMeans:
    """Means of an update's scalar loss terms over the mini-batches that had them: one stack and one add per
    mini-batch (not one add per term: a GPU update runs launch-bound), one host read at the end."""

    def __init__(self) -> None:
        self._sums: dict[tuple[str, ...], list] = {}  # the keys of a mini-batch -> [their sums, mini-batches]

    def add(self, terms: dict[str, torch.Tensor]) -> None:
        """Add one mini-batch's terms (0-d tensors)."""
        keys = tuple(terms)
        row = torch.stack([value.detach().float() for value in terms.values()])
        entry = self._sums.get(keys)
        if entry is None:
            self._sums[keys] = [row, 1]
        else:
            entry[0] += row
            entry[1] += 1

    def means(self) -> dict[str, float]:
        """``{key: mean}``: each key's sum over the mini-batches that had it (extensions that step every n-th
        mini-batch log their own mean), divided by their number."""
        if not self._sums:
            return {}
        values = iter(torch.cat([row for row, _ in self._sums.values()]).tolist())
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for keys, (_, count) in self._sums.items():
            for key in keys:
                sums[key] = sums.get(key, 0.0) + next(values)
                counts[key] = counts.get(key, 0) + count
        return {key: value / counts[key] for key, value in sums.items()}
