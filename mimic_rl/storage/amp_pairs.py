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
from mimic_rl.storage.layout import FLAG, PackedStore
from mimic_rl.utils import accepts_keyword, resolve_callable

__all__ = ["AmpPairExtractor"]


class AmpPairExtractor:
    """Fills the AMP fields of a ``PPOBatch`` from the packed store's carry-extended rows."""

    def __init__(self, amp_cfg: Mapping[str, Any]) -> None:
        env = amp_cfg.get("_env", amp_cfg.get("env"))
        self.obs_fn = self._bind(amp_cfg, "amp_obs_extractor", _identity, env)
        self.ref_fn = self._bind(amp_cfg, "amp_ref_obs_extractor", _identity, env)

    @staticmethod
    def _bind(amp_cfg: Mapping[str, Any], key: str, default: Callable, env: Any) -> Callable:
        spec = amp_cfg.get(key)
        fn = default if spec is None else resolve_callable(spec, f"amp_cfg[{key!r}]")
        if env is not None and accepts_keyword(fn, "env"):
            return lambda x, _fn=fn: _fn(x, env=env)
        return fn

    def add_pairs(self, batch: PPOBatch, store: PackedStore, index: torch.Tensor, masks: torch.Tensor | None) -> None:
        """Set ``obs_prev_state``, ``obs_cur_state``, the reference pair fields and ``amp_pair_valid``.

        ``index`` holds flat rollout indices ``t * N + n``; extended row ``t * N + n`` is step t - 1 of env n (the
        carry row at t = 0), and its done flag says whether the pair crosses a reset.
        """
        lead = tuple(index.shape)
        columns = max(store.columns_end(n) for n in ("observations", "reference_observations") if n in store.fields)
        prev_rows = store.gather(index, columns=columns)
        valid = ~prev_rows[FLAG][..., store.fields["dones"].leaves[None].start]
        if masks is not None:
            valid = valid & masks
        batch.amp_pair_valid = valid
        prev_obs = store.assemble(store.fields["observations"], prev_rows, lead)
        batch.obs_prev_state = _unflatten(self.obs_fn(_flatten(prev_obs, lead)), lead)
        batch.obs_cur_state = _unflatten(self.obs_fn(_flatten(batch.observations, lead)), lead)
        if batch.reference is None:
            return
        prev_ref = store.assemble(store.fields["reference_observations"], prev_rows, lead)
        prev_mask = store.assemble(store.fields["reference_observations_mask"], prev_rows, lead)
        state, mask = self.ref_fn((_flatten(prev_ref, lead), _flatten(prev_mask, lead)))
        batch.ref_obs_prev_state = _unflatten(state, lead)
        batch.ref_obs_prev_mask = _unflatten(mask, lead) & valid
        state, mask = self.ref_fn((_flatten(batch.reference[0], lead), _flatten(batch.reference[1], lead)))
        batch.ref_obs_cur_state = _unflatten(state, lead)
        batch.ref_obs_cur_mask = _unflatten(mask, lead)


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
