"""Random network distillation: a curiosity bonus from the error of a trained predictor against a frozen target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mimic_rl.algorithms.ppo_losses import masked_mean
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.models.mlp import MLP
from mimic_rl.models.normalization import EmpiricalNormalizer

__all__ = ["RandomNetworkDistillation"]


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
