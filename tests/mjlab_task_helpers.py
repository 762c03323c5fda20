"""Shared pieces of the tests of mimic_rl's tracking task on mjlab: one mjlab env for every in-process test of a
session (building one costs seconds, the first ever a warp kernel compile), the embedded env as the second
implementation of the MDP, and a way to put one physical state into both."""

from __future__ import annotations

import functools
from pathlib import Path

import torch
from task_helpers import (  # noqa: F401  (the shared pieces, for the mjlab tests)
    CSV_FPS,
    NUM_ENVS,
    REWARD,
    TERMINATION,
    cli,
    embedded_env,
    g1_mjcf,
    motions,
    set_embedded_state,
)


@functools.lru_cache(maxsize=1)
def shared_env(data_dir: Path):
    """``MimicRL-Tracking-G1-AMP`` (every group) with ``NUM_ENVS`` envs and both clips; its tracked bodies listed in
    the reverse of mjlab's (and the embedded env's) order, so that whatever compares bodies must match their names."""
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper

    from mimic_rl.envs.mjlab import MjlabEnvConfig
    from mimic_rl.envs.mjlab.command import robot_kinematics
    from mimic_rl.envs.mjlab.env import MjlabVecEnv, mjlab_env_config

    torch.set_num_threads(1)
    cfg = MjlabEnvConfig(
        task="MimicRL-Tracking-G1-AMP",
        num_envs=NUM_ENVS,
        motions=motions(data_dir),
        csv_fps=CSV_FPS,
        reward=REWARD,
        termination=TERMINATION,
    )
    env_cfg = mjlab_env_config(cfg)
    command = env_cfg.commands["motion"]
    command.tracked_bodies = tuple(reversed(robot_kinematics(env_cfg.scene.entities["robot"]).body_names))
    return MjlabVecEnv(RslRlVecEnvWrapper(ManagerBasedRlEnv(cfg=env_cfg, device="cpu")), cfg)


def write_mujoco_state(env, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
    """Put MuJoCo ``qpos`` / ``qvel`` rows (free joint first, root angular velocity local) into every env of an mjlab
    env through mjlab's entity API (world-frame root velocities, positions from each env's origin)."""
    from mimic_rl.rotations import quat_apply

    robot = env.mimic_command.robot
    q, v = qpos.float(), qvel.float()
    origins = env.unwrapped.scene.env_origins
    root = torch.cat((q[:, :3] + origins, q[:, 3:7], v[:, :3], quat_apply(q[:, 3:7], v[:, 3:6])), dim=-1)
    robot.write_root_state_to_sim(root)
    ix = robot.indexing
    robot.write_joint_state_to_sim(q[:, ix.joint_q_adr.long()], v[:, ix.joint_v_adr.long()])
