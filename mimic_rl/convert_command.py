"""``mimic-rl convert``: motion files (or folders of them) to this package's npz, optionally with the feet planted.

``--robot`` is a robot's MJCF, or ``humanoid28`` (the built-in model: its Isaac Lab humanoid_amp clips are written in
the model's hinge convention). ``--pin-feet`` writes each clip with its feet planted on the floor
(``mimic_rl.motion.contacts.pin_feet``: a floating clip comes down, a sunk one up, stance feet stay put) on the
robot's foot bodies: ``--feet``, or the G1's or humanoid28's when the model has them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mimic_rl.errors import UsageError
from mimic_rl.files import check_file, output_file, output_folder

if TYPE_CHECKING:  # torch and MuJoCo load when a conversion runs, not with the CLI
    from mimic_rl.motion import MotionClip, RobotKinematics

__all__ = ["BUILT_IN", "cmd_convert", "known_feet", "robot_feet"]

BUILT_IN = "humanoid28"
"""The ``--robot`` value of the built-in model (any other value is an MJCF path)."""


def known_feet() -> tuple[tuple[str, ...], ...]:
    """Foot bodies ``--pin-feet`` takes without ``--feet`` (the first set whose bodies the model all has): the G1's
    and humanoid28's."""
    from mimic_rl.envs.common.robots import G1_FEET
    from mimic_rl.envs.registry import built_in_robot

    return G1_FEET, built_in_robot(BUILT_IN).feet


@dataclass
class _Robot:
    """What ``--robot`` names: its kinematics, its foot bodies and whether its clips take humanoid28's conversion."""

    kin: RobotKinematics
    feet: tuple[str, ...]
    built_in: bool

    def load(self, path: str, csv_fps: float | None) -> MotionClip:
        """The clip at ``path`` in the model's joints (at its own frame rate)."""
        from mimic_rl.motion import load_motion

        if not self.built_in:
            return load_motion(path, robot=self.kin, csv_fps=csv_fps)
        from mimic_rl.envs.registry import built_in_robot

        # the feet are checked (or pinned) by cmd_convert, as for any robot
        return built_in_robot(BUILT_IN).load_clip(path, csv_fps=csv_fps, check_feet=False)


def robot_feet(kin: RobotKinematics, feet: Sequence[str] | None) -> tuple[str, ...]:
    """The robot's foot bodies: ``feet`` (each must be a body of the model), else the first set of ``known_feet()`` the
    model has, else none."""
    if feet:
        missing = [f for f in feet if f not in kin.body_names]
        if missing:
            raise UsageError(
                f"{kin.source}: --feet: expected bodies of the robot, found {', '.join(missing)}; its bodies: "
                f"{', '.join(kin.body_names)}"
            )
        return tuple(feet)
    return next((known for known in known_feet() if all(f in kin.body_names for f in known)), ())


def _robot(args: argparse.Namespace) -> _Robot | None:
    """The robot of ``--robot`` with its feet; a usage error for ``--pin-feet`` or ``--feet`` without one."""
    from mimic_rl.envs.registry import built_in_robot
    from mimic_rl.motion import RobotKinematics

    if args.robot is None:
        if args.pin_feet or args.feet:
            flag = "--pin-feet" if args.pin_feet else "--feet"
            raise UsageError(f"{flag}: expected --robot (the robot's MJCF, or {BUILT_IN}), found none; pass --robot")
        return None
    built_in = args.robot == BUILT_IN and not Path(args.robot).exists()
    if built_in:
        kin = RobotKinematics(built_in_robot(BUILT_IN).mjcf)
    else:
        kin = RobotKinematics(check_file(args.robot, "--robot", f"pass an MJCF or {BUILT_IN}"))
    feet = robot_feet(kin, args.feet)
    if args.pin_feet and not feet:
        raise UsageError(
            f"{args.robot}: --pin-feet: expected the robot's foot bodies, found none of "
            f"{' or '.join(', '.join(k) for k in known_feet())} in its model; pass --feet BODY [BODY ...]"
        )
    return _Robot(kin, feet, built_in)


def _mm(metres: float) -> int:
    """Whole millimetres (an int: -0.3 mm reads 0, not -0)."""
    return round(1000 * metres)


def _pinned(robot: _Robot, clip: MotionClip) -> tuple[MotionClip, str]:
    """``clip`` with its feet pinned, and a line that says what changed (skate speed, lowest foot point, how far the
    root moved: the copy's root is what a policy trained on it tracks)."""
    from mimic_rl.motion.contacts import foot_contacts, pin_feet, root_moved

    before = foot_contacts(robot.kin, clip, robot.feet)
    pinned = pin_feet(robot.kin, clip, robot.feet)
    after = foot_contacts(robot.kin, pinned, robot.feet)
    return pinned, (
        f"feet pinned ({', '.join(robot.feet)}): stance feet skate at a median {before.skate_median:.2f} -> "
        f"{after.skate_median:.2f} m/s, lowest foot point {_mm(before.lowest_median)} -> {_mm(after.lowest_median)} "
        f"mm (median), deepest in the floor {_mm(max(before.deepest, 0))} -> {_mm(max(after.deepest, 0))} mm, root "
        f"moved by up to {root_moved(clip, pinned):.2f} m horizontally"
    )


def _outputs(inputs: Sequence[str | Path], output: str) -> list[Path]:
    """The file each input is written to: ``output`` itself (one input, an .npz name) or ``output/<stem>.npz``."""
    single = Path(output).suffix.lower() == ".npz"
    if single and len(inputs) > 1:
        raise UsageError(
            f"{output}: --output: expected a folder for {len(inputs)} inputs, found an .npz file name; pass a folder"
        )
    if single:
        return [output_file(output, "--output")]
    base = output_folder(output, "--output")
    stems: dict[str, str] = {}
    for path in inputs:
        stem = Path(path).stem
        if stem in stems:
            raise UsageError(
                f"{output}: --output: expected one output file per input, found {stems[stem]} and {path}, which "
                f"would both be written to {stem}.npz; convert them separately"
            )
        stems[stem] = path
    return [base / f"{Path(p).stem}.npz" for p in inputs]


def cmd_convert(args: argparse.Namespace) -> int:
    """Convert motion files (or the motion files of folders) to this package's npz."""
    from mimic_rl.motion import expand_motion_paths, load_motion, save_motion
    from mimic_rl.motion.contacts import warn_about_feet
    from mimic_rl.motion.formats import resample

    inputs = expand_motion_paths(list(args.inputs))
    robot = _robot(args)
    outputs = _outputs(inputs, args.output)
    for path, out in zip(inputs, outputs, strict=True):
        clip = robot.load(path, args.csv_fps) if robot else load_motion(path, csv_fps=args.csv_fps)
        note = ""
        if args.pin_feet:
            assert robot is not None  # _robot asks for --robot
            clip, note = _pinned(robot, clip)
        elif robot is not None:
            warn_about_feet(str(path), robot.kin, clip, robot.feet)
        if args.fps is not None:
            clip = resample(clip, args.fps)
        if args.loop_mode:
            clip.metadata["loop_mode"] = args.loop_mode
        save_motion(clip, out)
        print(
            f"{path} -> {out}: {clip.num_frames} frames at {clip.fps:g} fps, {clip.num_joints} joints, "
            f"{clip.num_bodies} bodies ({clip.metadata['format']})"
        )
        if note:
            print(f"  {note}")
    return 0
