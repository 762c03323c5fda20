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

from mimic_rl.errors import CheckpointError
from mimic_rl.models.actor_critic import Actor
from mimic_rl.models.mlp import activation as make_activation
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.serialization import load_checkpoint

__all__ = ["ActorTeacher", "RslRlTeacher", "load_teacher", "load_teacher_state", "teacher_from_config"]


class ActorTeacher(nn.Module):
    """This package's ``Actor`` used as a frozen teacher, reading the observation groups its training run read
    (``groups``; default ``policy`` / ``reference`` / ``reference_mask``, or the legacy single-group names)."""

    def __init__(
        self,
        actor: Actor,
        obs_group: str = "policy",
        ref_group: str = "reference",
        mask_group: str = "reference_mask",
        groups: ObsGroups | None = None,
    ) -> None:
        super().__init__()
        self.actor = actor.eval().requires_grad_(False)
        if groups is None:
            has_ref = actor.ref_shape is not None
            groups = ObsGroups((obs_group,), ref_group if has_ref else None, mask_group if has_ref else None)
        self.groups = groups
        self.config = {"kind": "actor", "actor_cfg": actor.config, "obs_groups": groups.to_dict()}
        """What ``teacher_from_config`` rebuilds this teacher from (saved in distillation checkpoints)."""

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        """Deterministic teacher actions."""
        actor_obs, reference, mask = self.groups.actor_inputs(obs)
        if self.actor.ref_shape is None:
            return self.actor(actor_obs)
        return self.actor(actor_obs, reference, mask)

    def std(self) -> torch.Tensor:
        """The teacher's action std."""
        return self.actor.head.std()

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero a recurrent teacher's state where episodes ended."""
        self.actor.reset(dones)

    def train(self, mode: bool = True) -> ActorTeacher:
        """A teacher always stays in eval mode."""
        return super().train(False)


def _rsl_rl_to_own(state: Mapping[str, torch.Tensor], teacher: RslRlTeacher) -> dict[str, torch.Tensor]:
    """rsl_rl ``MLPModel`` actor keys -> ``RslRlTeacher`` keys (the MLP keeps its ``mlp.<i>`` names); without a
    distribution in ``state``, the teacher keeps its std."""
    out = {k: v for k, v in state.items() if k.startswith("mlp.")}
    if "obs_normalizer._mean" in state:
        out["norm_mean"] = state["obs_normalizer._mean"].reshape(-1)
        out["norm_std"] = state["obs_normalizer._std"].reshape(-1)
    if "distribution.std_param" in state:
        out["_std"] = state["distribution.std_param"]
    elif "distribution.log_std_param" in state:
        out["_std"] = state["distribution.log_std_param"].exp()
    else:
        out["_std"] = teacher._std
    return out


class RslRlTeacher(nn.Module):
    """An rsl_rl ``MLPModel`` actor: an MLP over the concatenation of ``obs_groups``, with an optional normalizer.

    Build it from an rsl_rl state dict with ``from_rsl_rl``; ``dims`` are the layer widths, input first.
    """

    def __init__(
        self, dims: Sequence[int], obs_groups: Sequence[str], activation: str = "elu", normalizer: bool = False
    ) -> None:
        super().__init__()
        dims = [int(d) for d in dims]
        if len(dims) < 2:
            raise ValueError(f"RslRlTeacher needs at least an input and an output width, got dims {dims}")
        self.obs_groups = list(obs_groups)
        layers: list[nn.Module] = []
        for j in range(len(dims) - 1):
            layers.append(nn.Linear(dims[j], dims[j + 1]))
            if j < len(dims) - 2:
                layers.append(make_activation(activation))
        self.mlp = nn.Sequential(*layers)
        self.input_dim = dims[0]
        if normalizer:
            self.register_buffer("norm_mean", torch.zeros(dims[0]))
            self.register_buffer("norm_std", torch.ones(dims[0]))
        else:
            self.norm_mean = None
        self.register_buffer("_std", torch.ones(dims[-1]))
        self.config = {
            "kind": "rsl_rl",
            "dims": dims,
            "obs_groups": self.obs_groups,
            "activation": activation,
            "normalizer": bool(normalizer),
        }
        """What ``teacher_from_config`` rebuilds this teacher from (saved in distillation checkpoints)."""
        self.requires_grad_(False).eval()

    @classmethod
    def from_rsl_rl(
        cls, state_dict: Mapping[str, torch.Tensor], obs_groups: Sequence[str], activation: str = "elu"
    ) -> RslRlTeacher:
        """The teacher of an rsl_rl ``actor_state_dict`` (``mlp.<i>.weight/bias``, ``obs_normalizer._mean/_std``,
        ``distribution.std_param`` or ``log_std_param``)."""
        ids = sorted(int(k.split(".")[1]) for k in state_dict if k.startswith("mlp.") and k.endswith(".weight"))
        if not ids:
            raise KeyError("rsl_rl actor_state_dict has no 'mlp.<i>.weight' entries; is this an rsl_rl MLPModel actor?")
        expected = list(range(0, 2 * len(ids), 2))
        if ids != expected:
            raise KeyError(f"rsl_rl actor MLP layers are at indices {ids}; expected Linear layers at {expected}")
        dims = [int(state_dict[f"mlp.{ids[0]}.weight"].shape[1])]
        dims += [int(state_dict[f"mlp.{i}.weight"].shape[0]) for i in ids]
        teacher = cls(dims, obs_groups, activation, normalizer="obs_normalizer._mean" in state_dict)
        _load_checked(teacher, _rsl_rl_to_own(state_dict, teacher))
        return teacher

    def forward(self, obs: TensorDictBase) -> torch.Tensor:
        """Deterministic teacher actions from the concatenated observation groups."""
        x = torch.cat([obs[g].reshape(obs[g].shape[0], -1) for g in self.obs_groups], dim=-1)
        if x.shape[-1] != self.input_dim:
            raise ValueError(
                f"rsl_rl teacher layer mlp.0.weight expects input dim {self.input_dim}, but the observation "
                f"groups {self.obs_groups} give {x.shape[-1]}"
            )
        if self.norm_mean is not None:
            x = (x - self.norm_mean) / (self.norm_std + 1e-2)
        return self.mlp(x)

    def std(self) -> torch.Tensor:
        """The teacher's action std."""
        return self._std

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Feed-forward: nothing to reset."""

    def train(self, mode: bool = True) -> RslRlTeacher:
        """A teacher always stays in eval mode."""
        return super().train(False)


def teacher_from_config(config: Mapping[str, Any]) -> nn.Module:
    """An untrained teacher with the architecture ``config`` (a teacher's ``.config``) describes."""
    kind = config.get("kind")
    if kind == "actor":
        if "obs_groups" in config:
            return ActorTeacher(Actor(**config["actor_cfg"]), groups=ObsGroups.from_dict(config["obs_groups"]))
        groups = {k: config[k] for k in ("obs_group", "ref_group", "mask_group")}  # mimic_rl <= 0.2 checkpoints
        return ActorTeacher(Actor(**config["actor_cfg"]), **groups)
    if kind == "rsl_rl":
        return RslRlTeacher(config["dims"], config["obs_groups"], config["activation"], config["normalizer"])
    raise ValueError(f"teacher config kind must be 'actor' or 'rsl_rl', got {kind!r}")


def load_teacher(
    source: str | Path | Mapping[str, Any] | nn.Module,
    obs_groups: Sequence[str] = ("policy", "reference"),
    activation: str = "elu",
    device: str | torch.device = "cpu",
) -> nn.Module:
    """A frozen teacher from a module, a checkpoint path, or a loaded checkpoint dict.

    This package's training checkpoints hold ``actor_cfg`` next to ``actor_state_dict``; a distillation checkpoint
    holds ``teacher_cfg`` and ``teacher_state_dict``; anything else with an ``actor_state_dict`` is read as rsl_rl's
    format, its input being the concatenation of ``obs_groups``.
    """
    if isinstance(source, nn.Module):
        module = source if not isinstance(source, Actor) else ActorTeacher(source)
        return module.to(device).eval().requires_grad_(False)
    if isinstance(source, str | Path):
        ckpt = load_checkpoint(source, what="--teacher")
    else:
        ckpt = source
    if "teacher_cfg" in ckpt and "teacher_state_dict" in ckpt:
        teacher = teacher_from_config(ckpt["teacher_cfg"])
    elif "actor_state_dict" not in ckpt:
        raise CheckpointError(
            f"{source if isinstance(source, str | Path) else 'teacher'}: --teacher: expected a trained policy (a "
            f"checkpoint with actor_state_dict, from mimic-rl train or rsl_rl), found keys {sorted(ckpt)[:10]}"
        )
    elif "actor_cfg" in ckpt:
        groups = ckpt.get("obs_groups")
        teacher = ActorTeacher(
            Actor(**ckpt["actor_cfg"]), groups=None if groups is None else ObsGroups.from_dict(groups)
        )
    else:
        return RslRlTeacher.from_rsl_rl(ckpt["actor_state_dict"], obs_groups, activation).to(device)
    load_teacher_state(teacher, ckpt)
    return teacher.to(device)


def load_teacher_state(teacher: nn.Module, ckpt: Mapping[str, Any]) -> None:
    """Load a teacher's parameters from a distillation checkpoint (``teacher_state_dict``), this package's training
    checkpoint (``actor_state_dict`` + ``actor_cfg``) or an rsl_rl one (``actor_state_dict``); a mismatch raises
    naming the layer and both shapes."""
    if "teacher_state_dict" in ckpt:
        _load_checked(teacher, ckpt["teacher_state_dict"])
    elif "actor_state_dict" not in ckpt:
        raise CheckpointError(
            "--teacher: expected a checkpoint with teacher_state_dict or actor_state_dict, found keys "
            f"{sorted(ckpt)[:10]}"
        )
    elif isinstance(teacher, ActorTeacher):
        _load_checked(teacher.actor, ckpt["actor_state_dict"])
    elif isinstance(teacher, RslRlTeacher):
        _load_checked(teacher, _rsl_rl_to_own(ckpt["actor_state_dict"], teacher))
    else:
        _load_checked(teacher, ckpt["actor_state_dict"])


def _load_checked(module: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """``load_state_dict`` whose errors name the layer and both shapes."""
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    if missing or unexpected:
        raise CheckpointError(
            f"--teacher: expected the teacher's layers, found missing {missing[:5]}, unexpected {unexpected[:5]}; pass "
            "a checkpoint of this architecture (for rsl_rl checkpoints set teacher.obs_groups and teacher.activation)"
        )
    for key, value in state.items():
        if tuple(own[key].shape) != tuple(value.shape):
            raise CheckpointError(
                f"teacher layer {key!r}: checkpoint has shape {tuple(value.shape)}, model {tuple(own[key].shape)}; the "
                "teacher was trained for other observations (or, for rsl_rl checkpoints, teacher.obs_groups differ)"
            )
    module.load_state_dict(state)
