"""The observation terms of a step and the table of groups they form (``policy``, ``reference``, ``critic``, ``amp``).

Each term is a function of a :class:`~mimic_rl.tasks.tracking.context.StepContext`; a group is an ordered tuple of
terms, concatenated along the last dim. A new observation: write ``f(ctx, **params) -> [N, D]`` and add an
:class:`~mimic_rl.tasks.tracking.terms.ObservationTerm` to the groups of :func:`observation_terms` that carry it.
"""

from __future__ import annotations

import torch

from mimic_rl.rotations import quat_apply_inverse
from mimic_rl.tasks.tracking.amp_features import amp_features
from mimic_rl.tasks.tracking.context import StepContext
from mimic_rl.tasks.tracking.deploy import deploy_reference
from mimic_rl.tasks.tracking.observations import body_pose_in_anchor_frame, projected_gravity, reference_observation
from mimic_rl.tasks.tracking.terms import ObservationTerm

__all__ = [
    "AMP_FEATURE_SETS",
    "amp_body_features",
    "anchor_ang_vel_b",
    "anchor_height",
    "anchor_lin_vel_b",
    "anchor_projected_gravity",
    "body_poses_b",
    "joint_pos",
    "joint_pos_rel",
    "joint_vel",
    "last_action",
    "observation_terms",
    "reference_frames",
]


def joint_pos(ctx: StepContext) -> torch.Tensor:
    """Joint positions ``[N, J]``."""
    return ctx.robot.joint_pos


def joint_pos_rel(ctx: StepContext) -> torch.Tensor:
    """Joint positions relative to the layout's default pose ``[N, J]``."""
    return ctx.robot.joint_pos - ctx.layout.default_joint_pos


def joint_vel(ctx: StepContext) -> torch.Tensor:
    """Joint velocities ``[N, J]``."""
    return ctx.robot.joint_vel


def anchor_lin_vel_b(ctx: StepContext) -> torch.Tensor:
    """The anchor's linear velocity in its own frame ``[N, 3]``."""
    return quat_apply_inverse(ctx.anchor_quat_w, ctx.robot.body_lin_vel_w[:, ctx.layout.anchor])


def anchor_ang_vel_b(ctx: StepContext) -> torch.Tensor:
    """The anchor's angular velocity in its own frame ``[N, 3]``."""
    return quat_apply_inverse(ctx.anchor_quat_w, ctx.robot.body_ang_vel_w[:, ctx.layout.anchor])


def anchor_projected_gravity(ctx: StepContext) -> torch.Tensor:
    """Gravity's direction in the anchor's frame ``[N, 3]``."""
    return projected_gravity(ctx.anchor_quat_w)


def last_action(ctx: StepContext) -> torch.Tensor:
    """The action just applied ``[N, A]`` (the policy's last action at the new state)."""
    return ctx.action


def reference_frames(ctx: StepContext) -> torch.Tensor:
    """The future reference frames seen from the robot anchor, ``[N, K, 2 J + 9]`` (:func:`reference_observation`
    of ``ctx.future``, the anchor alone)."""
    future = ctx.future_reference
    return reference_observation(
        future.joint_pos,
        future.joint_vel,
        future.body_pos_w[:, :, 0],
        future.body_quat_w[:, :, 0],
        ctx.anchor_pos_w,
        ctx.anchor_quat_w,
    )


def body_poses_b(ctx: StepContext) -> torch.Tensor:
    """Every tracked body's pose in the anchor frame, flattened body by body ``[N, 9 B]``."""
    robot = ctx.robot
    poses = body_pose_in_anchor_frame(robot.body_pos_w, robot.body_quat_w, ctx.anchor_pos_w, ctx.anchor_quat_w)
    return poses.flatten(1)


def anchor_height(ctx: StepContext) -> torch.Tensor:
    """The anchor's world height ``[N, 1]``."""
    return ctx.anchor_pos_w[:, 2:3]


def amp_body_features(ctx: StepContext) -> torch.Tensor:
    """:func:`~mimic_rl.tasks.tracking.amp_features.amp_features` of the robot ``[N, 2 J + 13 + 3 E]``: joints, the
    anchor's height, velocities and tilt in its heading frame, and the end effectors' positions in that frame."""
    robot, layout = ctx.robot, ctx.layout
    return amp_features(
        robot.joint_pos,
        robot.joint_vel,
        robot.body_pos_w,
        robot.body_quat_w,
        robot.body_lin_vel_w,
        robot.body_ang_vel_w,
        layout.anchor,
        layout.end_effectors,
    )


AMP_FEATURE_SETS = ("joints", "body")
"""What the ``amp`` group holds: ``joints`` (joint positions and velocities, the layout of the reference
observation's first two blocks) or ``body`` (:func:`amp_body_features`)."""


def _groups() -> dict[str, tuple[ObservationTerm, ...]]:
    policy = (
        ObservationTerm("joint_pos_rel", joint_pos_rel),
        ObservationTerm("joint_vel", joint_vel),
        ObservationTerm("anchor_lin_vel_b", anchor_lin_vel_b),
        ObservationTerm("anchor_ang_vel_b", anchor_ang_vel_b),
        ObservationTerm("projected_gravity", anchor_projected_gravity),
        ObservationTerm("last_action", last_action),
    )
    return {
        "policy": policy,
        "reference": (ObservationTerm("reference_frames", reference_frames),),
        "critic": (
            *policy,
            ObservationTerm("body_poses_b", body_poses_b),
            ObservationTerm("anchor_height", anchor_height),
        ),
        "amp": (ObservationTerm("joint_pos", joint_pos), ObservationTerm("joint_vel", joint_vel)),
    }


def _deploy_groups(policy: tuple[ObservationTerm, ...]) -> dict[str, tuple[ObservationTerm, ...]]:
    imu_and_encoders = tuple(t for t in policy if t.name != "anchor_lin_vel_b")
    return {
        "deploy_policy": imu_and_encoders,
        "deploy_reference": (ObservationTerm("deploy_reference", deploy_reference),),
    }


_GROUPS = _groups()
_DEPLOY_GROUPS = {**_GROUPS, **_deploy_groups(_GROUPS["policy"])}


def observation_terms(deployable: bool = False, amp: str = "joints") -> dict[str, tuple[ObservationTerm, ...]]:
    """The groups of the embedded env and mjlab task, in order: ``policy`` (proprioception and the last action),
    ``reference`` (the future reference frames), ``critic`` (``policy``'s terms, the body poses in the anchor frame,
    the anchor's height) and ``amp`` (``amp``: one of :data:`AMP_FEATURE_SETS`, joint positions and velocities by
    default); with ``deployable`` also ``deploy_policy`` (``policy`` less the anchor's linear velocity) and
    ``deploy_reference`` (``mimic_rl.tasks.tracking.deploy``). A new dict each call (the rows are shared)."""
    if amp not in AMP_FEATURE_SETS:
        raise ValueError(f"amp features must be one of {AMP_FEATURE_SETS}, got {amp!r}")
    table = dict(_DEPLOY_GROUPS if deployable else _GROUPS)
    if amp == "body":
        table["amp"] = (ObservationTerm("amp_body_features", amp_body_features),)
    return table
