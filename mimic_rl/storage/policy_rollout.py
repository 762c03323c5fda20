"""PolicyRollout: the rollout MMPPO and Distillation collect into, written and read as TensorDicts.

One name per concept, from the env to the loss:

- ``obs``: the env's observation groups under the env's own names (a TensorDict: ``policy``, ``reference``,
  ``reference_mask``, ``critic``, ... on the embedded env; ``actor``, ``critic`` on mjlab);
- extension fields (``fields=``; e.g. ``rnd_state``, the states RND reads, and ``dagger_actions``, a DAgger
  teacher's labels);
- ``actions``: the executed actions;
- PPO: ``values`` (the critic's value), ``actions_log_prob``, ``action_mean`` and ``action_std`` (the policy that
  acted), ``returns`` and ``advantages`` (filled by ``compute_returns``), ``bootstrap_values`` (V of the real next
  state on time-out steps);
- distillation: ``privileged_actions`` (the teacher's actions, the labels);
- ``rewards``, ``dones``, ``time_outs``.

It is a ``RolloutBuffer`` (every float field packed in one tensor, one ``index_select`` per mini-batch) plus what an
on-policy algorithm needs around it: returns with time-out bootstrapping, recurrent hidden states stored per step and
gathered at each sequence's first step, and one mini-batch iterator (``mini_batches``) for flat PPO batches, AMP's
previous-step pairs, padded recurrent sequences and in-order distillation chunks.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from mimic_rl.errors import TrainingDiverged
from mimic_rl.storage.hidden import HiddenStateStore
from mimic_rl.storage.returns import compute_gae, compute_monte_carlo, normalize_advantages
from mimic_rl.storage.rollout import FieldSpec, RolloutBuffer
from mimic_rl.storage.sequences import SequenceMode, build_sequences

__all__ = ["BATCH_EXCLUDED", "PolicyRollout"]

TRAINING_TYPES = ("rl", "distillation")
SCALAR = FieldSpec((1,), scalar=True)
FLAG = FieldSpec((1,), torch.bool, scalar=True, lenient=True)
COMPUTED = FieldSpec((1,), scalar=True, computed=True)
BATCH_EXCLUDED = ("rewards", "bootstrap_values", "dones", "time_outs")
_CORE_FIELDS = (
    "values",
    "returns",
    "advantages",
    "actions_log_prob",
    "action_mean",
    "action_std",
    "privileged_actions",
    *BATCH_EXCLUDED,
)
"""Fields the update never reads per sample (returns and advantages already hold them)."""

TIMEOUT_FALLBACK_WARNING = (
    "time-outs without bootstrap values: falling back to rsl_rl's gamma * V(s_t) shortcut (envs that return "
    "extras['final_observations'], like the embedded env, bootstrap from the real next state; rsl_rl VecEnvs such "
    "as mjlab's and Isaac Lab's do not)."
)


class PolicyRollout:
    """``num_steps`` steps of ``num_envs`` envs for PPO (``training_type="rl"``) or distillation.

    ``obs`` describes the stored observation groups: an example ``[N]`` TensorDict (or a mapping of group -> example
    tensor or per-env shape). ``fields`` adds fields (name -> per-env shape, example tensor or ``FieldSpec``) that
    extensions store, e.g. ``rnd_state`` or ``dagger_actions``. ``obs_view`` is what user callbacks (AMP feature
    extractors) receive of stored observations: the stored TensorDict itself by default. ``labels`` /
    ``leaf_labels`` / ``error_prefix`` name the fields in error messages (``RolloutBuffer``'s arguments).
    """

    def __init__(
        self,
        training_type: str,
        num_envs: int,
        num_steps: int,
        obs: TensorDictBase | Mapping[str, Any],
        actions_shape: Sequence[int] | int,
        *,
        fields: Mapping[str, Any] | None = None,
        device: str | torch.device = "cpu",
        obs_view: Callable[[Any], Any] | None = None,
        labels: Mapping[str, str] | None = None,
        leaf_labels: Mapping[str, Mapping[Any, str]] | None = None,
        error_prefix: str = "PolicyRollout.add_step: ",
    ) -> None:
        if training_type not in TRAINING_TYPES:
            raise ValueError(f"training_type must be one of {TRAINING_TYPES}, got {training_type!r}")
        if int(num_envs) < 1 or int(num_steps) < 1:
            raise ValueError(f"num_envs and num_steps must be >= 1, got {num_envs} and {num_steps}")
        self.training_type = training_type
        self.num_envs = int(num_envs)
        self.num_steps = int(num_steps)
        self.device = torch.device(device)
        self.obs_view = obs_view or _identity
        actions = (int(actions_shape),) if isinstance(actions_shape, int) else tuple(actions_shape)
        self.buffer = RolloutBuffer(
            self.num_steps,
            self.num_envs,
            self._spec(obs, actions, fields or {}),
            self.device,
            labels=labels,
            leaf_labels=leaf_labels,
            error_prefix=error_prefix,
        )
        self.fields = tuple(self.buffer.store.fields)
        self.batch_keys = tuple(name for name in self.fields if name not in BATCH_EXCLUDED)
        """The fields of a PPO mini-batch (every field but rewards, bootstrap values and episode ends)."""
        self.hidden = HiddenStateStore(self.num_steps, self.device)
        self._all_false = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._warned_timeout_fallback = False

    def _spec(self, obs: Any, actions: tuple[int, ...], fields: Mapping[str, Any]) -> dict[str, Any]:
        """The fields, in column order: observations first (AMP gathers them for the previous step), then the
        extensions' fields and the fields of a mini-batch, then the rest."""
        taken = sorted(set(fields) & {"obs", "actions", *_CORE_FIELDS})
        if taken:
            raise ValueError(f"PolicyRollout: fields: {taken[0]!r} is a field of every rollout; name yours otherwise")
        spec: dict[str, Any] = {"obs": obs}
        spec.update({name: tuple(v) if isinstance(v, list | tuple) else v for name, v in fields.items()})
        spec["actions"] = actions
        if self.training_type == "rl":
            spec["values"] = SCALAR
            spec["returns"] = spec["advantages"] = COMPUTED
            spec["actions_log_prob"] = SCALAR
            spec["action_mean"] = spec["action_std"] = actions
        else:
            spec["privileged_actions"] = actions
        spec["rewards"] = SCALAR
        if self.training_type == "rl":
            spec["bootstrap_values"] = FieldSpec((1,), scalar=True, computed=True)  # optional input, see add_step
        spec["dones"] = FLAG
        spec["time_outs"] = FieldSpec((1,), torch.bool, scalar=True, lenient=True, computed=True)
        return spec

    # ------------------------------------------------------------------ state
    @property
    def step(self) -> int:
        """Steps stored in the current rollout."""
        return self.buffer.step

    @step.setter
    def step(self, value: int) -> None:
        self.buffer.step = int(value)

    @property
    def is_full(self) -> bool:
        """Whether the rollout holds all ``num_steps`` steps."""
        return self.buffer.is_full

    def get(self, flatten: bool = False) -> TensorDict:
        """The ``[T, N]`` rollout as a TensorDict of views into the store (``[T * N]`` with ``flatten``)."""
        return self.buffer.get(flatten)

    def carry_state(self) -> dict[str, torch.Tensor]:
        """The carry row (the previous rollout's last step, which step 0's AMP pair reads), for a checkpoint."""
        return {key: store[0].clone() for key, store in self.buffer.store.stores.items()}

    def load_carry_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore ``carry_state()``."""
        for key, row in state.items():
            self.buffer.store.stores[key][0].copy_(row)

    # ------------------------------------------------------------------ writing
    def add_step(self, step: Mapping[str, Any] | TensorDictBase, hidden_states: Any = None) -> None:
        """Store one step of all envs (``[N, ...]`` per field) and the recurrent states that were its input.

        ``time_outs`` may be left out (no truncation). On PPO rollouts ``bootstrap_values`` may be left out: a
        time-out then bootstraps from ``values`` (rsl_rl's shortcut), with one warning. Raises naming the field on a
        missing or unknown field, a wrong shape or dtype, and on overflow.
        """
        if self.step >= self.num_steps:
            raise OverflowError(
                f"PolicyRollout overflow: it holds {self.num_steps} steps per env and all are filled; call clear() "
                "after the update before adding the next rollout"
            )
        if _missing(step, "time_outs") or (self.training_type == "rl" and _missing(step, "bootstrap_values")):
            step = dict(step.items())
            timed_out = step.get("time_outs") is not None
            if not timed_out:
                step["time_outs"] = self._all_false
            if self.training_type == "rl" and step.get("bootstrap_values") is None:
                step["bootstrap_values"] = step.get("values")
                if timed_out and not self._warned_timeout_fallback:
                    self._warned_timeout_fallback = True
                    warnings.warn(f"PolicyRollout: {TIMEOUT_FALLBACK_WARNING}", RuntimeWarning, stacklevel=3)
        self.hidden.save(self.step, hidden_states)  # before the step advances: a bad state stores nothing
        self.buffer.add_step(step)

    def clear(self) -> None:
        """Start a new rollout; the last stored step becomes the carry row for the next rollout's AMP pairs."""
        self.buffer.clear()

    # ------------------------------------------------------------------ returns
    def compute_returns(
        self,
        last_values: torch.Tensor,
        gamma: float,
        lam: float,
        normalize_advantage: bool = False,
        method: str = "gae",
    ) -> None:
        """Fill ``returns`` and ``advantages`` with GAE (``"gae"``) or Monte Carlo (``"mc"``) estimates.

        Time-outs bootstrap from ``bootstrap_values``; ``last_values`` is V of the state after the last step,
        ``[N]`` or ``[N, 1]``. Raises ``TrainingDiverged`` (a ``FloatingPointError``) naming the first non-finite
        input.
        """
        if self.training_type != "rl":
            raise ValueError("compute_returns() is only available for training_type='rl'")
        if not self.is_full:
            raise RuntimeError(f"compute_returns() needs a full rollout: {self.step} of {self.num_steps} steps stored")
        td = self.get()
        # Contiguous copies: the packed views are strided, and the recursion reads every element T times.
        inputs = {
            "rewards": td["rewards"].contiguous(),
            "values": td["values"].contiguous(),
            "bootstrap_values": td["bootstrap_values"].contiguous(),
            "last_values": last_values.reshape(self.num_envs, 1),
        }
        _check_finite(inputs)
        args = (inputs["rewards"], inputs["values"], td["dones"], inputs["last_values"])
        kwargs = {"time_outs": td["time_outs"], "bootstrap_values": inputs["bootstrap_values"]}
        if method == "gae":
            returns, advantages = compute_gae(*args, gamma, lam, **kwargs)
        elif method in ("mc", "monte_carlo"):
            returns, advantages = compute_monte_carlo(*args, gamma, **kwargs)
        else:
            raise ValueError(f"compute_returns: method must be 'gae' or 'mc', got {method!r}")
        if normalize_advantage:
            advantages = normalize_advantages(advantages)
        td["returns"].copy_(returns)
        td["advantages"].copy_(advantages)

    def get_statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean trajectory length, mean reward) of the stored steps; ``dones`` is not modified."""
        td = self.get()
        dones = td["dones"][: self.step].squeeze(-1).clone()
        dones[-1] = True
        flat = dones.transpose(0, 1).reshape(-1)
        ends = torch.cat((flat.new_tensor([-1], dtype=torch.int64), flat.nonzero()[:, 0]))
        return (ends[1:] - ends[:-1]).float().mean(), td["rewards"][: self.step].mean()

    # ------------------------------------------------------------------ reading
    def mini_batches(
        self,
        num_mini_batches: int,
        num_epochs: int = 1,
        *,
        keys: Sequence[str] | None = None,
        previous_keys: Sequence[str] | None = None,
        sequence_mode: SequenceMode | str | None = None,
        max_seq_len: int | None = None,
        shuffle: bool = True,
        reuse: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """Shuffled mini-batches of the full rollout, reshuffled every epoch; every sample once per epoch.

        Entries: the fields ``keys`` (default: ``batch_keys`` on PPO rollouts, every field otherwise), ``indices``
        (flat ``t * N + n``) and ``hidden_states`` (``(actor, critic)``, the stored states at each sequence's first
        step, or ``(None, None)``). With ``previous_keys``: ``previous`` (those fields at step t - 1 of the same env)
        and ``previous_valid``. With ``sequence_mode`` (recurrent models): padded ``[L, B]`` sequences with ``masks``
        and ``loss_mask`` (``RolloutBuffer.mini_batches``). ``shuffle=False`` and ``num_mini_batches=num_steps``
        give the rollout step by step, in time order. ``reuse=True`` gathers flat batches into the same buffers
        (each batch overwrites the previous one's tensors; MMPPO's update consumes them one at a time).
        """
        if keys is None:
            keys = self.batch_keys if self.training_type == "rl" else self.fields
        table = None
        if sequence_mode is not None:
            table = build_sequences(self.get()["dones"], sequence_mode, max_seq_len)
        batches = self.buffer.mini_batches(
            num_mini_batches,
            num_epochs,
            keys,
            previous_keys,
            sequences=table,
            shuffle=shuffle,
            as_dict=True,
            reuse=reuse,
        )
        for batch in batches:
            if table is None:
                batch["hidden_states"] = (None, None)
            else:  # step 0 of every padded sequence is real: its first step
                batch["hidden_states"] = self.hidden.gather(batch["indices"][0], self.num_envs)
            yield batch


def _identity(x: Any) -> Any:
    return x


def _missing(step: Mapping[str, Any] | TensorDictBase, key: str) -> bool:
    """Whether ``step`` leaves out ``key`` (or holds None for it)."""
    return key not in step.keys() or (isinstance(step, Mapping) and step[key] is None)


def _check_finite(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ``TrainingDiverged`` naming the first non-finite tensor and index (one device sync per call)."""
    finite = torch.stack([torch.isfinite(v).all() for v in tensors.values()])
    if bool(finite.all()):
        return
    bad = [name for name, ok in zip(tensors, finite.tolist()) if not ok]
    where = (~torch.isfinite(tensors[bad[0]])).nonzero()[0].tolist()
    raise TrainingDiverged(
        f"compute_returns: {', '.join(bad)} contain NaN or inf (first at index {where} of {bad[0]}, [t, env, ...]); "
        "check the env's reward terms and the critic before training continues"
    )
