"""GatherPlan: the fields of a mini-batch fetched from a ``PackedStore`` with as few operations as possible.

A plan is made once per ``mini_batches`` call: the flat source of each store it reads (the rows of the rollout's
steps, or of the steps before them; the float store restricted to the window of columns its fields occupy), and how
the gathered rows split into the fields. A batch then costs one
``index_select`` and one ``split`` per store, plus a ``view`` for the fields whose per-env shape is not one flat
dimension, and a ``TensorDict`` for each field of observation groups. On a GPU a mini-batch is that few kernel
launches and little Python, which is what bounds the pass there (the data itself is small).

With ``reuse``, a plan gathers into buffers it keeps (one set per batch size) whose field views and TensorDicts are
built once: a batch is then one ``index_select(out=...)`` per store and nothing else. Each batch overwrites the
previous one's tensors, so only a consumer that is done with a batch before it asks for the next (MMPPO's update)
may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDict

from mimic_rl.storage.layout import FLAG, FLOAT, PackedStore

__all__ = ["GatherPlan"]


@dataclass
class _Leaf:
    key: Any
    """The group of a TensorDict field (None for a plain field)."""
    store: str
    part: int
    """Index of the leaf's columns among the split parts of its store's gathered rows."""
    shape: tuple[int, ...] | None
    """The per-env shape to view the part as (None: the part is already ``[*lead, width]`` of a 1-D leaf)."""


@dataclass
class GatherPlan:
    """What one gather fetches for ``names`` (and the done flags when ``flags``): see the module docstring."""

    names: tuple[str, ...]
    sources: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per store: the flat ``[T * N, width]`` source (a view of the store; no copy), indexed by ``t * N + n``."""
    starts: dict[str, int] = field(default_factory=dict)
    """Per store: the first of its columns the source holds."""
    splits: dict[str, list[int]] = field(default_factory=dict)
    recipes: list[tuple[str, bool, list[_Leaf]]] = field(default_factory=list)
    device: torch.device | None = None
    reuse: bool = False
    """Gather into kept buffers (see the module docstring)."""
    _kept: dict[int, tuple[dict[str, torch.Tensor], dict[str, Any]]] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        store: PackedStore,
        names: tuple[str, ...],
        flags: bool = False,
        previous: bool = False,
        reuse: bool = False,
    ) -> GatherPlan:
        """The plan of ``names`` on ``store`` (``flags``: also gather the bool store, for the done flags): index
        ``t * N + n`` fetches step t of env n, or with ``previous`` its step t - 1 (the carry row for t = 0)."""
        rows = slice(0, store.num_steps * store.num_envs) if previous else slice(store.num_envs, None)
        plan = cls(names, device=store.device, reuse=reuse)
        leaves = [(n, key, leaf) for n in names for key, leaf in store.fields[n].leaves.items()]
        used = {leaf.store for _, _, leaf in leaves} | ({FLAG} if flags else set())
        for name in (FLOAT, FLAG, *sorted(used - {FLOAT, FLAG})):  # the float store first, then the flags
            if name not in used:
                continue
            mine = sorted({(leaf.start, leaf.stop) for _, _, leaf in leaves if leaf.store == name})
            start = mine[0][0] if (mine and name == FLOAT) else 0
            stop = mine[-1][1] if (mine and name == FLOAT) else store.stores[name].shape[-1]
            flat = store.stores[name].view(-1, store.stores[name].shape[-1])[rows]
            plan.sources[name] = flat if (start, stop) == (0, flat.shape[-1]) else flat[:, start:stop]
            plan.starts[name] = start
            plan.splits[name] = _segments(mine, start, stop)
        for name in names:
            f = store.fields[name]
            recipe = []
            for key, leaf in f.leaves.items():
                part = _part_index(plan.splits[leaf.store], leaf.start - plan.starts[leaf.store])
                shape = None if len(leaf.shape) == 1 else leaf.shape
                recipe.append(_Leaf(key, leaf.store, part, shape))
            plan.recipes.append((name, f.is_dict, recipe))
        return plan

    def fetch(self, index: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """(gathered rows, the plan's fields) at flat rollout indices ``index`` (``[B]``, or ``[L, B]``); kept
        buffers with ``reuse`` and a ``[B]`` index, else new tensors."""
        if not self.reuse or index.dim() != 1:
            rows = self.gather(index)
            return rows, self.assemble(rows, tuple(index.shape))
        kept = self._kept.get(index.shape[0])
        if kept is None:
            rows = {key: src.new_empty(index.shape[0], src.shape[-1]) for key, src in self.sources.items()}
            kept = self._kept[index.shape[0]] = (rows, self.assemble(rows, tuple(index.shape)))
        rows, fields = kept
        for key, src in self.sources.items():
            torch.index_select(src, 0, index, out=rows[key])
        return rows, dict(fields)

    def gather(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The rows of every source at flat rollout indices ``index`` (any shape), ``[*shape, width]``."""
        if index.dim() == 1:
            return {key: src.index_select(0, index) for key, src in self.sources.items()}
        lead = tuple(index.shape)
        flat = index.reshape(-1)
        return {key: src.index_select(0, flat).view(*lead, src.shape[-1]) for key, src in self.sources.items()}

    def assemble(self, rows: dict[str, torch.Tensor], lead: tuple[int, ...]) -> dict[str, Any]:
        """The plan's fields from gathered ``rows`` (``gather``'s result), ``[*lead, ...]`` each."""
        parts = {key: rows[key].split_with_sizes(sizes, -1) for key, sizes in self.splits.items()}
        out: dict[str, Any] = {}
        for name, is_dict, recipe in self.recipes:
            values = {}
            for leaf in recipe:
                part = parts[leaf.store][leaf.part]
                values[leaf.key] = part if leaf.shape is None else part.view(*lead, *leaf.shape)
            out[name] = TensorDict(values, batch_size=list(lead), device=self.device) if is_dict else values[None]
        return out


def _segments(leaves: list[tuple[int, int]], start: int, stop: int) -> list[int]:
    """Split sizes covering columns ``[start, stop)``: one part per leaf, and one per gap between leaves."""
    sizes, cursor = [], start
    for a, b in leaves:
        if a > cursor:
            sizes.append(a - cursor)
        if b > max(a, cursor):
            sizes.append(b - max(a, cursor))
        cursor = max(cursor, b)
    if stop > cursor:
        sizes.append(stop - cursor)
    return sizes


def _part_index(sizes: list[int], column: int) -> int:
    """The part of ``sizes`` that starts at ``column`` (a column offset inside the window)."""
    offset = 0
    for i, size in enumerate(sizes):
        if offset == column:
            return i
        offset += size
    raise ValueError(f"no split part starts at column {column}")
