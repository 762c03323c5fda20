"""AMP previous-state pairs: (s_{t-1}, s_t) of the same env, with pairs that cross a reset marked invalid.

The extractor callbacks of ``amp_cfg`` are resolved once here, never per mini-batch. ``amp_obs_extractor(obs)``
returns features; ``amp_ref_obs_extractor((ref_obs, ref_mask))`` returns ``(features, mask)``. A callback that
accepts an ``env`` keyword gets ``amp_cfg["_env"]`` (the GBC seed's convention).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from mimic_rl.storage.batches import PPOBatch
from mimic_rl.utils import accepts_keyword, resolve_callable

__all__ = ["AmpPairExtractor"]


class AmpPairExtractor:
    """Fills the AMP fields of a ``PPOBatch`` from the previous-step rows of a ``RolloutBuffer`` mini-batch."""

    def __init__(self, amp_cfg: Mapping[str, Any]) -> None:
        env = amp_cfg.get("_env", amp_cfg.get("env"))
        self.obs_fn = self._bind(amp_cfg, "amp_obs_extractor", _identity, env)
        self.ref_fn = self._bind(amp_cfg, "amp_ref_obs_extractor", _identity, env)
        self.reference_groups: tuple[str | None, str | None] = tuple(amp_cfg.get("reference_groups") or (None, None))
        """(reference, mask) group names inside the stored observations, when the storage keeps the env's groups
        in one TensorDict instead of a ``reference_observations`` buffer."""

    @staticmethod
    def _bind(amp_cfg: Mapping[str, Any], key: str, default: Callable, env: Any) -> Callable:
        spec = amp_cfg.get(key)
        fn = default if spec is None else resolve_callable(spec, f"amp_cfg[{key!r}]")
        if env is not None and accepts_keyword(fn, "env"):
            return lambda x, _fn=fn: _fn(x, env=env)
        return fn

    def add_pairs(self, batch: PPOBatch, previous: Mapping[str, Any] | TensorDictBase, valid: torch.Tensor) -> None:
        """Set ``obs_prev_state``, ``obs_cur_state``, the reference pair fields and ``amp_pair_valid``.

        ``previous`` holds the batch rows' previous steps (step t - 1 of the same env, the carry row at t = 0) and
        ``valid`` says which pairs are real: not across a reset, not padding (``RolloutBuffer.mini_batches``).
        """
        lead = tuple(valid.shape)
        batch.amp_pair_valid = valid
        batch.obs_prev_state = _unflatten(self.obs_fn(_flatten(previous.get("observations"), lead)), lead)
        batch.obs_cur_state = _unflatten(self.obs_fn(_flatten(batch.observations, lead)), lead)
        if batch.reference is not None:
            prev_ref, prev_mask = previous.get("reference_observations"), previous.get("reference_observations_mask")
            cur_ref, cur_mask = batch.reference
        elif self.reference_groups[0] is not None:
            prev_ref, prev_mask = self._reference(previous.get("observations"))
            cur_ref, cur_mask = self._reference(batch.observations)
        else:
            return
        state, mask = self.ref_fn((_flatten(prev_ref, lead), _flatten(prev_mask, lead)))
        batch.ref_obs_prev_state = _unflatten(state, lead)
        batch.ref_obs_prev_mask = _unflatten(mask, lead) & valid
        state, mask = self.ref_fn((_flatten(cur_ref, lead), _flatten(cur_mask, lead)))
        batch.ref_obs_cur_state = _unflatten(state, lead)
        batch.ref_obs_cur_mask = _unflatten(mask, lead)

    def _reference(self, obs: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """(reference, mask) from stored observations; a reference without a mask group is valid everywhere."""
        ref_name, mask_name = self.reference_groups
        ref = obs[ref_name]
        if mask_name is not None:
            return ref, obs[mask_name]
        return ref, torch.ones(obs.batch_size, dtype=torch.bool, device=ref.device)


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
