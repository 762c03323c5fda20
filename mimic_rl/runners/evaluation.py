"""Per-clip evaluation of a policy: MPJPE, root-relative MPJPE, joint errors, success and episode length.

Every clip is played from its start by ``num_envs`` envs (reference-state initialization with the configured noise,
no domain randomization) with the deterministic policy (or, with ``action_noise``, actions sampled around it), until
each env's first episode ends by termination or at the clip's end. Metrics are averaged over the steps each env was
alive; success is reaching the clip's end without a termination. Per clip it also records the errors over the clip's
time with the number of envs still alive, and the times at which episodes terminated (where in the clip the policy
fails).
"""

from __future__ import annotations

from typing import Any

import torch

from mimic_rl.config import TrainConfig, to_dict
from mimic_rl.envs import registry
from mimic_rl.models.actor_critic import Actor
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.runners.compat import check_policy_fits_env
from mimic_rl.runners.threads import apply_threads, resolve_threads

__all__ = ["ActorPolicy", "evaluate_policy"]


class ActorPolicy:
    """An ``Actor`` as a policy of the observation TensorDict (its deterministic action) with ``reset(dones)``;
    ``obs_groups`` (a config's mapping) says which groups it reads. With ``action_noise`` > 0 it adds Gaussian noise of
    ``action_noise`` times the actor's own std to each action (1.0: the distribution training samples from), drawn
    from a generator seeded with ``seed``."""

    def __init__(
        self, actor: Actor, obs_groups: dict[str, Any] | None = None, action_noise: float = 0.0, seed: int = 0
    ) -> None:
        self.actor = actor.eval()
        self.mapping = obs_groups
        self.groups: ObsGroups | None = None
        self.action_noise = float(action_noise)
        self._generator: torch.Generator | None = None
        self._seed = seed

    def __call__(self, obs: Any) -> torch.Tensor:
        if self.groups is None:
            self.groups = ObsGroups.resolve(self.mapping, obs)
        inputs = self.groups.actor_inputs(obs)
        if self.action_noise == 0:
            return self.actor(*inputs)
        mean, std = self.actor.distribution(*inputs)  # the Gaussian training samples from
        if self._generator is None:
            self._generator = torch.Generator(mean.device).manual_seed(self._seed)
        noise = torch.randn(mean.shape, generator=self._generator, device=mean.device)
        return mean + self.action_noise * std.detach() * noise

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero a recurrent actor's state (where ``dones``; everywhere when None)."""
        self.actor.reset(dones)


@torch.inference_mode()
def evaluate_policy(
    actor: Actor | Any,
    cfg: TrainConfig,
    num_envs: int = 8,
    robot: Any = None,
    source: str = "policy",
    trained_config: dict[str, Any] | None = None,
    action_noise: float = 0.0,
) -> dict[str, Any]:
    """Evaluate ``actor`` on every clip of ``cfg.env.motions`` from its first frame; returns a JSON-ready dict.

    ``actor`` is this package's ``Actor`` or any policy of the observation TensorDict (a callable with
    ``reset(dones)``, e.g. an rsl_rl policy in a wrapper). ``source`` (the checkpoint path) and ``trained_config`` (its
    config) describe an ``Actor`` that does not fit the env's observations (``CheckpointError``). Each backend
    evaluates with its registered evaluator (``mimic_rl.envs.registry``); ``robot`` is the embedded env's option.
    Torch and the env run with the threads of ``cfg.runner.threads`` (``mimic_rl.runners.threads``). ``action_noise``
    (an ``Actor`` only): actions sampled with that multiple of the actor's std (``ActorPolicy``; 0: the deterministic,
    deployable policy), recorded in the result as ``action_noise``.
    """
    apply_threads(resolve_threads(getattr(cfg.runner, "threads", None)))
    if action_noise and not isinstance(actor, Actor):
        raise ValueError("action_noise needs an Actor (its std); this policy is a plain callable")
    groups = getattr(cfg, "obs_groups", None)
    policy = ActorPolicy(actor, groups, action_noise, cfg.env.seed) if isinstance(actor, Actor) else actor
    check_env = None
    if isinstance(actor, Actor):

        def check_env(env: Any) -> None:
            check_policy_fits_env(actor, env, source, trained_config or to_dict(cfg))

    evaluation = registry.evaluate(policy, cfg, num_envs, robot=robot, check_env=check_env)
    if action_noise:
        evaluation["action_noise"] = float(action_noise)
    return evaluation
