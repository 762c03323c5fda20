"""Isaac Lab humanoid_amp clips on this package's humanoid28 model.

The clips store each spherical joint (``<joint>_x/_y/_z``) as the rotation vector of the child body relative to its
parent; the model has three hinges applied x, then y, then z. ``convert_clip`` turns each rotation vector into the
rotation and decomposes it into the hinges' intrinsic XYZ angles (continuous over time), keeps knees and elbows,
takes the root from the clip's pelvis, and recomputes body states by forward kinematics on the model, so the clip and
the model agree exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from mimic_rl.motion import MotionClip, MotionFormatError, RobotKinematics, clip_from_root_and_joints
from mimic_rl.rotations import matrix_from_quat, quat_from_axis_angle

__all__ = ["convert_clip", "xyz_hinge_angles"]


def xyz_hinge_angles(rotvec: torch.Tensor) -> torch.Tensor:
    """Angles ``(a, b, c)`` with ``R(rotvec) = Rx(a) Ry(b) Rz(c)``, ``[..., 3]`` (b in [-pi/2, pi/2])."""
    r = matrix_from_quat(quat_from_axis_angle(rotvec))
    a = torch.atan2(-r[..., 1, 2], r[..., 2, 2])
    b = torch.asin(r[..., 0, 2].clamp(-1.0, 1.0))
    c = torch.atan2(-r[..., 0, 1], r[..., 0, 0])
    return torch.stack((a, b, c), dim=-1)


def _joint_difference(expected: list[str], found: list[str]) -> str:
    missing = [n for n in expected if n not in found]
    extra = [n for n in found if n not in expected]
    return (
        f"expected humanoid28's {len(expected)} joints, found {len(found)} (missing {missing[:4]}, unexpected "
        f"{extra[:4]}); a motion of another robot needs its MJCF (train, eval: --robot NAME --robot-mjcf MJCF; "
        "convert: --robot MJCF)"
    )


def convert_clip(clip: MotionClip, kin: RobotKinematics) -> MotionClip:
    """A humanoid_amp clip (rotation-vector spherical joints) in the model's hinge convention, body states by FK.

    Clips in the model's own convention pass through, after a check that their joints are the model's; a clip read
    from the ``isaaclab_amp`` format, or saved from one (``mimic-rl convert``: ``joint_convention`` in its metadata),
    is converted.
    """
    where = str(clip.metadata.get("source", "<memory>"))
    amp = clip.metadata.get("format") == "isaaclab_amp" or clip.metadata.get("joint_convention") == "isaaclab_amp"
    if not amp:
        if clip.joint_names != kin.joint_names:
            raise MotionFormatError(f"{where}: joint_names: {_joint_difference(kin.joint_names, clip.joint_names)}")
        return clip
    if sorted(clip.joint_names) != sorted(kin.joint_names):
        raise MotionFormatError(f"{where}: joint_names: {_joint_difference(kin.joint_names, clip.joint_names)}")
    if clip.body_names[0] != "pelvis":
        raise MotionFormatError(f"{where}: body_names: expected the pelvis first, found {clip.body_names[:3]}")
    source = torch.from_numpy(clip.joint_pos.astype(np.float64))
    joint_pos = np.empty((clip.num_frames, kin.num_joints))
    done = set()
    for j, name in enumerate(kin.joint_names):
        if name in done:
            continue
        stem = name[:-2]
        if name.endswith("_x") and f"{stem}_y" in kin.joint_names:
            cols = [clip.joint_names.index(f"{stem}_{axis}") for axis in "xyz"]
            angles = xyz_hinge_angles(source[:, cols]).numpy()
            joint_pos[:, j : j + 3] = np.unwrap(angles, axis=0)  # continuous over time (no 2 pi jumps)
            done.update(f"{stem}_{axis}" for axis in "xyz")
        else:
            joint_pos[:, j] = source[:, clip.joint_names.index(name)].numpy()
            done.add(name)
    root_pos = clip.body_pos_w[:, 0].astype(np.float64)
    root_quat = clip.body_quat_w[:, 0].astype(np.float64)
    kept = {k: v for k, v in clip.metadata.items() if k != "joint_convention"}  # hinge angles from here on
    metadata = {**kept, "format": "humanoid28", "converted_from": "isaaclab_amp"}
    return clip_from_root_and_joints(kin, root_pos, root_quat, joint_pos, clip.fps, metadata)
