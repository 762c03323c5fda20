"""RolloutStorageMM: the rollout storage for motion-mimic PPO (reference observations, AMP pairs, DAgger, RND).

Keeps the GBC seed's API (constructor, ``Transition``, ``add_transitions``, ``compute_returns``, the 18-item PPO
mini-batch and the 7-item distillation batch) and fixes its defects: correct truncation bootstrapping, reshuffling
every epoch, AMP pairs that are really (env n, t-1) -> (env n, t) with resets masked, extractor callbacks resolved
once, and ``get_statistics`` that leaves ``dones`` alone. Buffers are time-major ``[T, N, ...]``.

It is a thin adapter over ``PolicyRollout`` (``core``), the storage MMPPO and Distillation use: the seed's
observation buffers are groups of the core's ``obs`` TensorDict under this package's group names (``policy``, or the
groups of a TensorDict ``obs_shape``; ``reference``, ``reference_mask``, ``critic``, ``critic_reference``,
``critic_reference_mask``), ``mu``/``sigma`` are its ``action_mean``/``action_std``, and every other buffer has its
seed name there. A ``Transition`` becomes one ``add_step``; a core mini-batch becomes a ``PPOBatch``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

from mimic_rl.storage.amp_pairs import AmpPairExtractor
from mimic_rl.storage.batches import DistillationBatch, PPOBatch
from mimic_rl.storage.policy_rollout import PolicyRollout
from mimic_rl.storage.rollout import RolloutBuffer
from mimic_rl.storage.sequences import SequenceMode

__all__ = ["RolloutStorageMM", "rollout_of"]

_SEED_NAMES = {  # seed buffer -> core field (or observation group, as ("obs", group))
    "observations": None,  # the policy group, or the groups of a TensorDict obs_shape
    "reference_observations": ("obs", "reference"),
    "reference_observations_mask": ("obs", "reference_mask"),
    "privileged_observations": ("obs", "critic"),
    "privileged_reference_observations": ("obs", "critic_reference"),
    "privileged_reference_observations_mask": ("obs", "critic_reference_mask"),
    "rnd_state": "rnd_state",
    "actions": "actions",
    "dagger_actions": "dagger_actions",
    "privileged_actions": "privileged_actions",
    "rewards": "rewards",
    "dones": "dones",
    "time_outs": "time_outs",
    "values": "values",
    "returns": "returns",
    "advantages": "advantages",
    "actions_log_prob": "actions_log_prob",
    "mu": "action_mean",
    "sigma": "action_std",
    "bootstrap_values": "bootstrap_values",
}
_GROUP_LABELS = {  # observation group -> Transition attribute, for error messages
    "reference": "reference_observations",
    "reference_mask": "reference_observations_mask",
    "critic": "critic_observations",
    "critic_reference": "critic_reference_observations",
    "critic_reference_mask": "critic_reference_observations_mask",
}
_STEP_FIELDS = ("rnd_state", "actions", "dagger_actions", "privileged_actions", "rewards", "dones", "time_outs")
"""Core fields whose Transition attribute has the same name."""


def _present(shape: Any) -> bool:
    """Seed convention: a shape ``(None,)`` (or None) means 'no such buffer'."""
    if shape is None:
        return False
    if isinstance(shape, Mapping) or hasattr(shape, "batch_size"):
        return len(shape) > 0
    shape = tuple(shape) if not isinstance(shape, int) else (shape,)
    return len(shape) > 0 and shape[0] is not None


def _leaves(shape: Any) -> dict[Any, Any]:
    """``{key: per-env shape or example tensor}`` of a group: one leaf (key None) for a plain shape, else one per
    entry of a mapping or (nested) TensorDict."""
    if isinstance(shape, TensorDictBase):
        return dict(shape.items(include_nested=True, leaves_only=True))
    if isinstance(shape, Mapping):
        return dict(shape)
    return {None: shape}


class RolloutStorageMM:
    """Time-major rollout storage for PPO or distillation with optional reference, critic, DAgger and RND data."""

    class Transition:
        """One environment step of all envs, filled by the algorithm and passed to ``add_transitions``."""

        def __init__(self) -> None:
            self.observations: Any = None
            self.reference_observations: Any = None
            self.reference_observations_mask: torch.Tensor | None = None
            self.critic_observations: Any = None
            self.critic_reference_observations: Any = None
            self.critic_reference_observations_mask: torch.Tensor | None = None
            self.actions: torch.Tensor | None = None
            self.privileged_actions: torch.Tensor | None = None
            self.dagger_actions: torch.Tensor | None = None
            self.rewards: torch.Tensor | None = None
            self.dones: torch.Tensor | None = None
            self.values: torch.Tensor | None = None
            self.actions_log_prob: torch.Tensor | None = None
            self.action_mean: torch.Tensor | None = None
            self.action_sigma: torch.Tensor | None = None
            self.hidden_states: Any = None
            self.rnd_state: torch.Tensor | None = None
            self.time_outs: torch.Tensor | None = None
            """Truncation flags: the episode ended by a time limit, not by a termination."""
            self.bootstrap_values: torch.Tensor | None = None
            """V(s_{t+1}) of the real (pre-reset) next state on time-out steps; other entries are ignored."""

        def clear(self) -> None:
            """Reset every field to None."""
            self.__init__()

    def __init__(
        self,
        training_type: str,
        num_envs: int,
        num_transitions_per_env: int,
        obs_shape: Any,
        ref_obs_shape: Any,
        privileged_obs_shape: Any,
        privileged_ref_obs_shape: Any,
        actions_shape: Any,
        apply_dagger_actions: bool = False,
        rnd_state_shape: Any = None,
        amp_cfg: Mapping[str, Any] | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        _check_arguments(training_type, num_envs, num_transitions_per_env, obs_shape)
        self.training_type = training_type
        self.device = torch.device(device)
        self.num_envs = int(num_envs)
        self.num_transitions_per_env = int(num_transitions_per_env)
        self.obs_shape = obs_shape
        self.ref_obs_shape = ref_obs_shape
        self.privileged_obs_shape = privileged_obs_shape
        self.privileged_ref_obs_shape = privileged_ref_obs_shape
        self.actions_shape = actions_shape
        self.rnd_state_shape = rnd_state_shape
        self.apply_dagger_actions = bool(apply_dagger_actions)
        self.amp_cfg = dict(amp_cfg) if amp_cfg else None

        self._obs_is_dict = isinstance(obs_shape, Mapping | TensorDictBase)
        self._obs_groups = list(_leaves(obs_shape)) if self._obs_is_dict else ["policy"]
        self._seed_groups = list(obs_shape.keys()) if self._obs_is_dict else None
        """The top-level groups of a TensorDict ``obs_shape`` (what ``observations`` holds)."""
        self.core = self._make_core()
        """The ``PolicyRollout`` underneath (MMPPO and Distillation store into it when given this storage)."""
        self._step_fields = tuple(n for n in _STEP_FIELDS if n in self.core.fields)
        self._batch_keys = self.core.batch_keys
        self._bind_seed_buffers()
        self._all_true = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._amp = None
        if self.amp_cfg is not None:
            reference = ("reference", "reference_mask") if "reference" in self._groups else None
            self._amp = AmpPairExtractor({**self.amp_cfg, "reference_groups": reference}, self._observations)

    def _make_core(self) -> PolicyRollout:
        """The ``PolicyRollout`` of the seed's buffers: its groups, RND states and DAgger labels, seed labels."""
        spec, labels = self._obs_spec()
        fields: dict[str, Any] = {}
        if _present(self.rnd_state_shape):
            fields["rnd_state"] = tuple(self.rnd_state_shape)
        if self.apply_dagger_actions:
            fields["dagger_actions"] = tuple(self.actions_shape)
        return PolicyRollout(
            self.training_type,
            self.num_envs,
            self.num_transitions_per_env,
            spec,
            tuple(self.actions_shape),
            fields=fields,
            device=self.device,
            obs_view=self._observations,
            labels={"obs": "observations", "action_std": "action_sigma"},
            leaf_labels={"obs": labels},
            error_prefix="Transition.",
        )

    def _bind_seed_buffers(self) -> None:
        """The seed's attribute names as views into the core (absent buffers are None)."""
        fields, view = self.core.fields, self.core.get()
        for seed, core in _SEED_NAMES.items():
            if seed == "observations":
                value = self._observations(view["obs"])
            elif isinstance(core, tuple):
                value = view[core] if core[1] in self._groups else None
            else:
                value = view[core] if core in fields else None
            setattr(self, seed, value)

    def _obs_spec(self) -> tuple[dict[Any, Any], dict[Any, str]]:
        """The core's observation groups (per-env shapes or example tensors) and their Transition labels."""
        spec: dict[Any, Any] = {}
        labels: dict[Any, str] = {}
        if self._obs_is_dict:
            for key, shape in _leaves(self.obs_shape).items():
                spec[key] = shape
                labels[key] = f"observations[{key!r}]"
        else:
            spec["policy"], labels["policy"] = self.obs_shape, "observations"
        has_ref = _present(self.ref_obs_shape)
        groups = {
            "reference": self.ref_obs_shape if has_ref else None,
            "reference_mask": torch.zeros(self.num_envs, dtype=torch.bool) if has_ref else None,
            "critic": self.privileged_obs_shape if _present(self.privileged_obs_shape) else None,
        }
        if has_ref and _present(self.privileged_ref_obs_shape):
            groups["critic_reference"] = self.privileged_ref_obs_shape
            groups["critic_reference_mask"] = groups["reference_mask"]
        self._groups = [g for g, shape in groups.items() if shape is not None]
        clash = [g for g in self._groups if g in self._obs_groups]
        if clash:
            raise ValueError(f"obs_shape: group name(s) {clash} are reserved for the reference and critic buffers")
        for group in self._groups:
            for key, shape in _leaves(groups[group]).items():
                leaf = group if key is None else (group, *(key if isinstance(key, tuple) else (key,)))
                spec[leaf] = shape
                labels[leaf] = _GROUP_LABELS[group] + ("" if key is None else f"[{key!r}]")
        return spec, labels

    def _observations(self, obs: TensorDictBase) -> Any:
        """The seed's ``observations`` part of the core's observation groups (a tensor or a TensorDict)."""
        return obs.select(*self._seed_groups) if self._obs_is_dict else obs["policy"]

    @property
    def step(self) -> int:
        """Number of transitions stored in the current rollout."""
        return self.core.step

    @step.setter
    def step(self, value: int) -> None:
        self.core.step = int(value)

    @property
    def buffer(self) -> RolloutBuffer:
        """The ``RolloutBuffer`` underneath (its ``get()`` is every field as one ``[T, N]`` TensorDict)."""
        return self.core.buffer

    @property
    def saved_hidden_states_a(self) -> list[torch.Tensor] | None:
        """Actor hidden states in the seed's layout, one ``[T, layers, N, H]`` view per tensor (h, or h and c)."""
        component = self.core.hidden.components[0]
        return None if component is None else component.seed_layout()

    @property
    def saved_hidden_states_c(self) -> list[torch.Tensor] | None:
        """Critic hidden states in the seed's layout, one ``[T, layers, N, H]`` view per tensor."""
        component = self.core.hidden.components[1]
        return None if component is None else component.seed_layout()

    # ------------------------------------------------------------------ writing
    def add_transitions(self, transition: Transition) -> None:
        """Store one step of all envs. Raises on overflow and on any shape or dtype mismatch, naming the field."""
        if self.step >= self.num_transitions_per_env:
            raise OverflowError(
                f"RolloutStorageMM overflow: it holds {self.num_transitions_per_env} transitions per env and all are "
                "filled; call clear() after the update before adding the next rollout"
            )
        t = transition
        step: dict[str, Any] = {"obs": self._obs_step(t)}
        for name in self._step_fields:
            step[name] = getattr(t, name)
        if self.training_type == "rl":
            step["values"], step["actions_log_prob"] = t.values, t.actions_log_prob
            step["action_mean"], step["action_std"] = t.action_mean, t.action_sigma
            step["bootstrap_values"] = t.bootstrap_values  # None: rsl_rl's gamma * V(s_t) fallback, with a warning
        self.core.add_step(step, t.hidden_states)

    add_transition = add_transitions

    def _obs_step(self, t: Transition) -> dict[Any, Any]:
        """The core's observation groups of one Transition."""
        obs = t.observations
        if self._obs_is_dict:
            if not isinstance(obs, Mapping | TensorDictBase):
                raise TypeError(
                    f"Transition.observations: the storage holds a TensorDict with groups {self._obs_groups} but got "
                    f"{type(obs).__name__}"
                )
            have = obs.keys(include_nested=True, leaves_only=True) if isinstance(obs, TensorDictBase) else obs
            missing = [k for k in self._obs_groups if k not in have]
            if missing:
                raise KeyError(
                    f"Transition.observations: missing observation group(s) {missing}; expected {self._obs_groups}"
                )
            out = {key: obs[key] for key in self._obs_groups}
        else:
            if isinstance(obs, Mapping | TensorDictBase):
                raise TypeError(
                    f"Transition.observations: got a {type(obs).__name__} but the storage was built with a plain "
                    f"shape {tuple(self.obs_shape)}; pass the shapes as a dict (or an example TensorDict) to store "
                    "groups"
                )
            out = {"policy": obs}
        groups = {
            "reference": t.reference_observations,
            "reference_mask": self._mask(t.reference_observations_mask),
            "critic": t.critic_observations,
            "critic_reference": t.critic_reference_observations,
            "critic_reference_mask": self._mask(t.critic_reference_observations_mask),
        }
        for group in self._groups:
            value = groups[group]
            if isinstance(value, Mapping | TensorDictBase):
                keys = value.keys(include_nested=True, leaves_only=True) if isinstance(value, TensorDictBase) else value
                out.update({(group, *(k if isinstance(k, tuple) else (k,))): value[k] for k in keys})
            else:
                out[group] = value
        return out

    def _mask(self, mask: torch.Tensor | None) -> torch.Tensor:
        """A reference without a mask is valid for every env."""
        return self._all_true if mask is None else mask

    def clear(self) -> None:
        """Start a new rollout. The last stored step is kept as the carry row for the next rollout's AMP pairs."""
        self.core.clear()

    # ------------------------------------------------------------------ returns
    def compute_returns(
        self,
        last_values: torch.Tensor,
        gamma: float,
        lam: float,
        normalize_advantage: bool = True,
        method: str = "gae",
    ) -> None:
        """Fill ``returns`` and ``advantages`` with GAE (``method="gae"``) or Monte Carlo (``"mc"``) estimates.

        Time-outs bootstrap from ``bootstrap_values``. ``last_values`` is V of the state after the last stored step,
        ``[N]`` or ``[N, 1]``. Raises ``FloatingPointError`` if rewards, values or bootstrap values are not finite.
        """
        self.core.compute_returns(last_values, gamma, lam, normalize_advantage, method)

    def get_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean trajectory length, mean reward) of the stored rollout; ``dones`` is not modified."""
        return self.core.get_statistics()

    # ------------------------------------------------------------------ generators
    def generator(self) -> Iterator[DistillationBatch]:
        """Yield one ``DistillationBatch`` (the seed's 7-tuple) per stored step.

        A plain loop over the ``[T, N]`` views rather than a mini-batch iterator: it yields views (no gather, no
        copy) and also works on a partly filled rollout, which distillation's per-step updates may read.
        """
        if self.training_type != "distillation":
            raise ValueError("generator() is only available for training_type='distillation'")
        for i in range(self.step):
            ref = self._pair("reference_observations", "reference_observations_mask", i)
            priv_ref = self._pair("privileged_reference_observations", "privileged_reference_observations_mask", i)
            priv_obs = self.privileged_observations if self.privileged_observations is not None else self.observations
            yield DistillationBatch(
                observations=self.observations[i],
                privileged_observations=priv_obs[i],
                reference=ref,
                privileged_reference=priv_ref,
                actions=self.actions[i],
                privileged_actions=self.privileged_actions[i],
                dones=self.dones[i],
                hidden_states=self.core.hidden.at_step(i),
            )

    def _pair(self, obs_name: str, mask_name: str, i: int) -> tuple[Any, torch.Tensor] | None:
        obs = getattr(self, obs_name)
        return None if obs is None else (obs[i], getattr(self, mask_name)[i])

    def mini_batch_generator(self, num_mini_batches: int, num_epochs: int = 8) -> Iterator[PPOBatch]:
        """Yield shuffled flat PPO mini-batches, reshuffled every epoch; every sample appears once per epoch."""
        self._check_rl("mini_batch_generator")
        for batch in self.core.mini_batches(num_mini_batches, num_epochs, previous_keys=self._amp_keys()):
            yield self._make_batch(batch)

    def recurrent_mini_batch_generator(
        self,
        num_mini_batches: int,
        num_epochs: int = 8,
        sequence_mode: SequenceMode | str = SequenceMode.TRAJECTORY,
        max_seq_len: int | None = None,
    ) -> Iterator[PPOBatch]:
        """Yield padded ``[L, B, ...]`` mini-batches of trajectories or truncated-BPTT sequences.

        Each sequence starts from the hidden state stored at its first step. ``masks`` marks real (non-padded) steps
        and ``loss_mask`` the steps the loss should count (see ``SequenceMode``). Sequences are reshuffled every
        epoch.
        """
        self._check_rl("recurrent_mini_batch_generator")
        batches = self.core.mini_batches(
            num_mini_batches,
            num_epochs,
            previous_keys=self._amp_keys(),
            sequence_mode=sequence_mode,
            max_seq_len=max_seq_len,
        )
        for batch in batches:
            yield self._make_batch(batch)

    def _amp_keys(self) -> tuple[str, ...] | None:
        return ("obs",) if self._amp is not None else None

    def _check_rl(self, what: str) -> None:
        if self.training_type != "rl":
            raise ValueError(f"{what}() is only available for training_type='rl'")
        if self.step != self.num_transitions_per_env:
            raise RuntimeError(f"{what}() needs a full rollout: {self.step} of {self.num_transitions_per_env} stored")

    def _make_batch(self, entries: dict[str, Any]) -> PPOBatch:
        """A ``PPOBatch`` from one of the core's mini-batches (``[B]`` or padded ``[L, B]``)."""
        get, obs, groups = entries.get, entries["obs"], self._groups
        observations = self._observations(obs)
        ref = (obs["reference"], obs["reference_mask"]) if "reference" in groups else None
        critic_ref = (obs["critic_reference"], obs["critic_reference_mask"]) if "critic_reference" in groups else ref
        batch = PPOBatch(
            observations=observations,
            reference=ref,
            critic_observations=obs["critic"] if "critic" in groups else observations,
            critic_reference=critic_ref,
            actions=get("actions"),
            target_values=get("values"),
            advantages=get("advantages"),
            returns=get("returns"),
            old_actions_log_prob=get("actions_log_prob"),
            old_mu=get("action_mean"),
            old_sigma=get("action_std"),
            dagger_actions=get("dagger_actions"),
            hidden_states=entries["hidden_states"],
            masks=get("masks"),
            rnd_state=get("rnd_state"),
            obs_prev_state=None,
            ref_obs_prev_state=None,
            ref_obs_prev_mask=None,
            loss_mask=get("loss_mask"),
            indices=get("indices"),
        )
        if self._amp is not None:
            pairs = self._amp.pairs(obs, entries["previous"]["obs"], entries["previous_valid"])
            batch.amp_pair_valid = pairs.valid
            batch.obs_prev_state, batch.obs_cur_state = pairs.policy_prev, pairs.policy_cur
            batch.ref_obs_prev_state, batch.ref_obs_prev_mask = pairs.expert_prev, pairs.expert_prev_mask
            batch.ref_obs_cur_state, batch.ref_obs_cur_mask = pairs.expert_cur, pairs.expert_cur_mask
        return batch


def _check_arguments(training_type: str, num_envs: int, num_transitions_per_env: int, obs_shape: Any) -> None:
    """``ValueError`` for a training type, a size or an observation shape the seed storage cannot hold."""
    if training_type not in ("rl", "distillation"):
        raise ValueError(f"training_type must be one of ('rl', 'distillation'), got {training_type!r}")
    if int(num_envs) < 1 or int(num_transitions_per_env) < 1:
        raise ValueError(
            f"num_envs and num_transitions_per_env must be >= 1, got {num_envs} and {num_transitions_per_env}"
        )
    if not _present(obs_shape):
        raise ValueError(f"obs_shape must describe the policy observations, got {obs_shape!r}")


def rollout_of(storage: PolicyRollout | RolloutStorageMM, training_type: str, who: str) -> PolicyRollout:
    """The ``PolicyRollout`` an algorithm stores into: ``storage`` itself, or a seed storage's ``core``; a storage of
    another training type is a ``ValueError``."""
    rollout = storage.core if isinstance(storage, RolloutStorageMM) else storage
    if rollout.training_type != training_type:
        raise ValueError(f"{who} needs a PolicyRollout or RolloutStorageMM of training_type={training_type!r}")
    return rollout
