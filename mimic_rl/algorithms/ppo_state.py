"""MMPPO's modes, checkpoints and multi-GPU parameter exchange (a base class, to keep ``ppo.py`` small)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from mimic_rl.algorithms.distributed import all_reduce_gradients, broadcast_modules
from mimic_rl.algorithms.extensions import Extension, registered_extension_names

if TYPE_CHECKING:
    from mimic_rl.models.actor_critic import Actor, Critic
    from mimic_rl.models.obs_groups import ObsGroups
    from mimic_rl.storage import PolicyRollout

__all__ = ["AlgorithmState"]

_PARTS = ("actor", "critic", "optimizer", "iteration")


class AlgorithmState:
    """Train/eval modes, ``save``/``load``, the runtime state of an exact resume, and gradient exchange across ranks
    for an actor-critic algorithm with extensions (``MMPPO``)."""

    actor: Actor
    critic: Critic
    rollout: PolicyRollout
    optimizer: torch.optim.Optimizer
    extensions: list[Extension]
    obs_groups: ObsGroups | None
    learning_rate: float
    iteration: int
    env_steps: int
    """Env steps of the rollouts updated on so far, all ranks together (the clock of ``unit: env_steps`` schedules)."""
    nonfinite_batches: int
    gpu_world_size: int
    grad_reduce_bucket_mb: float

    @property
    def env_steps_per_update(self) -> int:
        """Env steps one update trains on: the rollout's envs x steps, times the ranks."""
        return self.rollout.num_envs * self.rollout.num_steps * self.gpu_world_size

    def _modules(self) -> list[nn.Module]:
        return [self.actor, self.critic, *(m for ext in self.extensions for m in ext.modules())]

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
            "algorithm_env_steps": self.env_steps,
            "nonfinite_batches": self.nonfinite_batches,
        }
        if self.obs_groups is not None:
            state["obs_groups"] = self.obs_groups.to_dict()  # the resolved groups the actor and critic read
        for ext in self.extensions:
            state.update(ext.state_dict())
        return state

    def load(self, loaded_dict: dict[str, Any], load_cfg: dict[str, bool] | None = None, strict: bool = True) -> bool:
        """Load the parts named in ``load_cfg`` (default all); returns whether the iteration should be restored."""
        names = {*_PARTS, *registered_extension_names(), *(ext.name for ext in self.extensions)}
        load_cfg = load_cfg or dict.fromkeys(names, True)
        unknown = set(load_cfg) - names
        if unknown:
            raise ValueError(f"load_cfg: unknown key(s) {sorted(unknown)}")
        if load_cfg.get("actor"):
            self.actor.load_state_dict(loaded_dict["actor_state_dict"], strict=strict)
        if load_cfg.get("critic"):
            self.critic.load_state_dict(loaded_dict["critic_state_dict"], strict=strict)
        if load_cfg.get("optimizer"):
            self.optimizer.load_state_dict(_two_groups(loaded_dict["optimizer_state_dict"], self.optimizer))
            self.learning_rate = float(loaded_dict.get("learning_rate", self.optimizer.param_groups[0]["lr"]))
        for ext in self.extensions:
            if load_cfg.get(ext.name):
                ext.load_state_dict(loaded_dict, strict=strict)
        if load_cfg.get("iteration"):
            self.iteration = int(loaded_dict.get("algorithm_iteration", 0))
            # a checkpoint from before env steps were counted here: as many per iteration as this run collects
            self.env_steps = int(loaded_dict.get("algorithm_env_steps", self.iteration * self.env_steps_per_update))
            self.nonfinite_batches = int(loaded_dict.get("nonfinite_batches", 0))
        return bool(load_cfg.get("iteration", False))

    def runtime_state_dict(self) -> dict[str, Any]:
        """What ``save()`` leaves out but an exact resume needs: the storage's carry row (AMP pairs across rollouts),
        the AMP replay buffer and the recurrent models' collection-time hidden states."""
        state: dict[str, Any] = {"storage_carry": self.rollout.carry_state()}
        for ext in self.extensions:
            state.update(ext.runtime_state_dict())
        for name, model in (("actor", self.actor), ("critic", self.critic)):
            if model.memory is not None:
                state[f"{name}_hidden"] = model.memory.hidden
        return state

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``runtime_state_dict()``."""
        if "storage_carry" in state:  # absent: the rollout starts with a fresh carry row
            self.rollout.load_carry_state(state["storage_carry"])
        for ext in self.extensions:
            ext.load_runtime_state_dict(state)
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
