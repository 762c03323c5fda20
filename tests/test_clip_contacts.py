"""mimic_rl.motion.contacts (and tools/clip_contacts.py on it): a foot that floats, sinks and skates by known amounts is
measured as such (hand-built clips), a clip whose feet skate or float is said on loading, and pinning plants the feet.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from mimic_rl.envs.mujoco.robots import g1_config, humanoid28_config
from mimic_rl.motion import SyntheticMotionConfig, synthetic_clip
from mimic_rl.motion.contacts import (
    FLIGHT_M,
    FLOAT_WARN_M,
    PIN_MAX_M_S,
    SKATE_WARN_M_S,
    foot_contacts,
    foot_warnings,
    pin_feet,
)
from mimic_rl.motion.formats import clip_from_root_and_joints, save_motion
from mimic_rl.motion.kinematics import RobotKinematics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from clip_contacts import clip_contacts, pinned_clip


def _moved(kin: RobotKinematics, speed: float, sink: float):
    """A standing clip (every joint at 0, soles grounded by ``kin.lowest_point``), dragged forward at ``speed`` and
    moved down by ``sink``; and the standing clip."""
    stand = synthetic_clip(kin, SyntheticMotionConfig(duration=2.0, fps=30.0, amplitude=0.0))
    root = stand.body_pos_w[:, 0].astype(np.float64).copy()
    root[:, 0] += speed * np.arange(len(root)) / stand.fps
    root[:, 2] -= sink
    return clip_from_root_and_joints(kin, root, stand.body_quat_w[:, 0], stand.joint_pos, stand.fps), stand


def _dragged(tmp_path, speed: float, sink: float):
    clip, stand = _moved(RobotKinematics(humanoid28_config().mjcf), speed, sink)
    return save_motion(clip, tmp_path / "dragged.npz"), stand


@pytest.mark.parametrize(("speed", "sink"), [(0.0, 0.0), (0.4, 0.02)])
def test_a_standing_clip_dragged_and_sunk_reads_its_speed_and_depth(tmp_path, speed, sink):
    """Breakage caught: a wrong time base or sign in the skate speed or the depth, feet on the floor not counted (or
    the first and last frames, which have no central difference, left out of the share). The standing pose (every
    joint at 0) has both soles flat on the floor; the whole clip is then moved forward at ``speed`` and down by
    ``sink``, so every point of a sole moves at ``speed`` ``sink`` under the floor."""
    path, _ = _dragged(tmp_path, speed, sink)
    stats = clip_contacts(str(path), "humanoid28", None, None, contact=0.015)
    assert stats.root_speed == pytest.approx(speed, abs=1e-6)
    assert stats.deepest == pytest.approx(sink, abs=5e-4)  # the synthetic clip grounds the soles at 0
    assert stats.lowest_median == pytest.approx(-sink, abs=5e-4)
    assert stats.sunk_share == (1.0 if sink > 0.005 else 0.0)
    assert stats.on_floor_share == 1.0
    assert stats.skate_median == pytest.approx(speed, abs=1e-6)
    assert stats.skate_p90 == pytest.approx(speed, abs=1e-6)


def test_a_g1_standing_on_its_capsule_soles_is_on_the_floor(data_dir):
    """Breakage caught: the capsules' radius not taken off (MuJoCo's geom-type enum is not found by ``in`` in a tuple
    of enums: an earlier version of the tool read every G1 clip 10 mm too high, the radius of its sole capsules). The
    reference is ``RobotKinematics.lowest_point``, which grounds the synthetic clip by its own exact per-geom formula
    (on the collision geoms: it once counted the G1's visual foot meshes, whose bounding boxes reach 17 mm lower)."""
    cfg = g1_config(data_dir / "robots/unitree_g1/g1.xml")
    kin = RobotKinematics(cfg.mjcf)
    for lift in (0.0, 0.05):
        clip, _ = _moved(kin, 0.0, -lift)
        stats = foot_contacts(kin, clip, cfg.feet)
        assert stats.lowest_median == pytest.approx(lift, abs=1e-5)
        assert stats.on_floor_share == (1.0 if lift == 0.0 else 0.0)


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
    assert stats.skate_median == pytest.approx(0.0, abs=1e-6) and stats.deepest == pytest.approx(0.0, abs=5e-4)


@pytest.mark.parametrize("speed", [1.0, 1.5, 3.0])
def test_a_foot_sweeping_over_the_floor_faster_than_the_gate_is_not_pinned(speed):
    """Breakage caught: a fast low swing taken for a stance foot (pinning once moved G1 clips that do not skate by up
    to 1.07 m, humanoid28's dance by 0.65 m). The standing clip dragged at ``speed`` with its soles on the floor: below
    ``PIN_MAX_M_S`` (1.25 m/s) its root is held where it started, above it the clip keeps its own root."""
    kin = RobotKinematics(humanoid28_config().mjcf)
    clip, stand = _moved(kin, speed, 0.0)
    pinned = pin_feet(kin, clip, humanoid28_config().feet)
    held = speed < PIN_MAX_M_S
    expected = (stand if held else clip).body_pos_w[:, 0, :2]
    np.testing.assert_allclose(pinned.body_pos_w[:, 0, :2], expected, atol=1e-9)
    moved = np.linalg.norm(pinned.body_pos_w[-1, 0, :2] - clip.body_pos_w[-1, 0, :2])
    assert moved == pytest.approx(speed * (clip.num_frames - 1) / clip.fps if held else 0.0, abs=1e-9)


def test_pinning_a_g1_clip_keeps_its_capsule_soles_on_the_floor(data_dir):
    """Breakage caught: pinning that reads the soles without their radius lifts a grounded G1 clip by 10 mm."""
    cfg = g1_config(data_dir / "robots/unitree_g1/g1.xml")
    kin = RobotKinematics(cfg.mjcf)
    clip, stand = _moved(kin, 0.3, 0.0)
    pinned = pin_feet(kin, clip, cfg.feet)
    np.testing.assert_allclose(pinned.body_pos_w, stand.body_pos_w, atol=1e-5)


def _hopping(kin: RobotKinematics, lift: float):
    """The standing clip (3 s at 30 fps) lifted by ``lift``, with a 0.10 m hop of its whole body from 1.0 to 1.67 s,
    swaying sideways by 2 cm at most (no frame held: loading drops a clip's held first and last frames)."""
    stand = synthetic_clip(kin, SyntheticMotionConfig(duration=3.0, fps=30.0, amplitude=0.0))
    root = stand.body_pos_w[:, 0].astype(np.float64).copy()
    frame = np.arange(len(root))
    root[:, 1] += 0.02 * np.sin(2 * np.pi * frame / len(root))
    u = np.clip((frame - 30) / 20, 0.0, 1.0)
    root[:, 2] += lift + 0.10 * 4 * u * (1 - u)
    return clip_from_root_and_joints(kin, root, stand.body_quat_w[:, 0], stand.joint_pos, stand.fps)


def test_pinning_brings_a_floating_clip_down_and_keeps_its_hop(tmp_path, capsys):
    """The fix the float warning names (G1 ``M_Move8`` stands 58 mm up). Breakage caught: a floating clip left in
    the air (only sunk feet lifted, as pinning did first), the whole clip pressed to the floor (the hop flattened: its
    feet must still reach 0.10 m), the float taken from the hop's top (where the feet are still too), the numbers the
    command prints not the clip's (60 mm up, the hand-built clip's own)."""
    from mimic_rl.cli import main
    from mimic_rl.motion import load_motion

    kin = RobotKinematics(humanoid28_config().mjcf)
    feet = humanoid28_config().feet
    floating, grounded = _hopping(kin, 0.06), _hopping(kin, 0.0)
    pinned = pin_feet(kin, floating, feet)
    np.testing.assert_allclose(pinned.body_pos_w, grounded.body_pos_w, atol=1e-6)
    assert foot_contacts(kin, pinned, feet).lowest_median == pytest.approx(0.0, abs=1e-6)
    out = tmp_path / "grounded.npz"
    path = save_motion(floating, tmp_path / "floating.npz")
    assert main(["convert", str(path), "--robot", "humanoid28", "--pin-feet", "--output", str(out)]) == 0
    assert "lowest foot point 60 -> 0 mm (median)" in capsys.readouterr().out
    np.testing.assert_allclose(
        load_motion(out).body_pos_w[:, 0, 2].max() - grounded.body_pos_w[0, 0, 2], 0.10, atol=1e-3
    )


@pytest.mark.parametrize("lift", [0.0, 0.06])
def test_a_hop_is_read_as_a_flight_of_its_length_over_the_clips_own_floor(lift):
    """Breakage caught: flights counted from the world's floor (a clip floating 60 mm would be in flight throughout),
    an off-by-one in the longest stretch or its start, the root's crouch read from the world's floor. Hand-computed:
    the hop lifts the whole body by ``0.40 u (1 - u)`` m, ``u = (frame - 30) / 20``, so it is over ``FLIGHT_M`` (30 mm)
    for ``u`` in (0.081, 0.919): frames 32 to 48, 17 frames, 17/30 s from 32/30 s; between hops the root stands at the
    standing clip's height over the floor."""
    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = _hopping(kin, lift)
    stats = foot_contacts(kin, clip, humanoid28_config().feet)
    assert FLIGHT_M == 0.03
    assert stats.longest_flight_s == pytest.approx(17 / 30)
    assert stats.longest_flight_at_s == pytest.approx(32 / 30)
    assert stats.flight_share == pytest.approx(17 / clip.num_frames)
    stand = _hopping(kin, 0.0).body_pos_w[0, 0, 2]  # frame 0: before the hop, soles on the floor
    assert stats.root_lowest == pytest.approx(float(stand), abs=1e-5)
    still = foot_contacts(kin, _moved(kin, 0.0, -lift)[0], humanoid28_config().feet)
    assert (still.flight_share, still.longest_flight_s, still.longest_flight_at_s) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("speed", "lift", "said"),
    [(0.0, 0.0, []), (0.45, 0.0, ["skate: .* 0.45 m/s"]), (0.0, 0.06, ["float: .* 60 mm"])],
)
def test_a_clip_whose_feet_skate_or_float_is_said_on_loading(tmp_path, speed, lift, said):
    """Breakage caught: no warning for a clip that a robot cannot follow for its feet (or one for a clean clip), the
    wrong number in it, the warning not reaching a user who loads the clip for the embedded env. The thresholds sit
    between the clips measured (``SKATE_WARN_M_S`` between humanoid28's walk, 0.18 m/s and tracked, and its run, 0.53
    and not tracked as given; ``FLOAT_WARN_M`` between the walk's 22 mm and G1 ``M_Move8``'s 58 mm)."""
    assert 0.18 < SKATE_WARN_M_S < 0.45 and 0.022 < FLOAT_WARN_M < 0.058
    clip, _ = _moved(RobotKinematics(humanoid28_config().mjcf), speed, -lift)
    path = save_motion(clip, tmp_path / "clip.npz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        humanoid28_config().load_clip(path)
    lines = [str(w.message) for w in caught if "the clip's feet" in str(w.message)]
    assert len(lines) == len(said)
    for line, pattern in zip(lines, said, strict=True):
        assert line.startswith(f"{path}: the clip's feet ")
        assert re.search(pattern, line), line
    kin = RobotKinematics(humanoid28_config().mjcf)
    assert len(foot_warnings("x", foot_contacts(kin, clip, humanoid28_config().feet))) == len(said)


def test_the_loader_of_the_mjlab_and_isaaclab_tasks_says_it_too(tmp_path, data_dir):
    """Breakage caught: the warning only on the embedded backend, while clips for mjlab and Isaac Lab (where users
    train at scale) load through ``tracking_command.load_clips``; or the G1 feet it checks by default wrong."""
    from mimic_rl.envs.common.tracking_command import TrackingCommandSettings, load_clips

    kin = RobotKinematics(g1_config(data_dir / "robots/unitree_g1/g1.xml").mjcf)
    clip, _ = _moved(kin, 0.0, -0.06)
    path = save_motion(clip, tmp_path / "floating.npz")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_clips([str(path)], None, kin, TrackingCommandSettings().feet)
        load_clips([str(path)], None, kin)  # no feet named: nothing to check
    lines = [str(w.message) for w in caught if "the clip's feet" in str(w.message)]
    assert len(lines) == 1 and re.search(r"float: .* 60 mm above the floor", lines[0]), lines


def test_convert_pin_feet_plants_a_dragged_sunk_clip_and_says_by_how_much(tmp_path, capsys):
    """``mimic-rl convert --robot humanoid28 --pin-feet`` (what the skate warning tells a user to run). Breakage
    caught: the feet not pinned (or pinned on the wrong bodies), the clip resampled before pinning or not at all, the
    numbers it prints not the clip's (0.40 m/s dragged, 20 mm sunk, the root moved back by the drag's 0.8 m: the
    hand-built clip's own)."""
    from mimic_rl.cli import main
    from mimic_rl.motion import load_motion

    path, stand = _dragged(tmp_path, 0.4, 0.02)
    out = tmp_path / "pinned.npz"
    assert main(["convert", str(path), "--robot", "humanoid28", "--pin-feet", "--output", str(out)]) == 0
    said = capsys.readouterr().out
    assert re.search(r"feet pinned \(right_foot, left_foot\): stance feet skate at a median 0\.40 -> 0\.00 m/s", said)
    assert "deepest in the floor 20 -> 0 mm" in said
    moved = 0.4 * (stand.num_frames - 1) / stand.fps  # the drag's distance: the pinned root stands where it started
    assert f"root moved by up to {moved:.2f} m horizontally" in said
    np.testing.assert_allclose(load_motion(out).body_pos_w, stand.body_pos_w, atol=1e-5)
    half = tmp_path / "half.npz"
    argv = ["convert", str(path), "--robot", "humanoid28", "--pin-feet", "--fps", "15", "--output", str(half)]
    assert main(argv) == 0
    resampled = load_motion(half)
    assert resampled.fps == 15.0 and resampled.num_frames == (stand.num_frames + 1) // 2
    np.testing.assert_allclose(resampled.body_pos_w, stand.body_pos_w[::2], atol=1e-5)


def test_convert_finds_the_g1_feet_in_its_mjcf_and_warns_when_not_asked_to_pin(tmp_path, data_dir, capsys):
    """Breakage caught: an MJCF path's feet not found (the G1's ankle-roll links), a skating clip converted without a
    word (training warns about it; converting it should too), the warning naming a command that does not pin."""
    from mimic_rl.cli import main

    mjcf = data_dir / "robots/unitree_g1/g1.xml"
    clip, stand = _moved(RobotKinematics(g1_config(mjcf).mjcf), 0.45, 0.0)
    path = save_motion(clip, tmp_path / "skating.npz")
    assert main(["convert", str(path), "--robot", str(mjcf), "--output", str(tmp_path / "same.npz")]) == 0
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "the clip's feet" in x]  # the CLI's one line
    assert "skate" in line and "0.45 m/s" in line and "`mimic-rl convert CLIP --robot ROBOT --pin-feet" in line
    out = tmp_path / "planted.npz"
    assert main(["convert", str(path), "--robot", str(mjcf), "--pin-feet", "--output", str(out)]) == 0
    assert "(left_ankle_roll_link, right_ankle_roll_link): stance feet skate at a median 0.45 -> 0.00" in (
        capsys.readouterr().out
    )
    with np.load(out) as written:  # as written: loading drops the held frames of a clip that stands still
        np.testing.assert_allclose(written["body_pos_w"], stand.body_pos_w, atol=1e-5)
