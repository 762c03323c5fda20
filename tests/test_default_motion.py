"""The shipped default clip is a real test of tracking, not a pose to hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mimic_rl.envs.mujoco.robots import humanoid28_config
from mimic_rl.motion import RobotKinematics, load_motion

DEFAULT = Path(__file__).resolve().parents[1] / "motions" / "humanoid28_squat_reach.npz"


def test_default_clip_moves_enough():
    clip = load_motion(DEFAULT)
    assert clip.duration >= 10.0
    assert np.abs(clip.joint_vel).mean() >= 0.5  # mean joint speed, rad/s
    height = clip.body_pos_w[:, clip.body_names.index("pelvis"), 2]
    assert height.max() - height.min() >= 0.10  # a squat
    speed = dict(zip(clip.joint_names, np.abs(clip.joint_vel).mean(0)))
    for joint in ("right_shoulder_y", "left_shoulder_x", "right_elbow", "abdomen_z", "abdomen_y", "neck_z"):
        assert speed[joint] > 0.1, joint  # arms, torso and head move


def test_default_clip_is_kinematically_consistent_for_humanoid28():
    clip = load_motion(DEFAULT)
    kin = RobotKinematics(humanoid28_config().mjcf)
    assert clip.joint_names == kin.joint_names and clip.body_names == kin.body_names
    root_pos, root_quat = clip.body_pos_w[:, 0].astype(np.float64), clip.body_quat_w[:, 0].astype(np.float64)
    pos, _ = kin.forward(root_pos, root_quat, clip.joint_pos.astype(np.float64))
    np.testing.assert_allclose(clip.body_pos_w, pos, atol=1e-5)
    feet = kin.lowest_point(root_pos, root_quat, clip.joint_pos.astype(np.float64), ["right_foot", "left_foot"])
    np.testing.assert_allclose(feet, 0.0, atol=1e-5)  # soles on the ground throughout
