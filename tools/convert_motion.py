"""Convert motion files to this package's npz (until ``mimic-rl convert`` exists).

    python tools/convert_motion.py IN [IN ...] --output DIR_OR_FILE [--robot g1.xml] [--csv-fps 30] [--fps 50]
        [--loop-mode clamp|wrap]

Formats are detected by content: this package's npz, BeyondMimic / mjlab npz (names from --robot), Isaac Lab
humanoid_amp npz, and Unitree / LAFAN1 CSV (root xyz, quaternion xyzw, joints; body states by FK on --robot).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mimic_rl.motion import MotionFormatError, RobotKinematics, load_motion, save_motion


def main(argv: list[str] | None = None) -> int:
    """Convert each input; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inputs", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, required=True, help="an .npz file (one input) or a folder")
    parser.add_argument("--robot", type=Path, help="robot MJCF (for CSV and name-less npz, and to check joint names)")
    parser.add_argument("--csv-fps", type=float, help="frame rate of CSV inputs")
    parser.add_argument("--fps", type=float, help="resample to this frame rate")
    parser.add_argument("--loop-mode", choices=["clamp", "wrap"], help="store this loop mode in the output")
    args = parser.parse_args(argv)
    robot = RobotKinematics(args.robot) if args.robot else None
    single = args.output.suffix == ".npz"
    if single and len(args.inputs) > 1:
        parser.error("--output is a file but several inputs were given; pass a folder")
    for path in args.inputs:
        try:
            clip = load_motion(path, robot=robot, csv_fps=args.csv_fps, fps=args.fps)
        except (MotionFormatError, FileNotFoundError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.loop_mode:
            clip.metadata["loop_mode"] = args.loop_mode
        out = args.output if single else args.output / f"{path.stem}.npz"
        save_motion(clip, out)
        print(
            f"{path} -> {out}: {clip.num_frames} frames at {clip.fps:g} fps, {clip.num_joints} joints, "
            f"{clip.num_bodies} bodies ({clip.metadata['format']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
