"""The embedded env's evaluation from each clip's first frame, and its env for ``mimic-rl play`` (registered in
``mimic_rl.envs.registry``; ``mimic_rl.runners.evaluation`` describes the metrics)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from mimic_rl.envs.mujoco.config import TrackingEnvConfig
from mimic_rl.envs.mujoco.env import MujocoTrackingEnv
from mimic_rl.envs.mujoco.physics import DomainRandomization
from mimic_rl.envs.mujoco.robots import robot_config
from mimic_rl.motion import expand_motion_paths
from mimic_rl.tasks.tracking.from_start import clip_of_env, play_clips_from_start, summarize

__all__ = ["evaluate_mujoco", "play_env"]


def evaluate_mujoco(
    policy: Any,
    cfg: Any,
    num_envs: int = 8,
    robot: Any = None,
    check_env: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Play every clip of ``cfg.env.motions`` from its first frame in ``num_envs`` envs per clip (reference-state
    initialization with the configured noise, no domain randomization) with ``policy``, all clips at once in one env
    (``play_clips_from_start``); ``check_env`` sees the env before it plays, ``robot`` replaces the config's. Returns
    the JSON-ready per-clip dict."""
    env_cfg: TrackingEnvConfig = copy.deepcopy(cfg.env)
    env_cfg.sampling_mode = "start"
    env_cfg.compile = False  # a short run: compiling the step (a minute or more) would not pay off
    env_cfg.randomization = DomainRandomization(enabled=False)
    env_cfg.quality_metrics = True  # foot sliding, jerk, torque, power, penetration next to the tracking errors
    env_cfg.device = cfg.runner.device
    robot = robot or robot_config(env_cfg.robot, env_cfg.robot_mjcf)
    clips = [robot.load_clip(path, env_cfg.csv_fps) for path in expand_motion_paths(env_cfg.motions)]
    longest = max(clip.duration for clip in clips)
    env_cfg.episode_length_s = max(env_cfg.episode_length_s, longest + 1.0)  # only a clip's end stops an episode
    env_cfg.num_envs = num_envs * len(clips)  # env i plays clip i // num_envs
    env = MujocoTrackingEnv(env_cfg, robot=robot, clips=clips)
    try:
        if check_env is not None:
            check_env(env)
        if len(clips) > 1:
            env.start_clips(clip_of_env(len(clips), num_envs, env.device))
        names = env.library.clip_names
        results = play_clips_from_start(env, policy, env.tracked, names, [clip.duration for clip in clips])
    finally:
        env.close()
    return {"clips": results, "summary": summarize(results)}


def play_env(env_cfg: TrackingEnvConfig) -> MujocoTrackingEnv:
    """The env of ``env_cfg`` for a short run (``mimic-rl play``, export metadata): uncompiled."""
    env_cfg = copy.deepcopy(env_cfg)
    env_cfg.compile = False  # a short run: compiling the step (a minute or more per env size) would not pay off
    return MujocoTrackingEnv(env_cfg)
