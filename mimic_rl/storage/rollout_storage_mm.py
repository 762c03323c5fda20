"""RolloutStorageMM: the rollout storage for motion-mimic PPO (reference observations, AMP pairs, DAgger, RND).

Keeps the GBC seed's API (constructor, ``Transition``, ``add_transitions``, ``compute_returns``, the 18-item PPO
mini-batch and the 7-item distillation batch) and fixes its defects: correct truncation bootstrapping, reshuffling
every epoch, AMP pairs that are really (env n, t-1) -> (env n, t) with resets masked, extractor callbacks resolved
once, and ``get_statistics`` that leaves ``dones`` alone. Buffers are time-major ``[T, N, ...]``.

It is a thin adapter over the generic ``RolloutBuffer``: the seed's buffers are its fields (``observations``,
``reference_observations``, ``mu``, ...; ``returns`` and ``advantages`` are computed fields), a ``Transition`` becomes
one ``add_step``, and both PPO generators are ``RolloutBuffer.mini_batches`` turned into ``PPOBatch``es. Hidden states
stay here (``HiddenStateStore``): they are saved per step and gathered only at each sequence's first step.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from mimic_rl.errors import TrainingDiverged
from mimic_rl.storage.amp_pairs import AmpPairExtractor
from mimic_rl.storage.batches import DistillationBatch, PPOBatch
from mimic_rl.storage.hidden import HiddenStateStore
from mimic_rl.storage.layout import PackedStore
from mimic_rl.storage.returns import compute_gae, compute_monte_carlo, normalize_advantages
from mimic_rl.storage.rollout import FieldSpec, RolloutBuffer
from mimic_rl.storage.sequences import SequenceMode, build_sequences

__all__ = ["RolloutStorageMM"]

_TRAINING_TYPES = ("rl", "distillation")
_SCALAR = FieldSpec((1,), scalar=True)
_FLAG = FieldSpec((1,), torch.bool, scalar=True, lenient=True)
_MASK = FieldSpec((), torch.bool)
_LABELS = {  # buffer field -> Transition attribute, for error messages
    "privileged_observations": "critic_observations",
    "privileged_reference_observations": "critic_reference_observations",
    "privileged_reference_observations_mask": "critic_reference_observations_mask",
    "mu": "action_mean",
    "sigma": "action_sigma",
}
_NOT_IN_BATCH = ("rewards", "bootstrap_values", "dones", "time_outs")
_SEED_BUFFERS = (
    "observations",
    "privileged_observations",
    "reference_observations",
    "reference_observations_mask",
    "privileged_reference_observations",
    "privileged_reference_observations_mask",
    "rnd_state",
    "actions",
    "dagger_actions",
    "privileged_actions",
    "rewards",
    "dones",
    "time_outs",
    "values",
    "returns",
    "advantages",
    "actions_log_prob",
    "mu",
    "sigma",
    "bootstrap_values",
)


def _present(shape: Any) -> bool:
    """Seed convention: a shape ``(None,)`` (or None) means 'no such buffer'."""
    if shape is None:
        return False
    if isinstance(shape, Mapping) or hasattr(shape, "batch_size"):
        return len(shape) > 0
    shape = tuple(shape) if not isinstance(shape, int) else (shape,)
    return len(shape) > 0 and shape[0] is not None


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
        if training_type not in _TRAINING_TYPES:
            raise ValueError(f"training_type must be one of {_TRAINING_TYPES}, got {training_type!r}")
        if int(num_envs) < 1 or int(num_transitions_per_env) < 1:
            raise ValueError(
                f"num_envs and num_transitions_per_env must be >= 1, got {num_envs} and {num_transitions_per_env}"
            )
        if not _present(obs_shape):
            raise ValueError(f"obs_shape must describe the policy observations, got {obs_shape!r}")
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

        self._buffer = RolloutBuffer(
            self.num_transitions_per_env,
            self.num_envs,
            self._spec(),
            self.device,
            labels=_LABELS,
            error_prefix="Transition.",
        )
        self._store: PackedStore = self._buffer.store
        fields = self._store.fields
        self._batch_keys = tuple(name for name in fields if name not in _NOT_IN_BATCH)
        self._batch_columns = max(self._store.columns_end(name) for name in self._batch_keys)
        self._previous_keys = tuple(
            n for n in ("observations", "reference_observations", "reference_observations_mask") if n in fields
        )
        same_name = ("rnd_state", "actions", "dagger_actions", "privileged_actions", "rewards", "dones")
        self._same_name_inputs = tuple(n for n in same_name if n in fields)  # Transition attribute = field name
        for name in _SEED_BUFFERS:  # seed attribute names; absent buffers are None
            setattr(self, name, fields[name].view if name in fields else None)
        self._all_true = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._all_false = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._has_timeout_bootstrap = torch.zeros((), dtype=torch.bool, device=self.device)
        self._warned_timeout_fallback = False
        self._hidden = HiddenStateStore(self.num_transitions_per_env, self.device)
        self._amp = AmpPairExtractor(self.amp_cfg) if self.amp_cfg is not None else None

    def _spec(self) -> dict[str, Any]:
        """The buffer's fields. Declaration order is column order: state fields first (AMP gathers a prefix), then
        the batch fields, then the rest."""
        has_ref = _present(self.ref_obs_shape)
        is_rl = self.training_type == "rl"
        actions = self.actions_shape
        spec: dict[str, Any] = {"observations": self.obs_shape}
        if has_ref:
            spec["reference_observations"] = self.ref_obs_shape
            spec["reference_observations_mask"] = _MASK
        if _present(self.privileged_obs_shape):
            spec["privileged_observations"] = self.privileged_obs_shape
        if has_ref and _present(self.privileged_ref_obs_shape):
            spec["privileged_reference_observations"] = self.privileged_ref_obs_shape
            spec["privileged_reference_observations_mask"] = _MASK
        if _present(self.rnd_state_shape):
            spec["rnd_state"] = self.rnd_state_shape
        spec["actions"] = actions
        if self.apply_dagger_actions:
            spec["dagger_actions"] = actions
        if is_rl:
            spec["values"] = _SCALAR
            spec["returns"] = spec["advantages"] = FieldSpec((1,), scalar=True, computed=True)
            spec["actions_log_prob"] = _SCALAR
            spec["mu"] = spec["sigma"] = actions
        else:
            spec["privileged_actions"] = actions
        spec["rewards"] = _SCALAR
        if is_rl:
            spec["bootstrap_values"] = _SCALAR
        spec["dones"] = spec["time_outs"] = _FLAG
        return spec

    @property
    def step(self) -> int:
        """Number of transitions stored in the current rollout."""
        return self._buffer.step

    @step.setter
    def step(self, value: int) -> None:
        self._buffer.step = int(value)

    @property
    def buffer(self) -> RolloutBuffer:
        """The generic ``RolloutBuffer`` underneath (its ``get()`` is every buffer as one ``[T, N]`` TensorDict)."""
        return self._buffer

    @property
    def saved_hidden_states_a(self) -> list[torch.Tensor] | None:
        """Actor hidden states in the seed's layout, one ``[T, layers, N, H]`` view per tensor (h, or h and c)."""
        component = self._hidden.components[0]
        return None if component is None else component.seed_layout()

    @property
    def saved_hidden_states_c(self) -> list[torch.Tensor] | None:
        """Critic hidden states in the seed's layout, one ``[T, layers, N, H]`` view per tensor."""
        component = self._hidden.components[1]
        return None if component is None else component.seed_layout()

    # ------------------------------------------------------------------ writing
    def add_transitions(self, transition: Transition) -> None:
        """Store one step of all envs. Raises on overflow and on any shape or dtype mismatch, naming the field."""
        if self.step >= self.num_transitions_per_env:
            raise OverflowError(
                f"RolloutStorageMM overflow: it holds {self.num_transitions_per_env} transitions per env and all are "
                "filled; call clear() after the update before adding the next rollout"
            )
        # None for a stored field fails in the buffer, in field order, like any other bad value.
        t, fields = transition, self._store.fields
        step: dict[str, Any] = {"observations": t.observations}
        if "reference_observations" in fields:
            step["reference_observations"] = t.reference_observations
            step["reference_observations_mask"] = self._mask(t.reference_observations_mask)
        if "privileged_observations" in fields:
            step["privileged_observations"] = t.critic_observations
        if "privileged_reference_observations" in fields:
            step["privileged_reference_observations"] = t.critic_reference_observations
            step["privileged_reference_observations_mask"] = self._mask(t.critic_reference_observations_mask)
        for name in self._same_name_inputs:
            step[name] = getattr(t, name)
        step["time_outs"] = self._all_false if t.time_outs is None else t.time_outs
        if self.training_type == "rl":
            step["values"], step["actions_log_prob"] = t.values, t.actions_log_prob
            step["mu"], step["sigma"] = t.action_mean, t.action_sigma
            # Fallback (rsl_rl's shortcut): bootstrap a time-out from V(s_t) when the env gave no final state.
            step["bootstrap_values"] = step["values"] if t.bootstrap_values is None else t.bootstrap_values
            if t.bootstrap_values is None and t.time_outs is not None and not self._warned_timeout_fallback:
                self._warned_timeout_fallback = True
                warnings.warn(
                    "RolloutStorageMM: time-outs without bootstrap_values; falling back to rsl_rl's gamma * V(s_t) "
                    "shortcut (envs that return extras['final_observations'], like the embedded env, bootstrap "
                    "from the real next state; rsl_rl VecEnvs such as mjlab's and Isaac Lab's do not).",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._hidden.save(self.step, t.hidden_states)  # before the step advances: a bad state stores nothing
        self._buffer.add_step(step)

    add_transition = add_transitions

    def _mask(self, mask: torch.Tensor | None) -> torch.Tensor:
        """A reference without a mask is valid for every env."""
        return self._all_true if mask is None else mask

    def clear(self) -> None:
        """Start a new rollout. The last stored step is kept as the carry row for the next rollout's AMP pairs."""
        self._buffer.clear()

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
        if self.training_type != "rl":
            raise ValueError("compute_returns() is only available for training_type='rl'")
        if self.step != self.num_transitions_per_env:
            raise RuntimeError(
                f"compute_returns() needs a full rollout: {self.step} of {self.num_transitions_per_env} steps stored"
            )
        # Contiguous copies: the packed views are strided, and the recursion reads every element T times.
        inputs = {
            "rewards": self.rewards.contiguous(),
            "values": self.values.contiguous(),
            "bootstrap_values": self.bootstrap_values.contiguous(),
            "last_values": last_values.reshape(self.num_envs, 1),
        }
        _check_finite(inputs)
        args = (inputs["rewards"], inputs["values"], self.dones, inputs["last_values"])
        kwargs = {"time_outs": self.time_outs, "bootstrap_values": inputs["bootstrap_values"]}
        if method == "gae":
            returns, advantages = compute_gae(*args, gamma, lam, **kwargs)
        elif method in ("mc", "monte_carlo"):
            returns, advantages = compute_monte_carlo(*args, gamma, **kwargs)
        else:
            raise ValueError(f"compute_returns: method must be 'gae' or 'mc', got {method!r}")
        if normalize_advantage:
            advantages = normalize_advantages(advantages)
        self.returns.copy_(returns)
        self.advantages.copy_(advantages)

    def get_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean trajectory length, mean reward) of the stored rollout; ``dones`` is not modified."""
        dones = self.dones[: self.step].squeeze(-1).clone()
        dones[-1] = True
        flat = dones.transpose(0, 1).reshape(-1)
        ends = torch.cat((flat.new_tensor([-1], dtype=torch.int64), flat.nonzero()[:, 0]))
        return (ends[1:] - ends[:-1]).float().mean(), self.rewards[: self.step].mean()

    # ------------------------------------------------------------------ generators
    def generator(self) -> Iterator[DistillationBatch]:
        """Yield one ``DistillationBatch`` (the seed's 7-tuple) per stored step.

        A plain loop over the buffer's ``[T, N]`` views rather than ``mini_batches(T, shuffle=False)``: it yields
        views (no gather, no copy) and also works on a partly filled rollout, which distillation's per-step updates
        may read.
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
                hidden_states=self._hidden.at_step(i),
            )

    def _pair(self, obs_name: str, mask_name: str, i: int) -> tuple[Any, torch.Tensor] | None:
        obs = getattr(self, obs_name)
        return None if obs is None else (obs[i], getattr(self, mask_name)[i])

    def mini_batch_generator(self, num_mini_batches: int, num_epochs: int = 8) -> Iterator[PPOBatch]:
        """Yield shuffled flat PPO mini-batches, reshuffled every epoch; every sample appears once per epoch."""
        self._check_rl("mini_batch_generator")
        batches = self._buffer.mini_batches(
            num_mini_batches, num_epochs, self._batch_keys, self._amp_keys(), as_dict=True
        )
        for batch in batches:
            yield self._make_batch(batch, hidden=(None, None))

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
        table = build_sequences(self.dones, sequence_mode, max_seq_len)
        batches = self._buffer.mini_batches(
            num_mini_batches, num_epochs, self._batch_keys, self._amp_keys(), sequences=table, as_dict=True
        )
        for batch in batches:
            start_index = batch["indices"][0]  # step 0 of every padded sequence is real: its first step
            yield self._make_batch(batch, hidden=self._hidden.gather(start_index, self.num_envs))

    def _amp_keys(self) -> tuple[str, ...] | None:
        return self._previous_keys if self._amp is not None else None

    def _check_rl(self, what: str) -> None:
        if self.training_type != "rl":
            raise ValueError(f"{what}() is only available for training_type='rl'")
        if self.step != self.num_transitions_per_env:
            raise RuntimeError(f"{what}() needs a full rollout: {self.step} of {self.num_transitions_per_env} stored")

    def _make_batch(self, entries: dict[str, Any], hidden: tuple) -> PPOBatch:
        """A ``PPOBatch`` from one of the buffer's mini-batches (``[B]`` or padded ``[L, B]``, as a dict)."""
        get = entries.get
        obs, ref, critic_ref = get("observations"), None, None
        if "reference_observations" in entries:
            ref = (get("reference_observations"), get("reference_observations_mask"))
            critic_ref = ref
            if "privileged_reference_observations" in entries:
                critic_ref = (get("privileged_reference_observations"), get("privileged_reference_observations_mask"))
        batch = PPOBatch(
            observations=obs,
            reference=ref,
            critic_observations=get("privileged_observations", obs),
            critic_reference=critic_ref,
            actions=get("actions"),
            target_values=get("values"),
            advantages=get("advantages"),
            returns=get("returns"),
            old_actions_log_prob=get("actions_log_prob"),
            old_mu=get("mu"),
            old_sigma=get("sigma"),
            dagger_actions=get("dagger_actions"),
            hidden_states=hidden,
            masks=get("masks"),
            rnd_state=get("rnd_state"),
            obs_prev_state=None,
            ref_obs_prev_state=None,
            ref_obs_prev_mask=None,
            loss_mask=get("loss_mask"),
            indices=get("indices"),
        )
        if self._amp is not None:
            self._amp.add_pairs(batch, get("previous"), get("previous_valid"))
        return batch


def _check_finite(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``FloatingPointError`` naming the first non-finite tensor and index (one device sync per call)."""
    finite = torch.stack([torch.isfinite(v).all() for v in tensors.values()])
    if bool(finite.all()):
        return
    bad = [name for name, ok in zip(tensors, finite.tolist()) if not ok]
    where = (~torch.isfinite(tensors[bad[0]])).nonzero()[0].tolist()
    raise TrainingDiverged(
        f"RolloutStorageMM.compute_returns: {', '.join(bad)} contain NaN or inf (first at index {where} of "
        f"{bad[0]}, [t, env, ...]); check the env's reward terms and the critic before training continues"
    )
