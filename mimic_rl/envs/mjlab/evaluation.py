"""Evaluate a policy on an mjlab tracking task from its motion's first frame, with mjlab's own tracking metrics.

The task's play config is used (no pushes, no observation noise, no start-pose randomization, the motion from its
first frame), with ``num_envs`` envs, until each env's first episode ends by a termination or at the motion's end.
Global MPJPE is mjlab's MPKPE (``compute_mpkpe``), root-relative MPJPE its R-MPKPE, the joint velocity error its RMS
error, and the end-effector error its ``compute_ee_position_error`` on the bodies of the task's ``ee_body_pos``
termination. The result has the layout of the embedded env's evaluation (``mimic_rl.runners.evaluation``), so that
``mimic-rl plot`` reads both.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from mimic_rl.envs.mjlab.config import MjlabEnvConfig
from mimic_rl.envs.mjlab.env import MjlabVecEnv, mjlab_env_config

__all__ = ["evaluate_mjlab"]

METRICS = ("global_mpjpe_mm", "root_mpjpe_mm", "joint_pos_error", "joint_vel_rms_error", "ee_error_mm")


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
        "joint_pos_error": (command.joint_pos - command.robot_joint_pos).abs().mean(-1),
        "joint_vel_rms_error": M.compute_joint_velocity_error(command),
        "ee_error_mm": 1000 * M.compute_ee_position_error(command, ee_bodies),
        "body_error_mm": 1000 * body_error,
    }


@torch.inference_mode()
def evaluate_mjlab(policy: Any, cfg: Any, num_envs: int = 8) -> dict[str, Any]:
    """Evaluate ``policy`` (a callable of the observation TensorDict with ``reset(dones)``) on ``cfg.env``'s mjlab
    tracking task from its motion's first frame; returns the JSON-ready per-clip dict of ``evaluate_policy``."""
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper

    env_cfg = copy.deepcopy(cfg.env)
    assert isinstance(env_cfg, MjlabEnvConfig)
    env_cfg.num_envs, env_cfg.play, env_cfg.device = num_envs, True, cfg.runner.device
    task_cfg = mjlab_env_config(env_cfg)
    env = MjlabVecEnv(RslRlVecEnvWrapper(ManagerBasedRlEnv(cfg=task_cfg, device=str(env_cfg.device))), env_cfg)
    try:
        entry = _evaluate_motion(env, policy, _ee_bodies(task_cfg), Path(env_cfg.motions[0]).stem)
    finally:
        env.close()
    summary = {k: entry[k] for k in (*METRICS, "success_rate", "episode_length_fraction")}
    return {"clips": [entry], "summary": summary, "env": f"mjlab:{env_cfg.task}"}


def _evaluate_motion(env: MjlabVecEnv, policy: Any, ee_bodies: tuple[str, ...], name: str) -> dict[str, Any]:
    """Play the motion from its first frame in every env until each env's first episode ends."""
    command = env.motion_command
    if command is None:
        raise ValueError(f"mjlab task {env.cfg.task} has no motion command: nothing to evaluate from a clip's start")
    n, device = env.num_envs, env.device
    clip_steps = int(command.motion.time_step_total) - 1
    env.reset()
    alive = torch.ones(n, dtype=torch.bool, device=device)
    success = torch.zeros(n, dtype=torch.bool, device=device)
    length = torch.zeros(n, device=device)
    sums = {k: torch.zeros(n, dtype=torch.float64, device=device) for k in METRICS}
    body_names = list(command.cfg.body_names)
    body_sum = torch.zeros(len(body_names), dtype=torch.float64, device=device)
    body_count = 0
    over_time: dict[str, list[float]] = {"time_s": [], "global_mpjpe_mm": [], "root_mpjpe_mm": [], "alive": []}
    failures: list[float] = []
    obs = env.get_observations()
    policy.reset()
    for step in range(clip_steps):
        metrics = _metrics(command, ee_bodies)  # the state the policy acts from, against its reference frame
        obs, _, dones, _ = env.step(policy(obs))
        policy.reset(dones)
        for k in METRICS:
            sums[k] += torch.where(alive, metrics[k].double(), 0.0)
        body_sum += metrics["body_error_mm"][alive].double().sum(0)
        body_count += int(alive.sum())
        over_time["time_s"].append((step + 1) * env.step_dt)
        over_time["alive"].append(int(alive.sum()))
        for k in ("global_mpjpe_mm", "root_mpjpe_mm"):
            over_time[k].append(float(metrics[k][alive].mean()) if bool(alive.any()) else float("nan"))
        length += alive.float()
        terminated = alive & dones
        failures += [(step + 1) * env.step_dt] * int(terminated.sum())
        alive &= ~dones
        if not bool(alive.any()):
            break
    success |= alive  # reached the motion's end without a termination
    steps = length.clamp(min=1).double()
    entry: dict[str, Any] = {
        "name": name,
        "duration_s": clip_steps * env.step_dt,
        "num_envs": n,
        "clip_steps": clip_steps,
    }
    entry.update({k: float((sums[k] / steps).mean()) for k in METRICS})
    entry["success_rate"] = float(success.float().mean())
    entry["episode_length"] = float(length.mean())
    entry["episode_length_fraction"] = float(length.mean()) / max(1, clip_steps)
    entry["failure_times_s"] = failures
    entry["per_body_mpjpe_mm"] = {b: float(v) for b, v in zip(body_names, body_sum / max(1, body_count))}
    entry["over_time"] = over_time
    return entry
