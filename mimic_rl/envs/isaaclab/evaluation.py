"""Evaluate a policy on this package's Isaac Lab task (``MimicRL-Tracking-*``) from each clip's first frame, as the
embedded env evaluates: the task's play config (no randomization), every clip at once (env ``i`` restarts at clip
``i // num_envs``), the same metrics (``extras["tracking"]``) and success (reaching the clip's end without a
termination). Isaac Lab's own tasks have no clips to evaluate from (``--no-eval``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch

from mimic_rl.envs.common.task_config import is_mimic_task
from mimic_rl.envs.isaaclab.config import IsaacLabEnvConfig
from mimic_rl.envs.isaaclab.env import make_isaaclab_env
from mimic_rl.errors import UsageError
from mimic_rl.motion import expand_motion_paths
from mimic_rl.tasks.tracking.from_start import summarize

__all__ = ["evaluate_isaaclab"]


@torch.inference_mode()
def evaluate_isaaclab(
    policy: Any, cfg: Any, num_envs: int = 8, robot: Any = None, check_env: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    """Evaluate ``policy`` (a callable of the observation TensorDict with ``reset(dones)``) on ``cfg.env``'s
    ``MimicRL-Tracking-*`` task from each clip's first frame, ``num_envs`` envs per clip; returns the JSON-ready
    per-clip dict of ``evaluate_policy``. ``robot`` is the embedded env's option (unused); ``check_env`` sees the env
    before it plays."""
    env_cfg: IsaacLabEnvConfig = copy.deepcopy(cfg.env)
    if not is_mimic_task(env_cfg.task):
        raise UsageError(
            f"Isaac Lab's {env_cfg.task} has no clips to evaluate from their start (this package's tasks have: "
            "MimicRL-Tracking-G1); use --no-eval"
        )
    num_clips = len(expand_motion_paths(list(env_cfg.motions)))
    env_cfg.num_envs, env_cfg.play, env_cfg.device = num_envs * num_clips, True, cfg.runner.device
    env = make_isaaclab_env(env_cfg)
    try:
        if check_env is not None:
            check_env(env)
        results = env.play_clips_from_start(policy, num_envs)
    finally:
        env.close()
    return {"clips": results, "summary": summarize(results), "env": f"isaaclab:{env_cfg.task}"}
