"""Synthetic, kinematically consistent motions for any floating-base robot MJCF.

Joint trajectories are seeded sums of sinusoids, smooth, and inside the joint limits. The root stays upright above
the origin (optionally turning), and its height is set every frame so that the lowest point of the ground bodies
(the feet) touches z = 0. Body states come from forward kinematics. Used by unit tests and to generate the demo
motions shipped in ``motions/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimic_rl.motion.clip import MotionClip
from mimic_rl.motion.formats import clip_from_root_and_joints
from mimic_rl.motion.kinematics import RobotKinematics

__all__ = ["JointPattern", "SyntheticMotionConfig", "joint_trajectories", "synthetic_clip"]


@dataclass(frozen=True)
class JointPattern:
    """A hand-set trajectory for the joints whose name matches ``regex``: ``q = offset + amplitude * sin(...)``.

    The values are fractions of the joint's range measured from its neutral position (0 clamped into the limits):
    positive towards the upper limit, negative towards the lower. The result is always clipped into the limits. A
    pattern that crosses 0 on a joint with asymmetric limits changes slope there; keep it on one side for smoothness.
    """

    regex: str
    offset: float = 0.0
    amplitude: float = 0.3
    frequency: float = 0.5
    phase: float = 0.0
    radians: bool = False
    """Take ``offset`` and ``amplitude`` as joint angles in radians instead of fractions of the range."""


@dataclass(frozen=True)
class SyntheticMotionConfig:
    """How to generate a clip; every field has a sane default."""

    duration: float = 10.0
    fps: float = 50.0
    seed: int = 0
    amplitude: float = 0.3
    """Random joints move within [neutral - amplitude * (neutral - lower), neutral + amplitude * (upper - neutral)]."""
    frequency_range: tuple[float, float] = (0.2, 0.8)
    """Hz of the random sinusoids."""
    num_harmonics: int = 3
    yaw_rate: float = 0.0
    """rad/s of root turning."""
    patterns: tuple[JointPattern, ...] = field(default_factory=tuple)
    """Hand-set joints (the first matching pattern wins); other joints get random sinusoids."""
    ground_bodies: tuple[str, ...] | None = None
    """Bodies that touch the ground; default: bodies named like feet, ankles or toes (all bodies if none)."""
    loop_mode: str = "clamp"


def _neutral_and_spans(kin: RobotKinematics) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lower = np.where(np.isfinite(kin.joint_lower), kin.joint_lower, -np.pi)
    upper = np.where(np.isfinite(kin.joint_upper), kin.joint_upper, np.pi)
    neutral = np.clip(0.0, lower, upper)
    return neutral, upper - neutral, neutral - lower


def joint_trajectories(kin: RobotKinematics, cfg: SyntheticMotionConfig, times: np.ndarray) -> np.ndarray:
    """Joint positions ``[T, J]``: patterns where given, seeded smooth sinusoids elsewhere, all within limits."""
    rng = np.random.default_rng(cfg.seed)
    neutral, up, down = _neutral_and_spans(kin)
    q = np.empty((len(times), kin.num_joints))
    for j, name in enumerate(kin.joint_names):
        pattern = next((p for p in cfg.patterns if re.fullmatch(p.regex, name)), None)
        if pattern is not None:
            # v in [-1, 1]: a fraction of the way from neutral to the upper (v > 0) or lower (v < 0) limit
            v = pattern.offset + pattern.amplitude * np.sin(2 * np.pi * pattern.frequency * times + pattern.phase)
            q[:, j] = v if pattern.radians else neutral[j] + np.where(v >= 0, v * up[j], v * down[j])
            continue
        freqs = rng.uniform(*cfg.frequency_range, size=cfg.num_harmonics)
        phases = rng.uniform(0, 2 * np.pi, size=cfg.num_harmonics)
        weights = rng.uniform(0.2, 1.0, size=cfg.num_harmonics)
        wave = (weights[:, None] * np.sin(2 * np.pi * freqs[:, None] * times[None] + phases[:, None])).sum(0)
        s = wave / weights.sum()  # in [-1, 1]
        # an affine map onto [neutral - a * down, neutral + a * up]: smooth, and inside the limits
        lo, hi = neutral[j] - cfg.amplitude * down[j], neutral[j] + cfg.amplitude * up[j]
        q[:, j] = 0.5 * (lo + hi) + 0.5 * (hi - lo) * s
    lower = np.where(np.isfinite(kin.joint_lower), kin.joint_lower, -np.inf)
    upper = np.where(np.isfinite(kin.joint_upper), kin.joint_upper, np.inf)
    return np.clip(q, lower, upper)


def _default_ground_bodies(kin: RobotKinematics) -> list[str] | None:
    feet = [b for b in kin.body_names if re.search(r"foot|ankle|toe", b, re.IGNORECASE)]
    return feet or None


def synthetic_clip(robot: str | Path | RobotKinematics, cfg: SyntheticMotionConfig | None = None) -> MotionClip:
    """A synthetic clip for ``robot`` (an MJCF path or ``RobotKinematics``)."""
    cfg = cfg or SyntheticMotionConfig()
    if cfg.duration <= 0 or cfg.fps <= 0:
        raise ValueError(f"synthetic motion needs duration > 0 and fps > 0, got {cfg.duration}, {cfg.fps}")
    kin = robot if isinstance(robot, RobotKinematics) else RobotKinematics(robot)
    num = round(cfg.duration * cfg.fps) + 1
    times = np.arange(num) / cfg.fps
    joint_pos = joint_trajectories(kin, cfg, times)
    yaw = cfg.yaw_rate * times
    root_quat = np.stack([np.cos(yaw / 2), np.zeros(num), np.zeros(num), np.sin(yaw / 2)], axis=-1)
    root_pos = np.zeros((num, 3))
    bodies = list(cfg.ground_bodies) if cfg.ground_bodies is not None else _default_ground_bodies(kin)
    root_pos[:, 2] = -kin.lowest_point(root_pos, root_quat, joint_pos, bodies)
    meta = {"source": f"synthetic(seed={cfg.seed})", "format": "synthetic", "loop_mode": cfg.loop_mode}
    return clip_from_root_and_joints(kin, root_pos, root_quat, joint_pos, cfg.fps, meta).validate()
