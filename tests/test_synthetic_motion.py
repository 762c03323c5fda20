"""Synthetic motions: smooth, within limits, seeded, feet on the ground, kinematically consistent."""

from __future__ import annotations

import numpy as np
import pytest

from mimic_rl.motion import JointPattern, RobotKinematics, SyntheticMotionConfig, synthetic_clip

FEET = ["left_ankle_roll_link", "right_ankle_roll_link"]


@pytest.fixture(scope="module")
def g1(data_dir):
    return RobotKinematics(data_dir / "robots/unitree_g1/g1.xml")


def test_synthetic_clip_is_consistent(g1):
    cfg = SyntheticMotionConfig(duration=4.0, fps=50.0, seed=3)
    clip = synthetic_clip(g1, cfg)
    assert clip.num_frames == 201 and clip.joint_names == g1.joint_names
    assert np.all(clip.joint_pos >= g1.joint_lower - 1e-6) and np.all(clip.joint_pos <= g1.joint_upper + 1e-6)
    root_pos, root_quat = clip.body_pos_w[:, 0].astype(np.float64), clip.body_quat_w[:, 0].astype(np.float64)
    lowest = g1.lowest_point(root_pos, root_quat, clip.joint_pos.astype(np.float64), FEET)
    np.testing.assert_allclose(lowest, 0.0, atol=1e-5)  # the lowest foot point touches the ground every frame
    # body states are the forward kinematics of root and joints
    pos, _ = g1.forward(root_pos, root_quat, clip.joint_pos.astype(np.float64))
    np.testing.assert_allclose(clip.body_pos_w, pos, atol=1e-5)
    # smooth: velocities agree with finite differences of positions, accelerations are bounded
    np.testing.assert_allclose(clip.body_lin_vel_w[1:-1, 1:], np.gradient(clip.body_pos_w, 0.02, axis=0)[1:-1, 1:],
                               atol=5e-2)  # fmt: skip
    accel = np.diff(clip.joint_vel, axis=0) * cfg.fps
    assert np.abs(accel).max() < 50.0
    assert np.abs(clip.joint_vel).mean() > 0.1  # it moves


def test_synthetic_clip_is_seeded_and_patterns_apply(g1):
    a = synthetic_clip(g1, SyntheticMotionConfig(duration=1.0, seed=1))
    b = synthetic_clip(g1, SyntheticMotionConfig(duration=1.0, seed=1))
    c = synthetic_clip(g1, SyntheticMotionConfig(duration=1.0, seed=2))
    assert np.array_equal(a.joint_pos, b.joint_pos) and not np.allclose(a.joint_pos, c.joint_pos)
    knee = JointPattern(r".*_knee_joint", offset=0.5, amplitude=0.5, frequency=0.5)
    squat = synthetic_clip(g1, SyntheticMotionConfig(duration=2.0, fps=50.0, patterns=(knee,), amplitude=0.0))
    j = g1.joint_names.index("left_knee_joint")
    up = g1.joint_upper[j]  # knee neutral is 0 (its lower limit is below 0), so the pattern spans [0, up]
    t = np.arange(101) / 50.0
    np.testing.assert_allclose(squat.joint_pos[:, j], np.clip(up * (0.5 + 0.5 * np.sin(np.pi * t)), 0, up), atol=1e-5)
    height = squat.body_pos_w[:, 0, 2]
    assert height.max() - height.min() > 0.05  # bending the knees lowers the pelvis
