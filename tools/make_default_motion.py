"""Generate the default training motion shipped in ``motions/``: humanoid28 squatting and reaching, 12 s at 50 fps.

Legs squat with flat feet (hip pitch -theta, knee 2 theta, ankle pitch -theta; theta from 0 to 0.6 rad, so the pelvis
drops about 14 cm) every 2 s; the arms swing, raise and twist, the torso bends and twists and the head turns. The
clip is synthetic and kinematically consistent (forward kinematics of the humanoid28 model, feet on the ground).

    python tools/make_default_motion.py [--output motions/humanoid28_squat_reach.npz]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mimic_rl.envs.mujoco.robots import humanoid28_config
from mimic_rl.motion import JointPattern, RobotKinematics, SyntheticMotionConfig, save_motion, synthetic_clip

SQUAT = 0.3  # theta = SQUAT * (1 - cos(2 pi f t)) in [0, 0.6]
F = 0.5  # Hz

PATTERNS = (
    # flat-footed squat: the phase -pi/2 starts standing (theta = 0)
    JointPattern(r".*_hip_y", -SQUAT, SQUAT, F, np.pi / 2, radians=True),
    JointPattern(r".*_knee", 2 * SQUAT, -2 * SQUAT, F, np.pi / 2, radians=True),
    JointPattern(r".*_ankle_y", -SQUAT, SQUAT, F, np.pi / 2, radians=True),
    JointPattern(r".*_(hip|ankle)_[xz]", 0.0, 0.0, F, radians=True),
    # arms: swing (y), raise sideways (x, mirrored), twist (z), bend the elbows
    JointPattern(r"right_shoulder_y", -0.3, 0.8, F, 0.0, radians=True),
    JointPattern(r"left_shoulder_y", -0.3, 0.8, F, np.pi, radians=True),
    JointPattern(r"right_shoulder_x", -0.5, 0.5, F, 0.0, radians=True),
    JointPattern(r"left_shoulder_x", 0.5, 0.5, F, np.pi, radians=True),
    JointPattern(r".*_shoulder_z", 0.0, 0.4, F, np.pi / 3, radians=True),
    JointPattern(r".*_elbow", -0.8, 0.5, F, 0.0, radians=True),
    # torso and head
    JointPattern(r"abdomen_y", 0.1, 0.2, F, np.pi / 2, radians=True),
    JointPattern(r"abdomen_z", 0.0, 0.4, 0.4, 0.0, radians=True),
    JointPattern(r"abdomen_x", 0.0, 0.15, 0.3, 0.0, radians=True),
    JointPattern(r"neck_z", 0.0, 0.4, F, 0.0, radians=True),
    JointPattern(r"neck_y", 0.0, 0.2, F, np.pi / 2, radians=True),
    JointPattern(r"neck_x", 0.0, 0.0, F, radians=True),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--output", type=Path, default=Path(__file__).resolve().parents[1] / "motions" / "humanoid28_squat_reach.npz"
    )
    args = parser.parse_args()
    kin = RobotKinematics(humanoid28_config().mjcf)
    cfg = SyntheticMotionConfig(
        duration=12.0, fps=50.0, patterns=PATTERNS, amplitude=0.0, ground_bodies=("right_foot", "left_foot")
    )
    clip = synthetic_clip(kin, cfg)
    clip.metadata["source"] = "mimic_rl synthetic: humanoid28 squat and reach (tools/make_default_motion.py)"
    path = save_motion(clip, args.output)
    height = clip.body_pos_w[:, 0, 2]
    print(
        f"{path}: {clip.num_frames} frames, {clip.duration:.1f} s; mean joint speed "
        f"{np.abs(clip.joint_vel).mean():.2f} rad/s; pelvis height {height.min():.3f}-{height.max():.3f} m"
    )


if __name__ == "__main__":
    main()
