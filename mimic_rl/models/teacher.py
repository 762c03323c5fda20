"""Frozen teacher policies for DAgger guidance and distillation.

A teacher maps an observation TensorDict to action means (and has a ``std()`` for KL losses). It can come from this
package's checkpoint (the saved actor and its config) or from an rsl_rl checkpoint's ``actor_state_dict`` (the format
BeyondMimic and mjlab trackers save): an MLP ``mlp.<i>.weight/bias``, an optional ``obs_normalizer`` and a Gaussian
``distribution.std_param`` or ``log_std_param``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.models.actor_critic import Actor
from mimic_rl.models.mlp import activation as make_activation

__all__ = ["ActorTeacher", "RslRlTeacher", "load_teacher"]


class ActorTeacher(nn.Module):
    """This package's ``Actor`` used as a frozen teacher on the ``policy`` / ``reference`` groups (or renamed ones)."""

    def __init__(
        self, actor: Actor, obs_group: str = "policy", ref_group: str = "reference", mask_group: str = "reference_mask"
    ) -> None:
        super().__init__()
        self.actor = actor.eval().requires_grad_(False)
        self.obs_group, self.ref_group, self.mask_group = obs_group, ref_group, mask_group

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        """Deterministic teacher actions."""
        return self.actor(obs[self.obs_group], obs.get(self.ref_group, None), obs.get(self.mask_group, None))

    def std(self) -> torch.Tensor:
        """The teacher's action std."""
        return self.actor.head.std()

    def train(self, mode: bool = True) -> ActorTeacher:
        """A teacher always stays in eval mode."""
        return super().train(False)


class RslRlTeacher(nn.Module):
    """An rsl_rl ``MLPModel`` actor rebuilt from its state dict; input is the concatenation of ``obs_groups``."""

    def __init__(
        self, state_dict: Mapping[str, torch.Tensor], obs_groups: Sequence[str], activation: str = "elu"
    ) -> None:
        super().__init__()
        self.obs_groups = list(obs_groups)
        linear_ids = sorted(int(k.split(".")[1]) for k in state_dict if k.startswith("mlp.") and k.endswith(".weight"))
        if not linear_ids:
            raise KeyError("rsl_rl actor_state_dict has no 'mlp.<i>.weight' entries; is this an rsl_rl MLPModel actor?")
        layers: list[nn.Module] = []
        for j, i in enumerate(linear_ids):
            w = state_dict[f"mlp.{i}.weight"]
            lin = nn.Linear(w.shape[1], w.shape[0])
            lin.weight.data.copy_(w)
            lin.bias.data.copy_(state_dict[f"mlp.{i}.bias"])
            layers.append(lin)
            if j < len(linear_ids) - 1:
                layers.append(make_activation(activation))
        self.mlp = nn.Sequential(*layers)
        self.input_dim = int(state_dict[f"mlp.{linear_ids[0]}.weight"].shape[1])
        self._first_layer = f"mlp.{linear_ids[0]}.weight"
        mean = state_dict.get("obs_normalizer._mean")
        if mean is not None:
            self.register_buffer("norm_mean", mean.reshape(-1).clone())
            self.register_buffer("norm_std", state_dict["obs_normalizer._std"].reshape(-1).clone())
        else:
            self.norm_mean = None
        if "distribution.std_param" in state_dict:
            self.register_buffer("_std", state_dict["distribution.std_param"].clone())
        elif "distribution.log_std_param" in state_dict:
            self.register_buffer("_std", state_dict["distribution.log_std_param"].exp())
        else:
            self.register_buffer("_std", torch.ones(self.mlp[-1].out_features))
        self.requires_grad_(False).eval()

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        """Deterministic teacher actions from the concatenated observation groups."""
        x = torch.cat([obs[g].reshape(obs[g].shape[0], -1) for g in self.obs_groups], dim=-1)
        if x.shape[-1] != self.input_dim:
            raise ValueError(
                f"rsl_rl teacher layer {self._first_layer} expects input dim {self.input_dim}, but the observation "
                f"groups {self.obs_groups} give {x.shape[-1]}"
            )
        if self.norm_mean is not None:
            x = (x - self.norm_mean) / (self.norm_std + 1e-2)
        return self.mlp(x)

    def std(self) -> torch.Tensor:
        """The teacher's action std."""
        return self._std

    def train(self, mode: bool = True) -> RslRlTeacher:
        """A teacher always stays in eval mode."""
        return super().train(False)


def load_teacher(
    source: str | Path | Mapping[str, Any] | nn.Module,
    obs_groups: Sequence[str] = ("policy", "reference"),
    activation: str = "elu",
    device: str | torch.device = "cpu",
) -> nn.Module:
    """A frozen teacher from a module, a checkpoint path, or a loaded checkpoint dict.

    This package's checkpoints hold ``actor_cfg`` next to ``actor_state_dict``; anything else with an
    ``actor_state_dict`` is read as rsl_rl's format, its input being the concatenation of ``obs_groups``.
    """
    if isinstance(source, nn.Module):
        module = source if not isinstance(source, Actor) else ActorTeacher(source)
        return module.to(device).eval().requires_grad_(False)
    ckpt = torch.load(source, map_location="cpu", weights_only=False) if isinstance(source, str | Path) else source
    if "actor_state_dict" not in ckpt:
        raise KeyError(f"teacher checkpoint has no 'actor_state_dict' (keys: {sorted(ckpt)[:10]})")
    state = ckpt["actor_state_dict"]
    if "actor_cfg" in ckpt:
        actor = Actor(**ckpt["actor_cfg"])
        _load_checked(actor, state)
        return ActorTeacher(actor).to(device)
    return RslRlTeacher(state, obs_groups, activation).to(device)


def _load_checked(module: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """``load_state_dict`` whose shape errors name the layer and both shapes."""
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        raise KeyError(f"teacher state dict mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for key, value in state.items():
        if tuple(own[key].shape) != tuple(value.shape):
            raise ValueError(
                f"teacher layer {key!r}: checkpoint has shape {tuple(value.shape)}, model {tuple(own[key].shape)}"
            )
    module.load_state_dict(state)
