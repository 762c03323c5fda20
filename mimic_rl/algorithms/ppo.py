"""MMPPO: PPO with reference observations, AMP, RND, DAgger guidance, symmetry and multi-GPU training.

Keeps rsl_rl's ``PPO`` constructor (its ``rnd_cfg`` and ``symmetry_cfg``, like every registered extension's config
section, are extension keywords) and fixes GBC's MMPPO: the action std is in the optimizer, the style reward enters
the reward before the transition is stored, the RND predictor's optimizer steps, the R1 penalty is taken on expert
pairs only, the imitation loss shares the PPO backward, normalizers are updated once per iteration with raw
observations, and time-outs bootstrap from the critic (with references) on the real next state.

Observations are the env's TensorDict of named groups; ``obs_groups`` (``ObsGroups``) says which groups the actor
and the critic read. The storage (a ``PolicyRollout``) keeps those groups under the env's names in its ``obs``
TensorDict, so the same mapping picks the models' inputs at collection, in every mini-batch and for the normalizers,
and every other field keeps one name from collection to loss (``actions``, ``values``, ``actions_log_prob``,
``action_mean``, ``action_std``, ``returns``, ``advantages``). MMPPO itself is PPO: AMP, RND, DAgger guidance and
symmetry are ``Extension`` objects whose hooks it calls (``extensions.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms import ppo_losses as L
from mimic_rl.algorithms.distributed import MultiGPUConfig, placement
from mimic_rl.algorithms.extensions import (
    BuildContext,
    Extension,
    PolicyOutput,
    SideLoss,
    build_extensions,
    extension_config_keys,
    registered_extension_names,
)
from mimic_rl.algorithms.optimizers import OPTIMIZERS, make_optimizer
from mimic_rl.algorithms.ppo_state import AlgorithmState
from mimic_rl.algorithms.registry import builder_for, register_algorithm
from mimic_rl.algorithms.schedules import Schedule, entropy_schedule
from mimic_rl.algorithms.step_means import StepMeans, TermMeans
from mimic_rl.errors import TrainingDiverged
from mimic_rl.models.actor_critic import Actor, Critic
from mimic_rl.models.distributions import gaussian_entropy, gaussian_kl, gaussian_log_prob
from mimic_rl.models.normalization import nonfinite_rows
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.storage import PolicyRollout, RolloutStorageMM, rollout_of

__all__ = ["MMPPO"]

STREAM_FIELDS = (
    "actions",
    "advantages",
    "returns",
    "values",
    "actions_log_prob",
    "action_mean",
    "action_std",
)
"""The stored PPO fields a mini-batch's streams carry under their own names, with the extensions' fields (e.g.
``dagger_actions``). ``Extension.transform_batch`` sees them next to the model inputs ``obs``, ``reference``,
``critic_obs`` and ``critic_reference`` (a reference stream is a ``(reference, reference_mask)`` pair, or None)."""

SCHEDULES = ("adaptive", "adaptive_update", "fixed")
"""``adaptive``: rsl_rl's rule after every mini-batch (the KL so far against the rollout's policy); ``adaptive_update``:
the same rule once per update, on the KL of the whole update (the last mini-batch's); ``fixed``: no change."""


_INTS = ("num_learning_epochs", "num_mini_batches", "max_nonfinite_batches")
_FLOATS = ("clip_param", "gamma", "lam", "value_loss_coef", "max_grad_norm", "grad_reduce_bucket_mb")
_BOOLS = ("use_clipped_value_loss", "normalize_advantage_per_mini_batch")
_AS_GIVEN = ("schedule", "desired_kl", "returns_method", "sequence_mode", "max_seq_len")


@register_algorithm("MMPPO")
class MMPPO(AlgorithmState):
    """Proximal policy optimization for motion imitation (see the module docstring).

    The keywords ``<name>_cfg`` (``amp_cfg``, ``rnd_cfg``, ``symmetry_cfg``, ``dagger_cfg``, or any registered
    extension's ``config_key``) build extensions from their config sections; ``extensions`` adds built ones. Each is
    reached as ``alg.<its name>`` (``alg.amp``; None when a registered one is off).
    """

    num_learning_epochs: int
    num_mini_batches: int
    max_nonfinite_batches: int
    clip_param: float
    gamma: float
    lam: float
    value_loss_coef: float
    entropy_coef: float
    """The entropy bonus's coefficient in the current update (``entropy_schedule`` on its clock)."""
    entropy_schedule: Schedule
    max_grad_norm: float
    grad_reduce_bucket_mb: float
    use_clipped_value_loss: bool
    normalize_advantage_per_mini_batch: bool
    schedule: str
    desired_kl: float | None
    returns_method: str
    sequence_mode: str
    max_seq_len: int | None

    def __init__(
        self,
        actor: Actor,
        critic: Critic,
        storage: PolicyRollout | RolloutStorageMM,
        num_learning_epochs: int = 5,
        num_mini_batches: int = 4,
        clip_param: float = 0.2,
        gamma: float = 0.99,
        lam: float = 0.95,
        value_loss_coef: float = 1.0,
        entropy_coef: float | dict[str, Any] = 0.01,
        learning_rate: float = 1e-3,
        max_grad_norm: float = 1.0,
        optimizer: str = "adam",
        use_clipped_value_loss: bool = True,
        schedule: str = "adaptive",
        desired_kl: float | None = 0.01,
        normalize_advantage_per_mini_batch: bool = False,
        device: str | torch.device = "cpu",
        multi_gpu_cfg: dict[str, int] | MultiGPUConfig | None = None,
        use_mixed_precision: bool = False,
        grad_reduce_bucket_mb: float = 25.0,
        max_nonfinite_batches: int = 3,
        returns_method: str = "gae",
        sequence_mode: str = "trajectory",
        max_seq_len: int | None = None,
        critic_learning_rate: float | None = None,
        obs_groups: ObsGroups | None = None,
        extensions: Sequence[Extension] | None = None,
        **extension_cfgs: Any,
    ) -> None:
        _check_choices(schedule, optimizer, extension_cfgs)
        settings = locals()
        for names, kind in ((_INTS, int), (_FLOATS, float), (_BOOLS, bool), (_AS_GIVEN, None)):
            for name in names:
                setattr(self, name, settings[name] if kind is None else kind(settings[name]))
        self.entropy_schedule = entropy_schedule(entropy_coef)
        self.device = torch.device(device)
        self.multi_gpu, self.is_multi_gpu, self.gpu_global_rank, self.gpu_world_size = placement(multi_gpu_cfg)
        self.actor, self.critic = actor.to(self.device), critic.to(self.device)
        self.storage = storage
        """The storage given (rsl_rl's attribute): a ``PolicyRollout``, or a seed ``RolloutStorageMM``."""
        self.rollout = rollout_of(storage, "rl", "MMPPO")
        """The ``PolicyRollout`` MMPPO stores into and reads mini-batches from (the seed storage's ``core``)."""
        self.obs_groups = obs_groups
        """Which observation groups the actor and critic read (resolved from the first observations when None)."""
        self.transition: dict[str, Any] = {}
        """The step being collected, under the rollout's field names (``act`` and the extensions fill it)."""
        self._hidden: Any = None
        self.learning_rate = float(learning_rate)
        self.critic_learning_rate = None if critic_learning_rate is None else float(critic_learning_rate)
        self.optimizer = self._make_optimizer(optimizer)
        self.use_mixed_precision = bool(use_mixed_precision) and self.device.type == "cuda"
        self.iteration, self.env_steps, self.nonfinite_batches, self._nonfinite_streak = 0, 0, 0, 0
        self.entropy_coef = self.entropy_schedule.at(self.iteration, self.env_steps)
        self._logs = StepMeans()
        self._attach_extensions(extension_cfgs, extensions)
        if self.is_multi_gpu:
            self.broadcast_parameters()

    def _make_optimizer(self, name: str) -> torch.optim.Optimizer:
        """One optimizer, with a parameter group for the actor and one for the critic (its own rate, if given)."""
        groups = [
            {"params": list(self.actor.parameters()), "lr": self.learning_rate},
            {"params": list(self.critic.parameters()), "lr": self.critic_learning_rate or self.learning_rate},
        ]
        return make_optimizer(name, groups, self.learning_rate, self.device)

    def _attach_extensions(self, cfgs: dict[str, Any], given: Sequence[Extension] | None) -> None:
        """The extensions built from their config sections (registered ones, in ``hook_rank`` order), then those
        given; each checks that this algorithm can host it."""
        ctx = BuildContext(self.device, self.rollout, self.obs_groups)
        self.extensions: list[Extension] = [*build_extensions(cfgs, ctx), *(given or ())]
        """The extensions, in the order their hooks run."""
        for ext in self.extensions:
            ext.check(self)
        self._obs_keys = list(self.rollout.get()["obs"].keys())
        """The observation groups the rollout keeps (under the env's names)."""
        self._extension_fields = tuple(f for f in self.rollout.batch_keys if f != "obs" and f not in STREAM_FIELDS)
        """The rollout's fields beyond PPO's (``dagger_actions``, ``rnd_state``): streams of every mini-batch too."""
        self._previous_keys = tuple(dict.fromkeys(k for ext in self.extensions for k in ext.previous_keys))
        """Fields the extensions read at step t - 1 of the same env in every mini-batch (AMP's pairs)."""

    def __getattr__(self, name: str) -> Any:
        """``alg.<extension name>``: the extension of that name (None for a registered extension that is off)."""
        for ext in self.__dict__.get("extensions", ()):
            if ext.name == name:
                return ext
        if name in registered_extension_names():
            return None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def mirror(self, stream: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """The first mirror function of ``stream`` an extension gives (symmetry's), or None."""
        return next((fn for ext in self.extensions if (fn := ext.mirror(stream)) is not None), None)

    # ------------------------------------------------------------------ observation groups
    def stored_observations(self, obs: TensorDictBase) -> TensorDictBase:
        """The groups of ``obs`` the storage keeps (what the actor and the critic read, and AMP's ``amp`` group)."""
        try:
            return obs.select(*self._obs_keys)
        except KeyError:
            raise KeyError(
                f"MMPPO: the storage keeps the observation groups {self._obs_keys}, the env's observations have "
                f"{list(obs.keys())}; build the storage from this env's observations (construct_algorithm)"
            ) from None

    def _groups(self, obs: TensorDictBase) -> ObsGroups:
        if self.obs_groups is None:
            self.obs_groups = ObsGroups.resolve(None, obs)
        return self.obs_groups

    # ------------------------------------------------------------------ collection
    @torch.no_grad()
    def act(self, obs: TensorDictBase) -> torch.Tensor:
        """Sample actions for ``obs`` and record everything the step needs from before ``env.step``."""
        tr = self.transition
        if self.actor.is_recurrent or self.critic.is_recurrent:
            self._hidden = (self.actor.get_hidden_state(), self.critic.get_hidden_state())
        groups = self._groups(obs)
        mean, std = self.actor.distribution(*groups.actor_inputs(obs))
        actions = mean + std * torch.randn_like(mean)
        tr["values"] = self.critic(*groups.critic_inputs(obs))
        tr["actions"], tr["action_mean"], tr["action_std"] = actions, mean, std
        tr["actions_log_prob"] = gaussian_log_prob(actions, mean, std)
        tr["obs"] = self.stored_observations(obs)
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
            tr["time_outs"] = time_outs.reshape(-1).to(torch.bool)
            if final is not None:  # else the storage falls back to V(s_t), with a warning
                tr["bootstrap_values"] = self.critic.peek(*self._groups(final).critic_inputs(final))
        tr["rewards"], tr["dones"] = rewards, dones
        self.rollout.add_step(tr, self._hidden)
        self.transition, self._hidden = {}, None
        self.actor.reset(dones)
        self.critic.reset(dones)

    @torch.no_grad()
    def compute_returns(self, obs: TensorDictBase) -> None:
        """Returns and advantages for the stored rollout; ``obs`` is the observation after its last step."""
        last_values = self.critic.peek(*self._groups(obs).critic_inputs(obs))
        self.rollout.compute_returns(
            last_values, self.gamma, self.lam, normalize_advantage=False, method=self.returns_method
        )
        if not self.normalize_advantage_per_mini_batch:
            adv = self.rollout.get()["advantages"]
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
        self.entropy_coef = self.entropy_schedule.at(self.iteration, self.env_steps)  # both restored by a resume
        means = TermMeans()
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
            means.add(terms)
        if self.schedule == "adaptive_update" and self.desired_kl is not None and last_kl is not None:
            self._set_learning_rate(L.adapt_learning_rate(self.learning_rate, last_kl, self.desired_kl))
        self._update_normalizers()
        self.actor.head.check()
        self.iteration += 1
        self.env_steps += self.env_steps_per_update
        self.rollout.clear()
        return self._update_logs(means, counted, lr_sum)

    def _mini_batches(self, epochs: int | None = None) -> Iterator[dict[str, Any]]:
        """The update's mini-batches (``PolicyRollout.mini_batches``): flat, or padded sequences for recurrent
        models, with the previous step of the fields the extensions ask for. Flat batches reuse their buffers: each
        is done with (forward, backward, step) before the next is gathered, and what outlives it is copied."""
        recurrent = self.actor.is_recurrent or self.critic.is_recurrent
        return self.rollout.mini_batches(
            self.num_mini_batches,
            self.num_learning_epochs if epochs is None else epochs,
            previous_keys=self._previous_keys or None,
            sequence_mode=self.sequence_mode if recurrent else None,
            max_seq_len=self.max_seq_len,
            reuse=True,
        )

    def _policy_terms(self, batch: dict[str, Any]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """PPO terms of one mini-batch, and the extensions' terms on the actor's output; returns (terms, KL)."""
        actor_in, critic_in = self._model_inputs(batch["obs"])
        s = {
            "obs": actor_in[0],
            "reference": None if actor_in[1] is None else actor_in[1:],
            "critic_obs": critic_in[0],
            "critic_reference": None if critic_in[1] is None else critic_in[1:],
            **{key: batch.get(key) for key in (*STREAM_FIELDS, *self._extension_fields)},
        }
        n, mask = s["obs"].shape[0], batch.get("loss_mask")
        if self.normalize_advantage_per_mini_batch:
            adv, adv_mask = s["advantages"], None if mask is None else mask.unsqueeze(-1)
            mean = L.masked_mean(adv, adv_mask)
            s["advantages"] = (adv - mean) / (L.masked_mean((adv - mean).square(), adv_mask).sqrt() + 1e-8)
        for ext in self.extensions:
            s = ext.transform_batch(self, s)
        reference, reference_mask = s["reference"] or (None, None)
        critic_reference, critic_reference_mask = s["critic_reference"] or (None, None)
        hidden_a, hidden_c = batch["hidden_states"]
        mean, std = self.actor.distribution(s["obs"], reference, reference_mask, hidden_state=hidden_a)
        values = self.critic(s["critic_obs"], critic_reference, critic_reference_mask, hidden_state=hidden_c)
        log_prob = gaussian_log_prob(s["actions"], mean, std)
        value_mask = None if mask is None else mask.unsqueeze(-1)
        terms = {
            "surrogate": L.clipped_surrogate(
                log_prob, s["actions_log_prob"].squeeze(-1), s["advantages"].squeeze(-1), self.clip_param, mask
            ),
            "value": L.value_loss(
                values, s["values"], s["returns"], self.clip_param, self.use_clipped_value_loss, value_mask
            ),
            "entropy": L.masked_mean(gaussian_entropy(std[:n]), mask),
        }
        with torch.no_grad():
            kl = gaussian_kl(s["action_mean"][:n], s["action_std"][:n], mean[:n].detach(), std[:n].detach())
            kl = L.masked_mean(kl, mask)
        out = PolicyOutput(mean, std, n, mask)
        for ext in self.extensions:
            terms.update(ext.policy_terms(self, s, out))
        return terms, kl

    def _model_inputs(self, obs: TensorDictBase) -> tuple[tuple, tuple]:
        """The actor's and the critic's ``(obs, reference, mask)`` from stored observations (a mini-batch's, or the
        rollout's): ``obs_groups`` picks them as from the env's TensorDict."""
        return _with_mask(self.obs_groups.actor_inputs(obs)), _with_mask(self.obs_groups.critic_inputs(obs))

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
        for side in sides:  # checked, not clipped: the norm of each gradient (finite together iff the total is)
            grads = [p.grad for p in side.params if p.grad is not None] if side.checked else []
            if grads:
                norms.extend(torch._foreach_norm(grads))  # one kernel; get_total_norm adds a stack and a norm
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

        def rows(x: Any) -> Any:
            return None if x is None else x.flatten(0, 1)

        actor_in, critic_in = self._model_inputs(self.rollout.get()["obs"])
        self.actor.update_normalization(*(rows(x) for x in actor_in))
        self.critic.update_normalization(*(rows(x) for x in critic_in))
        for ext in self.extensions:
            ext.after_update(self)

    def _update_logs(self, means: TermMeans, counted: int, lr_sum: float) -> dict[str, float]:
        result = means.means()
        result["learning_rate"] = lr_sum / max(1, counted)  # the mean rate the update used (it changes per mini-batch)
        result["learning_rate_next"] = self.learning_rate
        result["entropy_coef"] = self.entropy_coef
        result["nonfinite_batches"] = float(self.nonfinite_batches)
        result["nonfinite_obs_rows"] = float(nonfinite_rows(*self._modules()))
        return result

    @staticmethod
    def construct_algorithm(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device) -> MMPPO:
        """Build actor, critic, storage and MMPPO from ``cfg`` (see ``mimic_rl.algorithms.builder.build_mmppo``)."""
        return builder_for("MMPPO")(obs, env, cfg, device)


def _check_choices(schedule: str, optimizer: str, extension_cfgs: dict[str, Any]) -> None:
    """``ValueError`` naming an unknown schedule, optimizer or keyword (the known extension config keys)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZERS)}, got {optimizer!r}")
    unknown = sorted(set(extension_cfgs) - set(extension_config_keys()))
    if unknown:
        raise TypeError(
            f"MMPPO got an unexpected keyword argument {unknown[0]!r}; extension sections are {extension_config_keys()}"
        )


def _with_mask(inputs: tuple[torch.Tensor, Any, Any]) -> tuple[torch.Tensor, Any, Any]:
    """``(obs, reference, mask)`` with an all-True mask for a reference that has no mask group."""
    obs, reference, mask = inputs
    if reference is not None and mask is None:
        mask = torch.ones(reference.shape[: obs.dim() - 1], dtype=torch.bool, device=reference.device)
    return obs, reference, mask


def _where_rows(rows: torch.Tensor, a: TensorDictBase, b: TensorDictBase) -> TensorDictBase:
    """Per-env choice between two observation TensorDicts: ``a`` where ``rows`` is True, else ``b``."""
    out = b.clone(recurse=False)
    for key in a.keys():
        if key in b.keys():
            x, y = a[key], b[key]
            mask = rows.reshape(-1, *([1] * (x.dim() - 1)))
            out[key] = torch.where(mask, x, y)
    return out
