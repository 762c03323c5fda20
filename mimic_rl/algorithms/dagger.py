"""DAgger guidance for PPO: a frozen teacher labels every collected step and the actor is pulled towards it.

The imitation loss (``"mse"`` on action means, or analytic ``"kl"`` KL(teacher || student)) is added to the PPO loss
with a scheduled coefficient, so one optimizer and one backward train both: no gradient is wiped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.extensions import Extension, PolicyOutput
from mimic_rl.algorithms.ppo_losses import masked_mean
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.models.distributions import gaussian_kl
from mimic_rl.models.teacher import load_teacher

if TYPE_CHECKING:
    from mimic_rl.algorithms.ppo import MMPPO

__all__ = ["DaggerExtension", "DaggerGuidance"]


class DaggerGuidance:
    """Teacher labels and the imitation loss term."""

    def __init__(
        self,
        teacher: Any,
        loss: str = "mse",
        coef: float | dict[str, Any] = 1.0,
        teacher_obs_groups: Sequence[str] = ("policy", "reference"),
        teacher_activation: str = "elu",
        device: str | torch.device = "cpu",
    ) -> None:
        if loss not in ("mse", "kl"):
            raise ValueError(f"dagger_cfg['loss'] must be 'mse' or 'kl', got {loss!r}")
        self.teacher: nn.Module = load_teacher(teacher, teacher_obs_groups, teacher_activation, device)
        self.loss_type = loss
        self.coef_schedule = Schedule.from_any(coef, "dagger_cfg['coef']")

    @torch.no_grad()
    def label(self, obs: TensorDictBase) -> torch.Tensor:
        """Teacher action means for the current observations ``[N, A]``."""
        return self.teacher(obs)

    def coef(self, iteration: int) -> float:
        """Imitation coefficient at ``iteration``."""
        return self.coef_schedule(iteration)

    def loss(
        self, mean: torch.Tensor, std: torch.Tensor, teacher_mean: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-sample imitation loss ``[...]``: squared error of means summed over actions, or KL(teacher || actor)."""
        if self.loss_type == "mse":
            return (mean - teacher_mean).square().sum(-1)
        teacher_std = self.teacher.std().to(mean.dtype).expand_as(mean)
        return gaussian_kl(teacher_mean, teacher_std, mean, std)


class DaggerExtension(Extension):
    """MMPPO's DAgger hooks: the teacher labels each collected step; the imitation term joins the PPO loss."""

    name = "dagger"

    def __init__(self, dagger: DaggerGuidance) -> None:
        self.dagger = dagger

    def check(self, alg: MMPPO) -> None:
        """The storage must keep the labels."""
        if "dagger_actions" not in alg.rollout.fields:
            raise ValueError(
                "dagger_cfg is set but the storage has no dagger_actions: build it with dagger_actions=True"
            )

    def on_act(self, alg: MMPPO, obs: TensorDictBase) -> None:
        """Label the state the policy acted in."""
        alg.transition["dagger_actions"] = self.dagger.label(obs)

    def policy_terms(self, alg: MMPPO, streams: dict[str, Any], out: PolicyOutput) -> dict[str, torch.Tensor]:
        """``imitation``: the mean imitation loss of the actor's output against the labels."""
        return {"imitation": masked_mean(self.dagger.loss(out.mean, out.std, streams["dagger_actions"]), out.mask)}

    def policy_loss(self, alg: MMPPO, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        """The imitation term times its scheduled coefficient."""
        return self.dagger.coef(alg.iteration) * terms["imitation"]
