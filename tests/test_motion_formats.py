"""Motion formats against the real data: G1 CSV conversion reproduces the shipped npz; humanoid28 round-trips."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from mimic_rl.motion import MotionLibrary, RobotKinematics, detect_format, load_motion, resample, save_motion
from mimic_rl.motion.clip import ARRAY_FIELDS, drop_held_frames, held_frames, velocity_mismatch
from mimic_rl.rotations import quat_angle_error

G1_CLIPS = ["B_HandsUp", "B_Fence2", "J_ShortDance16_JazzWalk"]
H28_CLIPS = ["humanoid_walk", "humanoid_run", "humanoid_dance"]


@pytest.fixture(scope="module")
def g1(data_dir):
    return RobotKinematics(data_dir / "robots/unitree_g1/g1.xml")


@pytest.mark.parametrize("name", G1_CLIPS)
def test_g1_csv_conversion_reproduces_the_shipped_npz(data_dir, g1, name):
    csv = load_motion(data_dir / f"motions/g1/{name}.csv", robot=g1, csv_fps=60)
    npz = load_motion(data_dir / f"motions/g1/{name}.npz", robot=g1)
    # BeyondMimic's converter resamples with arange(0, duration, dt), which drops the CSV's last row.
    assert csv.num_frames == npz.num_frames + 1 and csv.fps == npz.fps == 60
    assert csv.joint_names == npz.joint_names == g1.joint_names and csv.body_names == npz.body_names
    T = npz.num_frames
    err = np.linalg.norm(csv.body_pos_w[:T] - npz.body_pos_w, axis=-1).max(-1)  # worst body per frame
    assert (err < 1e-4).mean() >= 0.95 and err.max() < 5e-3, (np.mean(err < 1e-4), err.max())
    sign = np.sign((csv.body_quat_w[:T] * npz.body_quat_w).sum(-1, keepdims=True))  # q and -q are one rotation
    assert np.abs(csv.body_quat_w[:T] - sign * npz.body_quat_w).max() < 1e-3
    np.testing.assert_allclose(csv.joint_pos[:T], npz.joint_pos, atol=5e-5)
    # Velocities: the npz's last frame uses a one-sided difference (its next row was dropped), so compare before it.
    v = T - 1
    assert np.abs(csv.joint_vel[:v] - npz.joint_vel[:v]).max() < 1e-3
    for field in ("body_lin_vel_w", "body_ang_vel_w"):
        e = np.abs(getattr(csv, field)[:v] - getattr(npz, field)[:v]).reshape(v, -1).max(-1)
        # JazzWalk's third-party npz has ~4% of frames off in FK; central differences spread that to neighbours.
        assert (e < 1e-3).mean() >= 0.85 and e.max() < 0.1, (field, np.mean(e < 1e-3), e.max())


@pytest.mark.parametrize("name", H28_CLIPS)
def test_humanoid28_clips_load_and_round_trip_exactly(data_dir, tmp_path, name):
    clip = load_motion(data_dir / f"motions/humanoid28/{name}.npz")
    raw = np.load(data_dir / f"motions/humanoid28/{name}.npz")
    # Isaac Lab's humanoid_amp clips hold every frame twice (30 fps motions in 60 fps files): read one frame in two
    assert np.array_equal(raw["dof_positions"][0::2], raw["dof_positions"][1::2])
    assert clip.metadata["format"] == "isaaclab_amp" and clip.fps == float(raw["fps"]) / 2
    assert clip.joint_names == list(raw["dof_names"]) and clip.num_bodies == 15
    np.testing.assert_array_equal(clip.joint_pos, raw["dof_positions"][::2])
    np.testing.assert_array_equal(clip.body_quat_w, raw["body_rotations"][::2])
    path = save_motion(clip, tmp_path / f"{name}.npz")
    again = load_motion(path)
    assert again.metadata["format"] == "mimic_rl"
    assert (again.fps, again.joint_names, again.body_names) == (clip.fps, clip.joint_names, clip.body_names)
    for field in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        np.testing.assert_array_equal(getattr(again, field), getattr(clip, field))


def test_humanoid28_interpolation_is_exact_at_frames_and_slerps_between(data_dir):
    clips = [load_motion(data_dir / f"motions/humanoid28/{n}.npz") for n in H28_CLIPS]
    lib = MotionLibrary(clips)
    clip_ids = torch.tensor([0, 1, 2, 2])
    frames = torch.tensor([0, 40, 17, 450])
    times = frames.float() / 30.0  # the clips' frame rate once their held frames are dropped
    state = lib.state(clip_ids, times)
    for i, (c, f) in enumerate(zip(clip_ids.tolist(), frames.tolist())):
        assert np.array_equal(state.joint_pos[i].numpy(), clips[c].joint_pos[f])
        assert np.array_equal(state.body_pos_w[i].numpy(), clips[c].body_pos_w[f])
        assert np.array_equal(state.body_quat_w[i].numpy(), clips[c].body_quat_w[f])
    alpha = 0.3
    mid = lib.state(torch.tensor([2]), torch.tensor([(17 + alpha) / 30.0]))
    q0 = torch.from_numpy(clips[2].body_quat_w[17]).double()
    q1 = torch.from_numpy(clips[2].body_quat_w[18]).double()
    qm = mid.body_quat_w[0].double()
    total = quat_angle_error(q0, q1)
    # on the geodesic, at alpha of the way: angle(q0, qm) = alpha * total and angle(qm, q1) = (1 - alpha) * total
    torch.testing.assert_close(quat_angle_error(q0, qm), alpha * total, atol=2e-6, rtol=1e-4)
    torch.testing.assert_close(quat_angle_error(qm, q1), (1 - alpha) * total, atol=2e-6, rtol=1e-4)
    lerp = (1 - alpha) * clips[2].joint_pos[17] + alpha * clips[2].joint_pos[18]
    np.testing.assert_allclose(mid.joint_pos[0].numpy(), lerp, atol=1e-6)


def test_format_is_detected_by_content_not_name(data_dir, tmp_path, g1):
    npz_as_csv = tmp_path / "looks_like.csv"
    shutil.copy(data_dir / "motions/humanoid28/humanoid_walk.npz", npz_as_csv)
    assert detect_format(npz_as_csv) == "isaaclab_amp"
    assert load_motion(npz_as_csv).num_frames == 77  # 154 frames at 60 fps, each one twice: 77 at 30 fps
    csv_as_npz = tmp_path / "looks_like.npz"
    shutil.copy(data_dir / "motions/g1/B_HandsUp.csv", csv_as_npz)
    assert detect_format(csv_as_npz) == "csv"
    assert detect_format(data_dir / "motions/g1/B_HandsUp.npz") == "beyondmimic"
    # a name-less BeyondMimic npz takes its names from the robot model
    clip = load_motion(data_dir / "motions/g1/B_HandsUp.npz", robot=data_dir / "robots/unitree_g1/g1.xml")
    assert clip.joint_names == g1.joint_names and clip.body_names[0] == "pelvis"


def test_resampling_lerps_and_slerps(data_dir):
    clip = load_motion(data_dir / "motions/humanoid28/humanoid_run.npz")
    assert clip.num_frames == 41 and clip.fps == 30.0  # held frames removed (see the next test)
    half = resample(clip, 15.0)
    assert half.num_frames == 21 and half.fps == 15.0  # 40 intervals of 1/30 s = 1.33 s -> 20 intervals at 15 fps
    np.testing.assert_array_equal(half.joint_pos, clip.joint_pos[::2][:21])
    fifty = resample(clip, 50.0)  # frame 2 at 0.04 s = frame 1.2 of the original
    expected = 0.8 * clip.body_pos_w[1] + 0.2 * clip.body_pos_w[2]
    np.testing.assert_allclose(fifty.body_pos_w[2], expected, atol=1e-6)
    angle = quat_angle_error(
        torch.from_numpy(clip.body_quat_w[1]).double(), torch.from_numpy(fifty.body_quat_w[2]).double()
    )
    total = quat_angle_error(
        torch.from_numpy(clip.body_quat_w[1]).double(), torch.from_numpy(clip.body_quat_w[2]).double()
    )
    torch.testing.assert_close(angle, 0.2 * total, atol=2e-6, rtol=1e-3)


def test_held_frames_are_detected_and_dropped(data_dir):
    """Isaac Lab's humanoid_amp files hold 30 fps motions at 60 fps, each frame twice: a step-held reference that
    stutters. Read as what they are; a repeated first or last frame is dropped; clean clips are untouched."""
    raw = np.load(data_dir / "motions/humanoid28/humanoid_walk.npz")
    with pytest.warns(UserWarning, match=r"humanoid_walk\.npz: every frame is repeated 2 times: read as 30 fps"):
        walk = load_motion(data_dir / "motions/humanoid28/humanoid_walk.npz")
    assert walk.fps == 30.0 and walk.num_frames == 77
    np.testing.assert_array_equal(walk.body_pos_w, raw["body_positions"][::2])
    assert held_frames(walk) == (1, 0, 0)
    clean = load_motion(data_dir / "motions/g1/B_HandsUp.npz", robot=data_dir / "robots/unitree_g1/g1.xml")
    assert held_frames(clean) == (1, 0, 0) and "held_frames" not in clean.metadata
    repeats = clean.copy(**{k: np.concatenate((v[:1], v[:1], v, v[-1:])) for k, v in _arrays(clean).items()})
    assert held_frames(repeats) == (1, 2, 1)
    trimmed, note = drop_held_frames(repeats)
    assert note == "the first frame is repeated 2 and the last 1 times: repeats dropped"
    np.testing.assert_array_equal(trimmed.joint_pos, clean.joint_pos)
    triple = clean.copy(**{k: np.repeat(v, 3, axis=0) for k, v in _arrays(clean).items()})
    assert held_frames(triple) == (3, 0, 0) and drop_held_frames(triple)[0].fps == 20.0


def test_a_held_clips_velocities_come_from_its_positions(data_dir):
    """The humanoid_amp files' joint velocities are 0 on every other frame (the held copy) and double on the next: kept
    frame for frame they said every joint stood still; their body velocities are smoothed over ~10 frames, so the
    run's first frame moved at 1.4 m/s while its positions advance 0.11 m per 1/30 s (3.3 m/s) from the start."""
    raw = np.load(data_dir / "motions/humanoid28/humanoid_run.npz")
    assert np.abs(raw["dof_velocities"][::2]).max() == 0.0 and np.abs(raw["dof_velocities"][1::2]).mean() > 1.0
    assert abs(np.linalg.norm(raw["body_linear_velocities"][0, 0, :2]) - 1.36) < 0.01
    with pytest.warns(UserWarning, match="read as 30 fps .one frame in 2., velocities from the positions"):
        run = load_motion(data_dir / "motions/humanoid28/humanoid_run.npz")
    root = raw["body_positions"][::2, 0].astype(np.float64)
    # hand-computed: (x1 - x0) * 30 at the first frame, (x_{t+1} - x_{t-1}) * 15 inside
    np.testing.assert_allclose(run.body_lin_vel_w[0, 0], (root[1] - root[0]) * 30, rtol=1e-5)
    np.testing.assert_allclose(run.body_lin_vel_w[7, 0], (root[8] - root[6]) * 15, rtol=1e-5)
    assert 3.2 < np.linalg.norm(run.body_lin_vel_w[0, 0, :2]) < 3.5
    joints = raw["dof_positions"][::2].astype(np.float64)
    np.testing.assert_allclose(run.joint_vel[7], (joints[8] - joints[6]) * 15, rtol=1e-4, atol=1e-5)
    assert max(velocity_mismatch(run).values()) < 1e-5


def test_velocities_that_are_not_the_positions_derivative_are_recomputed_with_a_warning(data_dir, tmp_path):
    """Zeroed joint velocities and body-frame angular velocities are caught (relative RMS error against the finite
    differences above 0.5) and replaced; consistent clips (every shared G1 clip: at most 0.15) load untouched."""
    clean = load_motion(data_dir / "motions/g1/B_HandsUp.npz", robot=data_dir / "robots/unitree_g1/g1.xml")
    assert max(velocity_mismatch(clean).values()) < 0.05  # the shared clips: 0.0-0.15 (B_Fence2's angular velocity)
    local = np.einsum(
        "tbji,tbj->tbi", _rotation_matrices(clean.body_quat_w), clean.body_ang_vel_w.astype(np.float64)
    )  # R^T w: the angular velocity in each body's frame
    bad = clean.copy(joint_vel=np.zeros_like(clean.joint_vel), body_ang_vel_w=local)
    errors = velocity_mismatch(bad)
    assert errors["joint_vel"] == pytest.approx(1.0) and errors["body_ang_vel_w"] > 0.5
    assert errors["body_lin_vel_w"] == velocity_mismatch(clean)["body_lin_vel_w"]
    path = save_motion(bad, tmp_path / "bad.npz")
    said = r"bad\.npz: joint_vel \(relative RMS error 1\.00\), body_ang_vel_w .*recomputed"
    with pytest.warns(UserWarning, match=said):
        fixed = load_motion(path)
    assert fixed.metadata["velocities_recomputed"] == ["body_ang_vel_w", "joint_vel"]
    np.testing.assert_array_equal(fixed.body_lin_vel_w, clean.body_lin_vel_w)  # consistent: kept as given
    assert max(velocity_mismatch(fixed).values()) < 0.05
    dt = 1.0 / clean.fps
    np.testing.assert_allclose(fixed.joint_vel[5], (clean.joint_pos[6] - clean.joint_pos[4]) / (2 * dt), atol=1e-4)


def _rotation_matrices(quat_wxyz: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(quat_wxyz.astype(np.float64), -1, 0)
    return np.stack(
        (
            np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)), -1),
            np.stack((2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)), -1),
            np.stack((2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)), -1),
        ),
        -2,
    )


def _arrays(clip):
    return {k: getattr(clip, k) for k in ARRAY_FIELDS}
