"""AMP previous-state pairs: (s_{t-1}, s_t) of the same env, with pairs that cross a reset marked invalid.

The extractor callbacks of ``amp_cfg`` are resolved once here, never per mini-batch. ``amp_obs_extractor(obs)``
returns features of the robot's stored observations; ``amp_ref_obs_extractor((ref_obs, ref_mask))`` returns
``(features, mask)`` of the reference (the expert). A callback that accepts an ``env`` keyword gets
``amp_cfg["_env"]`` (the GBC seed's convention).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDictBase

from mimic_rl.utils import accepts_keyword, resolve_callable

__all__ = ["PAIR_ONLY_KEYS", "AmpPairExtractor", "AmpPairs"]

ReferenceGroups = tuple[str | None, str | None]
"""(reference group, mask group) of the stored observations."""

PAIR_ONLY_KEYS = ("_env", "reference_groups")
"""Keys of ``amp_cfg`` that only the pairs read (set by the builders); the discriminator takes the others."""


@dataclass
class AmpPairs:
    """The AMP pairs of a mini-batch's rows ``[*lead]``: the robot's feature pairs and whether each is real (same
    env, same episode, not padding), and, when the rollout holds a reference, the reference's feature pairs with
    their masks (the previous mask already folded with ``valid``)."""

    policy_prev: torch.Tensor
    policy_cur: torch.Tensor
    valid: torch.Tensor
    expert_prev: torch.Tensor | None = None
    expert_cur: torch.Tensor | None = None
    expert_prev_mask: torch.Tensor | None = None
    expert_cur_mask: torch.Tensor | None = None


class AmpPairExtractor:
    """Features and pairs from stored observations (``PolicyRollout`` mini-batches with ``previous_keys=["obs"]``).

    ``obs_view`` turns stored observations into what ``amp_obs_extractor`` reads (default: the stored TensorDict).
    ``amp_cfg["reference_groups"]`` names the ``(reference, mask)`` groups of the stored observations whose pairs
    are the expert's (None: the expert pairs come from elsewhere, e.g. an ``expert_sampler``).
    """

    def __init__(self, amp_cfg: Mapping[str, Any], obs_view: Callable[[Any], Any] | None = None) -> None:
        env = amp_cfg.get("_env", amp_cfg.get("env"))
        self.obs_fn = self._bind(amp_cfg, "amp_obs_extractor", _identity, env)
        self.ref_fn = self._bind(amp_cfg, "amp_ref_obs_extractor", _identity, env)
        self.obs_view = obs_view or _identity
        self.reference_groups: ReferenceGroups = tuple(amp_cfg.get("reference_groups") or (None, None))
        """(reference, mask) group names inside the stored observations."""

    @staticmethod
    def _bind(amp_cfg: Mapping[str, Any], key: str, default: Callable, env: Any) -> Callable:
        spec = amp_cfg.get(key)
        fn = default if spec is None else resolve_callable(spec, f"amp_cfg[{key!r}]")
        if env is not None and accepts_keyword(fn, "env"):
            return lambda x, _fn=fn: _fn(x, env=env)
        return fn

    def features(self, obs: Any) -> torch.Tensor:
        """The robot's AMP features ``[M, F]`` of stored observations ``[M]``."""
        return self.obs_fn(self.obs_view(obs))

    def pairs(
        self, obs: Any, previous: Any, valid: torch.Tensor, reference_groups: ReferenceGroups | None = None
    ) -> AmpPairs:
        """The pairs of a mini-batch: ``obs`` its rows' stored observations, ``previous`` those of step t - 1 of the
        same env (the carry row at t = 0), ``valid`` which pairs are real (``RolloutBuffer.mini_batches``);
        ``reference_groups`` overrides ``self.reference_groups``."""
        lead = tuple(valid.shape)
        reference_name, mask_name = reference_groups or self.reference_groups
        out = AmpPairs(
            policy_prev=_unflatten(self.features(_flatten(previous, lead)), lead),
            policy_cur=_unflatten(self.features(_flatten(obs, lead)), lead),
            valid=valid,
        )
        if reference_name is None:
            return out
        state, mask = self.ref_fn(_reference(_flatten(previous, lead), reference_name, mask_name))
        out.expert_prev, out.expert_prev_mask = _unflatten(state, lead), _unflatten(mask, lead) & valid
        state, mask = self.ref_fn(_reference(_flatten(obs, lead), reference_name, mask_name))
        out.expert_cur, out.expert_cur_mask = _unflatten(state, lead), _unflatten(mask, lead)
        return out


def _reference(obs: TensorDictBase, reference_name: str, mask_name: str | None) -> tuple[Any, torch.Tensor]:
    """(reference, mask) from stored observations; a reference without a mask group is valid everywhere."""
    reference = obs[reference_name]
    if mask_name is not None:
        return reference, obs[mask_name]
    return reference, torch.ones(obs.batch_size, dtype=torch.bool, device=reference.device)


def _identity(x: Any) -> Any:
    return x


def _flatten(x: Any, lead: tuple[int, ...]) -> Any:
    """Merge the leading ``lead`` dims into one so that extractors always see ``[M, ...]`` rows."""
    if x is None or len(lead) == 1:
        return x
    if isinstance(x, TensorDictBase):
        return x.reshape(-1)
    return x.reshape(-1, *x.shape[len(lead) :])


def _unflatten(x: Any, lead: tuple[int, ...]) -> Any:
    """Inverse of ``_flatten`` for extractor outputs."""
    if x is None or len(lead) == 1:
        return x
    if isinstance(x, TensorDictBase):
        return x.reshape(*lead)
    return x.reshape(*lead, *x.shape[1:])
