"""The motion of mimic_rl's tracking task on Isaac Lab: an Isaac Lab command term that owns this package's
``MotionLibrary``.

What the command does is ``mimic_rl.envs.common.tracking_command.TrackingCommand`` (shared with mjlab's task); this
module adapts it to Isaac Lab 3.0's articulation on Newton: body and joint names, states read as torch views of its
warp arrays (quaternions xyzw there, wxyz here), joint limits and default pose, and restarts written through its
``write_*_to_sim_index`` methods. Reference-state initialization builds MuJoCo rows of the robot's own MJCF (the one
its USD was made from), so that the embedded env and this task draw the same initial states.

Isaac Lab's ``ManagerBasedRLEnv`` computes terminations and rewards after the physics steps of a policy step, from
the state at its end (Newton's body poses follow its joint state after every step), with the reference at that same
instant, as mjlab's task does.

Isaac Lab is optional: without it this module still imports, and its classes cannot be built.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from mimic_rl.envs.common.tracking_command import TrackingCommand, TrackingCommandSettings
from mimic_rl.errors import ConfigError
from mimic_rl.motion import RobotKinematics
from mimic_rl.rotations import quat_apply

try:
    from isaaclab.managers import CommandTerm, CommandTermCfg
    from isaaclab.utils import configclass
except ImportError:  # Isaac Lab is optional
    CommandTerm = CommandTermCfg = object  # type: ignore[assignment,misc]

    def configclass(cls: Any) -> Any:
        return cls


__all__ = ["IsaacLabMotionCommand", "IsaacLabMotionCommandCfg", "mujoco_model", "xyzw_to_wxyz"]


def xyzw_to_wxyz(quat: torch.Tensor) -> torch.Tensor:
    """Isaac Lab 3.0's (x, y, z, w) quaternions in this package's (w, x, y, z)."""
    return torch.cat((quat[..., 3:4], quat[..., 0:3]), dim=-1)


def _wxyz_to_xyzw(quat: torch.Tensor) -> torch.Tensor:
    return torch.cat((quat[..., 1:4], quat[..., 0:1]), dim=-1)


@functools.lru_cache(maxsize=4)
def mujoco_model(mjcf: str) -> Any:
    """The robot's MuJoCo model, compiled once per MJCF path (its meshes take most of a second)."""
    import mujoco

    return mujoco.MjModel.from_xml_path(mjcf)


class IsaacLabMotionCommand(TrackingCommand, CommandTerm):
    """Clip, motion time and reference of every env; the MDP of each step (``TrackingCommand``) on Isaac Lab."""

    simulator = "Isaac Lab"

    def __init__(self, cfg: IsaacLabMotionCommandCfg, env: Any) -> None:
        CommandTerm.__init__(self, cfg, env)
        if not cfg.robot_mjcf:
            raise ConfigError("env.robot_mjcf: expected the MJCF of the robot's USD for its MuJoCo rows, found none")
        self.robot = env.scene[cfg.entity_name]
        self._setup_tracking(RobotKinematics(mujoco_model(cfg.robot_mjcf)))

    # ------------------------------------------------------------------ TrackingCommand's hooks
    def _robot_names(self) -> tuple[list[str], list[str]]:
        return list(self.robot.body_names), list(self.robot.joint_names)

    def _robot_joint_limits(self) -> torch.Tensor:
        return self.robot.data.joint_pos_limits.torch[0]

    def _robot_default_joint_pos(self) -> torch.Tensor:
        return self.robot.data.default_joint_pos.torch

    def _read_robot(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        data = self.robot.data
        pose = data.body_link_pose_w.torch
        pose = torch.cat((pose[..., 0:3], xyzw_to_wxyz(pose[..., 3:7])), dim=-1)
        return pose, data.body_link_vel_w.torch, data.joint_pos.torch, data.joint_vel.torch

    def _reference_state_model(self, joint_ids: torch.Tensor) -> tuple[Any, list[int], list[int]]:
        """The robot's MJCF as a MuJoCo model (its free joint first) and the addresses of Isaac Lab's joints in it."""
        import mujoco

        model = mujoco_model(self.cfg.robot_mjcf)
        if model.njnt == 0 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
            raise ConfigError(f"{self.cfg.robot_mjcf}: env.robot_mjcf: expected a robot with a free joint first")
        names = list(self.robot.joint_names)
        q_adr = [int(model.joint(name).qposadr[0]) for name in names]
        v_adr = [int(model.joint(name).dofadr[0]) for name in names]
        self._q_cols = torch.tensor(q_adr, device=self.device)  # qpos columns of Isaac Lab's joints, its order
        self._v_cols = torch.tensor(v_adr, device=self.device)
        self._nq = int(model.nq)
        ids = joint_ids.tolist()
        return model, [q_adr[i] for i in ids], [v_adr[i] for i in ids]

    def _reward_scale(self) -> float:
        return self._env.step_dt  # Isaac Lab's reward manager multiplies every term by the step's dt

    def _write_rows(self, env_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Write physics rows (MuJoCo ``qpos`` then ``qvel``, root angular velocity local) through Isaac Lab's
        articulation (root link pose and velocity in the world, joints in its order)."""
        qpos, qvel = rows[:, : self._nq].float(), rows[:, self._nq :].float()
        quat = qpos[:, 3:7]
        pose = torch.cat((qpos[:, 0:3] + self._env.scene.env_origins[env_ids], _wxyz_to_xyzw(quat)), dim=-1)
        velocity = torch.cat((qvel[:, 0:3], quat_apply(quat, qvel[:, 3:6])), dim=-1)
        robot = self.robot
        robot.write_root_link_pose_to_sim_index(root_pose=pose.contiguous(), env_ids=env_ids)
        robot.write_root_link_velocity_to_sim_index(root_velocity=velocity.contiguous(), env_ids=env_ids)
        robot.write_joint_state_to_sim_index(
            position=qpos[:, self._q_cols].contiguous(), velocity=qvel[:, self._v_cols].contiguous(), env_ids=env_ids
        )
        robot.reset(env_ids=env_ids)


@configclass
class IsaacLabMotionCommandCfg(TrackingCommandSettings, CommandTermCfg):
    """The motion term of ``MimicRL-Tracking-G1`` on Isaac Lab (defaults: the embedded env's and the G1)."""

    class_type: type = IsaacLabMotionCommand
    robot_mjcf: str | None = None
    """The robot's MJCF (its USD was made from it): the layout of the MuJoCo rows restarts are drawn in."""
