"""Per-clip evaluation of a policy: MPJPE, root-relative MPJPE, joint errors, success and episode length.

Every clip is played from its start by ``num_envs`` envs (reference-state initialization with the configured noise,
no domain randomization) with the deterministic policy, until each env's first episode ends by termination or at the
clip's end. Metrics are averaged over the steps each env was alive; success is reaching the clip's end without a
termination. Per clip it also records the errors over the clip's time with the number of envs still alive, and the
times at which episodes terminated (where in the clip the policy fails).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from mimic_rl.config import TrainConfig, to_dict
from mimic_rl.envs.registry import backend, load_attribute
from mimic_rl.errors import UsageError
from mimic_rl.models.actor_critic import Actor
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.runners.compat import check_policy_fits_env
from mimic_rl.tasks.tracking.from_start import play_from_start, summarize

__all__ = ["ActorPolicy", "evaluate_policy"]


class ActorPolicy:
    """An ``Actor`` as a policy of the observation TensorDict (its deterministic action) with ``reset(dones)``;
    ``obs_groups`` (a config's mapping) says which groups it reads."""

    def __init__(self, actor: Actor, obs_groups: dict[str, Any] | None = None) -> None:
        self.actor = actor.eval()
        self.mapping = obs_groups
        self.groups: ObsGroups | None = None

    def __call__(self, obs: Any) -> torch.Tensor:
        if self.groups is None:
            self.groups = ObsGroups.resolve(self.mapping, obs)
        return self.actor(*self.groups.actor_inputs(obs))

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
) -> dict[str, Any]:
    """Evaluate ``actor`` on every clip of ``cfg.env.motions`` from its first frame; returns a JSON-ready dict.

    ``actor`` is this package's ``Actor`` or any policy of the observation TensorDict (a callable with
    ``reset(dones)``, e.g. an rsl_rl policy in a wrapper). ``source`` (the checkpoint path) and ``trained_config`` (its
    config) describe an ``Actor`` that does not fit the env's observations (``CheckpointError``). Backends other than
    the embedded env evaluate with their registered evaluator.
    """
    policy = ActorPolicy(actor, getattr(cfg, "obs_groups", None)) if isinstance(actor, Actor) else actor
    if cfg.env.backend != "mujoco":
        evaluator = backend(cfg.env.backend).evaluate
        if evaluator is None:
            raise UsageError(f"env.backend {cfg.env.backend!r} has no evaluation from the clips' start; use --no-eval")
        return load_attribute(evaluator)(policy, cfg, num_envs)
    from mimic_rl.envs.mujoco import DomainRandomization, MujocoTrackingEnv

    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs = num_envs
    env_cfg.sampling_mode = "start"
    env_cfg.compile = False  # one short env per clip: compiling each (a minute or more) would not pay off
    env_cfg.randomization = DomainRandomization(enabled=False)
    env_cfg.device = cfg.runner.device
    probe = MujocoTrackingEnv(copy.deepcopy(env_cfg), robot=robot)
    if isinstance(actor, Actor):
        check_policy_fits_env(actor, probe, source, trained_config or to_dict(cfg))
    clips, body_names = probe.library.clips, probe.tracked
    probe.close()
    results = []
    for clip in clips:
        env_cfg.episode_length_s = max(env_cfg.episode_length_s, clip.duration + 1.0)  # only the clip's end stops it
        env = MujocoTrackingEnv(copy.deepcopy(env_cfg), robot=robot, clips=[clip])
        name = Path(str(clip.metadata.get("source", "clip"))).stem
        results.append(play_from_start(env, policy, body_names, name, clip.duration))
        env.close()
    return {"clips": results, "summary": summarize(results)}
