"""RolloutStorageMM: the rollout storage for motion-mimic PPO (reference observations, AMP pairs, DAgger, RND).

Keeps the GBC seed's API (constructor, ``Transition``, ``add_transitions``, ``compute_returns``, the 18-item PPO
mini-batch and the 7-item distillation batch) and fixes its defects: correct truncation bootstrapping, reshuffling
every epoch, AMP pairs that are really (env n, t-1) -> (env n, t) with resets masked, extractor callbacks resolved
once, and ``get_statistics`` that leaves ``dones`` alone. Buffers are time-major ``[T, N, ...]``.
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
from mimic_rl.storage.layout import FLAG, FLOAT, PackedStore
from mimic_rl.storage.returns import compute_gae, compute_monte_carlo, normalize_advantages
from mimic_rl.storage.sequences import SequenceMode, build_sequences, pad_indices

__all__ = ["RolloutStorageMM"]

_TRAINING_TYPES = ("rl", "distillation")


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
        self.step = 0

        has_ref = _present(ref_obs_shape)
        has_critic = _present(privileged_obs_shape)
        has_critic_ref = has_ref and _present(privileged_ref_obs_shape)
        is_rl = training_type == "rl"

        # Declaration order is column order: state fields first (AMP gathers a prefix), batch fields, then the rest.
        store = PackedStore(self.num_transitions_per_env, self.num_envs, self.device)
        store.add("observations", obs_shape)
        if has_ref:
            store.add("reference_observations", ref_obs_shape)
            store.add("reference_observations_mask", (), torch.bool)
        if has_critic:
            store.add("privileged_observations", privileged_obs_shape)
        if has_critic_ref:
            store.add("privileged_reference_observations", privileged_ref_obs_shape)
            store.add("privileged_reference_observations_mask", (), torch.bool)
        if _present(rnd_state_shape):
            store.add("rnd_state", rnd_state_shape)
        store.add("actions", actions_shape)
        if self.apply_dagger_actions:
            store.add("dagger_actions", actions_shape)
        if not is_rl:
            store.add("privileged_actions", actions_shape)
        if is_rl:
            for name in ("values", "returns", "advantages", "actions_log_prob"):
                store.add(name, (1,), scalar=True)
            store.add("mu", actions_shape)
            store.add("sigma", actions_shape)
        self._batch_columns = store.width(FLOAT)
        store.add("rewards", (1,), scalar=True)
        if is_rl:
            store.add("bootstrap_values", (1,), scalar=True)
        store.add("dones", (1,), torch.bool, scalar=True, lenient_flag=True)
        store.add("time_outs", (1,), torch.bool, scalar=True, lenient_flag=True)
        store.allocate()
        self._store = store
        # No previous rollout yet: the carry row is marked done, so t = 0 pairs are invalid in the first rollout.
        store.stores[FLAG][0, :, store.fields["dones"].leaves[None].start] = True

        # Seed attribute names; absent buffers are None.
        for name in (
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
        ):
            setattr(self, name, store.fields[name].view if name in store.fields else None)
        self._has_timeout_bootstrap = torch.zeros((), dtype=torch.bool, device=self.device)
        self._warned_timeout_fallback = False
        self._hidden = HiddenStateStore(self.num_transitions_per_env, self.device)
        self._amp = AmpPairExtractor(self.amp_cfg) if self.amp_cfg is not None else None

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
        row = self.step + 1
        t = transition
        write = self._store.write
        fields = self._store.fields
        write("observations", row, self._required(t.observations, "observations"), "observations")
        if "reference_observations" in fields:
            write(
                "reference_observations",
                row,
                self._required(t.reference_observations, "reference_observations"),
                "reference_observations",
            )
            self._write_mask("reference_observations_mask", row, t.reference_observations_mask)
        if "privileged_observations" in fields:
            write(
                "privileged_observations",
                row,
                self._required(t.critic_observations, "critic_observations"),
                "critic_observations",
            )
        if "privileged_reference_observations" in fields:
            value = self._required(t.critic_reference_observations, "critic_reference_observations")
            write("privileged_reference_observations", row, value, "critic_reference_observations")
            self._write_mask(
                "privileged_reference_observations_mask",
                row,
                t.critic_reference_observations_mask,
                "critic_reference_observations_mask",
            )
        if "rnd_state" in fields:
            write("rnd_state", row, self._required(t.rnd_state, "rnd_state"), "rnd_state")
        write("actions", row, self._required(t.actions, "actions"), "actions")
        if "dagger_actions" in fields:
            write("dagger_actions", row, self._required(t.dagger_actions, "dagger_actions"), "dagger_actions")
        if "privileged_actions" in fields:
            write(
                "privileged_actions",
                row,
                self._required(t.privileged_actions, "privileged_actions"),
                "privileged_actions",
            )
        write("rewards", row, self._required(t.rewards, "rewards"), "rewards")
        write("dones", row, self._required(t.dones, "dones"), "dones")
        time_outs = t.time_outs
        if time_outs is None:
            self.time_outs[self.step].zero_()
        else:
            write("time_outs", row, time_outs, "time_outs")
        if self.training_type == "rl":
            write("values", row, self._required(t.values, "values"), "values")
            write("actions_log_prob", row, self._required(t.actions_log_prob, "actions_log_prob"), "actions_log_prob")
            write("mu", row, self._required(t.action_mean, "action_mean"), "action_mean")
            write("sigma", row, self._required(t.action_sigma, "action_sigma"), "action_sigma")
            if t.bootstrap_values is not None:
                write("bootstrap_values", row, t.bootstrap_values, "bootstrap_values")
            else:
                # Fallback (rsl_rl's shortcut): bootstrap a time-out from V(s_t) when the env gave no final state.
                self.bootstrap_values[self.step].copy_(self.values[self.step])
                if time_outs is not None and not self._warned_timeout_fallback:
                    self._warned_timeout_fallback = True
                    warnings.warn(
                        "RolloutStorageMM: time-outs without bootstrap_values; falling back to rsl_rl's gamma * V(s_t) "
                        "shortcut (envs that return extras['final_observations'], like the embedded env, bootstrap "
                        "from the real next state; rsl_rl VecEnvs such as mjlab's and Isaac Lab's do not).",
                        RuntimeWarning,
                        stacklevel=2,
                    )
        self._hidden.save(self.step, t.hidden_states)
        self.step += 1

    add_transition = add_transitions

    def _required(self, value: Any, name: str) -> Any:
        if value is None:
            raise ValueError(
                f"Transition.{name} is None, but this storage (training_type={self.training_type!r}) keeps a buffer "
                f"for it; set it before add_transitions()"
            )
        return value

    def _write_mask(self, field: str, row: int, mask: torch.Tensor | None, source: str | None = None) -> None:
        source = source or field
        if mask is None:  # a reference without a mask is valid for every env
            self._store.fields[field].view[row - 1].fill_(True)
        else:
            self._store.write(field, row, mask, source)

    def clear(self) -> None:
        """Start a new rollout. The last stored step is kept as the carry row for the next rollout's AMP pairs."""
        if self.step > 0:
            self._store.carry(self.step)
        self.step = 0

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
        """Yield one ``DistillationBatch`` (the seed's 7-tuple) per stored step."""
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
        batch_size = self.num_envs * self.num_transitions_per_env
        if not 1 <= num_mini_batches <= batch_size:
            raise ValueError(f"num_mini_batches must be in [1, {batch_size}], got {num_mini_batches}")
        for _ in range(num_epochs):
            permutation = torch.randperm(batch_size, device=self.device)
            for index in torch.tensor_split(permutation, num_mini_batches):
                yield self._make_batch(index, masks=None, loss_mask=None, hidden=(None, None))

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
        num_sequences = len(table)
        if not 1 <= num_mini_batches <= num_sequences:
            raise ValueError(f"num_mini_batches must be in [1, {num_sequences}] (the number of sequences)")
        for _ in range(num_epochs):
            permutation = torch.randperm(num_sequences, device=self.device)
            for select in torch.tensor_split(permutation, num_mini_batches):
                index, masks, loss_mask = pad_indices(table, select, self.num_envs)
                start_index = table.start[select] * self.num_envs + table.env[select]
                hidden = self._hidden.gather(start_index, self.num_envs)
                yield self._make_batch(index, masks=masks, loss_mask=loss_mask, hidden=hidden)

    def _check_rl(self, what: str) -> None:
        if self.training_type != "rl":
            raise ValueError(f"{what}() is only available for training_type='rl'")
        if self.step != self.num_transitions_per_env:
            raise RuntimeError(f"{what}() needs a full rollout: {self.step} of {self.num_transitions_per_env} stored")

    def _make_batch(
        self, index: torch.Tensor, masks: torch.Tensor | None, loss_mask: torch.Tensor | None, hidden: tuple
    ) -> PPOBatch:
        """Assemble a batch from flat rollout indices (``[B]`` or padded ``[L, B]``) with one gather per store."""
        store = self._store
        lead = tuple(index.shape)
        rows = store.gather(index + self.num_envs, columns=self._batch_columns)
        if masks is not None:  # zero the padding so that padded steps are inert
            for key, value in rows.items():
                rows[key] = value * masks.unsqueeze(-1) if key != FLAG else value & masks.unsqueeze(-1)
        get = {name: store.assemble(f, rows, lead) for name, f in store.fields.items() if _in_batch(name)}

        ref = critic_ref = None
        if "reference_observations" in get:
            ref = (get["reference_observations"], get["reference_observations_mask"])
            if "privileged_reference_observations" in get:
                critic_ref = (get["privileged_reference_observations"], get["privileged_reference_observations_mask"])
            else:
                critic_ref = ref
        critic_obs = get.get("privileged_observations", get["observations"])

        batch = PPOBatch(
            observations=get["observations"],
            reference=ref,
            critic_observations=critic_obs,
            critic_reference=critic_ref,
            actions=get["actions"],
            target_values=get["values"],
            advantages=get["advantages"],
            returns=get["returns"],
            old_actions_log_prob=get["actions_log_prob"],
            old_mu=get["mu"],
            old_sigma=get["sigma"],
            dagger_actions=get.get("dagger_actions"),
            hidden_states=hidden,
            masks=masks,
            rnd_state=get.get("rnd_state"),
            obs_prev_state=None,
            ref_obs_prev_state=None,
            ref_obs_prev_mask=None,
            loss_mask=loss_mask,
            indices=index,
        )
        if self._amp is not None:
            self._amp.add_pairs(batch, store, index, masks)
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


def _in_batch(name: str) -> bool:
    return name not in ("rewards", "bootstrap_values", "dones", "time_outs")
