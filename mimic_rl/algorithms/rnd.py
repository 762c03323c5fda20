"""Random network distillation: a curiosity bonus from the error of a trained predictor against a frozen target.

One extension, one file: ``RndConfig`` (the ``algorithm.rnd_cfg`` section), how it is built, its hooks (the
intrinsic reward at collection, the predictor's step per mini-batch with its own optimizer, the state normalizer
after the update) and its state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.extensions import BuildContext, Extension, Host, SideLoss, flat_rows, register_extension
from mimic_rl.algorithms.ppo_losses import masked_mean
from mimic_rl.algorithms.schedules import Schedule
from mimic_rl.models.mlp import MLP
from mimic_rl.models.normalization import EmpiricalNormalizer
from mimic_rl.utils import Range

__all__ = ["RandomNetworkDistillation", "RndConfig", "RndNetworks"]


@dataclass
class RndConfig:
    """``algorithm.rnd_cfg``: the predictor and target networks, the bonus weight and the predictor's rate."""

    num_states: Annotated[int | None, Range(1)] = None
    """Width of the states RND reads (the ``rnd_state`` group, else the actor's observation); None: from the env."""
    num_outputs: Annotated[int, Range(1)] = 16
    predictor_hidden_dims: tuple[int, ...] = (128, 128)
    target_hidden_dims: tuple[int, ...] = (128, 128)
    activation: str = "elu"
    weight: float | dict[str, Any] = 0.1
    """The bonus weight: a number, or a schedule (``mimic_rl.algorithms.schedules.Schedule``)."""
    learning_rate: Annotated[float, Range(0, low_exclusive=True)] = 1e-3
    state_normalization: bool = True


class RndNetworks(nn.Module):
    """The trained predictor, the frozen target and the state normalizer (``rnd_state_dict`` in checkpoints)."""

    def __init__(self, cfg: RndConfig) -> None:
        super().__init__()
        n = int(cfg.num_states)
        self.predictor = MLP(n, cfg.num_outputs, cfg.predictor_hidden_dims, cfg.activation)
        self.target = MLP(n, cfg.num_outputs, cfg.target_hidden_dims, cfg.activation)
        self.target.requires_grad_(False)
        self.state_normalizer = EmpiricalNormalizer(n) if cfg.state_normalization else None

    def errors(self, states: torch.Tensor) -> torch.Tensor:
        """Squared prediction error per state ``[...]``."""
        if self.state_normalizer is not None:
            states = self.state_normalizer(states)
        return (self.predictor(states) - self.target(states)).square().mean(-1)


@register_extension
class RandomNetworkDistillation(Extension):
    """Intrinsic reward ``weight(it) * ||predictor(s) - target(s)||^2`` over the ``rnd_state`` observation group.

    The predictor has its own optimizer, stepped by the algorithm's ``update()`` on the stored RND states.
    """

    name = "rnd"
    config_key = "rnd_cfg"
    Config = RndConfig
    build_rank = 10
    hook_rank = 40

    def __init__(self, cfg: RndConfig | None = None, *, device: str | torch.device = "cpu", **fields: Any) -> None:
        """``cfg`` (or its fields as keywords, e.g. ``RandomNetworkDistillation(num_states=8)``)."""
        cfg = self.config_of(cfg, fields)
        if cfg.num_states is None:
            raise ValueError("rnd_cfg needs 'num_states' (construct_algorithm takes it from the env)")
        self.cfg = cfg
        self.num_states = int(cfg.num_states)
        self.net = RndNetworks(cfg).to(device)
        self.weight_schedule = Schedule.from_any(cfg.weight, "rnd_cfg['weight']")
        self.optimizer = torch.optim.Adam(self.net.predictor.parameters(), lr=cfg.learning_rate)

    @property
    def predictor(self) -> nn.Module:
        """The trained network."""
        return self.net.predictor

    @property
    def target(self) -> nn.Module:
        """The frozen, randomly initialized network."""
        return self.net.target

    @property
    def state_normalizer(self) -> EmpiricalNormalizer | None:
        """The running normalizer of the states (None without ``state_normalization``)."""
        return self.net.state_normalizer

    # ------------------------------------------------------------------ construction from a config
    @classmethod
    def prepare(cls, cfg: RndConfig, obs: TensorDictBase, env: Any, obs_groups: Any) -> RndConfig:
        """``num_states`` from the states RND reads."""
        if cfg.num_states is None:
            cfg = replace(cfg, num_states=cls._state_shape(obs, obs_groups)[-1])
        return cfg

    @classmethod
    def rollout_fields(cls, cfg: RndConfig, obs: TensorDictBase, env: Any, obs_groups: Any) -> dict[str, Any]:
        """``rnd_state``: the states the predictor learns."""
        return {"rnd_state": cls._state_shape(obs, obs_groups)}

    @staticmethod
    def _state_shape(obs: TensorDictBase, obs_groups: Any) -> tuple[int, ...]:
        """Per-env shape of the ``rnd_state`` group, else of the actor's observation."""
        if "rnd_state" in obs.keys():
            return tuple(obs["rnd_state"].shape[1:])
        return (obs_groups.shapes(obs)["actor"],)

    @classmethod
    def build(cls, cfg: RndConfig, ctx: BuildContext) -> RandomNetworkDistillation:
        """The networks and the predictor's optimizer on ``ctx.device``."""
        return cls(cfg, device=ctx.device)

    # ------------------------------------------------------------------ the bonus and the predictor's loss
    @torch.no_grad()
    def intrinsic_reward(self, states: torch.Tensor, iteration: int) -> torch.Tensor:
        """Weighted prediction error per env, ``[N]``; 0 for a state with a NaN or inf (the normalizer leaves such
        rows out and counts them)."""
        finite = torch.isfinite(states).all(-1)
        return torch.where(finite, self.weight_schedule(iteration) * self.net.errors(states), 0.0)

    def loss(self, states: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Predictor regression loss (mean over rows, or over rows where ``mask`` is True)."""
        return masked_mean(self.net.errors(states.detach()), mask)

    def update_normalization(self, states: torch.Tensor) -> None:
        """Merge raw RND states into the state normalizer."""
        if self.net.state_normalizer is not None:
            self.net.state_normalizer.update(states)

    # ------------------------------------------------------------------ MMPPO's hooks
    def modules(self) -> list[nn.Module]:
        """Predictor and frozen target."""
        return [self.net]

    def check(self, alg: Host) -> None:
        """The rollout must keep the states the predictor learns."""
        if "rnd_state" not in alg.rollout.fields:
            raise ValueError(
                "rnd_cfg is set but the rollout has no rnd_state field: build it with fields={'rnd_state': shape} "
                "(construct_algorithm does)"
            )

    def on_step(self, alg: Host, next_obs: TensorDictBase, rewards: torch.Tensor) -> torch.Tensor:
        """Add the intrinsic reward of the next state (the ``rnd_state`` group, else the actor's observation)."""
        if "rnd_state" in next_obs.keys():
            state = next_obs["rnd_state"]
        else:
            state = alg.obs_groups.actor_obs(next_obs)
        intrinsic = self.intrinsic_reward(state, alg.iteration)
        alg.log_step("rnd_intrinsic_reward", intrinsic.mean())
        alg.transition["rnd_state"] = state
        return rewards + intrinsic

    def side_loss(self, alg: Host, batch: dict[str, Any], step: int) -> SideLoss:
        """The predictor's regression loss on the mini-batch's stored states."""
        masks = batch.get("masks")
        mask = None if masks is None else masks.reshape(-1)
        loss = self.loss(flat_rows(batch["rnd_state"], masks), mask)
        return SideLoss({"rnd": loss}, loss, self.optimizer, list(self.net.predictor.parameters()))

    @torch.no_grad()
    def after_update(self, alg: Host) -> None:
        """The rollout's states into the state normalizer."""
        self.update_normalization(alg.rollout.get()["rnd_state"].flatten(0, 1))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """``rnd_state_dict`` (networks, normalizer) and ``rnd_optimizer_state_dict``."""
        return {"rnd_state_dict": self.net.state_dict(), "rnd_optimizer_state_dict": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore both when the checkpoint has them."""
        if "rnd_state_dict" in state:
            self.net.load_state_dict(state["rnd_state_dict"], strict=strict)
            self.optimizer.load_state_dict(state["rnd_optimizer_state_dict"])
