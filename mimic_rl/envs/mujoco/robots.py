"""Robots for the embedded MuJoCo backend: a ``RobotConfig`` per robot, and the physics model built from it.

``build_model`` loads the MJCF through ``mujoco.MjSpec`` and adds what a tracking env needs when the file lacks it:
a ground plane, position actuators from the actuator table (kp, kd, effort limit, armature), and the sensors the
env reads body and joint states from. Built-ins: ``humanoid28`` (this package's MJCF) and ``g1`` (Unitree G1, MJCF
path from the user, actuator facts from Unitree's motor specs as mjlab uses them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from mimic_rl.envs.common.robots import G1_ACTUATORS, G1_END_EFFECTORS, G1_FEET, G1_HOME_POSE, ActuatorGroup
from mimic_rl.envs.mujoco.quality_sensors import add_quality_sensors
from mimic_rl.errors import ConfigError
from mimic_rl.motion import MotionClip, MotionFormatError, RobotKinematics, detect_format, load_motion
from mimic_rl.motion.contacts import warn_about_feet

__all__ = [
    "SENSOR_KINDS",
    "ActuatorGroup",
    "RobotConfig",
    "build_model",
    "g1_config",
    "humanoid28_config",
    "joint_tables",
    "robot_config",
    "servo_kv_over_kp",
]

ASSETS = Path(__file__).parent / "assets"
SENSOR_KINDS = ("framepos", "framequat", "framelinvel", "frameangvel")


@dataclass(frozen=True)
class RobotConfig:
    """What the tracking env needs to know about a robot.

    ``actuators`` are added when the MJCF has no actuators (or always, with ``override_actuators``).
    ``action_scale`` is a number, or ``None`` for BeyondMimic's rule ``0.25 * effort / kp`` per joint.
    ``default_joint_pos`` maps joint-name regexes to the pose that actions are offsets from.
    """

    name: str
    mjcf: str
    anchor_body: str
    end_effectors: tuple[str, ...]
    actuators: tuple[ActuatorGroup, ...] = ()
    override_actuators: bool = False
    default_joint_pos: dict[str, float] = field(default_factory=dict)
    action_scale: float | None = None
    action_scale_factor: float = 1.0
    """The multiplier of ``action_scale`` that ``TrackingEnvConfig.action_scale_factor: null`` (the default) picks:
    0.3 for humanoid28's stiff servos, 1.0 (BeyondMimic's scale) for the G1's soft ones (docs/ablations.md)."""
    tracked_bodies: tuple[str, ...] | None = None
    """Bodies whose tracking is rewarded and measured (default: every body)."""
    feet: tuple[str, ...] = ()
    """The bodies whose contacts with the floor count as foot contacts (motion-quality metrics: foot sliding)."""
    timestep: float = 0.005
    floor_friction: float = 1.0
    clip_convention: str = "hinge"
    """``"hinge"``: clips already use the model's joints; ``"humanoid28_amp"``: convert Isaac Lab humanoid_amp clips."""

    def load_clip(self, path: str | Path, csv_fps: float | None = None, check_feet: bool = True) -> MotionClip:
        """Load a motion file for this robot (format by content; converted to the model's joint convention), with a
        warning if its feet float or skate (``mimic_rl.motion.contacts.warn_about_feet``; not with ``check_feet``
        False, for a caller that measures or fixes the feet itself)."""
        kin = RobotKinematics(self.mjcf)
        if self.clip_convention == "humanoid28_amp":
            from mimic_rl.envs.mujoco.humanoid28 import convert_clip

            if detect_format(path) == "beyondmimic":  # its joints come from a robot's MJCF: not this model's clip
                raise MotionFormatError(
                    f"{path}: joint_names: expected a {self.name} motion (Isaac Lab humanoid_amp or mimic_rl npz), "
                    "found a BeyondMimic/mjlab npz without joint names, i.e. a motion of another robot; for a G1 "
                    "motion pass the G1's MJCF (train, eval: --robot g1 --robot-mjcf G1.xml; convert: --robot G1.xml)"
                )
            clip = convert_clip(load_motion(path, csv_fps=csv_fps), kin)
        else:
            clip = load_motion(path, robot=kin, csv_fps=csv_fps)
        if check_feet:
            warn_about_feet(str(path), kin, clip, self.feet)
        return clip


def humanoid28_config() -> RobotConfig:
    """This package's 28-DoF humanoid (the skeleton of Isaac Lab's humanoid_amp motions)."""
    return RobotConfig(
        name="humanoid28",
        mjcf=str(ASSETS / "humanoid28.xml"),
        anchor_body="pelvis",
        end_effectors=("right_hand", "left_hand", "right_foot", "left_foot"),
        feet=("right_foot", "left_foot"),
        action_scale=0.5,
        action_scale_factor=0.3,
        clip_convention="humanoid28_amp",
    )


def g1_config(mjcf: str | Path) -> RobotConfig:
    """Unitree G1 (29 DoF) with the actuator facts of Unitree's motors (10 Hz, damping ratio 2) and its home pose."""
    return RobotConfig(
        name="g1",
        mjcf=str(mjcf),
        anchor_body="torso_link",
        end_effectors=G1_END_EFFECTORS,
        feet=G1_FEET,
        actuators=G1_ACTUATORS,
        default_joint_pos=dict(G1_HOME_POSE),
        action_scale_factor=1.0,
        floor_friction=0.6,
    )


def robot_config(name: str, mjcf: str | Path | None = None) -> RobotConfig:
    """A built-in robot by name: ``humanoid28``, or ``g1`` (needs ``mjcf``)."""
    if name == "humanoid28":
        return humanoid28_config()
    if name == "g1":
        if mjcf is None:
            raise ConfigError(
                "--robot-mjcf: expected the G1's MJCF for robot g1, found none; pass Unitree's G1 model "
                "(--robot-mjcf PATH/TO/g1.xml, or env.robot_mjcf in a config)"
            )
        return g1_config(mjcf)
    raise ConfigError(f"env.robot: expected 'humanoid28' or 'g1', found {name!r} (or pass a RobotConfig in Python)")


def _match(groups: tuple[ActuatorGroup, ...], joint: str) -> ActuatorGroup | None:
    return next((g for g in groups if re.fullmatch(g.joints, joint)), None)


def build_model(
    cfg: RobotConfig, bodies: list[str] | None = None, sensors: bool = True, quality: bool = False
) -> tuple[mujoco.MjModel, list[str], int]:
    """The compiled model, the bodies it has sensors for (``bodies`` or every body), and where they start.

    The returned offset is the ``sensordata`` address of the first added sensor (an MJCF may have its own before);
    with ``sensors=False`` none are added (the physics alone, for benchmarks) and the offset is -1.

    Adds a floor if the model has no plane, position actuators (from ``cfg.actuators``) if it has none, and for each
    sensed body ``framepos``, ``framequat``, ``framelinvel`` and ``frameangvel`` of its body frame, then ``jointpos``
    and ``jointvel`` of every actuated joint, in that order; with ``quality``, after them the motion-quality sensors
    (``mimic_rl.envs.mujoco.quality_sensors``; they change no physics).
    """
    path = Path(cfg.mjcf)
    if not path.is_file():
        raise FileNotFoundError(f"robot {cfg.name}: MJCF {path} not found")
    spec = mujoco.MjSpec.from_file(str(path))
    spec.option.timestep = cfg.timestep
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    if not any(g.type == mujoco.mjtGeom.mjGEOM_PLANE for g in spec.worldbody.geoms):
        spec.worldbody.add_geom(
            name="floor",
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[0, 0, 0.05],
            friction=[cfg.floor_friction, 0.005, 1e-4],
            contype=1,
            conaffinity=1,
        )
    joints = [j for j in spec.joints if j.type in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)]
    if cfg.override_actuators:
        for act in list(spec.actuators):
            spec.delete(act)
    if not list(spec.actuators):
        if not cfg.actuators:
            raise ValueError(f"robot {cfg.name}: the MJCF has no actuators and the config has no actuator table")
        for joint in joints:
            group = _match(cfg.actuators, joint.name)
            if group is None:
                raise ValueError(f"robot {cfg.name}: no actuator group matches joint {joint.name!r}")
            if group.armature is not None:
                joint.armature = group.armature
            act = spec.add_actuator(name=joint.name, target=joint.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.set_to_position(kp=group.kp, kv=group.kd)
            act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            act.forcerange = [-group.effort, group.effort]
    if not sensors:
        return spec.compile(), [], -1
    names = bodies if bodies is not None else RobotKinematics(spec.compile()).body_names  # MuJoCo's body order
    for body in names:
        for kind in SENSOR_KINDS:
            spec.add_sensor(
                name=f"{kind}:{body}",
                type=getattr(mujoco.mjtSensor, f"mjSENS_{kind.upper()}"),
                objtype=mujoco.mjtObj.mjOBJ_XBODY,
                objname=body,
            )
    for kind in ("jointpos", "jointvel"):  # all positions, then all velocities (the env's sensor layout)
        for joint in joints:
            spec.add_sensor(
                name=f"{kind}:{joint.name}",
                type=getattr(mujoco.mjtSensor, f"mjSENS_{kind.upper()}"),
                objtype=mujoco.mjtObj.mjOBJ_JOINT,
                objname=joint.name,
            )
    if quality:
        root = spec.compile().body(1).name  # the robot's root: the world body's first child
        add_quality_sensors(spec, cfg.feet, root, [a.name for a in spec.actuators])
    model = spec.compile()
    return model, list(names), int(model.sensor(f"{SENSOR_KINDS[0]}:{names[0]}").adr[0])


def servo_kv_over_kp(model: mujoco.MjModel) -> np.ndarray:
    """``kv / kp`` of each actuator, which must all be position servos (``kp (ctrl - q) - kv qd``)."""
    kp, bias = model.actuator_gainprm[:, 0], model.actuator_biasprm[:, :3]
    servo = (kp > 0) & np.isclose(bias[:, 0], 0) & np.isclose(bias[:, 1], -kp)
    if not servo.all():
        names = [model.actuator(i).name for i in np.flatnonzero(~servo)]
        raise ConfigError(
            f"env.reference_velocity_feedforward: needs position actuators; these are not: {names[:5]}; "
            "turn the feed-forward off for this robot"
        )
    return -bias[:, 2] / kp


def joint_tables(
    model: mujoco.MjModel, robot: RobotConfig, joint_names: list[str], cfg: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per actuated joint: the default pose (``robot.default_joint_pos``'s patterns, else 0), the action scale (rad
    of PD target per unit of action: the robot's, or 0.25 x effort limit / kp, times ``cfg.action_scale_factor``, or
    the robot's own factor when that is None)
    and the velocity feed-forward gain (kv / kp with ``cfg.reference_velocity_feedforward``, else 0)."""
    default = np.zeros(model.nu)
    for pattern, value in robot.default_joint_pos.items():
        for i, name in enumerate(joint_names):
            if re.fullmatch(pattern, name):
                default[i] = value
    if robot.action_scale is None:
        scale = 0.25 * model.actuator_forcerange[:, 1] / model.actuator_gainprm[:, 0]
    else:
        scale = np.full(model.nu, float(robot.action_scale))
    feedforward = servo_kv_over_kp(model) if cfg.reference_velocity_feedforward else np.zeros(model.nu)
    factor = robot.action_scale_factor if cfg.action_scale_factor is None else cfg.action_scale_factor
    return default, scale * factor, feedforward
