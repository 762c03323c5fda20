"""Whether a clip's feet stay planted: how far they sink into the floor and how fast they skate while on it.

    python tools/clip_contacts.py $MIMIC_RL_DATA/motions/humanoid28/*.npz
    python tools/clip_contacts.py --robot g1 --robot-mjcf $MIMIC_RL_DATA/robots/unitree_g1/g1.xml --csv-fps 60 CLIP.csv
    python tools/clip_contacts.py CLIP.npz --pin-feet OUT_DIR      # also write OUT_DIR/CLIP_pinned.npz

Each frame of the clip is posed on the robot's model (``mj_kinematics``, no physics) and each foot's lowest point is
found from its collision geoms (boxes by their corners, spheres and capsules by their radius; meshes by their
vertices). A foot is on the floor when that point is within ``--contact-mm`` of it; its skate speed is the
horizontal speed of that same point (central differences). A robot whose soles stick where they touch cannot follow
a clip whose feet skate: its root falls behind (or ahead) by the skate speed while the pose matches. Prints per clip:
the root's mean horizontal speed, the median height of the lowest foot point (a clip that floats above the floor has
it well above 0), the deepest point under the floor and the share of frames with a foot more than 5 mm in it, the
share of frames with a foot on the floor, and those feet's skate speed (median and 90th percentile).

``--pin-feet`` writes a copy of each clip with its feet planted (``pinned_clip``): the root moved so that a foot on
the floor stays where it is and lifted out of the floor where a foot is in it; train on it like any clip
(``docs/ablations.md`` has what it did for humanoid28's run).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mimic_rl.envs.mujoco.robots import robot_config
from mimic_rl.errors import MimicRLError
from mimic_rl.motion import MotionClip
from mimic_rl.motion.formats import clip_from_root_and_joints, save_motion
from mimic_rl.motion.kinematics import RobotKinematics, mj_kinematics


def _local_points(model: mujoco.MjModel, geom: int) -> np.ndarray:
    """Points ``[P, 3]`` in the geom's frame whose lowest one is the geom's lowest point (sphere-like: the centre)."""
    size, kind = model.geom_size[geom], model.geom_type[geom]
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        return np.array(list(itertools.product(*[(-s, s) for s in size])))
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return np.array([[0.0, 0.0, -size[1]], [0.0, 0.0, size[1]]])
    if kind == mujoco.mjtGeom.mjGEOM_MESH:
        mesh = model.geom_dataid[geom]
        start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
        return np.asarray(model.mesh_vert[start : start + count], float)
    return np.zeros((1, 3))  # sphere (and anything else: its centre)


def _radius(model: mujoco.MjModel, geom: int) -> float:
    kind = model.geom_type[geom]
    return (
        float(model.geom_size[geom, 0])
        if kind in (mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_CAPSULE)
        else 0.0
    )


def foot_points(model: mujoco.MjModel, data: mujoco.MjData, body: int) -> np.ndarray:
    """Candidate lowest points ``[P, 3]`` of ``body``'s collision geoms in the world (a sphere's radius taken off z)."""
    out = []
    for g in range(model.ngeom):
        if model.geom_bodyid[g] != body or (model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0):
            continue
        pts = data.geom_xpos[g] + _local_points(model, g) @ data.geom_xmat[g].reshape(3, 3).T
        pts[:, 2] -= _radius(model, g)
        out.append(pts)
    if not out:
        raise ValueError(f"body {model.body(body).name!r} has no collision geom")
    return np.concatenate(out)


@dataclass
class PosedClip:
    """A clip posed on its robot: ``points[t][f]`` are foot ``f``'s candidate lowest points at frame ``t``."""

    clip: MotionClip
    kin: RobotKinematics
    points: list[list[np.ndarray]]


def pose_feet(path: str, robot: str, mjcf: str | None, csv_fps: float | None) -> PosedClip:
    """Load ``path`` for the robot and pose every frame on its model (``mj_kinematics``, no physics)."""
    cfg = robot_config(robot, mjcf)
    clip = cfg.load_clip(path, csv_fps=csv_fps)
    kin = RobotKinematics(cfg.mjcf)
    model, data = kin.model, mujoco.MjData(kin.model)
    feet = [model.body(name).id for name in cfg.end_effectors if "foot" in name or "ankle" in name]
    cols = [clip.joint_names.index(name) for name in kin.joint_names]
    points = []
    for t in range(clip.num_frames):
        qpos = model.qpos0.copy()
        qpos[0:3], qpos[3:7] = clip.body_pos_w[t, 0], clip.body_quat_w[t, 0]
        qpos[kin.joint_qpos] = clip.joint_pos[t, cols]
        mj_kinematics(model, data, qpos)
        points.append([foot_points(model, data, body) for body in feet])
    return PosedClip(clip, kin, points)


def contact_stats(posed: PosedClip, contact: float) -> dict[str, float]:
    """The statistics of one posed clip (metres, m/s, shares of frames)."""
    clip, points = posed.clip, posed.points
    n, feet = len(points), len(points[0])
    which = np.array([[int(p[:, 2].argmin()) for p in frame] for frame in points])
    z = np.array([[p[:, 2].min() for p in frame] for frame in points])
    dt = 1.0 / clip.fps
    speed = np.full((n, feet), np.nan)
    for t, f in itertools.product(range(1, n - 1), range(feet)):
        k = which[t, f]
        speed[t, f] = np.linalg.norm(points[t + 1][f][k, :2] - points[t - 1][f][k, :2]) / (2 * dt)
    on_floor = z < contact
    root = np.asarray(clip.body_pos_w, float)[:, 0, :2]
    skate = speed[on_floor & ~np.isnan(speed)]  # the first and last frames have no central difference
    return {
        "duration_s": (n - 1) * dt,
        "root_speed": float(np.linalg.norm(root[-1] - root[0]) / ((n - 1) * dt)),
        "lowest_median_mm": float(1000 * np.median(z.min(1))),
        "deepest_mm": float(-1000 * z.min()),
        "sunk_share": float((z.min(1) < -0.005).mean()),
        "on_floor_share": float(on_floor.any(1).mean()),
        "skate_median": float(np.median(skate)) if skate.size else float("nan"),
        "skate_p90": float(np.percentile(skate, 90)) if skate.size else float("nan"),
    }


def pin_feet(posed: PosedClip, contact: float) -> MotionClip:
    """The clip with its feet planted: the root moved so that a foot on the floor in two consecutive frames keeps its
    lowest point where it was (horizontally; flight and touch-down frames keep the clip's own motion), and lifted in
    each frame by as much as its lowest foot point is under the floor. Joint angles and orientations are the clip's;
    body states and velocities are recomputed (forward kinematics, finite differences)."""
    clip, points = posed.clip, posed.points
    root = np.asarray(clip.body_pos_w, float)[:, 0].copy()
    shift = np.zeros_like(root)
    for t in range(clip.num_frames):
        z = [p[:, 2].min() for p in points[t]]
        f = int(np.argmin(z))
        shift[t, 2] = max(0.0, -z[f])
        if t > 0:
            shift[t, :2] = shift[t - 1, :2]
            if z[f] < contact and points[t - 1][f][:, 2].min() < contact:  # on the floor in both frames
                k = int(points[t][f][:, 2].argmin())
                shift[t, :2] -= points[t][f][k, :2] - points[t - 1][f][k, :2]
    meta = {"source": f"{clip.metadata['source']} (feet pinned)", "loop_mode": clip.loop_mode}
    return clip_from_root_and_joints(posed.kin, root + shift, clip.body_quat_w[:, 0], clip.joint_pos, clip.fps, meta)


def clip_contacts(path: str, robot: str, mjcf: str | None, csv_fps: float | None, contact: float) -> dict[str, float]:
    """``contact_stats`` of the clip at ``path``."""
    return contact_stats(pose_feet(path, robot, mjcf, csv_fps), contact)


def pinned_clip(path: str, robot: str, mjcf: str | None, csv_fps: float | None, contact: float) -> MotionClip:
    """``pin_feet`` of the clip at ``path``."""
    return pin_feet(pose_feet(path, robot, mjcf, csv_fps), contact)


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
          f"{'on floor':>8s} {'skate m/s median':>16s} {'p90':>5s}")  # fmt: skip
    for path in args.clips:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                posed = pose_feet(path, args.robot, args.robot_mjcf, args.csv_fps)
            except (MimicRLError, OSError, ValueError) as exc:  # a missing or malformed clip or MJCF: one line
                print(f"error: {exc}", file=sys.stderr)
                sys.exit(2)
        s = contact_stats(posed, args.contact_mm / 1000)
        name = Path(path).name
        row = f"{name:28s} {s['duration_s']:5.1f} {s['root_speed']:8.2f} {s['lowest_median_mm']:9.0f}"
        row += f" {s['deepest_mm']:10.0f} {s['sunk_share']:9.0%}"
        print(f"{row} {s['on_floor_share']:8.0%} {s['skate_median']:16.2f} {s['skate_p90']:5.2f}")
        if args.pin_feet:
            out = save_motion(
                pin_feet(posed, args.contact_mm / 1000), Path(args.pin_feet) / f"{Path(path).stem}_pinned"
            )
            print(f"  feet pinned: {out}")


if __name__ == "__main__":
    main()
