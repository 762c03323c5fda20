"""Named mini-batches that also unpack positionally in the seed's order.

Internal code reads fields by name; ``obs, ref, critic_obs, ... = batch`` keeps working for code written against
the GBC seed. Fields beyond the seed tuple (``amp_pair_valid``, ``loss_mask``, ...) are reachable by name only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["DistillationBatch", "PPOBatch"]

RefPair = tuple[Any, torch.Tensor]


class _SeedTuple:
    """Mixin: iterate, index and measure the dataclass by its ``_seed_order`` only."""

    _seed_order: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        return (getattr(self, name) for name in self._seed_order)

    def __len__(self) -> int:
        return len(self._seed_order)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return tuple(getattr(self, name) for name in self._seed_order[index])
        return getattr(self, self._seed_order[index])


@dataclass(eq=False)
class PPOBatch(_SeedTuple):
    """One PPO mini-batch. Unpacks as the seed's 18-tuple, in order.

    Feed-forward batches are ``[B, ...]``; recurrent batches are padded ``[L, B, ...]`` with ``masks`` (valid,
    non-padded steps) and ``loss_mask`` (steps the loss counts; fewer than ``masks`` in overlapping sequence modes).
    ``reference`` and ``critic_reference`` are ``(observations, bool mask)`` pairs or None.
    """

    observations: Any
    reference: RefPair | None
    critic_observations: Any
    critic_reference: RefPair | None
    actions: torch.Tensor
    target_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    old_actions_log_prob: torch.Tensor
    old_mu: torch.Tensor
    old_sigma: torch.Tensor
    dagger_actions: torch.Tensor | None
    hidden_states: tuple[Any, Any]
    masks: torch.Tensor | None
    rnd_state: torch.Tensor | None
    obs_prev_state: Any
    ref_obs_prev_state: Any
    ref_obs_prev_mask: torch.Tensor | None
    # Named-only extras.
    amp_pair_valid: torch.Tensor | None = None
    """Bool per row: the (t-1, t) pair is the same env and episode (also folded into ``ref_obs_prev_mask``)."""
    obs_cur_state: Any = None
    ref_obs_cur_state: Any = None
    ref_obs_cur_mask: torch.Tensor | None = None
    loss_mask: torch.Tensor | None = None
    indices: torch.Tensor | None = None
    """Flat rollout indices ``t * N + n`` of the rows (``[B]``, or ``[L, B]`` with padding pointing at 0)."""

    _seed_order = (
        "observations",
        "reference",
        "critic_observations",
        "critic_reference",
        "actions",
        "target_values",
        "advantages",
        "returns",
        "old_actions_log_prob",
        "old_mu",
        "old_sigma",
        "dagger_actions",
        "hidden_states",
        "masks",
        "rnd_state",
        "obs_prev_state",
        "ref_obs_prev_state",
        "ref_obs_prev_mask",
    )


@dataclass(eq=False)
class DistillationBatch(_SeedTuple):
    """One time step of a distillation rollout. Unpacks as the seed's 7-tuple, in order."""

    observations: Any
    privileged_observations: Any
    reference: RefPair | None
    privileged_reference: RefPair | None
    actions: torch.Tensor
    privileged_actions: torch.Tensor
    dones: torch.Tensor
    hidden_states: tuple[Any, Any] = (None, None)

    _seed_order = (
        "observations",
        "privileged_observations",
        "reference",
        "privileged_reference",
        "actions",
        "privileged_actions",
        "dones",
    )
