"""MotionClip: one reference motion, in this package's conventions (wxyz quaternions, world frame, SI units)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mimic_rl.errors import MotionFormatError
from mimic_rl.rotations import so3_central_derivative
from mimic_rl.utils import FPS_RANGE

__all__ = [
    "LOOP_MODES",
    "VELOCITY_MISMATCH",
    "MotionClip",
    "MotionFormatError",
    "check_fps",
    "drop_held_frames",
    "finite_difference_velocities",
    "held_frames",
    "velocity_mismatch",
]

LOOP_MODES = ("clamp", "wrap")
QUAT_NORM_TOLERANCE = 1e-2
"""Quaternions within this distance of unit norm are renormalized; farther ones are an error."""
VELOCITY_MISMATCH = 0.5
"""A velocity field whose relative RMS error against the finite differences of its positions exceeds this is not the
derivative of the clip's motion (``velocity_mismatch``): ``load_motion`` replaces it by those differences."""


ARRAY_FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


@dataclass(eq=False)
class MotionClip:
    """A reference motion sampled at ``fps``: joint states ``[T, J]`` and world-frame body states ``[T, B, ...]``.

    ``metadata`` holds at least ``source`` (where it came from) and ``loop_mode`` (``"clamp"`` or ``"wrap"``).
    Arrays are float32 numpy arrays; ``validate()`` checks shapes, finiteness and unit quaternions.
    """

    fps: float
    joint_names: list[str]
    body_names: list[str]
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray
    body_lin_vel_w: np.ndarray
    body_ang_vel_w: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fps = float(self.fps)
        self.joint_names = [str(n) for n in self.joint_names]
        self.body_names = [str(n) for n in self.body_names]
        for name in ARRAY_FIELDS:
            setattr(self, name, np.asarray(getattr(self, name), dtype=np.float32))
        self.metadata = {"source": "<memory>", "loop_mode": "clamp", **dict(self.metadata)}

    @property
    def num_frames(self) -> int:
        """T."""
        return int(self.joint_pos.shape[0])

    @property
    def num_joints(self) -> int:
        """J."""
        return int(self.joint_pos.shape[1])

    @property
    def num_bodies(self) -> int:
        """B."""
        return int(self.body_pos_w.shape[1])

    @property
    def dt(self) -> float:
        """Seconds between frames."""
        return 1.0 / self.fps

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame, ``(T - 1) / fps``."""
        return (self.num_frames - 1) / self.fps

    @property
    def loop_mode(self) -> str:
        """``"clamp"`` (hold the last frame) or ``"wrap"`` (loop)."""
        return str(self.metadata.get("loop_mode", "clamp"))

    def validate(self, source: str | None = None) -> MotionClip:
        """Raise ``MotionFormatError`` on any inconsistency; renormalize nearly-unit quaternions. Returns self."""
        where = source or str(self.metadata.get("source", "<memory>"))

        def fail(fld: str, expected: str, found: Any) -> MotionFormatError:
            return MotionFormatError(f"{where}: {fld}: expected {expected}, found {found}")

        check_fps(self.fps, f"{where}: fps")
        if self.loop_mode not in LOOP_MODES:
            raise fail("metadata.loop_mode", f"one of {LOOP_MODES}", repr(self.loop_mode))
        if self.joint_pos.ndim != 2:
            raise fail("joint_pos", "a [T, J] array", f"shape {self.joint_pos.shape}")
        t, j = self.joint_pos.shape
        if t < 2:
            raise fail("frames", "at least 2 frames", t)
        if self.body_pos_w.ndim != 3:
            raise fail("body_pos_w", "a [T, B, 3] array", f"shape {self.body_pos_w.shape}")
        b = self.body_pos_w.shape[1]
        shapes = {
            "joint_pos": (t, j),
            "joint_vel": (t, j),
            "body_pos_w": (t, b, 3),
            "body_quat_w": (t, b, 4),
            "body_lin_vel_w": (t, b, 3),
            "body_ang_vel_w": (t, b, 3),
        }
        for name, shape in shapes.items():
            arr = getattr(self, name)
            if arr.shape != shape:
                raise fail(name, f"shape {shape} (T={t}, J={j}, B={b})", f"shape {arr.shape}")
            bad = ~np.isfinite(arr)
            if bad.any():
                index = tuple(int(i) for i in np.argwhere(bad)[0])
                raise fail(name, "finite values", f"{arr[index]} at index {index}")
        if len(self.joint_names) != j:
            raise fail("joint_names", f"{j} names (one per joint_pos column)", f"{len(self.joint_names)} names")
        if len(self.body_names) != b:
            raise fail("body_names", f"{b} names (one per body)", f"{len(self.body_names)} names")
        for fld, names in (("joint_names", self.joint_names), ("body_names", self.body_names)):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise fail(fld, "unique names", f"duplicates {dupes}")
        self.body_quat_w = normalize_quaternions(self.body_quat_w, "body_quat_w", where)
        return self

    def copy(self, **changes: Any) -> MotionClip:
        """A copy with some fields replaced."""
        values = {name: getattr(self, name) for name in ("fps", "joint_names", "body_names", *ARRAY_FIELDS)}
        values["metadata"] = dict(self.metadata)
        values.update(changes)
        return MotionClip(**values)


def held_frames(clip: MotionClip) -> tuple[int, int, int]:
    """``(hold, first, last)``: frames that repeat their predecessor exactly are export artifacts.

    ``hold`` > 1 when every run of equal frames has that length (a clip captured at ``fps / hold`` and written with
    each frame repeated, as Isaac Lab's humanoid_amp clips are: their 60 fps files hold 30 fps motions); ``first`` and
    ``last`` count repeats of the first and last frames otherwise. All zero for a clean clip.
    """
    frames = np.concatenate((clip.joint_pos, clip.body_pos_w.reshape(clip.num_frames, -1)), axis=1)
    moved = np.abs(np.diff(frames, axis=0)).max(1) > 0  # [T - 1]: frame t+1 differs from frame t
    if moved.all() or not moved.any():
        return 1, 0, 0
    changes = np.nonzero(moved)[0]
    runs = np.diff(np.concatenate(([-1], changes, [len(moved)])))  # lengths of the runs of equal frames
    inner = runs[1:-1] if len(runs) > 2 else runs
    if len(inner) >= 2 and (inner == inner[0]).all() and inner[0] > 1 and runs[0] <= inner[0] and runs[-1] <= inner[0]:
        return int(inner[0]), 0, 0
    return 1, int(runs[0]) - 1, int(runs[-1]) - 1


def drop_held_frames(clip: MotionClip) -> tuple[MotionClip, str | None]:
    """``clip`` without repeated frames (see ``held_frames``) and a note saying what was done (None if nothing).

    A held-frame clip becomes its ``fps / hold`` original: a step-held reference stutters (its positions jump every
    ``hold`` frames). Its velocities are recomputed from the kept frames (``finite_difference_velocities``): a held
    file's own velocities belong to the held sequence (Isaac Lab's humanoid_amp files: joint velocities 0 on every
    kept frame and double on the dropped ones; body velocities smoothed, with the first frames of the run at 1.4
    instead of 3.3 m/s). After dropping a repeated first or last frame the file's velocities are kept.
    """
    hold, first, last = held_frames(clip)
    if hold > 1:
        keep = np.arange(0, clip.num_frames, hold)
        note = (
            f"every frame is repeated {hold} times: read as {clip.fps / hold:g} fps (one frame in {hold}), "
            "velocities from the positions"
        )
        fps = clip.fps / hold
    elif first or last:
        keep = np.arange(first, clip.num_frames - last)
        note = f"the first frame is repeated {first} and the last {last} times: repeats dropped"
        fps = clip.fps
    else:
        return clip, None
    changes = {name: getattr(clip, name)[keep] for name in ARRAY_FIELDS}
    dropped = clip.copy(fps=fps, **changes)
    if hold > 1:
        dropped = dropped.copy(**finite_difference_velocities(dropped))
    return dropped, note


def finite_difference_velocities(clip: MotionClip) -> dict[str, np.ndarray]:
    """The velocities of ``clip``'s positions: ``joint_vel`` and ``body_lin_vel_w`` by central differences
    (``np.gradient``: one-sided at the ends), ``body_ang_vel_w`` (world frame) by ``so3_central_derivative``."""
    dt = 1.0 / clip.fps
    quat = torch.from_numpy(np.ascontiguousarray(clip.body_quat_w, dtype=np.float64))
    return {
        "joint_vel": np.gradient(clip.joint_pos.astype(np.float64), dt, axis=0).astype(np.float32),
        "body_lin_vel_w": np.gradient(clip.body_pos_w.astype(np.float64), dt, axis=0).astype(np.float32),
        "body_ang_vel_w": so3_central_derivative(quat, dt).numpy().astype(np.float32),
    }


def velocity_mismatch(clip: MotionClip) -> dict[str, float]:
    """Relative RMS error of each velocity field against ``finite_difference_velocities``: ``rms(v - d) / rms(d)``
    (0 for a clip whose positions do not move and whose velocities are 0; inf for velocities of a still clip).
    The shared clips, differentiated by other schemes (G1 CSVs through the kinematic chain): 0.00-0.15."""
    errors = {}
    for name, reference in finite_difference_velocities(clip).items():
        given = getattr(clip, name).astype(np.float64)
        diff = float(np.sqrt(np.mean((given - reference) ** 2)))
        scale = float(np.sqrt(np.mean(reference.astype(np.float64) ** 2)))
        errors[name] = diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))
    return errors


def check_fps(fps: float, where: str) -> float:
    """``fps`` if it is a finite frame rate within ``FPS_RANGE``; else ``MotionFormatError`` at ``where``."""
    low, high = FPS_RANGE
    if not (isinstance(fps, int | float | np.number) and np.isfinite(fps) and low <= fps <= high):
        found = f"{fps:g}" if isinstance(fps, int | float | np.number) else repr(fps)
        raise MotionFormatError(f"{where}: expected a frame rate between {low:g} and {high:g} fps, found {found}")
    return float(fps)


def normalize_quaternions(q: np.ndarray, fld: str, where: str) -> np.ndarray:
    """Renormalize quaternions within ``QUAT_NORM_TOLERANCE`` of unit norm; raise for the others."""
    norms = np.linalg.norm(q.astype(np.float64), axis=-1)
    off = np.abs(norms - 1.0)
    if (off > QUAT_NORM_TOLERANCE).any():
        index = tuple(int(i) for i in np.argwhere(off > QUAT_NORM_TOLERANCE)[0])
        raise MotionFormatError(
            f"{where}: {fld}: expected unit quaternions (|q| = 1 +- {QUAT_NORM_TOLERANCE}), found |q| = "
            f"{norms[index]:.4g} at index {index}"
        )
    if (off <= 1e-6).all():  # already unit (to float32 precision): leave the values untouched, so I/O round-trips
        return q.astype(np.float32)
    return (q / norms[..., None]).astype(np.float32)
