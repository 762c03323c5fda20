"""What MMPPO's add-ons (AMP, RND, DAgger guidance, symmetry) may do, as a small set of hooks.

MMPPO knows PPO only. Each add-on is an ``Extension`` that it calls at fixed points, in the order of
``MMPPO.extensions``:

- collection: ``on_act`` (after the policy acted: labels, features of the current state) and ``on_step`` (the step's
  outcome before it is stored: reward terms, extra stored data); both may add fields to ``alg.transition``, the step
  being collected (a dict under the storage's field names, e.g. ``dagger_actions``, ``rnd_state``);
- update: ``before_update`` (once, before the first mini-batch), ``transform_batch`` (the mini-batch's streams
  before the forward pass), ``policy_terms`` / ``policy_loss`` (terms on the actor's output, added to the PPO loss),
  ``side_loss`` (a loss with its own optimizer, on the mini-batch itself: a dict of the storage's fields plus
  ``indices``, ``hidden_states``, ``masks``/``loss_mask`` for sequences and, for the fields named in
  ``previous_keys``, ``previous`` and ``previous_valid``), ``after_update`` (once, after the last mini-batch:
  normalizers);
- checkpoints: ``state_dict`` / ``load_state_dict`` (saved with the model) and ``runtime_state_dict`` /
  ``load_runtime_state_dict`` (only what an exact resume needs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn

if TYPE_CHECKING:
    from mimic_rl.algorithms.ppo import MMPPO

__all__ = ["Extension", "PolicyOutput", "SideLoss", "flat_rows"]


@dataclass
class PolicyOutput:
    """The actor's output on a mini-batch: ``mean``/``std`` over all (possibly augmented) rows, the first ``n`` of
    them the stored samples, and the loss mask of the stored samples (None: every row counts)."""

    mean: torch.Tensor
    std: torch.Tensor
    n: int
    mask: torch.Tensor | None


@dataclass
class SideLoss:
    """A loss trained by its own optimizer in the same mini-batch step as PPO.

    ``checked``: its gradient norm joins the non-finite check that skips the whole step. ``after_step`` runs after
    its optimizer stepped (replay buffers, counters).
    """

    terms: dict[str, torch.Tensor]
    loss: torch.Tensor
    optimizer: torch.optim.Optimizer
    params: list[nn.Parameter]
    checked: bool = False
    after_step: Callable[[], None] | None = None


class Extension:
    """An add-on of MMPPO: every hook does nothing unless overridden (see the module docstring)."""

    name: str = ""
    """Its key in ``load_cfg`` and in logs."""
    previous_keys: tuple[str, ...] = ()
    """Storage fields this extension reads at step t - 1 of the same env in every mini-batch (AMP: ``("obs",)``)."""

    def modules(self) -> list[nn.Module]:
        """Learnable modules: train/eval mode, broadcast across ranks, non-finite row counts."""
        return []

    def check(self, alg: MMPPO) -> None:
        """Raise ``ValueError`` if ``alg`` (its models, its storage) cannot host this extension."""

    def on_act(self, alg: MMPPO, obs: TensorDictBase) -> None:
        """After the policy acted on ``obs``; may add fields to ``alg.transition``."""

    def on_step(self, alg: MMPPO, next_obs: TensorDictBase, rewards: torch.Tensor) -> torch.Tensor:
        """The step's outcome (``next_obs``: the real next state, before any reset); returns the rewards to store."""
        return rewards

    def before_update(self, alg: MMPPO) -> None:
        """Once per update, before the first mini-batch."""

    def transform_batch(self, alg: MMPPO, streams: dict[str, Any]) -> dict[str, Any]:
        """The mini-batch's streams (``obs``, ``ref``, ``actions``, ``advantages``, ...) before the forward pass."""
        return streams

    def policy_terms(self, alg: MMPPO, streams: dict[str, Any], out: PolicyOutput) -> dict[str, torch.Tensor]:
        """Loss terms on the actor's output; reported, and added to the PPO loss by ``policy_loss``."""
        return {}

    def policy_loss(self, alg: MMPPO, terms: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """This extension's weighted share of the PPO loss (None: nothing)."""
        return None

    def side_loss(self, alg: MMPPO, batch: dict[str, Any], step: int) -> SideLoss | None:
        """A loss with its own optimizer on mini-batch number ``step`` of the update (None: none this step)."""
        return None

    def after_update(self, alg: MMPPO) -> None:
        """Once per update, after the last mini-batch, before the storage is cleared (normalizers)."""

    def state_dict(self) -> dict[str, Any]:
        """Top-level checkpoint entries (merged into ``MMPPO.save()``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Inverse of ``state_dict`` on a whole checkpoint dict (entries it does not find are left alone)."""

    def runtime_state_dict(self) -> dict[str, Any]:
        """What an exact resume needs beyond ``state_dict`` (merged into ``MMPPO.runtime_state_dict()``)."""
        return {}

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``runtime_state_dict``."""


def flat_rows(x: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """Rows of a padded ``[L, B, ...]`` recurrent batch as ``[L * B, ...]``; a flat batch (``masks`` None) as it is."""
    return x if masks is None else x.reshape(-1, *x.shape[2:])
