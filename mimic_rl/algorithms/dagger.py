"""DAgger guidance for PPO: a frozen teacher labels every collected step and the actor is pulled towards it.

The imitation loss (``"mse"`` on action means, or analytic ``"kl"`` KL(teacher || student)) is added to the PPO loss
with a scheduled coefficient, so one optimizer and one backward train both: no gradient is wiped.

One extension, one file: ``DaggerConfig`` (the ``algorithm.dagger_cfg`` section), how it is built, its hooks (the
teacher's label of each collected step, the imitation term in the PPO loss).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.extensions import BuildContext, Extension, Host, PolicyOutput, register_extension
from mimic_rl.algorithms.ppo_losses import masked_mean
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.models.distributions import gaussian_kl
from mimic_rl.models.teacher import load_teacher

__all__ = ["DaggerConfig", "DaggerGuidance"]


@dataclass
class DaggerConfig:
    """``algorithm.dagger_cfg``: the teacher and the imitation loss."""

    teacher: Any = None
    """A trained policy: a checkpoint path (this package's or rsl_rl's), a loaded checkpoint dict or a module."""
    loss: Literal["mse", "kl"] = "mse"
    coef: float | dict[str, Any] = 1.0
    """The imitation coefficient: a number, or a schedule (``mimic_rl.algorithms.schedules.Schedule``)."""
    teacher_obs_groups: list[str] = field(default_factory=lambda: ["policy", "reference"])
    """rsl_rl checkpoints only: the observation groups the teacher's MLP reads, concatenated in this order."""
    teacher_activation: str = "elu"
    """rsl_rl checkpoints only: the MLP's activation."""


@register_extension
class DaggerGuidance(Extension):
    """Teacher labels and the imitation loss term."""

    name = "dagger"
    config_key = "dagger_cfg"
    Config = DaggerConfig
    build_rank = 20
    hook_rank = 10

    def __init__(self, cfg: DaggerConfig | None = None, *, device: str | torch.device = "cpu", **fields: Any) -> None:
        """``cfg`` (or its fields as keywords, e.g. ``DaggerGuidance(teacher=path, loss="kl")``)."""
        cfg = self.config_of(cfg, fields)
        if cfg.loss not in ("mse", "kl"):
            raise ValueError(f"dagger_cfg['loss'] must be 'mse' or 'kl', got {cfg.loss!r}")
        if cfg.teacher is None:
            raise ValueError("dagger_cfg needs 'teacher': a trained policy's checkpoint path")
        self.cfg = cfg
        self.teacher: nn.Module = load_teacher(cfg.teacher, cfg.teacher_obs_groups, cfg.teacher_activation, device)
        self.loss_type = cfg.loss
        self.coef_schedule = Schedule.from_any(cfg.coef, "dagger_cfg['coef']")

    @classmethod
    def rollout_fields(cls, cfg: DaggerConfig, obs: TensorDictBase, env: Any, obs_groups: Any) -> dict[str, Any]:
        """``dagger_actions``: the teacher's label of each step."""
        return {"dagger_actions": (int(env.num_actions),)}

    @classmethod
    def build(cls, cfg: DaggerConfig, ctx: BuildContext) -> DaggerGuidance:
        """The frozen teacher on ``ctx.device``."""
        return cls(cfg, device=ctx.device)

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

    # ------------------------------------------------------------------ MMPPO's hooks
    def check(self, alg: Host) -> None:
        """The rollout must keep the labels."""
        if "dagger_actions" not in alg.rollout.fields:
            raise ValueError(
                "dagger_cfg is set but the rollout has no dagger_actions field: build it with "
                "fields={'dagger_actions': (num_actions,)} (construct_algorithm does)"
            )

    def on_act(self, alg: Host, obs: TensorDictBase) -> None:
        """Label the state the policy acted in."""
        alg.transition["dagger_actions"] = self.label(obs)

    def policy_terms(self, alg: Host, streams: dict[str, Any], out: PolicyOutput) -> dict[str, torch.Tensor]:
        """``imitation``: the mean imitation loss of the actor's output against the labels."""
        return {"imitation": masked_mean(self.loss(out.mean, out.std, streams["dagger_actions"]), out.mask)}

    def policy_loss(self, alg: Host, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        """The imitation term times its scheduled coefficient."""
        return self.coef(alg.iteration) * terms["imitation"]
