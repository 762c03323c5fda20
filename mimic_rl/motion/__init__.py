"""Motions: the clip type, file formats, forward kinematics, the motion library and synthetic clips."""

from mimic_rl.motion.adaptive import AdaptiveSampler, AdaptiveSamplingConfig
from mimic_rl.motion.clip import LOOP_MODES, MotionClip, MotionFormatError
from mimic_rl.motion.formats import (
    clip_from_root_and_joints,
    detect_format,
    expand_motion_paths,
    load_motion,
    resample,
    save_motion,
)
from mimic_rl.motion.kinematics import RobotKinematics, mj_kinematics
from mimic_rl.motion.library import SAMPLING_MODES, MotionLibrary
from mimic_rl.motion.state import BodyState
from mimic_rl.motion.synthetic import JointPattern, SyntheticMotionConfig, synthetic_clip

__all__ = [
    "LOOP_MODES",
    "SAMPLING_MODES",
    "AdaptiveSampler",
    "AdaptiveSamplingConfig",
    "BodyState",
    "JointPattern",
    "MotionClip",
    "MotionFormatError",
    "MotionLibrary",
    "RobotKinematics",
    "SyntheticMotionConfig",
    "clip_from_root_and_joints",
    "detect_format",
    "expand_motion_paths",
    "load_motion",
    "mj_kinematics",
    "resample",
    "save_motion",
    "synthetic_clip",
]
