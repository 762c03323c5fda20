"""MMPPO: PPO with reference observations, AMP, RND, DAgger guidance, symmetry and multi-GPU training.

Keeps rsl_rl's ``PPO`` constructor (plus ``amp_cfg``, ``dagger_cfg``) and fixes GBC's MMPPO: the action std is in the
optimizer, the style reward enters the reward before the transition is stored, the RND predictor's optimizer steps,
the R1 penalty is taken on expert pairs only, the imitation loss shares the PPO backward, normalizers are updated
once per iteration with raw observations, and time-outs bootstrap from the critic (with references) on the real
next state.

Observations are a TensorDict with the groups of the package contract: ``policy``, ``critic``, ``reference``,
``reference_mask``, ``critic_reference``, ``critic_reference_mask``, and optionally ``amp``, ``rnd_state``,
``teacher``. The critic falls back to the actor's groups when its own are absent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.algorithms.amp import AMP
from mimic_rl.algorithms.dagger import DaggerGuidance
from mimic_rl.algorithms.distributed import MultiGPUConfig, all_reduce_gradients, broadcast_modules, placement
from mimic_rl.algorithms.rnd import RandomNetworkDistillation
from mimic_rl.algorithms.step_means import StepMeans
from mimic_rl.algorithms.symmetry import Symmetry
from mimic_rl.models.actor_critic import Actor, Critic
from mimic_rl.models.distributions import gaussian_log_prob
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.storage import RolloutStorageMM
from mimic_rl.storage.amp_pairs import AmpPairExtractor

__all__ = ["MMPPO"]

SCHEDULES = ("adaptive", "adaptive_update", "fixed")
"""``adaptive``: rsl_rl's rule after every mini-batch (the KL so far against the rollout's policy); ``adaptive_update``:
the same rule once per update, on the KL of the whole update (the last mini-batch's); ``fixed``: no change."""

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}


class MMPPO:
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

        self.rnd = RandomNetworkDistillation(device=self.device, **rnd_cfg) if rnd_cfg else None
        self.symmetry = Symmetry(**symmetry_cfg) if symmetry_cfg else None
        if self.symmetry is not None and (self.actor.is_recurrent or self.critic.is_recurrent):
            raise ValueError("symmetry augmentation and the mirror loss are not supported with recurrent models")
        self.dagger = DaggerGuidance(device=self.device, **dagger_cfg) if dagger_cfg else None
        if self.dagger is not None and storage.dagger_actions is None:
            raise ValueError(
                "dagger_cfg is set but the storage has no dagger_actions: build it apply_dagger_actions=True"
            )
        self.amp: AMP | None = None
        if amp_cfg:
            amp_kwargs = dict(amp_cfg)
            if "num_features" not in amp_kwargs:
                raise ValueError("amp_cfg needs 'num_features' (construct_algorithm infers it from the extractor)")
            if storage.amp_cfg is None:
                raise ValueError("amp_cfg is set but the storage has none: build it with the same amp_cfg")
            self.amp = AMP(device=self.device, **amp_kwargs)
            self._amp_features = AmpPairExtractor(amp_cfg).obs_fn
        self._amp_prev: torch.Tensor | None = None
        self._obs_keys = list(storage.observations.keys()) if isinstance(storage.observations, TensorDictBase) else None
        self._logs = StepMeans()
        if self.is_multi_gpu:
            self.broadcast_parameters()

    # ------------------------------------------------------------------ observation groups
    def _stored_obs(self, obs: TensorDictBase) -> Any:
        return obs.select(*self._obs_keys) if self._obs_keys is not None else self._groups(obs).actor_obs(obs)

    def _groups(self, obs: TensorDictBase) -> ObsGroups:
        if self.obs_groups is None:
            self.obs_groups = ObsGroups.resolve(None, obs)
        return self.obs_groups

    def _actor_inputs(self, obs: TensorDictBase) -> tuple[torch.Tensor, Any, Any]:
        return self._groups(obs).actor_inputs(obs)

    def _critic_inputs(self, obs: TensorDictBase) -> tuple[torch.Tensor, Any, Any]:
        return self._groups(obs).critic_inputs(obs)

    # ------------------------------------------------------------------ collection
    @torch.no_grad()
    def act(self, obs: TensorDictBase) -> torch.Tensor:
        """Sample actions for ``obs`` and record everything the transition needs from before ``env.step``."""
        tr = self.transition
        if self.actor.is_recurrent or self.critic.is_recurrent:
            tr.hidden_states = (self.actor.get_hidden_state(), self.critic.get_hidden_state())
        actor_obs, ref, ref_mask = self._actor_inputs(obs)
        mean, std = self.actor.distribution(actor_obs, ref, ref_mask)
        actions = mean + std * torch.randn_like(mean)
        critic_obs, critic_ref, critic_mask = self._critic_inputs(obs)
        tr.values = self.critic(critic_obs, critic_ref, critic_mask)
        tr.actions, tr.action_mean, tr.action_sigma = actions, mean, std
        tr.actions_log_prob = gaussian_log_prob(actions, mean, std)
        tr.observations = self._stored_obs(obs)
        tr.reference_observations, tr.reference_observations_mask = ref, ref_mask
        tr.critic_observations = critic_obs
        tr.critic_reference_observations, tr.critic_reference_observations_mask = critic_ref, critic_mask
        if self.dagger is not None:
            tr.dagger_actions = self.dagger.label(obs)
        if self.amp is not None:
            self._amp_prev = self._amp_features(tr.observations)
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
        if self.amp is not None:
            style = self.amp.style_reward(self._amp_prev, self._amp_features(self._stored_obs(next_obs)))
            self._log("amp_style_reward", style.mean())
            self._log("task_reward", rewards.mean())
            rewards = self.amp.mix(rewards, style)
        if self.rnd is not None:
            rnd_state = next_obs["rnd_state"] if "rnd_state" in next_obs.keys() else self._actor_inputs(next_obs)[0]
            intrinsic = self.rnd.intrinsic_reward(rnd_state, self.iteration)
            self._log("rnd_intrinsic_reward", intrinsic.mean())
            rewards = rewards + intrinsic
            tr.rnd_state = rnd_state
        time_outs = extras.get("time_outs")
        if time_outs is not None:
            tr.time_outs = time_outs.reshape(-1).to(torch.bool)
            if final is not None:
                tr.bootstrap_values = self.critic.peek(*self._critic_inputs(final))
        tr.rewards, tr.dones = rewards, dones
        self.storage.add_transitions(tr)
        tr.clear()
        self.actor.reset(dones)
        self.critic.reset(dones)

    @torch.no_grad()
    def compute_returns(self, obs: TensorDictBase) -> None:
        """Returns and advantages for the stored rollout; ``obs`` is the observation after its last step."""
        last_values = self.critic.peek(*self._critic_inputs(obs))
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

    def _log(self, key: str, value: torch.Tensor) -> None:
        self._logs.add(key, value)

    def collection_logs(self) -> dict[str, float]:
        """Per-step means of collection-time quantities (style reward, intrinsic reward) since the last call."""
        return self._logs.pop()

    # ------------------------------------------------------------------ update
    def update(self) -> dict[str, float]:
        """Run the learning epochs over the stored rollout and return mean losses and diagnostics."""
        from mimic_rl.algorithms.ppo_update import run_update  # the update loop lives beside, to keep files small

        return run_update(self)

    # ------------------------------------------------------------------ modes, checkpoints, distributed
    def _modules(self) -> list[nn.Module]:
        modules: list[nn.Module] = [self.actor, self.critic]
        if self.rnd is not None:
            modules.append(self.rnd)
        if self.amp is not None:
            modules.append(self.amp.discriminator)
        return modules

    def train_mode(self) -> None:
        """Training mode for every learnable model (a DAgger teacher stays in eval)."""
        for m in self._modules():
            m.train()

    def eval_mode(self) -> None:
        """Evaluation mode for every model."""
        for m in self._modules():
            m.eval()

    def save(self) -> dict[str, Any]:
        """Everything needed to resume: models, optimizers, normalizers (in the state dicts) and counters."""
        state: dict[str, Any] = {
            "actor_state_dict": self.actor.state_dict(),
            "critic_state_dict": self.critic.state_dict(),
            "optimizer_state_dict": self.optimizer.state_dict(),
            "actor_cfg": getattr(self.actor, "config", None),
            "critic_cfg": getattr(self.critic, "config", None),
            "learning_rate": self.learning_rate,
            "algorithm_iteration": self.iteration,
            "nonfinite_batches": self.nonfinite_batches,
        }
        if self.obs_groups is not None:
            state["obs_groups"] = self.obs_groups.to_dict()  # the resolved groups the actor and critic read
        if self.rnd is not None:
            state["rnd_state_dict"] = self.rnd.state_dict()
            state["rnd_optimizer_state_dict"] = self.rnd.optimizer.state_dict()
        if self.amp is not None:
            state["amp_state_dict"] = self.amp.state_dict()
        return state

    def load(self, loaded_dict: dict[str, Any], load_cfg: dict[str, bool] | None = None, strict: bool = True) -> bool:
        """Load the parts named in ``load_cfg`` (default all); returns whether the iteration should be restored."""
        load_cfg = load_cfg or {
            "actor": True,
            "critic": True,
            "optimizer": True,
            "iteration": True,
            "rnd": True,
            "amp": True,
        }
        unknown = set(load_cfg) - {"actor", "critic", "optimizer", "iteration", "rnd", "amp"}
        if unknown:
            raise ValueError(f"load_cfg: unknown key(s) {sorted(unknown)}")
        if load_cfg.get("actor"):
            self.actor.load_state_dict(loaded_dict["actor_state_dict"], strict=strict)
        if load_cfg.get("critic"):
            self.critic.load_state_dict(loaded_dict["critic_state_dict"], strict=strict)
        if load_cfg.get("optimizer"):
            self.optimizer.load_state_dict(_two_groups(loaded_dict["optimizer_state_dict"], self.optimizer))
            self.learning_rate = float(loaded_dict.get("learning_rate", self.optimizer.param_groups[0]["lr"]))
        if load_cfg.get("rnd") and self.rnd is not None and "rnd_state_dict" in loaded_dict:
            self.rnd.load_state_dict(loaded_dict["rnd_state_dict"], strict=strict)
            self.rnd.optimizer.load_state_dict(loaded_dict["rnd_optimizer_state_dict"])
        if load_cfg.get("amp") and self.amp is not None and "amp_state_dict" in loaded_dict:
            self.amp.load_state_dict(loaded_dict["amp_state_dict"], strict=strict)
        if load_cfg.get("iteration"):
            self.iteration = int(loaded_dict.get("algorithm_iteration", 0))
            self.nonfinite_batches = int(loaded_dict.get("nonfinite_batches", 0))
        return bool(load_cfg.get("iteration", False))

    def runtime_state_dict(self) -> dict[str, Any]:
        """What ``save()`` leaves out but an exact resume needs: the storage's carry row (AMP pairs across rollouts),
        the AMP replay buffer and the recurrent models' collection-time hidden states."""
        state: dict[str, Any] = {"storage_carry": {k: v[0].clone() for k, v in self.storage._store.stores.items()}}
        if self.amp is not None:
            state["amp_replay"] = (self.amp._replay.clone(), self.amp._replay_count, self.amp._replay_next)
        for name, model in (("actor", self.actor), ("critic", self.critic)):
            if model.memory is not None:
                state[f"{name}_hidden"] = model.memory.hidden
        return state

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``runtime_state_dict()``."""
        for key, row in state["storage_carry"].items():
            self.storage._store.stores[key][0].copy_(row)
        if self.amp is not None and "amp_replay" in state:
            replay, count, nxt = state["amp_replay"]
            self.amp._replay.copy_(replay)
            self.amp._replay_count, self.amp._replay_next = int(count), int(nxt)
        for name, model in (("actor", self.actor), ("critic", self.critic)):
            if model.memory is not None:
                model.memory.hidden = state.get(f"{name}_hidden")

    def get_policy(self) -> Actor:
        """The actor (its ``forward`` is the deterministic policy)."""
        return self.actor

    def broadcast_parameters(self) -> None:
        """Copy all model parameters and buffers from rank 0 to every rank."""
        modules: list[nn.Module] = self._modules()
        broadcast_modules(modules)

    def reduce_parameters(self, params: Iterable[nn.Parameter] | None = None) -> None:
        """Average gradients across ranks in bounded buckets (default: actor, critic, RND and discriminator)."""
        if params is None:
            params = [p for m in self._modules() for p in m.parameters() if p.requires_grad]
        all_reduce_gradients(params, self.gpu_world_size, self.grad_reduce_bucket_mb)

    @staticmethod
    def construct_algorithm(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device) -> MMPPO:
        """Build actor, critic, storage and MMPPO from ``cfg`` (see ``mimic_rl.algorithms.builder``)."""
        from mimic_rl.algorithms.builder import build_mmppo

        return build_mmppo(obs, env, cfg, device)


def _two_groups(state: dict[str, Any], optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """An optimizer state of one parameter group (actor and critic together, as rsl_rl and mimic_rl 0.1 save it)
    split into this optimizer's actor and critic groups; any other state unchanged."""
    groups = state["param_groups"]
    if len(groups) != 1 or len(optimizer.param_groups) != 2:
        return state
    n_actor = len(optimizer.param_groups[0]["params"])
    ids = groups[0]["params"]
    actor = {**groups[0], "params": ids[:n_actor]}
    critic = {**groups[0], "params": ids[n_actor:], "lr": optimizer.param_groups[1]["lr"]}
    return {"state": state["state"], "param_groups": [actor, critic]}


def _where_rows(rows: torch.Tensor, a: TensorDictBase, b: TensorDictBase) -> TensorDictBase:
    """Per-env choice between two observation TensorDicts: ``a`` where ``rows`` is True, else ``b``."""
    out = b.clone(recurse=False)
    for key in a.keys():
        if key in b.keys():
            x, y = a[key], b[key]
            mask = rows.reshape(-1, *([1] * (x.dim() - 1)))
            out[key] = torch.where(mask, x, y)
    return out
