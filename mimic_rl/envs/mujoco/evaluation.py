"""The embedded env's evaluation from each clip's first frame, and its env for ``mimic-rl play`` (registered in
``mimic_rl.envs.registry``; ``mimic_rl.runners.evaluation`` describes the metrics)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mimic_rl.envs.mujoco.config import TrackingEnvConfig
from mimic_rl.envs.mujoco.env import MujocoTrackingEnv
from mimic_rl.envs.mujoco.physics import DomainRandomization
from mimic_rl.tasks.tracking.from_start import play_from_start, summarize

__all__ = ["evaluate_mujoco", "play_env"]


def evaluate_mujoco(
    policy: Any,
    cfg: Any,
    num_envs: int = 8,
    robot: Any = None,
    check_env: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Play every clip of ``cfg.env.motions`` from its first frame in ``num_envs`` envs of its own (reference-state
    initialization with the configured noise, no domain randomization) with ``policy``; ``check_env`` sees the first
    env before any clip is played, ``robot`` replaces the config's. Returns the JSON-ready per-clip dict."""
    env_cfg: TrackingEnvConfig = copy.deepcopy(cfg.env)
    env_cfg.num_envs = num_envs
    env_cfg.sampling_mode = "start"
    env_cfg.compile = False  # one short env per clip: compiling each (a minute or more) would not pay off
    env_cfg.randomization = DomainRandomization(enabled=False)
    env_cfg.device = cfg.runner.device
    probe = MujocoTrackingEnv(copy.deepcopy(env_cfg), robot=robot)
    if check_env is not None:
        check_env(probe)
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


def play_env(env_cfg: TrackingEnvConfig) -> MujocoTrackingEnv:
    """The env of ``env_cfg`` for a short run (``mimic-rl play``, export metadata): uncompiled."""
    env_cfg = copy.deepcopy(env_cfg)
    env_cfg.compile = False  # a short run: compiling the step (a minute or more per env size) would not pay off
    return MujocoTrackingEnv(env_cfg)
