"""AMP state features, one layout for policy states and reference states (the same function builds both).

Layout of the last dimension (``J`` joints, ``K`` key bodies), ``F = 2 J + 13 + 3 K``:

====================  ======  ===============================================================================
joint positions       J       as given
joint velocities      J       as given
anchor height         1       world z of the anchor
anchor linear vel.    3       in the anchor's heading frame (world velocity rotated by ``yaw(anchor)^-1``)
anchor angular vel.   3       in the anchor's heading frame
anchor tilt           6       6D (``quat_to_6d``) of ``yaw(anchor)^-1 * anchor``: the orientation relative to
                              the heading frame (roll and pitch only), chosen over projected gravity as the
                              6D encoding AMP-style discriminators use for the root (continuous, no yaw)
key-body positions    3 K     ``yaw(anchor)^-1 (p_key - p_anchor)``, flattened body by body
====================  ======  ===============================================================================

Everything but the joints is expressed in the heading frame, so the features do not change when the whole robot
is turned about world z or moved in the horizontal plane.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mimic_rl.rotations import quat_apply_inverse, quat_conjugate_mul, quat_to_6d, yaw_quat

__all__ = ["amp_feature_dim", "amp_features"]


def amp_feature_dim(num_joints: int, num_key_bodies: int) -> int:
    """Width ``F = 2 J + 13 + 3 K`` of :func:`amp_features`."""
    return 2 * num_joints + 13 + 3 * num_key_bodies


def amp_features(
    joint_pos: torch.Tensor,
    joint_vel: torch.Tensor,
    body_pos_w: torch.Tensor,
    body_quat_w: torch.Tensor,
    body_lin_vel_w: torch.Tensor,
    body_ang_vel_w: torch.Tensor,
    anchor: int,
    key_bodies: Sequence[int] | torch.Tensor,
) -> torch.Tensor:
    """AMP features ``[..., F]`` of a state (see the module docstring for the layout).

    Args:
        joint_pos: ``[..., J]`` joint positions.
        joint_vel: ``[..., J]`` joint velocities.
        body_pos_w: ``[..., B, 3]`` body positions (world).
        body_quat_w: ``[..., B, 4]`` body orientations (world, wxyz).
        body_lin_vel_w: ``[..., B, 3]`` body linear velocities (world).
        body_ang_vel_w: ``[..., B, 3]`` body angular velocities (world).
        anchor: index of the anchor body (pelvis or torso) in the body dimension.
        key_bodies: indices of the key bodies (hands, feet, ...); a long tensor avoids a per-call host copy.
    """
    anchor_pos = body_pos_w[..., anchor, :]
    anchor_quat = body_quat_w[..., anchor, :]
    heading = yaw_quat(anchor_quat)
    lin_vel = quat_apply_inverse(heading, body_lin_vel_w[..., anchor, :])
    ang_vel = quat_apply_inverse(heading, body_ang_vel_w[..., anchor, :])
    tilt = quat_to_6d(quat_conjugate_mul(heading, anchor_quat))
    key_pos = body_pos_w[..., key_bodies, :] - anchor_pos.unsqueeze(-2)
    key_local = quat_apply_inverse(heading.unsqueeze(-2).expand(*key_pos.shape[:-1], 4), key_pos)
    return torch.cat(
        (joint_pos, joint_vel, anchor_pos[..., 2:3], lin_vel, ang_vel, tilt, key_local.flatten(-2)),
        dim=-1,
    )
