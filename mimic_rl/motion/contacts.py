"""Whether a clip's feet stay planted: how high they float, how far they sink into the floor and how fast they skate
while on it, when both leave it (jumps) and how low the root crouches; and a copy of a clip with its feet planted.

Each frame's foot poses come from the clip's own body states (the forward kinematics it was loaded with); each foot's
lowest point is found from its collision geoms on the robot's model (boxes by their corners, spheres and capsules by
their radius, meshes by their vertices). A foot is on the floor when that point is within ``contact`` of it; its skate
speed is the horizontal speed of that same point (central differences). A robot whose soles stick where they touch
cannot follow a clip whose feet skate: its root falls behind (or ahead) by the skate speed while its pose matches.
A robot standing on the floor under a clip that floats stands below its reference, and an episode from the clip's
first frame starts in the air. ``docs/ablations.md`` has what both did to training (humanoid28's run, G1 ``M_Move8``).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from mimic_rl.motion.clip import MotionClip
from mimic_rl.motion.formats import clip_from_root_and_joints
from mimic_rl.motion.kinematics import RobotKinematics

__all__ = [
    "CONTACT_M",
    "FLIGHT_M",
    "FLOAT_WARN_M",
    "PIN_MAX_M_S",
    "SKATE_MIN_ON_FLOOR",
    "SKATE_WARN_M_S",
    "STILL_MAX_M",
    "STILL_M_S",
    "FootContacts",
    "foot_contacts",
    "foot_points",
    "foot_warnings",
    "pin_feet",
    "root_moved",
    "warn_about_feet",
]

CONTACT_M = 0.015
"""A foot whose lowest point is within this of the floor is on it."""
FLIGHT_M = 0.03
"""``foot_contacts``: a frame whose lowest foot point is more than this above the clip's floor (the median lowest foot
point) is in flight: both feet off the floor (twice ``CONTACT_M``: a foot brushing the floor is not a flight)."""
FLOAT_WARN_M = 0.04
"""``foot_warnings``: a clip whose lowest foot point sits a median this high is said to float (G1 ``M_Move8``: 58 mm;
every other clip of ``../shared/data``: -6 to 22 mm, the most humanoid28's walk, which is tracked)."""
SKATE_WARN_M_S = 0.3
"""``foot_warnings``: stance feet sliding at a median this fast, on clips with a foot on the floor in at least
``SKATE_MIN_ON_FLOOR`` of their frames (humanoid28's run: 0.53 m/s, not tracked as given; its walk 0.18, tracked)."""
SKATE_MIN_ON_FLOOR = 0.2
"""``foot_warnings`` judges skating only on clips with a foot on the floor in at least this share of their frames."""
STILL_M_S = 0.1
"""``pin_feet``: a clip's lowest foot point moving slower than this stands (where it is, the clip's floor is)."""
STILL_MAX_M = 0.1
"""``pin_feet``: ... and only within this of the floor (a foot still at a jump's top is not standing)."""
PIN_MAX_M_S = 1.25
"""``pin_feet``: a foot on the floor moving faster than this (horizontally, from one frame to the next) is swinging
past it, not standing on it, and is not pinned (the shipped clips' stance feet skate at up to 1.21 m/s, humanoid28's
run; G1 feet brush the floor while swinging at 1.4-3.7 m/s)."""


@dataclass(frozen=True)
class FootContacts:
    """A clip's feet against the floor (metres, m/s, shares of frames)."""

    duration_s: float
    root_speed: float
    """The root's mean horizontal speed from the first frame to the last."""
    lowest_median: float
    """The median over frames of the lowest foot point's height (a floating clip has it well above 0)."""
    deepest: float
    """How far the lowest foot point goes under the floor (negative: never under it)."""
    sunk_share: float
    """The share of frames with a foot more than 5 mm under the floor."""
    on_floor_share: float
    """The share of frames with a foot on the floor."""
    skate_median: float
    """The median horizontal speed of the feet on the floor (nan if none is)."""
    skate_p90: float
    flight_share: float
    """The share of frames in flight (both feet more than ``FLIGHT_M`` above the clip's floor: jumps and hops)."""
    longest_flight_s: float
    """The longest stretch of consecutive frames in flight, in seconds (0 if none), ..."""
    longest_flight_at_s: float
    """... and the time of its first frame."""
    root_lowest: float
    """The root's lowest height above the clip's floor (how deep it crouches; the shared G1 clips: 0.51-0.82 m)."""


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """The length and first index of the longest run of ``True`` in the 1-D ``mask`` (``(0, 0)`` if none)."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    if not starts.size:
        return 0, 0
    i = int((ends - starts).argmax())
    return int(ends[i] - starts[i]), int(starts[i])


def _local_points(model: mujoco.MjModel, geom: int) -> tuple[np.ndarray, float]:
    """Points ``[P, 3]`` in the geom's frame whose lowest one, less the returned radius, is the geom's lowest point."""
    size, kind = model.geom_size[geom], model.geom_type[geom]
    if kind == mujoco.mjtGeom.mjGEOM_BOX:
        return np.array(list(itertools.product(*[(-s, s) for s in size]))), 0.0
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        return np.array([[0.0, 0.0, -size[1]], [0.0, 0.0, size[1]]]), float(size[0])
    if kind == mujoco.mjtGeom.mjGEOM_MESH:
        mesh = model.geom_dataid[geom]
        start, count = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
        return np.asarray(model.mesh_vert[start : start + count], float), 0.0
    radius = float(size[0]) if kind == mujoco.mjtGeom.mjGEOM_SPHERE else 0.0
    return np.zeros((1, 3)), radius  # sphere (and anything else: its centre)


def _matrices(quat: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[..., 3, 3]`` of unit quaternions ``[..., 4]`` (wxyz)."""
    w, x, y, z = np.moveaxis(quat, -1, 0)
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return np.stack([np.stack(r, -1) for r in rows], -2)


def foot_points(kin: RobotKinematics, clip: MotionClip, feet: Sequence[str]) -> np.ndarray:
    """Per frame and foot, the candidate lowest points ``[T, F, P, 3]`` of the foot body's collision geoms in the world
    (a sphere's or capsule's radius taken off z), from the clip's body states and the model's geoms."""
    model, out = kin.model, []
    for name in feet:
        if name not in clip.body_names:
            raise ValueError(f"foot {name!r}: not a body of the clip ({clip.metadata['source']})")
        body = model.body(name).id
        geoms = [
            g
            for g in range(model.ngeom)
            if model.geom_bodyid[g] == body and (model.geom_contype[g] != 0 or model.geom_conaffinity[g] != 0)
        ]
        if not geoms:
            raise ValueError(f"foot {name!r}: the body has no collision geom in {kin.source}")
        b = clip.body_names.index(name)
        pos, rot = clip.body_pos_w[:, b].astype(np.float64), _matrices(clip.body_quat_w[:, b].astype(np.float64))
        points = []
        for g in geoms:
            local, radius = _local_points(model, g)
            in_body = model.geom_pos[g] + local @ _matrices(model.geom_quat[g]).T  # [P, 3] in the body's frame
            world = pos[:, None] + np.einsum("tij,pj->tpi", rot, in_body)
            world[..., 2] -= radius
            points.append(world)
        out.append(np.concatenate(points, axis=1))
    width = max(p.shape[1] for p in out)  # feet of different geoms: pad with copies of their first point
    return np.stack([np.concatenate([p, p[:, :1].repeat(width - p.shape[1], 1)], 1) for p in out], axis=1)


def foot_contacts(
    kin: RobotKinematics, clip: MotionClip, feet: Sequence[str], contact: float = CONTACT_M
) -> FootContacts:
    """The statistics of ``FootContacts`` for ``clip`` on the robot of ``kin``, with ``feet`` its foot bodies."""
    points = foot_points(kin, clip, feet)  # [T, F, P, 3]
    n = clip.num_frames
    which = points[..., 2].argmin(-1)  # [T, F]
    z = np.take_along_axis(points[..., 2], which[..., None], -1)[..., 0]
    dt = 1.0 / clip.fps
    speed = np.full(z.shape, np.nan)
    if n > 2:
        idx = which[1:-1, :, None, None].repeat(2, -1)
        ahead = np.take_along_axis(points[2:, ..., :2], idx, 2)[:, :, 0]
        behind = np.take_along_axis(points[:-2, ..., :2], idx, 2)[:, :, 0]
        speed[1:-1] = np.linalg.norm(ahead - behind, axis=-1) / (2 * dt)
    on_floor = z < contact
    root = np.asarray(clip.body_pos_w, float)[:, 0]
    skate = speed[on_floor & ~np.isnan(speed)]  # the first and last frames have no central difference
    duration = max(n - 1, 1) * dt
    floor = float(np.median(z.min(1)))
    flight = z.min(1) - floor > FLIGHT_M
    frames, first = _longest_run(flight)
    return FootContacts(
        duration_s=(n - 1) * dt,
        root_speed=float(np.linalg.norm(root[-1, :2] - root[0, :2]) / duration),
        lowest_median=floor,
        deepest=float(-z.min()),
        sunk_share=float((z.min(1) < -0.005).mean()),
        on_floor_share=float(on_floor.any(1).mean()),
        skate_median=float(np.median(skate)) if skate.size else float("nan"),
        skate_p90=float(np.percentile(skate, 90)) if skate.size else float("nan"),
        flight_share=float(flight.mean()),
        longest_flight_s=frames * dt,
        longest_flight_at_s=first * dt,
        root_lowest=float(root[:, 2].min() - floor),
    )


_PIN = (
    "`mimic-rl convert CLIP --robot ROBOT --pin-feet --output COPY.npz` writes a copy with its feet planted on the "
    "floor (ROBOT: the robot's MJCF, or humanoid28)"
)


def foot_warnings(name: str, stats: FootContacts) -> list[str]:
    """One line per way the clip's feet would keep a robot off it: floating (``FLOAT_WARN_M``) and skating
    (``SKATE_WARN_M_S``); each names the clip, the number and what to do."""
    out = []
    if stats.lowest_median > FLOAT_WARN_M:
        out.append(
            f"{name}: the clip's feet float: its lowest foot point is a median {1000 * stats.lowest_median:.0f} mm "
            f"above the floor (over {1000 * FLOAT_WARN_M:.0f} mm), so a robot on the floor stands below its reference "
            f"and episodes from its first frame start in the air; {_PIN}"
        )
    if stats.on_floor_share >= SKATE_MIN_ON_FLOOR and stats.skate_median > SKATE_WARN_M_S:
        out.append(
            f"{name}: the clip's feet skate: a foot on the floor slides at a median {stats.skate_median:.2f} m/s "
            f"(over {SKATE_WARN_M_S:.1f}), so a robot whose soles grip falls behind its reference's root; {_PIN}"
        )
    return out


def warn_about_feet(name: str, kin: RobotKinematics, clip: MotionClip, feet: Sequence[str]) -> None:
    """Warn (``UserWarning``) each line of ``foot_warnings`` for a clip just loaded; nothing when ``feet`` is empty
    or cannot be measured (not bodies of the clip, or without collision geoms)."""
    try:
        said = foot_warnings(name, foot_contacts(kin, clip, feet)) if feet else []
    except ValueError:
        said = []
    for line in said:
        warnings.warn(line, UserWarning, stacklevel=3)


def _floor(points: np.ndarray, z: np.ndarray, fps: float) -> np.ndarray:
    """Per frame, the height ``[T]`` the clip's floor is at: its lowest foot's lowest point on frames where that point
    stands still (slower than ``STILL_M_S``, within ``STILL_MAX_M`` of 0), interpolated between them (held before the
    first and after the last); 0 everywhere for a clip whose feet never stand still."""
    frames = np.arange(len(z))
    foot = z.argmin(1)
    k = points[frames, foot, :, 2].argmin(-1)  # the lowest point of the lowest foot, followed to its neighbours
    before, after = np.maximum(frames - 1, 0), np.minimum(frames + 1, len(z) - 1)
    step = points[after, foot, k] - points[before, foot, k]
    speed = np.linalg.norm(step, axis=-1) * fps / np.maximum(after - before, 1)
    low = z[frames, foot]
    still = (speed < STILL_M_S) & (np.abs(low) < STILL_MAX_M)
    return np.interp(frames, frames[still], low[still]) if still.any() else np.zeros(len(z))


def pin_feet(
    kin: RobotKinematics,
    clip: MotionClip,
    feet: Sequence[str],
    contact: float = CONTACT_M,
    max_speed: float = PIN_MAX_M_S,
) -> MotionClip:
    """The clip with its feet planted on the floor. Up and down: moved so that a foot that stands still stands on the
    floor (``_floor``: a floating clip comes down, one in the floor comes up, flights keep their height over it), then
    lifted in each frame by as much as its lowest foot point is still under the floor. Horizontally: moved so that a
    foot on the floor (within ``contact`` of it as the clip gives it) in two consecutive frames, and slower than
    ``max_speed`` between them, keeps its lowest point where it was; flight, touch-down and swing frames (a foot
    sweeping low over the floor) keep the clip's own motion. Joint angles and orientations are the clip's; body states
    and velocities are recomputed (forward kinematics, finite differences)."""
    points = foot_points(kin, clip, feet)
    z = points[..., 2].min(-1)  # [T, F]
    floor = _floor(points, z, clip.fps)
    root = np.asarray(clip.body_pos_w, float)[:, 0].copy()
    shift = np.zeros_like(root)
    for t in range(clip.num_frames):
        f = int(np.argmin(z[t]))
        shift[t, 2] = max(0.0, floor[t] - z[t, f]) - floor[t]
        if t > 0:
            shift[t, :2] = shift[t - 1, :2]
            if z[t, f] < contact and z[t - 1, f] < contact:  # on the floor in both frames
                k = int(points[t, f, :, 2].argmin())
                step = points[t, f, k, :2] - points[t - 1, f, k, :2]
                if np.linalg.norm(step) * clip.fps < max_speed:  # standing (or skating), not swinging past
                    shift[t, :2] -= step
    meta = {**clip.metadata, "source": f"{clip.metadata.get('source', '<memory>')} (feet pinned)"}
    return clip_from_root_and_joints(kin, root + shift, clip.body_quat_w[:, 0], clip.joint_pos, clip.fps, meta)


def root_moved(clip: MotionClip, pinned: MotionClip) -> float:
    """How far ``pin_feet`` moved the clip's root horizontally, at most over the frames (metres)."""
    shift = np.asarray(pinned.body_pos_w, float)[:, 0, :2] - np.asarray(clip.body_pos_w, float)[:, 0, :2]
    return float(np.linalg.norm(shift, axis=-1).max())
