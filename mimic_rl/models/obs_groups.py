"""Which observation groups each model reads: rsl_rl's ``obs_groups`` convention, extended with reference groups.

An env hands the models one ``TensorDict`` of named groups. ``obs_groups`` maps each model input to the env's group
names, once, at construction (``ObsGroups.resolve``); afterwards ``actor_inputs(obs)`` and ``critic_inputs(obs)`` pick
them from every TensorDict that flows from the env (collection, storage mini-batches, evaluation, export)::

    actor: [policy]                       # concatenated along the last dim, in this order
    actor_reference: reference            # [N, K, F] future reference frames (optional)
    actor_reference_mask: reference_mask  # [N] bool (optional: all rows valid)
    critic: [critic]
    critic_reference: critic_reference    # when the env has such a group; else the actor's reference
    critic_reference_mask: critic_reference_mask

Unset inputs take defaults from the groups the env has: this package's embedded env (no ``critic_reference``: the
critic reads the actor's reference, stored once) gives the mapping above with the critic's reference and mask being
``reference`` and ``reference_mask``; an rsl_rl-style env with ``actor`` / ``policy`` and ``critic`` groups (mjlab,
Isaac Lab) gets no reference stream.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from tensordict import TensorDictBase

__all__ = ["OBS_GROUP_KEYS", "ObsGroups"]

OBS_GROUP_KEYS = (
    "actor",
    "actor_reference",
    "actor_reference_mask",
    "critic",
    "critic_reference",
    "critic_reference_mask",
)


def _cat(obs: TensorDictBase, groups: tuple[str, ...]) -> torch.Tensor:
    if len(groups) == 1:
        return obs[groups[0]]
    return torch.cat([obs[g] for g in groups], dim=-1)


@dataclass(frozen=True)
class ObsGroups:
    """The resolved mapping from model inputs to observation group names (see the module docstring)."""

    actor: tuple[str, ...]
    actor_reference: str | None = None
    actor_reference_mask: str | None = None
    critic: tuple[str, ...] = ()
    critic_reference: str | None = None
    critic_reference_mask: str | None = None

    @classmethod
    def resolve(cls, mapping: Mapping[str, Any] | None, obs: TensorDictBase, where: str = "obs_groups") -> ObsGroups:
        """The mapping for ``obs``'s groups: ``mapping``'s entries, defaults for the rest; a named group the env
        does not have, or an unknown key, is a ``ValueError`` that names it and the groups the env has."""
        mapping = dict(mapping or {})
        unknown = sorted(set(mapping) - set(OBS_GROUP_KEYS))
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}; allowed keys: {list(OBS_GROUP_KEYS)}")
        have = list(obs.keys())

        def groups(key: str, default: Sequence[str] | None) -> tuple[str, ...]:
            value = mapping.get(key, default)
            names = (value,) if isinstance(value, str) else tuple(value or ())
            missing = [g for g in names if g not in have]
            if missing:
                raise ValueError(
                    f"{where}.{key}: the env has no observation group {missing[0]!r}; its groups are {have}"
                )
            return names

        def one(key: str, default: str | None) -> str | None:
            named = groups(key, [default] if default in have else None)
            if len(named) > 1:
                raise ValueError(f"{where}.{key}: expected one group name, found {list(named)}")
            return named[0] if named else None

        actor_default = next(([g] for g in ("policy", "actor") if g in have), None)
        actor = groups("actor", actor_default)
        if not actor:
            raise ValueError(f"{where}.actor: name the policy's observation groups; the env's groups are {have}")
        actor_reference = one("actor_reference", "reference")
        actor_mask = one("actor_reference_mask", "reference_mask" if actor_reference == "reference" else None)
        critic_default = "critic_reference" if "critic_reference" in have else actor_reference
        critic_reference = one("critic_reference", critic_default)
        if critic_reference == actor_reference:
            critic_mask_default = actor_mask
        else:
            critic_mask_default = "critic_reference_mask" if critic_reference == "critic_reference" else None
        return cls(
            actor=actor,
            actor_reference=actor_reference,
            actor_reference_mask=actor_mask,
            critic=groups("critic", ["critic"] if "critic" in have else list(actor)),
            critic_reference=critic_reference,
            critic_reference_mask=one("critic_reference_mask", critic_mask_default),
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ObsGroups:
        """Inverse of ``to_dict`` (a checkpoint's or an export's mapping, already resolved)."""
        values = {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in data.items() if k in OBS_GROUP_KEYS}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists and strings) for configs and checkpoints."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def stored(self) -> list[str]:
        """Every group the actor and the critic read, each once, in the order of the fields of this mapping."""
        names: list[str] = []
        for value in (self.actor, self.actor_reference, self.actor_reference_mask, self.critic):
            names += [v for v in ((value,) if isinstance(value, str) else value or ()) if v not in names]
        for value in (self.critic_reference, self.critic_reference_mask):
            if value is not None and value not in names:
                names.append(value)
        return names

    def actor_obs(self, obs: TensorDictBase) -> torch.Tensor:
        """The actor's observation vector ``[..., obs_dim]``."""
        return _cat(obs, self.actor)

    def actor_inputs(self, obs: TensorDictBase) -> tuple[torch.Tensor, Any, Any]:
        """``(obs, reference or None, reference mask or None)`` of the actor."""
        return (
            _cat(obs, self.actor),
            obs[self.actor_reference] if self.actor_reference else None,
            obs[self.actor_reference_mask] if self.actor_reference_mask else None,
        )

    def critic_inputs(self, obs: TensorDictBase) -> tuple[torch.Tensor, Any, Any]:
        """``(obs, reference or None, reference mask or None)`` of the critic."""
        return (
            _cat(obs, self.critic),
            obs[self.critic_reference] if self.critic_reference else None,
            obs[self.critic_reference_mask] if self.critic_reference_mask else None,
        )

    def shapes(self, obs: TensorDictBase) -> dict[str, Any]:
        """Per-env input sizes: actor / critic dims and reference shapes (None where absent)."""

        def dim(groups: tuple[str, ...]) -> int:
            return sum(int(obs[g].shape[-1]) for g in groups)

        def reference_shape(name: str | None) -> tuple[int, ...] | None:
            return tuple(obs[name].shape[1:]) if name else None

        return {
            "actor": dim(self.actor),
            "actor_reference": reference_shape(self.actor_reference),
            "critic": dim(self.critic),
            "critic_reference": reference_shape(self.critic_reference),
        }
