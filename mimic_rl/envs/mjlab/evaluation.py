"""Evaluate a policy on an mjlab tracking task from its motion's first frame, with mjlab's own tracking metrics.

The task's play config is used (no pushes, no observation noise, no start-pose randomization, the motion from its
first frame), with ``num_envs`` envs, until each env's first episode ends by a termination or at the motion's end.
Global MPJPE is mjlab's MPKPE (``compute_mpkpe``), root-relative MPJPE its R-MPKPE, the joint velocity error its RMS
error, and the end-effector error its ``compute_ee_position_error`` on the bodies of the task's ``ee_body_pos``
termination. The result has the layout of the embedded env's evaluation (``mimic_rl.runners.evaluation``), so that
``mimic-rl plot`` reads both.

This package's tasks (``MimicRL-Tracking-*``) are evaluated as the embedded env evaluates: every clip of the config's
motions from its first frame (reference-state initialization with the configured noise, no randomization), all clips
at once in one env whose command restarts env ``i`` at clip ``i // num_envs``, with the same metrics
(``extras["tracking"]``) and success (reaching the clip's end without a termination).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mimic_rl.envs.mjlab.config import MjlabEnvConfig, is_mimic_task
from mimic_rl.envs.mjlab.env import MjlabVecEnv, make_mjlab_env
from mimic_rl.errors import UsageError
from mimic_rl.motion import expand_motion_paths
from mimic_rl.tasks.tracking import joint_position_error
from mimic_rl.tasks.tracking.from_start import FromStartEvaluation, summarize

__all__ = ["evaluate_mjlab"]


def _ee_bodies(env_cfg: Any) -> tuple[str, ...]:
    term = (getattr(env_cfg, "terminations", None) or {}).get("ee_body_pos")
    return tuple((getattr(term, "params", None) or {}).get("body_names", ()))


def _metrics(command: Any, ee_bodies: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Per-env tracking errors of the current step (mjlab's metric functions, in this package's units)."""
    from mjlab.tasks.tracking.mdp import metrics as M

    body_error = torch.norm(command.body_pos_w - command.robot_body_pos_w, dim=-1)
    return {
        "global_mpjpe_mm": 1000 * M.compute_mpkpe(command),
        "root_mpjpe_mm": 1000 * M.compute_root_relative_mpkpe(command),
        "joint_pos_error": joint_position_error(command.joint_pos, command.robot_joint_pos),
        "joint_vel_rms_error": M.compute_joint_velocity_error(command),
        "ee_error_mm": 1000 * M.compute_ee_position_error(command, ee_bodies),
        "body_error_mm": 1000 * body_error,
    }


@torch.inference_mode()
def evaluate_mjlab(
    policy: Any, cfg: Any, num_envs: int = 8, robot: Any = None, check_env: Callable[[Any], None] | None = None
) -> dict[str, Any]:
    """Evaluate ``policy`` (a callable of the observation TensorDict with ``reset(dones)``) on ``cfg.env``'s mjlab
    tracking task from its motion's first frame; returns the JSON-ready per-clip dict of ``evaluate_policy``.

    ``robot`` and ``check_env`` are the registry's evaluator options for the embedded env and are not used here: the
    task defines its robot, and the policy reads the task's groups through the config's ``obs_groups``."""
    env_cfg: MjlabEnvConfig = copy.deepcopy(cfg.env)
    env_cfg.num_envs, env_cfg.play, env_cfg.device = num_envs, True, cfg.runner.device
    if is_mimic_task(env_cfg.task):
        return _evaluate_mimic_task(policy, env_cfg)
    env = make_mjlab_env(env_cfg)
    try:
        entry = _evaluate_motion(env, policy, _ee_bodies(env.unwrapped.cfg), Path(env_cfg.motions[0]).stem)
    finally:
        env.close()
    return {"clips": [entry], "summary": summarize([entry]), "env": f"mjlab:{env_cfg.task}"}


def _evaluate_motion(env: MjlabVecEnv, policy: Any, ee_bodies: tuple[str, ...], name: str) -> dict[str, Any]:
    """Play the motion from its first frame in every env until each env's first episode ends."""
    command = env.motion_command
    if command is None:
        raise UsageError(
            f"mjlab task {env.cfg.task} has no motion command: nothing to evaluate from a clip's start; use --no-eval"
        )
    clip_steps = int(command.motion.time_step_total) - 1
    env.reset()
    evaluation = FromStartEvaluation(env.num_envs, command.cfg.body_names, env.step_dt, env.device)
    obs = env.get_observations()
    policy.reset()
    for _ in range(clip_steps):
        metrics = _metrics(command, ee_bodies)  # the state the policy acts from, against its reference frame
        obs, _, dones, extras = env.step(policy(obs))
        policy.reset(dones)
        time_outs = extras.get("time_outs")
        terminated = dones if time_outs is None else dones & ~time_outs.to(torch.bool)
        evaluation.record(metrics, dones, terminated, extras.get("termination_terms"))
        if not evaluation.any_alive:
            break
    return evaluation.result(name, clip_steps * env.step_dt, clip_steps, end_is_success=True)


def _evaluate_mimic_task(policy: Any, env_cfg: MjlabEnvConfig) -> dict[str, Any]:
    """Every clip from its first frame, all at once in one env of ``num_envs`` envs per clip (env ``i`` restarts
    at clip ``i // num_envs``; ``MimicRL-Tracking-*``)."""
    per_clip = env_cfg.num_envs
    num_clips = len(expand_motion_paths(list(env_cfg.motions)))
    env_cfg.num_envs = per_clip * num_clips
    env = make_mjlab_env(env_cfg)
    try:
        results = env.play_clips_from_start(policy, per_clip)
    finally:
        env.close()
    return {"clips": results, "summary": summarize(results), "env": f"mjlab:{env_cfg.task}"}
