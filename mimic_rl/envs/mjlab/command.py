"""The motion of mimic_rl's tracking task on mjlab: an mjlab command term that owns this package's ``MotionLibrary``.

What the command does is ``mimic_rl.envs.common.tracking_command.TrackingCommand`` (shared with Isaac Lab's task);
this module adapts it to mjlab's entity: body and joint names and states, joint limits, the scene's MuJoCo model for
reference-state initialization, writing restarts.

When the MDP is evaluated. mjlab computes terminations and rewards before its single ``forward()`` of the step, when
body poses are one physics substep old but joint positions are current. The command first recomputes the body
kinematics (MuJoCo Warp's ``kinematics``, ``com_pos``, ``com_vel``: no collision, no solver), so that the MDP sees
the whole state at the end of the policy step, with the reference at that same instant. (The embedded env instead
reads MuJoCo sensors, one physics step before the end of the step, with the reference at that earlier instant.)

mjlab is optional: without it this module still imports, and its classes cannot be built.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from mimic_rl.envs.common.tracking_command import (
    G1_END_EFFECTORS,
    TrackingCommand,
    TrackingCommandSettings,
    load_clips,
)
from mimic_rl.errors import ConfigError
from mimic_rl.motion import RobotKinematics
from mimic_rl.rotations import quat_apply

try:
    from mjlab.managers.command_manager import CommandTerm, CommandTermCfg
except ImportError:  # mjlab is optional
    CommandTerm = CommandTermCfg = object  # type: ignore[assignment,misc]

__all__ = ["G1_END_EFFECTORS", "MimicMotionCommand", "MimicMotionCommandCfg", "load_clips", "robot_kinematics"]


def robot_kinematics(entity_cfg: Any) -> RobotKinematics:
    """The kinematics of an mjlab entity's own MJCF (its ``spec_fn``), for reading CSV and name-less npz motions."""
    return _kinematics(entity_cfg.spec_fn)


@functools.lru_cache(maxsize=4)
def _kinematics(spec_fn: Any) -> RobotKinematics:
    return RobotKinematics(spec_fn().compile())  # compiling the G1 with its meshes takes most of a second


@dataclass(kw_only=True)
class MimicMotionCommandCfg(TrackingCommandSettings, CommandTermCfg):
    """The motion term of ``MimicRL-Tracking-*`` (defaults: the embedded env's ``TrackingEnvConfig`` and G1)."""

    def build(self, env: Any) -> MimicMotionCommand:
        """The command term of ``env``."""
        return MimicMotionCommand(self, env)


class MimicMotionCommand(TrackingCommand, CommandTerm):
    """Clip, motion time and reference of every env; the MDP of each step (``TrackingCommand``) on mjlab."""

    simulator = "mjlab"

    def __init__(self, cfg: MimicMotionCommandCfg, env: Any) -> None:
        CommandTerm.__init__(self, cfg, env)
        self.robot = env.scene[cfg.entity_name]
        self._setup_tracking(robot_kinematics(env.cfg.scene.entities[cfg.entity_name]))

    # ------------------------------------------------------------------ TrackingCommand's hooks
    def _robot_names(self) -> tuple[list[str], list[str]]:
        return list(self.robot.body_names), list(self.robot.joint_names)

    def _robot_joint_limits(self) -> torch.Tensor:
        return self.robot.data.joint_pos_limits[0]

    def _robot_default_joint_pos(self) -> torch.Tensor:
        return self.robot.data.default_joint_pos

    def _read_robot(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        data = self.robot.data
        return data.body_link_pose_w, data.body_link_vel_w, data.joint_pos, data.joint_vel

    def _reference_state_model(self, joint_ids: torch.Tensor) -> tuple[Any, list[int], list[int]]:
        """The scene's MuJoCo model (mjlab's free joint first) and the addresses of its joints."""
        ix = self.robot.indexing
        if ix.free_joint_q_adr.tolist() != list(range(7)) or ix.free_joint_v_adr.tolist() != list(range(6)):
            raise ConfigError(f"mjlab task: expected {self.cfg.entity_name}'s free joint first in the scene's state")
        self._q_cols = ix.joint_q_adr.to(self.device, torch.long)  # the scene's qpos columns of mjlab's joints
        self._v_cols = ix.joint_v_adr.to(self.device, torch.long)
        q_adr = ix.joint_q_adr[joint_ids.to(ix.joint_q_adr.device)].tolist()
        v_adr = ix.joint_v_adr[joint_ids.to(ix.joint_v_adr.device)].tolist()
        return self._env.sim.mj_model, q_adr, v_adr

    def _reward_scale(self) -> float:
        env = self._env
        return env.step_dt if env.cfg.scale_rewards_by_dt else 1.0

    def refresh_body_states(self) -> None:
        """Recompute body poses and velocities from the current joint state (kinematics only, no collision or
        solver), so that they describe the same instant as the joint state."""
        import mujoco_warp as mjwarp
        import warp as wp

        sim = self._env.sim
        with wp.ScopedDevice(sim.wp_device):
            mjwarp.kinematics(sim.wp_model, sim.wp_data)
            mjwarp.com_pos(sim.wp_model, sim.wp_data)
            mjwarp.com_vel(sim.wp_model, sim.wp_data)

    def _write_rows(self, env_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Write physics rows (MuJoCo ``qpos`` then ``qvel``, root angular velocity local) through mjlab's entity."""
        nq = self._env.sim.mj_model.nq
        qpos, qvel = rows[:, :nq].float(), rows[:, nq:].float()
        quat = qpos[:, 3:7]
        root = torch.cat(
            (qpos[:, 0:3] + self._env.scene.env_origins[env_ids], quat, qvel[:, 0:3], quat_apply(quat, qvel[:, 3:6])),
            dim=-1,
        )
        self.robot.write_root_state_to_sim(root, env_ids=env_ids)
        self.robot.write_joint_state_to_sim(qpos[:, self._q_cols], qvel[:, self._v_cols], env_ids=env_ids)
        self.robot.reset(env_ids=env_ids)
