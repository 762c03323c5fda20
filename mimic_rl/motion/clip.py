"""MotionClip: one reference motion, in this package's conventions (wxyz quaternions, world frame, SI units)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mimic_rl.errors import MotionFormatError
from mimic_rl.utils import FPS_RANGE

__all__ = ["FPS_RANGE", "LOOP_MODES", "MotionClip", "MotionFormatError", "check_fps"]

LOOP_MODES = ("clamp", "wrap")
QUAT_NORM_TOLERANCE = 1e-2
"""Quaternions within this distance of unit norm are renormalized; farther ones are an error."""


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
