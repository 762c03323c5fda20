"""tools/clip_contacts.py: a foot that sinks and skates by known amounts is measured as such (hand-built clips)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mimic_rl.envs.mujoco.robots import humanoid28_config
from mimic_rl.motion import SyntheticMotionConfig, synthetic_clip
from mimic_rl.motion.formats import clip_from_root_and_joints, save_motion
from mimic_rl.motion.kinematics import RobotKinematics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from clip_contacts import clip_contacts, pinned_clip


def _dragged(tmp_path, speed: float, sink: float):
    kin = RobotKinematics(humanoid28_config().mjcf)
    stand = synthetic_clip(kin, SyntheticMotionConfig(duration=2.0, fps=30.0, amplitude=0.0))
    root = stand.body_pos_w[:, 0].astype(np.float64).copy()
    root[:, 0] += speed * np.arange(len(root)) / stand.fps
    root[:, 2] -= sink
    clip = clip_from_root_and_joints(kin, root, stand.body_quat_w[:, 0], stand.joint_pos, stand.fps)
    return save_motion(clip, tmp_path / "dragged.npz"), stand


@pytest.mark.parametrize(("speed", "sink"), [(0.0, 0.0), (0.4, 0.02)])
def test_a_standing_clip_dragged_and_sunk_reads_its_speed_and_depth(tmp_path, speed, sink):
    """Breakage caught: a wrong time base or sign in the skate speed or the depth, feet on the floor not counted (or
    the first and last frames, which have no central difference, left out of the share). The standing pose (every
    joint at 0) has both soles flat on the floor; the whole clip is then moved forward at ``speed`` and down by
    ``sink``, so every point of a sole moves at ``speed`` ``sink`` under the floor."""
    path, _ = _dragged(tmp_path, speed, sink)
    stats = clip_contacts(str(path), "humanoid28", None, None, contact=0.015)
    assert stats["root_speed"] == pytest.approx(speed, abs=1e-6)
    assert stats["deepest_mm"] == pytest.approx(1000 * sink, abs=0.5)  # the synthetic clip grounds the soles at 0
    assert stats["lowest_median_mm"] == pytest.approx(-1000 * sink, abs=0.5)
    assert stats["sunk_share"] == (1.0 if sink > 0.005 else 0.0)
    assert stats["on_floor_share"] == 1.0
    assert stats["skate_median"] == pytest.approx(speed, abs=1e-6)
    assert stats["skate_p90"] == pytest.approx(speed, abs=1e-6)


def test_pinning_the_feet_of_a_dragged_sunk_clip_gives_back_the_standing_clip(tmp_path):
    """Breakage caught: the root shifted the wrong way or by the wrong amount (the feet must stay put), the first frame
    moved (it has no earlier frame to pin to), the sunk feet not lifted to the floor, velocities not recomputed."""
    path, stand = _dragged(tmp_path, 0.4, 0.02)
    pinned = pinned_clip(str(path), "humanoid28", None, None, contact=0.015)
    np.testing.assert_allclose(
        pinned.body_pos_w[:, 0, :2], stand.body_pos_w[:1, 0, :2].repeat(stand.num_frames, 0), atol=1e-9
    )
    np.testing.assert_allclose(pinned.body_pos_w, stand.body_pos_w, atol=1e-6)  # every body back where it stood
    np.testing.assert_allclose(pinned.body_lin_vel_w, 0.0, atol=1e-6)
    stats = clip_contacts(str(save_motion(pinned, tmp_path / "pinned.npz")), "humanoid28", None, None, contact=0.015)
    assert stats["skate_median"] == pytest.approx(0.0, abs=1e-6) and stats["deepest_mm"] == pytest.approx(0.0, abs=0.5)
