"""Whether a clip's feet stay planted: how far they sink into the floor and how fast they skate while on it.

    python tools/clip_contacts.py $MIMIC_RL_DATA/motions/humanoid28/*.npz
    python tools/clip_contacts.py --robot g1 --robot-mjcf $MIMIC_RL_DATA/robots/unitree_g1/g1.xml --csv-fps 60 CLIP.csv
    python tools/clip_contacts.py CLIP.npz --pin-feet OUT_DIR      # also write OUT_DIR/CLIP_pinned.npz

The statistics are ``mimic_rl.motion.contacts.foot_contacts`` (its docstring says how they are measured; training on
the embedded backend warns about a clip whose feet float or skate): per clip the root's mean horizontal speed, the
median height of the lowest foot point (a clip that floats above the floor has it well above 0), the deepest point
under the floor and the share of frames with a foot more than 5 mm in it, the share of frames with a foot on the floor
(within ``--contact-mm``), and those feet's skate speed (median and 90th percentile); then the share of frames in
flight (both feet more than 30 mm above the clip's floor), the longest flight and when it starts, and the root's
lowest height above the floor (a deep crouch).

``--pin-feet`` writes a copy of each clip with its feet planted (``mimic_rl.motion.contacts.pin_feet``): the clip
moved down or up so that a foot that stands still stands on the floor, lifted where a foot is still in it, and moved so
that a foot on the floor stays where it is (unless it sweeps past faster than ``PIN_MAX_M_S``, 1.25 m/s); train on
it like any clip (``docs/ablations.md`` has what it did for humanoid28's run). ``mimic-rl convert CLIP --robot ROBOT
--pin-feet --output COPY.npz`` writes the same copy from an installed package.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from mimic_rl.envs.mujoco.robots import robot_config
from mimic_rl.errors import MimicRLError
from mimic_rl.motion import MotionClip
from mimic_rl.motion.contacts import FootContacts, foot_contacts, pin_feet, root_moved
from mimic_rl.motion.formats import save_motion
from mimic_rl.motion.kinematics import RobotKinematics


def _load(
    path: str, robot: str, mjcf: str | None, csv_fps: float | None
) -> tuple[MotionClip, RobotKinematics, tuple[str, ...]]:
    """The clip at ``path`` for the robot, the robot's kinematics and its foot bodies."""
    cfg = robot_config(robot, mjcf)
    return cfg.load_clip(path, csv_fps=csv_fps), RobotKinematics(cfg.mjcf), cfg.feet


def clip_contacts(path: str, robot: str, mjcf: str | None, csv_fps: float | None, contact: float) -> FootContacts:
    """``foot_contacts`` of the clip at ``path`` on the robot's feet."""
    clip, kin, feet = _load(path, robot, mjcf, csv_fps)
    return foot_contacts(kin, clip, feet, contact)


def pinned_clip(path: str, robot: str, mjcf: str | None, csv_fps: float | None, contact: float) -> MotionClip:
    """``pin_feet`` of the clip at ``path``."""
    clip, kin, feet = _load(path, robot, mjcf, csv_fps)
    return pin_feet(kin, clip, feet, contact)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("clips", nargs="+")
    parser.add_argument("--robot", default="humanoid28", choices=["humanoid28", "g1"])
    parser.add_argument("--robot-mjcf")
    parser.add_argument("--csv-fps", type=float)
    parser.add_argument("--contact-mm", type=float, default=15.0, help="a foot within this of the floor is on it")
    parser.add_argument("--pin-feet", metavar="DIR", help="also write each clip with its feet planted to DIR")
    args = parser.parse_args()
    print(f"{'clip':28s} {'s':>5s} {'root m/s':>8s} {'lowest mm':>9s} {'deepest mm':>10s} {'sunk >5mm':>9s} "
          f"{'on floor':>8s} {'skate m/s median':>16s} {'p90':>5s} {'in flight':>9s} {'longest flight':>16s} "
          f"{'root lowest m':>13s}")  # fmt: skip
    for path in args.clips:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                clip, kin, feet = _load(path, args.robot, args.robot_mjcf, args.csv_fps)
            except (MimicRLError, OSError, ValueError) as exc:  # a missing or malformed clip or MJCF: one line
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(2)
        s = foot_contacts(kin, clip, feet, args.contact_mm / 1000)
        name = Path(path).name
        row = f"{name:28s} {s.duration_s:5.1f} {s.root_speed:8.2f} {1000 * s.lowest_median:9.0f}"
        row += f" {1000 * s.deepest:10.0f} {s.sunk_share:9.0%}"
        row += f" {s.on_floor_share:8.0%} {s.skate_median:16.2f} {s.skate_p90:5.2f} {s.flight_share:9.1%}"
        flight = f"{s.longest_flight_s:.2f} s at {s.longest_flight_at_s:.1f}" if s.longest_flight_s else "-"
        print(f"{row} {flight:>16s} {s.root_lowest:13.2f}")
        if args.pin_feet:
            pinned = pin_feet(kin, clip, feet, args.contact_mm / 1000)
            out = save_motion(pinned, Path(args.pin_feet) / f"{Path(path).stem}_pinned")
            print(f"  feet pinned: {out} (root moved by up to {root_moved(clip, pinned):.2f} m horizontally)")


if __name__ == "__main__":
    main()
