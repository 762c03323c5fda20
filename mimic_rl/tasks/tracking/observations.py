"""Tracking observations: reference frames in the robot anchor frame, body poses, relative-body targets.

Frames follow BeyondMimic / mjlab motion tracking. 6D orientations are ``quat_to_6d``: the first two columns of the
rotation matrix, flattened row by row, ``[r00, r01, r10, r11, r20, r21]`` (identity -> ``[1, 0, 0, 1, 0, 0]``).
"""

from __future__ import annotations

import torch

from mimic_rl.rotations import quat_apply_inverse, quat_conjugate_mul, quat_mul, quat_to_6d

__all__ = [
    "body_pose_in_anchor_frame",
    "projected_gravity",
    "projected_gravity_z",
    "reference_observation",
    "reference_observation_dim",
    "relative_reference_body_poses",
]


def reference_observation_dim(num_joints: int) -> int:
    """Width of one frame of :func:`reference_observation`: ``2 J + 9``."""
    return 2 * num_joints + 9


def reference_observation(
    ref_joint_pos: torch.Tensor,
    ref_joint_vel: torch.Tensor,
    ref_anchor_pos_w: torch.Tensor,
    ref_anchor_quat_w: torch.Tensor,
    anchor_pos_w: torch.Tensor,
    anchor_quat_w: torch.Tensor,
) -> torch.Tensor:
    """The actor's reference group: K future reference frames seen from the robot anchor, ``[N, K, 2J + 9]``.

    Per frame ``k``: ``concat(ref joint pos [J], ref joint vel [J], ref anchor position in the robot anchor frame [3],
    6D of the relative orientation robot_anchor^-1 * ref_anchor [6])``.

    Args:
        ref_joint_pos: ``[N, K, J]`` reference joint positions.
        ref_joint_vel: ``[N, K, J]`` reference joint velocities.
        ref_anchor_pos_w: ``[N, K, 3]`` reference anchor positions (world).
        ref_anchor_quat_w: ``[N, K, 4]`` reference anchor orientations (world, wxyz).
        anchor_pos_w: ``[N, 3]`` robot anchor position (world), shared by the K frames.
        anchor_quat_w: ``[N, 4]`` robot anchor orientation (world, wxyz).
    """
    pos = anchor_pos_w.unsqueeze(-2).expand_as(ref_anchor_pos_w)
    quat = anchor_quat_w.unsqueeze(-2).expand_as(ref_anchor_quat_w)
    rel_pos = quat_apply_inverse(quat, ref_anchor_pos_w - pos)
    rel_ori = quat_to_6d(quat_conjugate_mul(quat, ref_anchor_quat_w))
    return torch.cat((ref_joint_pos, ref_joint_vel, rel_pos, rel_ori), dim=-1)


def body_pose_in_anchor_frame(
    body_pos_w: torch.Tensor, body_quat_w: torch.Tensor, anchor_pos_w: torch.Tensor, anchor_quat_w: torch.Tensor
) -> torch.Tensor:
    """Body poses in an anchor's frame, ``[N, B, 9]`` = position ``[3]`` and 6D orientation ``[6]`` per body.

    Position ``R_a^T (p_b - p_a)``, orientation ``q_a^-1 * q_b`` as 6D. The critic's extras: call it with the robot's
    bodies and robot anchor, or with the reference bodies and either anchor.

    Args:
        body_pos_w: ``[N, B, 3]`` body positions (world).
        body_quat_w: ``[N, B, 4]`` body orientations (world, wxyz).
        anchor_pos_w: ``[N, 3]`` anchor position (world).
        anchor_quat_w: ``[N, 4]`` anchor orientation (world, wxyz).
    """
    pos = anchor_pos_w.unsqueeze(-2).expand_as(body_pos_w)
    quat = anchor_quat_w.unsqueeze(-2).expand_as(body_quat_w)
    rel_pos = quat_apply_inverse(quat, body_pos_w - pos)
    rel_ori = quat_to_6d(quat_conjugate_mul(quat, body_quat_w))
    return torch.cat((rel_pos, rel_ori), dim=-1)


def relative_reference_body_poses(
    ref_body_pos_w: torch.Tensor,
    ref_body_quat_w: torch.Tensor,
    ref_anchor_pos_w: torch.Tensor,
    ref_anchor_quat_w: torch.Tensor,
    anchor_pos_w: torch.Tensor,
    anchor_quat_w: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BeyondMimic's relative body targets: the reference re-anchored at the robot's xy position and heading.

    The whole reference skeleton is moved rigidly so that its anchor sits at ``(robot anchor x, robot anchor y,
    reference anchor z)`` and is turned about world z by ``delta = yaw(anchor) * yaw(ref_anchor)^-1``:
    ``pos = (anchor_xy, ref_anchor_z) + delta (ref_body_pos - ref_anchor_pos)``, ``quat = delta * ref_body_quat``.
    The targets are invariant to translating or yawing the reference as a whole. (Upstream BeyondMimic takes
    ``delta = yaw(anchor * ref_anchor^-1)``, which equals this one when both anchors are upright.)

    Args:
        ref_body_pos_w: ``[N, B, 3]`` reference body positions (world).
        ref_body_quat_w: ``[N, B, 4]`` reference body orientations (world, wxyz).
        ref_anchor_pos_w: ``[N, 3]`` reference anchor position.
        ref_anchor_quat_w: ``[N, 4]`` reference anchor orientation.
        anchor_pos_w: ``[N, 3]`` robot anchor position.
        anchor_quat_w: ``[N, 4]`` robot anchor orientation.

    Returns:
        ``(pos [N, B, 3], quat [N, B, 4])`` target body poses in the world frame.
    """
    # delta is the rotation about z by the difference of the two headings: both headings from one atan2, then the
    # half-angle quaternion and a planar rotation of the offsets (the same numbers as yaw_quat(a) * yaw_quat(b)^-1
    # and quat_apply, in a third of the operations)
    w, x, y, z = torch.stack((anchor_quat_w, ref_anchor_quat_w)).unbind(-1)
    heading = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    angle = heading[0] - heading[1]
    half = 0.5 * angle
    zero = torch.zeros_like(half)
    delta = torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)
    cos, sin = torch.cos(angle).unsqueeze(-1), torch.sin(angle).unsqueeze(-1)
    offset = ref_body_pos_w - ref_anchor_pos_w.unsqueeze(-2)
    dx, dy, dz = offset.unbind(-1)
    rotated = torch.stack((cos * dx - sin * dy, sin * dx + cos * dy, dz), dim=-1)
    origin = torch.cat((anchor_pos_w[..., :2], ref_anchor_pos_w[..., 2:3]), dim=-1)
    pos = origin.unsqueeze(-2) + rotated
    quat = quat_mul(delta.unsqueeze(-2).expand_as(ref_body_quat_w), ref_body_quat_w)
    return pos, quat


def projected_gravity(quat_w: torch.Tensor) -> torch.Tensor:
    """Gravity direction ``(0, 0, -1)`` expressed in the frame of ``quat_w`` (``[..., 4]`` wxyz) -> ``[..., 3]``.

    Equals ``quat_apply_inverse(quat_w, (0, 0, -1))`` = minus the last row of the rotation matrix.
    """
    w, x, y, z = quat_w.unbind(-1)
    return torch.stack((2.0 * (w * y - x * z), -2.0 * (y * z + w * x), projected_gravity_z(quat_w)), dim=-1)


def projected_gravity_z(quat_w: torch.Tensor) -> torch.Tensor:
    """The z component of :func:`projected_gravity` alone, ``[..., 4]`` -> ``[...]``: ``-cos(tilt)``."""
    x, y = quat_w[..., 1], quat_w[..., 2]
    return 2.0 * (x * x + y * y) - 1.0
