"""What a robot can observe: the deployable observation groups, their sensor models and the terms they may contain.

A real robot has an IMU on its anchor body (angular velocity, orientation) and joint encoders; it has no world
position and no reliable linear velocity without a state estimator. The deployable groups hold only that:

- ``deploy_policy``: ``joint_pos_rel`` ``[J]``, ``joint_vel`` ``[J]``, ``anchor_ang_vel_b`` ``[3]`` (the gyro),
  ``projected_gravity`` ``[3]`` (from the IMU's orientation), ``last_action`` ``[A]``;
- ``deploy_reference``: ``[N, K, 2 J + 6]``, per future frame the reference joint positions and velocities and the
  6D of the reference anchor's orientation relative to the robot's (``robot_anchor^-1 * ref_anchor``); no positions.

:class:`DeployObservations` configures each sensor's noise and latency (applied by the env, see
``mimic_rl.envs.common.sensor_model``) and the action delay. ``DEPLOYABLE_TERMS`` is the list a student's inputs are
checked against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

import torch

from mimic_rl.rotations import quat_conjugate_mul, quat_to_6d
from mimic_rl.tasks.tracking.context import StepContext
from mimic_rl.utils import Range

__all__ = [
    "DEPLOYABLE_TERMS",
    "DEPLOY_GROUPS",
    "DeployObservations",
    "SensorModel",
    "deploy_reference",
    "deploy_reference_dim",
    "term_sizes",
]

DEPLOY_GROUPS = ("deploy_policy", "deploy_reference")
"""The deployable observation groups (and ``reference_mask``, all true, which carries nothing)."""

DEPLOYABLE_TERMS = frozenset(
    {"joint_pos_rel", "joint_vel", "anchor_ang_vel_b", "projected_gravity", "last_action", "deploy_reference"}
)
"""The observation terms a robot without a state estimator can compute: a student may read only groups of these."""


@dataclass(frozen=True, slots=True)
class SensorModel:
    """One sensor's imperfections: uniform noise in ``[-noise, noise]`` on each entry, and a latency in control steps
    (the value the policy sees is the reading of ``latency_steps`` steps before)."""

    noise: Annotated[float, Range(0)] = 0.0
    latency_steps: Annotated[int, Range(0, 10)] = 0


@dataclass
class DeployObservations:
    """The deployable groups and their sensor models (``env.deploy``); off by default (no groups, no cost).

    Defaults: BeyondMimic's observation noise (joint positions 0.01 rad, velocities 0.5 rad/s, gyro 0.2 rad/s,
    anchor orientation 0.05; gravity 0.05) and one control step (20 ms at 50 Hz) of latency on every sensor; no
    action delay. ``noise: false`` or ``latency: false`` switch all of them off at once (checks, sim2sim).
    """

    enabled: bool = False
    """Compute ``deploy_policy`` and ``deploy_reference`` every step."""
    noise: bool = True
    """Add each sensor's noise (false: exact readings)."""
    latency: bool = True
    """Delay each sensor by its latency (false: current readings)."""
    joint_pos: SensorModel = field(default_factory=lambda: SensorModel(0.01, 1))
    joint_vel: SensorModel = field(default_factory=lambda: SensorModel(0.5, 1))
    ang_vel: SensorModel = field(default_factory=lambda: SensorModel(0.2, 1))
    gravity: SensorModel = field(default_factory=lambda: SensorModel(0.05, 1))
    anchor_ori: SensorModel = field(default_factory=lambda: SensorModel(0.05, 1))
    """The robot anchor's orientation estimate, i.e. the 6D columns of ``deploy_reference``."""
    action_delay_steps: Annotated[int, Range(0, 10)] = 0
    """Control steps between the policy's action and the PD targets that apply it."""

    def sensors(self) -> dict[str, SensorModel]:
        """Each sensor's model by the term it corrupts, with ``noise`` and ``latency`` applied."""
        models = {
            "joint_pos_rel": self.joint_pos,
            "joint_vel": self.joint_vel,
            "anchor_ang_vel_b": self.ang_vel,
            "projected_gravity": self.gravity,
            "deploy_reference": self.anchor_ori,
        }
        return {
            name: SensorModel(m.noise if self.noise else 0.0, m.latency_steps if self.latency else 0)
            for name, m in models.items()
        }


def deploy_reference_dim(num_joints: int) -> int:
    """Width of one frame of :func:`deploy_reference`: ``2 J + 6``."""
    return 2 * num_joints + 6


def deploy_reference(ctx: StepContext) -> torch.Tensor:
    """The reference command without positions, ``[N, K, 2 J + 6]``: per future frame the reference joint positions
    and velocities and the 6D of ``robot_anchor^-1 * ref_anchor`` (what an IMU's orientation and the clip give)."""
    future = ctx.future_reference
    ref_quat = future.body_quat_w[:, :, 0]
    quat = ctx.anchor_quat_w.unsqueeze(-2).expand_as(ref_quat)
    rel_ori = quat_to_6d(quat_conjugate_mul(quat, ref_quat))
    return torch.cat((future.joint_pos, future.joint_vel, rel_ori), dim=-1)


def term_sizes(num_joints: int, num_actions: int, num_bodies: int) -> dict[str, int]:
    """The last-dim size of each observation term of ``observation_terms`` (per frame for the reference terms)."""
    j = num_joints
    return {
        "joint_pos_rel": j,
        "joint_vel": j,
        "joint_pos": j,
        "anchor_lin_vel_b": 3,
        "anchor_ang_vel_b": 3,
        "projected_gravity": 3,
        "last_action": num_actions,
        "body_poses_b": 9 * num_bodies,
        "anchor_height": 1,
        "reference_frames": 2 * j + 9,
        "deploy_reference": deploy_reference_dim(j),
    }
