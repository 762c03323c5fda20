"""Whether a clip's feet stay planted: how far they sink into the floor and how fast they skate while on it.

    python tools/clip_contacts.py $MIMIC_RL_DATA/motions/humanoid28/*.npz
    python tools/clip_contacts.py --robot g1 --robot-mjcf $MIMIC_RL_DATA/robots/unitree_g1/g1.xml --csv-fps 60 CLIP.csv

Each frame of the clip is posed on the robot's model (``mj_kinematics``, no physics) and each foot's lowest point is
found from its collision geoms (boxes by their corners, spheres and capsules by their radius; meshes by their
vertices). A foot is on the floor when that point is within ``--contact-mm`` of it; its skate speed is the
horizontal speed of that same point (central differences). A robot whose soles stick where they touch cannot follow
a clip whose feet skate: its root falls behind (or ahead) by the skate speed while the pose matches. Prints per clip:
the root's mean horizontal speed, the deepest point under the floor and the share of frames with a foot more than 5 mm
in it, the share of frames with a foot on the floor, and those feet's skate speed (median and 90th percentile).
"""

from __future__ import annotations

import argparse
import itertools
import warnings

import mujoco
import numpy as np

from mimic_rl.envs.mujoco.robots import build_model, robot_config


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


def clip_contacts(path: str, robot: str, mjcf: str | None, csv_fps: float | None, contact: float) -> dict[str, float]:
    """The statistics of one clip (metres, m/s, shares of frames)."""
    cfg = robot_config(robot, mjcf)
    model, _, _ = build_model(cfg, sensors=False)
    data = mujoco.MjData(model)
    clip = cfg.load_clip(path, csv_fps=csv_fps)
    adr = [model.joint(name).qposadr[0] for name in clip.joint_names]
    feet = [model.body(name).id for name in cfg.end_effectors if "foot" in name or "ankle" in name]
    n = len(clip.joint_pos)
    points = np.empty((n, len(feet)), dtype=object)
    lowest = np.empty((n, len(feet), 3))
    which = np.empty((n, len(feet)), dtype=int)
    for t in range(n):
        data.qpos[:] = model.qpos0
        data.qpos[0:3], data.qpos[3:7] = clip.body_pos_w[t, 0], clip.body_quat_w[t, 0]
        data.qpos[adr] = clip.joint_pos[t]
        mujoco.mj_kinematics(model, data)
        for f, body in enumerate(feet):
            points[t, f] = foot_points(model, data, body)
            which[t, f] = int(points[t, f][:, 2].argmin())
            lowest[t, f] = points[t, f][which[t, f]]
    z = lowest[..., 2]
    dt = 1.0 / clip.fps
    speed = np.full((n, len(feet)), np.nan)
    for t, f in itertools.product(range(1, n - 1), range(len(feet))):
        k = which[t, f]
        speed[t, f] = np.linalg.norm(points[t + 1, f][k, :2] - points[t - 1, f][k, :2]) / (2 * dt)
    on_floor = z < contact
    root = np.asarray(clip.body_pos_w, float)[:, 0, :2]
    skate = speed[on_floor & ~np.isnan(speed)]  # the first and last frames have no central difference
    return {
        "duration_s": (n - 1) * dt,
        "root_speed": float(np.linalg.norm(root[-1] - root[0]) / ((n - 1) * dt)),
        "deepest_mm": float(-1000 * z.min()),
        "sunk_share": float((z.min(1) < -0.005).mean()),
        "on_floor_share": float(on_floor.any(1).mean()),
        "skate_median": float(np.median(skate)) if skate.size else float("nan"),
        "skate_p90": float(np.percentile(skate, 90)) if skate.size else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("clips", nargs="+")
    parser.add_argument("--robot", default="humanoid28", choices=["humanoid28", "g1"])
    parser.add_argument("--robot-mjcf")
    parser.add_argument("--csv-fps", type=float)
    parser.add_argument("--contact-mm", type=float, default=15.0, help="a foot within this of the floor is on it")
    args = parser.parse_args()
    print(f"{'clip':28s} {'s':>5s} {'root m/s':>8s} {'deepest mm':>10s} {'sunk >5mm':>9s} {'on floor':>8s} "
          f"{'skate m/s median':>16s} {'p90':>5s}")  # fmt: skip
    for path in args.clips:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = clip_contacts(path, args.robot, args.robot_mjcf, args.csv_fps, args.contact_mm / 1000)
        name = path.rsplit("/", 1)[-1]
        row = f"{name:28s} {s['duration_s']:5.1f} {s['root_speed']:8.2f} {s['deepest_mm']:10.0f} {s['sunk_share']:9.0%}"
        print(f"{row} {s['on_floor_share']:8.0%} {s['skate_median']:16.2f} {s['skate_p90']:5.2f}")


if __name__ == "__main__":
    main()
