"""Random network distillation: a curiosity bonus from the error of a trained predictor against a frozen target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.extensions import Extension, SideLoss, flat_rows
from mimic_rl.algorithms.ppo_losses import masked_mean
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.models.mlp import MLP
from mimic_rl.models.normalization import EmpiricalNormalizer

if TYPE_CHECKING:
    from mimic_rl.algorithms.ppo import MMPPO

__all__ = ["RandomNetworkDistillation", "RndExtension"]


class RandomNetworkDistillation(nn.Module):
    """Intrinsic reward ``weight(it) * ||predictor(s) - target(s)||^2`` over the ``rnd_state`` observation group.

    The predictor has its own optimizer, stepped by the algorithm's ``update()`` on the stored RND states.
    """

    def __init__(
        self,
        num_states: int,
        num_outputs: int = 16,
        predictor_hidden_dims: Sequence[int] = (128, 128),
        target_hidden_dims: Sequence[int] = (128, 128),
        activation: str = "elu",
        weight: float | dict[str, Any] = 0.1,
        learning_rate: float = 1e-3,
        state_normalization: bool = True,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__()
        self.num_states = int(num_states)
        self.predictor = MLP(num_states, num_outputs, predictor_hidden_dims, activation)
        self.target = MLP(num_states, num_outputs, target_hidden_dims, activation)
        self.target.requires_grad_(False)
        self.state_normalizer = EmpiricalNormalizer(num_states) if state_normalization else None
        self.weight_schedule = Schedule.from_any(weight, "rnd_cfg['weight']")
        self.to(device)
        self.optimizer = torch.optim.Adam(self.predictor.parameters(), lr=learning_rate)

    def _errors(self, states: torch.Tensor) -> torch.Tensor:
        if self.state_normalizer is not None:
            states = self.state_normalizer(states)
        return (self.predictor(states) - self.target(states)).square().mean(-1)

    @torch.no_grad()
    def intrinsic_reward(self, states: torch.Tensor, iteration: int) -> torch.Tensor:
        """Weighted prediction error per env, ``[N]``; 0 for a state with a NaN or inf (the normalizer leaves such
        rows out and counts them)."""
        finite = torch.isfinite(states).all(-1)
        return torch.where(finite, self.weight_schedule(iteration) * self._errors(states), 0.0)

    def loss(self, states: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Predictor regression loss (mean over rows, or over rows where ``mask`` is True)."""
        return masked_mean(self._errors(states.detach()), mask)

    def update_normalization(self, states: torch.Tensor) -> None:
        """Merge raw RND states into the state normalizer."""
        if self.state_normalizer is not None:
            self.state_normalizer.update(states)


class RndExtension(Extension):
    """MMPPO's RND hooks: the intrinsic reward at collection, the predictor's step per mini-batch (its own
    optimizer), the state normalizer after the update."""

    name = "rnd"

    def __init__(self, rnd: RandomNetworkDistillation) -> None:
        self.rnd = rnd

    def modules(self) -> list[nn.Module]:
        """Predictor and frozen target."""
        return [self.rnd]

    def check(self, alg: MMPPO) -> None:
        """The storage must keep the states the predictor learns."""
        if "rnd_state" not in alg.rollout.fields:
            raise ValueError("rnd_cfg is set but the storage has no rnd_state: build it with rnd_state_shape")

    def on_step(self, alg: MMPPO, next_obs: TensorDictBase, rewards: torch.Tensor) -> torch.Tensor:
        """Add the intrinsic reward of the next state (the ``rnd_state`` group, else the actor's observation)."""
        if "rnd_state" in next_obs.keys():
            state = next_obs["rnd_state"]
        else:
            state = alg.obs_groups.actor_obs(next_obs)
        intrinsic = self.rnd.intrinsic_reward(state, alg.iteration)
        alg.log_step("rnd_intrinsic_reward", intrinsic.mean())
        alg.transition["rnd_state"] = state
        return rewards + intrinsic

    def side_loss(self, alg: MMPPO, batch: dict[str, Any], step: int) -> SideLoss:
        """The predictor's regression loss on the mini-batch's stored states."""
        masks = batch.get("masks")
        mask = None if masks is None else masks.reshape(-1)
        loss = self.rnd.loss(flat_rows(batch["rnd_state"], masks), mask)
        return SideLoss({"rnd": loss}, loss, self.rnd.optimizer, list(self.rnd.predictor.parameters()))

    @torch.no_grad()
    def after_update(self, alg: MMPPO) -> None:
        """The rollout's states into the state normalizer."""
        self.rnd.update_normalization(alg.rollout.get()["rnd_state"].flatten(0, 1))

    def state_dict(self) -> dict[str, Any]:
        """``rnd_state_dict`` and ``rnd_optimizer_state_dict``."""
        return {"rnd_state_dict": self.rnd.state_dict(), "rnd_optimizer_state_dict": self.rnd.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore both when the checkpoint has them."""
        if "rnd_state_dict" in state:
            self.rnd.load_state_dict(state["rnd_state_dict"], strict=strict)
            self.rnd.optimizer.load_state_dict(state["rnd_optimizer_state_dict"])
