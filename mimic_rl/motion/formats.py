"""Motion file formats, detected by content (never by file name alone).

- ``mimic_rl`` npz: the BeyondMimic / mjlab keys plus ``joint_names`` and ``body_names`` (and ``loop_mode``).
- ``beyondmimic`` npz: ``fps, joint_pos, joint_vel, body_pos_w, body_quat_w, body_lin_vel_w, body_ang_vel_w`` without
  names; joint and body names come from the robot model (MuJoCo's order).
- ``isaaclab_amp`` npz: Isaac Lab's ``humanoid_amp`` motions (``dof_names, body_names, dof_positions, ...``).
- ``csv``: Unitree / LAFAN1 retargets, one row per frame: root position, root quaternion **xyzw**, joint angles.
  Body states come from forward kinematics on the robot's MJCF; the file has no frame rate, so pass ``csv_fps``.
"""

from __future__ import annotations

import glob
import io
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mimic_rl.errors import ConfigError
from mimic_rl.files import PathProblem, path_problem
from mimic_rl.motion.clip import (
    VELOCITY_MISMATCH,
    MotionClip,
    MotionFormatError,
    check_fps,
    drop_held_frames,
    finite_difference_velocities,
    normalize_quaternions,
    velocity_mismatch,
)
from mimic_rl.motion.kinematics import RobotKinematics
from mimic_rl.rotations import quat_slerp

__all__ = [
    "clip_from_root_and_joints",
    "detect_format",
    "expand_motion_paths",
    "load_motion",
    "resample",
    "save_motion",
]

BEYONDMIMIC_KEYS = ("fps", "joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
ISAACLAB_KEYS = (
    "fps",
    "dof_names",
    "body_names",
    "dof_positions",
    "dof_velocities",
    "body_positions",
    "body_rotations",
    "body_linear_velocities",
    "body_angular_velocities",
)
ZIP_MAGIC = b"PK\x03\x04"
MAX_ARRAY_BYTES = 4 * 2**30
"""No motion array is larger (an hour of a 50-body clip at 60 fps is ~0.5 GiB)."""

RobotLike = str | Path | RobotKinematics | None


def _robot(robot: RobotLike) -> RobotKinematics | None:
    if robot is None or isinstance(robot, RobotKinematics):
        return robot
    return RobotKinematics(robot)


def detect_format(path: str | Path) -> str:
    """``"mimic_rl"``, ``"beyondmimic"``, ``"isaaclab_amp"`` or ``"csv"``, from the file's content."""
    path = Path(path)
    problem = path_problem(path, "file")
    if problem == "an empty file":
        raise MotionFormatError(f"{path}: file: expected a motion (npz or csv), found an empty file")
    if problem is not None:
        raise PathProblem(f"{path}: motion: expected a motion file (.npz or .csv), found {problem}")
    sample = path.read_bytes()[:4096]
    head = sample[:4]
    if head == ZIP_MAGIC:
        keys = set(_open_npz(path).files)
        if set(ISAACLAB_KEYS) <= keys:
            return "isaaclab_amp"
        if set(BEYONDMIMIC_KEYS) <= keys:
            return "mimic_rl" if {"joint_names", "body_names"} <= keys else "beyondmimic"
        raise MotionFormatError(
            f"{path}: keys: expected the BeyondMimic keys {list(BEYONDMIMIC_KEYS)} or Isaac Lab's "
            f"{list(ISAACLAB_KEYS)}, found {sorted(keys)}"
        )
    try:
        sample.decode("utf-8", errors="strict" if len(sample) < 4096 else "ignore")
        binary = b"\x00" in sample
    except UnicodeDecodeError:
        binary = True
    if binary:
        raise MotionFormatError(f"{path}: file: expected an npz archive or a text CSV, found binary data")
    return "csv"


def _open_npz(path: Path) -> Any:
    try:
        return np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise MotionFormatError(f"{path}: archive: expected a complete npz file, found a damaged one ({exc})") from exc


def _check_header(npz: Any, key: str, path: Path, kind: str) -> None:
    """Read ``key``'s npy header (not its data) and refuse non-real (or non-text) dtypes and sizes the archive
    cannot hold, before anything is allocated."""
    member = f"{key}.npy"
    try:
        info = npz.zip.getinfo(member)
        with npz.zip.open(member) as f:
            version = np.lib.format.read_magic(f)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(f)
    except (KeyError, zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise MotionFormatError(f"{path}: {key}: expected a readable array, found a damaged entry ({exc})") from exc
    allowed = "fiu" if kind == "real" else "US"
    if dtype.hasobject or dtype.kind not in allowed:
        expected = "real numbers (float or int)" if kind == "real" else "text"
        raise MotionFormatError(f"{path}: {key}: expected {expected}, found an array of dtype {dtype}")
    nbytes = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    # deflate expands at most ~1032x; an entry's declared size beyond that, or a header beyond it, is a lie
    holds = info.file_size if info.compress_type != zipfile.ZIP_STORED else min(info.file_size, info.compress_size)
    holds = min(holds, 1100 * max(info.compress_size, 1))
    if nbytes > min(holds, MAX_ARRAY_BYTES):
        raise MotionFormatError(
            f"{path}: {key}: expected an array the archive holds, found a header that declares shape {shape} "
            f"({nbytes / 2**30:.3g} GiB) in an entry of {info.compress_size} bytes; the file is damaged or crafted"
        )


def _array(npz: Any, key: str, path: Path, kind: str = "real") -> np.ndarray:
    """Entry ``key`` of an npz; ``kind`` is ``"real"`` (numbers) or ``"text"`` (names)."""
    _check_header(npz, key, path, kind)
    try:
        return np.asarray(npz[key])
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise MotionFormatError(f"{path}: {key}: expected a readable array, found a damaged entry ({exc})") from exc


def _fps(value: np.ndarray, path: Path) -> float:
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise MotionFormatError(f"{path}: fps: expected one number, found an array of shape {np.shape(value)}")
    return check_fps(float(flat[0]), f"{path}: fps")


def load_motion(
    path: str | Path, robot: RobotLike = None, csv_fps: float | None = None, fps: float | None = None
) -> MotionClip:
    """Read a motion file (format detected by content) into a validated ``MotionClip``.

    ``robot`` (an MJCF path or ``RobotKinematics``) is needed for CSV files and name-less BeyondMimic npz files, and
    when given, the clip's joints must match the robot's (they are reordered to the robot's order). ``csv_fps`` is
    the CSV's frame rate. ``fps`` resamples the result (lerp for positions and velocities, slerp for rotations).
    """
    path = Path(path)
    kind = detect_format(path)
    kin = _robot(robot)
    if kind == "csv":
        clip = _read_csv(path, kin, csv_fps)
    else:
        npz = _open_npz(path)
        if kind == "isaaclab_amp":
            clip = _read_isaaclab(npz, path)
        else:
            clip = _read_beyondmimic(npz, path, kin, named=kind == "mimic_rl")
    clip.metadata.setdefault("format", kind)
    clip.metadata["source"] = str(path)
    clip.validate(str(path))
    clip, note = drop_held_frames(clip)
    if note is not None:
        clip.metadata["held_frames"] = note
        warnings.warn(f"{path}: {note}", UserWarning, stacklevel=2)
    clip = _checked_velocities(clip, path)
    if kin is not None:
        clip = match_robot(clip, kin, str(path))
    if fps is not None:
        clip = resample(clip, fps)
    return clip


def _checked_velocities(clip: MotionClip, path: Path) -> MotionClip:
    """``clip`` with each velocity field that is not the derivative of its positions (``velocity_mismatch`` above
    ``VELOCITY_MISMATCH``: zeros, another frame rate, body-frame angular velocities) replaced by the finite
    differences, with a warning naming it."""
    bad = {name: error for name, error in velocity_mismatch(clip).items() if error > VELOCITY_MISMATCH}
    if not bad:
        return clip
    fixed = finite_difference_velocities(clip)
    said = ", ".join(f"{name} (relative RMS error {error:.2f})" for name, error in bad.items())
    warnings.warn(
        f"{path}: {said}: not the derivative of the clip's positions; recomputed from them", UserWarning, stacklevel=3
    )
    clip.metadata["velocities_recomputed"] = sorted(bad)
    return clip.copy(**{name: fixed[name] for name in bad})


def _read_isaaclab(npz: Any, path: Path) -> MotionClip:
    a = {k: _array(npz, k, path, "text" if k.endswith("names") else "real") for k in ISAACLAB_KEYS}
    return MotionClip(
        fps=_fps(a["fps"], path),
        joint_names=list(a["dof_names"]),
        body_names=list(a["body_names"]),
        joint_pos=a["dof_positions"],
        joint_vel=a["dof_velocities"],
        body_pos_w=a["body_positions"],
        body_quat_w=a["body_rotations"],
        body_lin_vel_w=a["body_linear_velocities"],
        body_ang_vel_w=a["body_angular_velocities"],
        metadata={"format": "isaaclab_amp", "joint_convention": "isaaclab_amp"},
    )


def _read_beyondmimic(npz: Any, path: Path, kin: RobotKinematics | None, named: bool) -> MotionClip:
    a = {k: _array(npz, k, path) for k in BEYONDMIMIC_KEYS}
    if named:
        joint_names = [str(n) for n in _array(npz, "joint_names", path, "text")]
        body_names = [str(n) for n in _array(npz, "body_names", path, "text")]
    elif kin is None:
        raise MotionFormatError(
            f"{path}: joint_names: expected names for a BeyondMimic/mjlab npz, found none; pass the robot's MJCF "
            "(--robot-mjcf, or robot= in Python) so that they can be taken from the robot model"
        )
    else:
        joint_names, body_names = list(kin.joint_names), list(kin.body_names)
        _check_count(path, "joint_pos", a["joint_pos"], 1, len(joint_names), "joints", kin)
        _check_count(path, "body_pos_w", a["body_pos_w"], 1, len(body_names), "bodies", kin)
    metadata = {"format": "mimic_rl" if named else "beyondmimic"}
    if "loop_mode" in npz.files:
        metadata["loop_mode"] = str(_array(npz, "loop_mode", path, "text"))
    if "joint_convention" in npz.files:  # rotation-vector spherical joints kept from an Isaac Lab humanoid_amp file
        metadata["joint_convention"] = str(_array(npz, "joint_convention", path, "text"))
    return MotionClip(
        fps=_fps(a["fps"], path),
        joint_names=joint_names,
        body_names=body_names,
        joint_pos=a["joint_pos"],
        joint_vel=a["joint_vel"],
        body_pos_w=a["body_pos_w"],
        body_quat_w=a["body_quat_w"],
        body_lin_vel_w=a["body_lin_vel_w"],
        body_ang_vel_w=a["body_ang_vel_w"],
        metadata=metadata,
    )


def _check_count(path: Path, fld: str, arr: np.ndarray, axis: int, n: int, what: str, kin: RobotKinematics) -> None:
    if arr.ndim <= axis or arr.shape[axis] != n:
        raise MotionFormatError(f"{path}: {fld}: expected {n} {what} (robot {kin.source}), found shape {arr.shape}")


def _read_csv(path: Path, kin: RobotKinematics | None, csv_fps: float | None) -> MotionClip:
    if kin is None:
        raise MotionFormatError(
            f"{path}: body states: a CSV has none; pass the robot's MJCF (--robot-mjcf, or robot= in Python) to "
            "compute them by forward kinematics"
        )
    if csv_fps is None:
        raise MotionFormatError(
            f"{path}: fps: a CSV carries no frame rate; pass --csv-fps (env.csv_fps in a config, csv_fps= in Python): "
            "30 for LAFAN1 retargets, 60 for G1 Moves"
        )
    csv_fps = check_fps(csv_fps, f"{path}: --csv-fps")
    text = path.read_text()
    rows = [line for line in text.splitlines() if line.strip()]
    columns = 7 + kin.num_joints
    values = []
    for i, line in enumerate(rows):
        cells = line.split(",")
        if len(cells) != columns:
            raise MotionFormatError(
                f"{path}: row {i + 1}: expected {columns} columns (root xyz, quaternion xyzw, {kin.num_joints} joints "
                f"of {kin.source}), found {len(cells)}" + (" (truncated file?)" if i == len(rows) - 1 and i else "")
            )
        try:
            values.append([float(c) for c in cells])
        except ValueError:
            raise MotionFormatError(f"{path}: row {i + 1}: expected numbers, found {line[:60]!r}") from None
    data = np.asarray(values, dtype=np.float64).reshape(-1, columns)
    if data.shape[0] < 2:
        raise MotionFormatError(f"{path}: frames: expected at least 2 rows, found {data.shape[0]}")
    bad = ~np.isfinite(data)
    if bad.any():
        r, c = (int(i) for i in np.argwhere(bad)[0])
        raise MotionFormatError(f"{path}: row {r + 1}, column {c + 1}: expected a finite number, found {data[r, c]}")
    quat = normalize_quaternions(data[:, [6, 3, 4, 5]], "root quaternion (columns 4-7, xyzw)", str(path))
    return clip_from_root_and_joints(
        kin, data[:, :3], quat.astype(np.float64), data[:, 7:], float(csv_fps), {"format": "csv"}
    )


def clip_from_root_and_joints(
    kin: RobotKinematics,
    root_pos: np.ndarray,
    root_quat: np.ndarray,
    joint_pos: np.ndarray,
    fps: float,
    metadata: dict[str, Any] | None = None,
) -> MotionClip:
    """A full clip (body states by FK, velocities by finite differences through the kinematic chain)."""
    check_fps(fps, "fps")
    root_quat = root_quat / np.linalg.norm(root_quat, axis=-1, keepdims=True)
    body_pos, body_quat = kin.forward(root_pos, root_quat, joint_pos)
    joint_vel, lin_vel, ang_vel = kin.velocities(root_pos, root_quat, joint_pos, fps)
    return MotionClip(
        fps=fps,
        joint_names=list(kin.joint_names),
        body_names=list(kin.body_names),
        joint_pos=joint_pos,
        joint_vel=joint_vel,
        body_pos_w=body_pos,
        body_quat_w=body_quat,
        body_lin_vel_w=lin_vel,
        body_ang_vel_w=ang_vel,
        metadata=dict(metadata or {}),
    )


def match_robot(clip: MotionClip, kin: RobotKinematics, where: str) -> MotionClip:
    """Check that the clip's joints are the robot's, and reorder its joint columns to the robot's order."""
    names, expected = clip.joint_names, kin.joint_names
    if names == expected:
        return clip
    missing = [n for n in expected if n not in names]
    extra = [n for n in names if n not in expected]
    if missing or extra:
        raise MotionFormatError(
            f"{where}: joint_names: expected the {len(expected)} joints of {kin.source}, found {len(names)}; "
            f"missing {missing[:6]}, unexpected {extra[:6]}"
        )
    order = [names.index(n) for n in expected]
    return clip.copy(joint_names=expected, joint_pos=clip.joint_pos[:, order], joint_vel=clip.joint_vel[:, order])


def resample(clip: MotionClip, fps: float) -> MotionClip:
    """The clip at a new frame rate: frames at k / fps for every k with k / fps <= duration (lerp, slerp)."""
    check_fps(fps, "resample: --fps")
    n = int(np.floor(clip.duration * fps + 1e-6)) + 1
    if n < 2:
        raise MotionFormatError(f"resample: frames: {clip.duration:.3f} s at {fps} fps gives fewer than 2 frames")
    x = np.arange(n, dtype=np.float64) * (clip.fps / fps)
    i0 = np.clip(np.floor(x).astype(np.int64), 0, clip.num_frames - 1)
    i1 = np.clip(i0 + 1, 0, clip.num_frames - 1)
    a = (x - i0).astype(np.float64)

    def lerp(arr: np.ndarray) -> np.ndarray:
        w = a.reshape(-1, *([1] * (arr.ndim - 1)))
        return (1.0 - w) * arr[i0] + w * arr[i1]

    q0 = torch.from_numpy(clip.body_quat_w[i0].astype(np.float64))
    q1 = torch.from_numpy(clip.body_quat_w[i1].astype(np.float64))
    t = torch.from_numpy(a).reshape(-1, 1).expand(-1, clip.num_bodies)
    quat = quat_slerp(q0, q1, t).numpy()
    return clip.copy(
        fps=float(fps),
        joint_pos=lerp(clip.joint_pos),
        joint_vel=lerp(clip.joint_vel),
        body_pos_w=lerp(clip.body_pos_w),
        body_quat_w=quat,
        body_lin_vel_w=lerp(clip.body_lin_vel_w),
        body_ang_vel_w=lerp(clip.body_ang_vel_w),
    )


def save_motion(clip: MotionClip, path: str | Path) -> Path:
    """Write the clip as this package's npz (BeyondMimic keys + names + loop mode, and the joint convention of a clip
    read from an Isaac Lab humanoid_amp file, whose spherical joints are rotation vectors), atomically."""
    clip.validate()
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(".npz")
    buffer = io.BytesIO()
    convention = clip.metadata.get("joint_convention")
    np.savez(
        buffer,
        **({"joint_convention": np.array(str(convention))} if convention else {}),
        fps=np.array([clip.fps], dtype=np.float64),
        joint_pos=clip.joint_pos,
        joint_vel=clip.joint_vel,
        body_pos_w=clip.body_pos_w,
        body_quat_w=clip.body_quat_w,
        body_lin_vel_w=clip.body_lin_vel_w,
        body_ang_vel_w=clip.body_ang_vel_w,
        joint_names=np.array(clip.joint_names),
        body_names=np.array(clip.body_names),
        loop_mode=np.array(clip.loop_mode),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(buffer.getvalue())
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path


def expand_motion_paths(paths: list[str]) -> list[Path]:
    """Motion files from paths, folders (their .npz and .csv files, sorted; where a folder holds both ``a.csv`` and
    ``a.npz``, the npz, which is the converted clip) and glob patterns."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            entries = sorted(path.iterdir())
            found = [q for q in entries if q.suffix.lower() in (".npz", ".csv") and not q.name.startswith(".")]
            npz_stems = {q.stem for q in found if q.suffix.lower() == ".npz"}
            found = [q for q in found if q.suffix.lower() == ".npz" or q.stem not in npz_stems]  # a.npz over a.csv
            if not found:
                what = "an empty folder" if not entries else f"a folder of {len(entries)} entries, none .npz or .csv"
                raise PathProblem(
                    f"{path}: --motion: expected motion files (.npz or .csv) in the folder, found {what}; pass motion "
                    "files or a folder that holds them (subfolders are not searched)"
                )
            out += found
        elif any(c in p for c in "*?["):
            matched = [Path(q) for q in sorted(glob.glob(p))]
            if not matched:
                raise PathProblem(f"{p}: --motion: expected the pattern to match motion files, found none")
            out += matched
        else:
            problem = path_problem(path, "file")
            if problem is not None and problem != "an empty file":  # an empty file is the reader's to report
                raise PathProblem(
                    f"{path}: --motion: expected a motion file (.npz or .csv) or a folder, found {problem}"
                )
            out.append(path)
    if not out:
        raise ConfigError("env.motions: expected motion files or folders, found none; pass --motion FILE_OR_DIR ...")
    return out
