"""MMPPO: PPO with reference observations, AMP, RND, DAgger guidance, symmetry and multi-GPU training.

Keeps rsl_rl's ``PPO`` constructor (plus ``amp_cfg``, ``dagger_cfg``) and fixes GBC's MMPPO: the action std is in the
optimizer, the style reward enters the reward before the transition is stored, the RND predictor's optimizer steps,
the R1 penalty is taken on expert pairs only, the imitation loss shares the PPO backward, normalizers are updated
once per iteration with raw observations, and time-outs bootstrap from the critic (with references) on the real
next state.

Observations are the env's TensorDict of named groups; ``obs_groups`` (``ObsGroups``) says which groups the actor
and the critic read. A storage built by ``construct_algorithm`` keeps those groups under the env's names, so the same
mapping picks the models' inputs at collection, in every mini-batch and for the normalizers. MMPPO itself is PPO:
AMP, RND, DAgger guidance and symmetry are ``Extension`` objects whose hooks it calls (``extensions.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms import ppo_losses as L
from mimic_rl.algorithms.amp import AMP, AmpExtension
from mimic_rl.algorithms.dagger import DaggerExtension, DaggerGuidance
from mimic_rl.algorithms.distributed import MultiGPUConfig, placement
from mimic_rl.algorithms.extensions import Extension, PolicyOutput, SideLoss
from mimic_rl.algorithms.ppo_state import AlgorithmState
from mimic_rl.algorithms.registry import builder_for, register_algorithm
from mimic_rl.algorithms.rnd import RandomNetworkDistillation, RndExtension
from mimic_rl.algorithms.step_means import StepMeans
from mimic_rl.algorithms.symmetry import Symmetry, SymmetryExtension
from mimic_rl.errors import TrainingDiverged
from mimic_rl.models.actor_critic import Actor, Critic
from mimic_rl.models.distributions import gaussian_entropy, gaussian_kl, gaussian_log_prob
from mimic_rl.models.normalization import nonfinite_rows
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.storage import PPOBatch, RolloutStorageMM
from mimic_rl.storage.amp_pairs import AmpPairExtractor

__all__ = ["MMPPO"]

SCHEDULES = ("adaptive", "adaptive_update", "fixed")
"""``adaptive``: rsl_rl's rule after every mini-batch (the KL so far against the rollout's policy); ``adaptive_update``:
the same rule once per update, on the KL of the whole update (the last mini-batch's); ``fixed``: no change."""

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


@register_algorithm("MMPPO")
class MMPPO(AlgorithmState):
    """Proximal policy optimization for motion imitation (see the module docstring)."""

    def __init__(
        self,
        actor: Actor,
        critic: Critic,
        storage: RolloutStorageMM,
        num_learning_epochs: int = 5,
        num_mini_batches: int = 4,
        clip_param: float = 0.2,
        gamma: float = 0.99,
        lam: float = 0.95,
        value_loss_coef: float = 1.0,
        entropy_coef: float = 0.01,
        learning_rate: float = 1e-3,
        max_grad_norm: float = 1.0,
        optimizer: str = "adam",
        use_clipped_value_loss: bool = True,
        schedule: str = "adaptive",
        desired_kl: float | None = 0.01,
        normalize_advantage_per_mini_batch: bool = False,
        device: str | torch.device = "cpu",
        rnd_cfg: dict[str, Any] | None = None,
        symmetry_cfg: dict[str, Any] | None = None,
        multi_gpu_cfg: dict[str, int] | MultiGPUConfig | None = None,
        amp_cfg: dict[str, Any] | None = None,
        dagger_cfg: dict[str, Any] | None = None,
        use_mixed_precision: bool = False,
        grad_reduce_bucket_mb: float = 25.0,
        max_nonfinite_batches: int = 3,
        returns_method: str = "gae",
        sequence_mode: str = "trajectory",
        max_seq_len: int | None = None,
        critic_learning_rate: float | None = None,
        obs_groups: ObsGroups | None = None,
        extensions: Sequence[Extension] | None = None,
    ) -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
        self.device = torch.device(device)
        self.multi_gpu, self.is_multi_gpu, self.gpu_global_rank, self.gpu_world_size = placement(multi_gpu_cfg)
        self.actor = actor.to(self.device)
        self.critic = critic.to(self.device)
        self.storage = storage
        self.obs_groups = obs_groups
        """Which observation groups the actor and critic read (resolved from the first observations when None)."""
        self.transition = RolloutStorageMM.Transition()
        self.learning_rate = float(learning_rate)
        self.critic_learning_rate = None if critic_learning_rate is None else float(critic_learning_rate)
        groups = [
            {"params": list(self.actor.parameters()), "lr": self.learning_rate},
            {"params": list(self.critic.parameters()), "lr": self.critic_learning_rate or self.learning_rate},
        ]
        self.optimizer = OPTIMIZERS[optimizer](groups, lr=self.learning_rate)

        self.num_learning_epochs = int(num_learning_epochs)
        self.num_mini_batches = int(num_mini_batches)
        self.clip_param = float(clip_param)
        self.gamma = float(gamma)
        self.lam = float(lam)
        self.value_loss_coef = float(value_loss_coef)
        self.entropy_coef = float(entropy_coef)
        self.max_grad_norm = float(max_grad_norm)
        self.use_clipped_value_loss = bool(use_clipped_value_loss)
        self.schedule = schedule
        self.desired_kl = desired_kl
        self.normalize_advantage_per_mini_batch = bool(normalize_advantage_per_mini_batch)
        self.use_mixed_precision = bool(use_mixed_precision) and self.device.type == "cuda"
        self.grad_reduce_bucket_mb = float(grad_reduce_bucket_mb)
        self.max_nonfinite_batches = int(max_nonfinite_batches)
        self.returns_method = returns_method
        self.sequence_mode = sequence_mode
        self.max_seq_len = max_seq_len
        self.iteration = 0
        self.nonfinite_batches = 0
        """Mini-batches skipped because of a non-finite loss or gradient (total)."""
        self._nonfinite_streak = 0

        self.extensions: list[Extension] = self._build_extensions(rnd_cfg, symmetry_cfg, dagger_cfg, amp_cfg)
        """AMP, RND, DAgger guidance, symmetry and any ``extensions`` given, in the order their hooks run."""
        self.extensions += list(extensions or ())
        for ext in self.extensions:
            ext.check(self)
        self._obs_keys = list(storage.observations.keys()) if isinstance(storage.observations, TensorDictBase) else None
        self._env_named = (
            self._obs_keys is not None
            and self.obs_groups is not None
            and set(self.obs_groups.stored()) <= set(self._obs_keys)
            and storage.reference_observations is None
            and storage.privileged_observations is None
        )
        """Whether the storage keeps the env's groups under their own names (see ``_stored_inputs``)."""
        self._logs = StepMeans()
        if self.is_multi_gpu:
            self.broadcast_parameters()

    def _build_extensions(self, rnd_cfg: Any, symmetry_cfg: Any, dagger_cfg: Any, amp_cfg: Any) -> list[Extension]:
        """The built-in extensions from their config sections (built in this order: it fixes their random init)."""
        rnd = RandomNetworkDistillation(device=self.device, **rnd_cfg) if rnd_cfg else None
        symmetry = Symmetry(**symmetry_cfg) if symmetry_cfg else None
        dagger = DaggerGuidance(device=self.device, **dagger_cfg) if dagger_cfg else None
        amp = None
        if amp_cfg:
            if "num_features" not in amp_cfg:
                raise ValueError("amp_cfg needs 'num_features' (construct_algorithm infers it from the extractor)")
            amp = AmpExtension(AMP(device=self.device, **amp_cfg), AmpPairExtractor(amp_cfg).obs_fn)
        built = [
            None if dagger is None else DaggerExtension(dagger),
            None if symmetry is None else SymmetryExtension(symmetry),
            amp,
            None if rnd is None else RndExtension(rnd),
        ]
        return [ext for ext in built if ext is not None]

    def _extension(self, name: str) -> Extension | None:
        return next((ext for ext in self.extensions if ext.name == name), None)

    @property
    def amp(self) -> AMP | None:
        """The AMP discriminator and its optimizer (None without ``amp_cfg``)."""
        ext = self._extension("amp")
        return None if ext is None else ext.amp  # type: ignore[attr-defined]

    @property
    def rnd(self) -> RandomNetworkDistillation | None:
        """The RND predictor and target (None without ``rnd_cfg``)."""
        ext = self._extension("rnd")
        return None if ext is None else ext.rnd  # type: ignore[attr-defined]

    @property
    def dagger(self) -> DaggerGuidance | None:
        """The DAgger teacher and imitation loss (None without ``dagger_cfg``)."""
        ext = self._extension("dagger")
        return None if ext is None else ext.dagger  # type: ignore[attr-defined]

    @property
    def symmetry(self) -> Symmetry | None:
        """The mirror functions (None without ``symmetry_cfg``)."""
        ext = self._extension("symmetry")
        return None if ext is None else ext.symmetry  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ observation groups
    def stored_observations(self, obs: TensorDictBase) -> Any:
        """The part of ``obs`` the storage keeps as ``observations`` (the actor's groups)."""
        return obs.select(*self._obs_keys) if self._obs_keys is not None else self._groups(obs).actor_obs(obs)

    def _groups(self, obs: TensorDictBase) -> ObsGroups:
        if self.obs_groups is None:
            self.obs_groups = ObsGroups.resolve(None, obs)
        return self.obs_groups

    # ------------------------------------------------------------------ collection
    @torch.no_grad()
    def act(self, obs: TensorDictBase) -> torch.Tensor:
        """Sample actions for ``obs`` and record everything the transition needs from before ``env.step``."""
        tr = self.transition
        if self.actor.is_recurrent or self.critic.is_recurrent:
            tr.hidden_states = (self.actor.get_hidden_state(), self.critic.get_hidden_state())
        groups = self._groups(obs)
        actor_obs, ref, ref_mask = groups.actor_inputs(obs)
        mean, std = self.actor.distribution(actor_obs, ref, ref_mask)
        actions = mean + std * torch.randn_like(mean)
        critic_obs, critic_ref, critic_mask = groups.critic_inputs(obs)
        tr.values = self.critic(critic_obs, critic_ref, critic_mask)
        tr.actions, tr.action_mean, tr.action_sigma = actions, mean, std
        tr.actions_log_prob = gaussian_log_prob(actions, mean, std)
        tr.observations = self.stored_observations(obs)
        tr.reference_observations, tr.reference_observations_mask = ref, ref_mask
        tr.critic_observations = critic_obs
        tr.critic_reference_observations, tr.critic_reference_observations_mask = critic_ref, critic_mask
        for ext in self.extensions:
            ext.on_act(self, obs)
        return actions

    @torch.no_grad()
    def process_env_step(
        self, obs: TensorDictBase, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]
    ) -> None:
        """Record the step's outcome; ``obs`` is the observation after the step (after any auto-reset)."""
        tr = self.transition
        rewards = rewards.reshape(-1).to(torch.float32).clone()
        dones = dones.reshape(-1).to(torch.bool)
        final = extras.get("final_observations")
        # The real next state: pre-reset observations for envs that just reset.
        next_obs = obs if final is None else _where_rows(dones, final, obs)
        for ext in self.extensions:
            rewards = ext.on_step(self, next_obs, rewards)
        time_outs = extras.get("time_outs")
        if time_outs is not None:
            tr.time_outs = time_outs.reshape(-1).to(torch.bool)
            if final is not None:
                tr.bootstrap_values = self.critic.peek(*self._groups(final).critic_inputs(final))
        tr.rewards, tr.dones = rewards, dones
        self.storage.add_transitions(tr)
        tr.clear()
        self.actor.reset(dones)
        self.critic.reset(dones)

    @torch.no_grad()
    def compute_returns(self, obs: TensorDictBase) -> None:
        """Returns and advantages for the stored rollout; ``obs`` is the observation after its last step."""
        last_values = self.critic.peek(*self._groups(obs).critic_inputs(obs))
        self.storage.compute_returns(
            last_values, self.gamma, self.lam, normalize_advantage=False, method=self.returns_method
        )
        if not self.normalize_advantage_per_mini_batch:
            adv = self.storage.advantages
            stats = torch.stack([adv.sum(), adv.square().sum(), torch.tensor(float(adv.numel()), device=adv.device)])
            if self.is_multi_gpu:  # normalize with the statistics of all ranks' data
                torch.distributed.all_reduce(stats)
            mean = stats[0] / stats[2]
            var = (stats[1] - stats[2] * mean.square()) / (stats[2] - 1).clamp(min=1)
            adv.copy_((adv - mean) / (var.clamp(min=0).sqrt() + 1e-8))

    def log_step(self, key: str, value: torch.Tensor) -> None:
        """Add one collection step's value of ``key`` to the per-step means ``collection_logs`` returns."""
        self._logs.add(key, value)

    def collection_logs(self) -> dict[str, float]:
        """Per-step means of collection-time quantities (style reward, intrinsic reward) since the last call."""
        return self._logs.pop()

    # ------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """Run the learning epochs over the stored rollout and return mean losses and diagnostics."""
        for ext in self.extensions:
            ext.before_update(self)
        sums: dict[str, torch.Tensor] = {}
        counted, lr_sum, last_kl, step = 0, 0.0, None, 0
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_mixed_precision)
        for batch in self._mini_batches():
            with autocast:
                terms, kl = self._policy_terms(batch)
                loss = self._policy_loss(terms)
                sides = [side for ext in self.extensions if (side := ext.side_loss(self, batch, step)) is not None]
                for side in sides:
                    terms.update(side.terms)
            kl_value, finite = self._backward(loss, kl, sides)
            step += 1
            if not finite:
                self._skip_nonfinite(terms)
                continue
            self._nonfinite_streak = 0
            if self.schedule == "adaptive" and self.desired_kl is not None:
                self._set_learning_rate(L.adapt_learning_rate(self.learning_rate, kl_value, self.desired_kl))
            lr_sum += self.learning_rate
            last_kl = kl_value
            self.optimizer.step()
            for side in sides:
                side.optimizer.step()
                if side.after_step is not None:
                    side.after_step()
            counted += 1
            terms["kl"] = kl
            for key, value in terms.items():
                sums[key] = sums.get(key, 0.0) + value.detach().float()
        if self.schedule == "adaptive_update" and self.desired_kl is not None and last_kl is not None:
            self._set_learning_rate(L.adapt_learning_rate(self.learning_rate, last_kl, self.desired_kl))
        self._update_normalizers()
        self.actor.head.check()
        self.iteration += 1
        self.storage.clear()
        return self._update_logs(sums, counted, lr_sum)

    def _mini_batches(self, epochs: int | None = None) -> Iterator[PPOBatch]:
        epochs = self.num_learning_epochs if epochs is None else epochs
        if self.actor.is_recurrent or self.critic.is_recurrent:
            return self.storage.recurrent_mini_batch_generator(
                self.num_mini_batches, epochs, self.sequence_mode, self.max_seq_len
            )
        return self.storage.mini_batch_generator(self.num_mini_batches, epochs)

    def _policy_terms(self, batch: PPOBatch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """PPO terms of one mini-batch, and the extensions' terms on the actor's output; returns (terms, KL)."""
        (obs, ref, ref_mask), (critic_obs, critic_ref, critic_mask) = self._stored_inputs(
            batch.observations, batch.reference, batch.critic_observations, batch.critic_reference
        )
        s = {
            "obs": obs,
            "ref": None if ref is None else (ref, ref_mask),
            "critic_obs": critic_obs,
            "critic_ref": None if critic_ref is None else (critic_ref, critic_mask),
            "actions": batch.actions,
            "advantages": batch.advantages,
            "returns": batch.returns,
            "target_values": batch.target_values,
            "old_log_prob": batch.old_actions_log_prob,
            "old_mu": batch.old_mu,
            "old_sigma": batch.old_sigma,
            "dagger_actions": batch.dagger_actions,
        }
        n, mask = s["obs"].shape[0], batch.loss_mask
        if self.normalize_advantage_per_mini_batch:
            adv, adv_mask = s["advantages"], None if mask is None else mask.unsqueeze(-1)
            mean = L.masked_mean(adv, adv_mask)
            s["advantages"] = (adv - mean) / (L.masked_mean((adv - mean).square(), adv_mask).sqrt() + 1e-8)
        for ext in self.extensions:
            s = ext.transform_batch(self, s)
        ref, ref_mask = s["ref"] if s["ref"] is not None else (None, None)
        critic_ref, critic_mask = s["critic_ref"] if s["critic_ref"] is not None else (None, None)
        hidden_a, hidden_c = batch.hidden_states if batch.hidden_states is not None else (None, None)
        mean, std = self.actor.distribution(s["obs"], ref, ref_mask, hidden_state=hidden_a)
        values = self.critic(s["critic_obs"], critic_ref, critic_mask, hidden_state=hidden_c)
        log_prob = gaussian_log_prob(s["actions"], mean, std)
        value_mask = None if mask is None else mask.unsqueeze(-1)
        terms = {
            "surrogate": L.clipped_surrogate(
                log_prob, s["old_log_prob"].squeeze(-1), s["advantages"].squeeze(-1), self.clip_param, mask
            ),
            "value": L.value_loss(
                values, s["target_values"], s["returns"], self.clip_param, self.use_clipped_value_loss, value_mask
            ),
            "entropy": L.masked_mean(gaussian_entropy(std[:n]), mask),
        }
        with torch.no_grad():
            kl = gaussian_kl(s["old_mu"][:n], s["old_sigma"][:n], mean[:n].detach(), std[:n].detach())
            kl = L.masked_mean(kl, mask)
        out = PolicyOutput(mean, std, n, mask)
        for ext in self.extensions:
            terms.update(ext.policy_terms(self, s, out))
        return terms, kl

    def _stored_inputs(self, obs: Any, ref: Any, critic_obs: Any, critic_ref: Any) -> tuple[tuple, tuple]:
        """The actor's and the critic's ``(obs, reference, mask)`` from stored data (a mini-batch, or the rollout).

        A storage built by ``construct_algorithm`` keeps the env's groups under their own names in ``observations``,
        and ``obs_groups`` picks each model's inputs from it, as from the env's TensorDict. A hand-built seed storage
        (``RolloutStorageMM(obs_shape, ref_obs_shape, privileged_obs_shape, ...)``) keeps them in its own buffers.
        """
        if self._env_named:
            actor, critic = self.obs_groups.actor_inputs(obs), self.obs_groups.critic_inputs(obs)
            return _with_mask(actor), _with_mask(critic)
        actor_obs = self.obs_groups.actor_obs(obs) if isinstance(obs, TensorDictBase) else obs
        if isinstance(critic_obs, TensorDictBase):
            critic_obs = self.obs_groups.actor_obs(critic_obs)
        ref_pair, critic_pair = ref or (None, None), critic_ref or (None, None)
        return (actor_obs, *ref_pair), (critic_obs, *critic_pair)

    def _policy_loss(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        loss = terms["surrogate"] + self.value_loss_coef * terms["value"] - self.entropy_coef * terms["entropy"]
        for ext in self.extensions:
            share = ext.policy_loss(self, terms)
            if share is not None:
                loss = loss + share
        return loss

    def _backward(self, loss: torch.Tensor, kl: torch.Tensor, sides: list[SideLoss]) -> tuple[float, bool]:
        """Gradients of the PPO loss and every side loss, reduced across ranks and clipped; returns the KL and
        whether the losses and the checked gradient norms are finite (the same on every rank)."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        params = [*self.actor.parameters(), *self.critic.parameters()]
        for side in sides:
            side.optimizer.zero_grad(set_to_none=True)
            side.loss.backward()
            params += side.params
        if self.is_multi_gpu:
            self.reduce_parameters(params)
        norms = [
            nn.utils.clip_grad_norm_(self.actor.parameters(), self.max_grad_norm),
            nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_grad_norm),
        ]
        norms += [nn.utils.clip_grad_norm_(side.params, float("inf")) for side in sides if side.checked]
        check = torch.stack([kl.float(), torch.stack([loss.float(), *norms]).isfinite().all().logical_not().float()])
        if self.is_multi_gpu:  # the same KL and skip decision on every rank
            torch.distributed.all_reduce(check)
            check[0] /= self.gpu_world_size
        kl_value, nonfinite = check.tolist()  # the one host sync of a mini-batch
        return kl_value, nonfinite == 0

    def _skip_nonfinite(self, terms: dict[str, torch.Tensor]) -> None:
        """Count a skipped mini-batch; raise ``TrainingDiverged`` after ``max_nonfinite_batches`` in a row."""
        self.nonfinite_batches += 1
        self._nonfinite_streak += 1
        if self._nonfinite_streak < self.max_nonfinite_batches:
            return
        bad = [k for k, v in terms.items() if isinstance(v, torch.Tensor) and not bool(torch.isfinite(v).all())]
        what = f"loss term(s) {bad}" if bad else "the gradient (all loss terms were finite)"
        raise TrainingDiverged(
            f"MMPPO: {self._nonfinite_streak} consecutive mini-batches had a non-finite loss or gradient; last: "
            f"{what}. Check observations and rewards for NaN/inf, or lower the learning rate"
        )

    def _set_learning_rate(self, rate: float) -> None:
        """The actor's learning rate (and the critic's, unless it has a rate of its own)."""
        self.learning_rate = rate
        for group in self.optimizer.param_groups[: 1 if self.critic_learning_rate else None]:
            group["lr"] = rate

    @torch.no_grad()
    def _update_normalizers(self) -> None:
        """Once per iteration, after the update, with the raw observations of the whole rollout."""
        st = self.storage

        def rows(x: Any) -> Any:
            return None if x is None else x.flatten(0, 1)

        ref = None if st.reference_observations is None else (st.reference_observations, st.reference_observations_mask)
        critic_ref = ref
        if st.privileged_reference_observations is not None:
            critic_ref = (st.privileged_reference_observations, st.privileged_reference_observations_mask)
        critic_obs = st.privileged_observations if st.privileged_observations is not None else st.observations
        actor_in, critic_in = self._stored_inputs(st.observations, ref, critic_obs, critic_ref)
        self.actor.update_normalization(*(rows(x) for x in actor_in))
        self.critic.update_normalization(*(rows(x) for x in critic_in))
        for ext in self.extensions:
            ext.after_update(self)

    def _update_logs(self, sums: dict[str, torch.Tensor], counted: int, lr_sum: float) -> dict[str, float]:
        out = {key: value / max(1, counted) for key, value in sums.items()}
        result = {k: float(v) for k, v in zip(out, torch.stack(list(out.values())).tolist())} if out else {}
        result["learning_rate"] = lr_sum / max(1, counted)  # the mean rate the update used (it changes per mini-batch)
        result["learning_rate_next"] = self.learning_rate
        result["nonfinite_batches"] = float(self.nonfinite_batches)
        result["nonfinite_obs_rows"] = float(nonfinite_rows(*self._modules()))
        return result

    @staticmethod
    def construct_algorithm(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device) -> MMPPO:
        """Build actor, critic, storage and MMPPO from ``cfg`` (see ``mimic_rl.algorithms.builder.build_mmppo``)."""
        return builder_for("MMPPO")(obs, env, cfg, device)


def _with_mask(inputs: tuple[torch.Tensor, Any, Any]) -> tuple[torch.Tensor, Any, Any]:
    """``(obs, reference, mask)`` with an all-True mask for a reference that has no mask group."""
    obs, ref, mask = inputs
    if ref is not None and mask is None:
        mask = torch.ones(ref.shape[: obs.dim() - 1], dtype=torch.bool, device=ref.device)
    return obs, ref, mask


def _where_rows(rows: torch.Tensor, a: TensorDictBase, b: TensorDictBase) -> TensorDictBase:
    """Per-env choice between two observation TensorDicts: ``a`` where ``rows`` is True, else ``b``."""
    out = b.clone(recurse=False)
    for key in a.keys():
        if key in b.keys():
            x, y = a[key], b[key]
            mask = rows.reshape(-1, *([1] * (x.dim() - 1)))
            out[key] = torch.where(mask, x, y)
    return out
