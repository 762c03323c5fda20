"""A corpus of malformed motion files, made here; each gets an error naming the file, the field and the problem."""

from __future__ import annotations

import numpy as np
import pytest

from mimic_rl.motion import MotionFormatError, RobotKinematics, load_motion


@pytest.fixture(scope="module")
def g1(data_dir):
    return RobotKinematics(data_dir / "robots/unitree_g1/g1.xml")


def _bm(T=5, J=29, B=30, **overrides):
    """BeyondMimic-layout arrays with valid values."""
    q = np.zeros((T, B, 4), np.float32)
    q[..., 0] = 1
    arrays = {
        "fps": np.array([50.0]),
        "joint_pos": np.zeros((T, J), np.float32),
        "joint_vel": np.zeros((T, J), np.float32),
        "body_pos_w": np.zeros((T, B, 3), np.float32),
        "body_quat_w": q,
        "body_lin_vel_w": np.zeros((T, B, 3), np.float32),
        "body_ang_vel_w": np.zeros((T, B, 3), np.float32),
    }
    arrays.update(overrides)
    return {k: v for k, v in arrays.items() if v is not None}


def _named(T=5, J=3, B=2, **overrides):
    base = _bm(T, J, B)
    base.update(joint_names=np.array([f"j{i}" for i in range(J)]), body_names=np.array([f"b{i}" for i in range(B)]))
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def _isaac(**overrides):
    T, J, B = 4, 2, 2
    q = np.zeros((T, B, 4), np.float32)
    q[..., 0] = 1
    base = {
        "fps": np.array(30),
        "dof_names": np.array(["a", "b"]),
        "body_names": np.array(["p", "q"]),
        "dof_positions": np.zeros((T, J), np.float32),
        "dof_velocities": np.zeros((T, J), np.float32),
        "body_positions": np.zeros((T, B, 3), np.float32),
        "body_rotations": q,
        "body_linear_velocities": np.zeros((T, B, 3), np.float32),
        "body_angular_velocities": np.zeros((T, B, 3), np.float32),
    }
    base.update(overrides)
    return base


def _csv_rows(T=4, J=29, quat=(0, 0, 0, 1)):
    return [",".join(["0", "0", "0.8", *map(str, quat), *["0.1"] * J]) for _ in range(T)]


def _nan_joint():
    a = _named()
    a["joint_pos"][2, 1] = np.nan
    return a


def _inf_body():
    a = _named()
    a["body_pos_w"][1, 0, 2] = np.inf
    return a


def _far_quat():
    a = _named()
    a["body_quat_w"][3, 1] = [2, 0, 0, 0]
    return a


CASES = {
    # name: (content: bytes | dict (npz) | list[str] (csv rows), kwargs, regex that must appear in the error)
    "empty": (b"", {}, r"empty file"),
    "binary_garbage": (bytes(range(256)) * 4, {}, r"file: expected an npz archive or a text CSV, found binary"),
    "truncated_npz": ("truncate", {}, r"(archive|joint_pos|fps|body).*damaged"),
    "missing_key": (_named(body_quat_w=None), {}, r"keys: expected the BeyondMimic keys"),
    "nan_joint": (_nan_joint(), {}, r"joint_pos: expected finite values, found nan at index \(2, 1\)"),
    "inf_body": (_inf_body(), {}, r"body_pos_w: expected finite values, found inf at index \(1, 0, 2\)"),
    "zero_fps": (_named(fps=np.array([0.0])), {}, r"fps: expected a frame rate between 1 and 1000 fps, found 0"),
    "negative_fps": (
        _named(fps=np.array([-30.0])),
        {},
        r"fps: expected a frame rate between 1 and 1000 fps, found -30",
    ),
    "absurd_fps": (
        _named(fps=np.array([1e9])),
        {},
        r"fps: expected a frame rate between 1 and 1000 fps, found 1e\+?0?9",
    ),
    "nan_fps": (_named(fps=np.array([np.nan])), {}, r"fps: expected a frame rate between 1 and 1000 fps, found nan"),
    "text_fps": (
        _named(fps=np.array(["sixty"])),
        {},
        r"fps: expected real numbers \(float or int\), found .*dtype <U5",
    ),
    "complex_joint_pos": (
        _named(joint_pos=np.zeros((5, 3), np.complex64)),
        {},
        r"joint_pos: expected real numbers \(float or int\), found an array of dtype complex64",
    ),
    "text_joint_pos": (
        _named(joint_pos=np.full((5, 3), "0.1")),
        {},
        r"joint_pos: expected real numbers \(float or int\), found an array of dtype <U3",
    ),
    "numeric_names": (_named(joint_names=np.arange(3)), {}, r"joint_names: expected text, found an array of dtype int"),
    "one_frame": (_named(T=1), {}, r"frames: expected at least 2 frames, found 1"),
    "far_from_unit_quat": (
        _far_quat(),
        {},
        r"body_quat_w: expected unit quaternions.*found \|q\| = 2 at index \(3, 1\)",
    ),
    "quat_three_components": (
        _named(body_quat_w=np.zeros((5, 2, 3), np.float32)),
        {},
        r"body_quat_w: expected shape \(5, 2, 4\)",
    ),
    "frame_count_mismatch": (_named(joint_vel=np.zeros((4, 3), np.float32)), {}, r"joint_vel: expected shape \(5, 3\)"),
    "joint_name_count": (_named(joint_names=np.array(["j0", "j1"])), {}, r"joint_names: expected 3 names.*found 2"),
    "duplicate_joint_names": (
        _named(joint_names=np.array(["j0", "j0", "j2"])),
        {},
        r"joint_names: expected unique names, found duplicates \['j0'\]",
    ),
    "names_not_the_robots": (
        _named(J=29, B=30),
        {"robot": "g1"},
        r"joint_names: expected the 29 joints of .*g1.xml.*missing",
    ),
    "nameless_without_robot": (_bm(), {}, r"joint_names: expected names.*pass the robot's MJCF \(--robot-mjcf"),
    "nameless_wrong_joint_count": (_bm(J=27), {"robot": "g1"}, r"joint_pos: expected 29 joints"),
    "isaac_fps_array": (
        _isaac(fps=np.array([30, 60])),
        {},
        r"fps: expected one number, found an array of shape \(2,\)",
    ),
    "isaac_rotations_not_unit": (
        _isaac(body_rotations=np.full((4, 2, 4), 0.9, np.float32)),
        {},
        r"body_quat_w: expected unit quaternions",
    ),
    "csv_wrong_columns": (_csv_rows(J=28), {"robot": "g1", "csv_fps": 30}, r"row 1: expected 36 columns.*found 35"),
    "csv_truncated": (
        [*_csv_rows(), "0,0,0.8,0,0"],
        {"robot": "g1", "csv_fps": 30},
        r"row 5: expected 36 columns.*truncated file\?",
    ),
    "csv_not_numbers": (
        ["a,b,c", *_csv_rows()[1:]],
        {"robot": "g1", "csv_fps": 30},
        r"row 1: expected 36 columns|row 1: expected numbers",
    ),
    "csv_text_cell": (
        [_csv_rows()[0].replace("0.8", "high", 1), *_csv_rows(3)],
        {"robot": "g1", "csv_fps": 30},
        r"row 1: expected numbers",
    ),
    "csv_nan": (
        [_csv_rows()[0].replace("0.8", "nan", 1), *_csv_rows(3)],
        {"robot": "g1", "csv_fps": 30},
        r"row 1, column 3: expected a finite number",
    ),
    "csv_one_row": (_csv_rows(T=1), {"robot": "g1", "csv_fps": 30}, r"frames: expected at least 2 rows, found 1"),
    "csv_without_fps": (_csv_rows(), {"robot": "g1"}, r"fps: a CSV carries no frame rate; pass --csv-fps"),
    "csv_without_robot": (
        _csv_rows(),
        {"csv_fps": 30},
        r"body states: a CSV has none; pass the robot's MJCF \(--robot-mjcf",
    ),
    "csv_bad_root_quat": (
        _csv_rows(quat=(0, 0, 0, 3)),
        {"robot": "g1", "csv_fps": 30},
        r"root quaternion.*expected unit quaternions",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_motion_file_raises_a_clear_error(name, tmp_path, g1, data_dir):
    content, kwargs, pattern = CASES[name]
    path = tmp_path / f"{name}.motion"
    if content == "truncate":
        good = tmp_path / "good.npz"
        np.savez(good, **_named(T=200))
        path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, dict):
        with open(path, "wb") as f:
            np.savez(f, **content)
    else:
        path.write_text("\n".join(content) + "\n")
    kwargs = {k: (g1 if v == "g1" else v) for k, v in kwargs.items()}
    with pytest.raises(MotionFormatError, match=pattern) as info:
        load_motion(path, **kwargs)
    assert str(path) in str(info.value)  # the error names the file


def test_corpus_is_large_enough():
    assert len(CASES) >= 15


def test_nearly_unit_quaternions_are_renormalized(tmp_path):
    a = _named()
    a["body_quat_w"][..., 0] = 1.004
    path = tmp_path / "near.npz"
    np.savez(path, **a)
    clip = load_motion(path)
    np.testing.assert_allclose(np.linalg.norm(clip.body_quat_w, axis=-1), 1.0, atol=1e-6)


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_motion("/nonexistent/clip.npz")


def _npz_with_raw_entry(path, name: str, npy: bytes, **arrays) -> None:
    """An npz of ``arrays`` plus one entry ``name`` with the raw ``npy`` bytes given (a crafted header)."""
    import zipfile

    np.savez(path, **arrays)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(f"{name}.npy", npy)


def test_a_header_that_declares_terabytes_is_refused_before_anything_is_allocated(tmp_path, monkeypatch):
    import io

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 3)})
    arrays = _named()
    del arrays["joint_pos"]
    path = tmp_path / "huge.npz"
    _npz_with_raw_entry(path, "joint_pos", header.getvalue() + b"\0" * 64, **arrays)
    allocated = []
    real_empty = np.ndarray

    def guard(shape, *args, **kwargs):  # numpy allocates the declared size before reading a zip entry
        if int(np.prod(shape)) > 10**8:
            allocated.append(shape)
        return real_empty(shape, *args, **kwargs)

    monkeypatch.setattr(np, "ndarray", guard)
    with pytest.raises(MotionFormatError, match=r"joint_pos: .*declares shape \(1000000000000, 3\) \(1.12e\+04 GiB\)"):
        load_motion(path)
    assert not allocated


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    arrays = _named()
    arrays["joint_pos"] = np.empty((5, 3), dtype=object)
    path = tmp_path / "objects.npz"
    np.savez(path, **arrays)  # numpy pickles object arrays
    with pytest.raises(MotionFormatError, match=r"joint_pos: expected real numbers .* dtype object"):
        load_motion(path)
