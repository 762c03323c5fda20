"""Shared pieces of the tests of mimic_rl's tracking task on mjlab: one mjlab env for every in-process test of a
session (building one costs seconds, the first ever a warp kernel compile), the embedded env as the second
implementation of the MDP, and a way to put one physical state into both."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from mimic_rl.tasks.tracking import TerminationConfig, TrackingRewardConfig

NUM_ENVS = 4
CSV_FPS = 60.0
REWARD = TrackingRewardConfig(joint_pos_weight=0.5, joint_vel_weight=0.2)
"""The defaults plus the joint terms, so that every reward term is compared."""
TERMINATION = TerminationConfig(anchor_position=0.25)
"""The defaults plus ``anchor_position``, so that every termination term is compared."""


def motions(data_dir: Path) -> list[str]:
    """Two G1 clips in two formats: a Unitree CSV (body states by forward kinematics) and a BeyondMimic npz."""
    g1 = data_dir / "motions" / "g1"
    return [str(g1 / "B_HandsUp.csv"), str(g1 / "B_Fence2.npz")]


def g1_mjcf(data_dir: Path) -> str:
    """The shared G1 MJCF (the same file as mjlab's G1)."""
    return str(data_dir / "robots" / "unitree_g1" / "g1.xml")


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


def embedded_env(data_dir: Path, default_joint_pos: dict[str, float]):
    """The embedded env on the same clips with the same MDP settings, no randomization, and mjlab's default pose
    (the pose that ``policy`` observes joint positions relative to)."""
    from mimic_rl.envs.mujoco import DomainRandomization, MujocoTrackingEnv, TrackingEnvConfig, g1_config

    robot = dataclasses.replace(g1_config(g1_mjcf(data_dir)), default_joint_pos=default_joint_pos)
    cfg = TrackingEnvConfig(
        robot="g1",
        robot_mjcf=g1_mjcf(data_dir),
        motions=motions(data_dir),
        csv_fps=CSV_FPS,
        num_envs=NUM_ENVS,
        reward=REWARD,
        termination=TERMINATION,
        randomization=DomainRandomization(enabled=False),
        num_threads=1,
    )
    return MujocoTrackingEnv(cfg, robot=robot)


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


def set_embedded_state(env, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
    """Put the rows into the embedded env's physics and evaluate its sensors there (``mj_forward``: no latency);
    returns the raw sensor rows its MDP reads."""
    ids = np.arange(env.num_envs)
    env.physics.set_state(ids, qpos.numpy(), qvel.numpy())
    env.physics.refresh_sensors(ids)
    return torch.from_numpy(env.physics.sensordata.copy())


def cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``mimic-rl ARGS`` in a subprocess (one thread)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MJLAB_WARP_QUIET": "1"}
    cmd = [sys.executable, "-m", "mimic_rl.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
