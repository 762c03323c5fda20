"""The MuJoCo sensors behind the motion-quality metrics (``mimic_rl.tasks.tracking.quality``), and the
``QualitySample`` read from them.

Per foot a contact sensor between the foot's body and the world body (the floor), reduced to the deepest contact:
whether there is one, its distance and the relative linear velocity in the contact frame (normal first, so the
tangential slip is the norm of the last two). One contact sensor between the robot's whole tree and the world body:
its deepest contact's distance (negative: penetration). One ``actuatorfrc`` sensor per actuator.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import torch

from mimic_rl.tasks.tracking.quality import QualitySample

__all__ = ["QualitySensors", "add_quality_sensors"]

_FOUND, _DIST, _LINVEL = 1 << 0, 1 << 3, 1 << 7  # the data bits of MJCF's data="found dist linvel"
_MINDIST = 1  # mjtConReduce: the contact of least distance


def add_quality_sensors(spec: mujoco.MjSpec, feet: Sequence[str], root_body: str, actuators: Sequence[str]) -> None:
    """Add the sensors of the module docstring to ``spec`` (named ``quality:...``)."""
    bodies = {b.name for b in spec.bodies}
    missing = [f for f in (*feet, root_body) if f not in bodies]
    if missing:
        raise ValueError(f"quality sensors: bodies {missing} not in the model")
    for foot in feet:
        sensor = spec.add_sensor(name=f"quality:contact:{foot}", type=mujoco.mjtSensor.mjSENS_CONTACT)
        sensor.objtype, sensor.objname = mujoco.mjtObj.mjOBJ_BODY, foot
        sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_BODY, "world"
        sensor.intprm[:3] = [_FOUND | _DIST | _LINVEL, _MINDIST, 1]
    sensor = spec.add_sensor(name="quality:contact:robot", type=mujoco.mjtSensor.mjSENS_CONTACT)
    sensor.objtype, sensor.objname = mujoco.mjtObj.mjOBJ_XBODY, root_body  # the root's subtree: the whole robot
    sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_BODY, "world"
    sensor.intprm[:3] = [_FOUND | _DIST, _MINDIST, 1]
    for name in actuators:
        spec.add_sensor(
            name=f"quality:torque:{name}",
            type=mujoco.mjtSensor.mjSENS_ACTUATORFRC,
            objtype=mujoco.mjtObj.mjOBJ_ACTUATOR,
            objname=name,
        )


class QualitySensors:
    """Where ``add_quality_sensors``' readings sit in a model's ``sensordata``, and the sample they give."""

    def __init__(self, model: mujoco.MjModel, feet: Sequence[str], actuators: Sequence[str]) -> None:
        self.feet = [int(model.sensor(f"quality:contact:{f}").adr[0]) for f in feet]
        self.robot = int(model.sensor("quality:contact:robot").adr[0])
        self.torque = [int(model.sensor(f"quality:torque:{a}").adr[0]) for a in actuators]

    def sample(self, sensors: torch.Tensor, joint_vel: torch.Tensor) -> QualitySample:
        """The motion's quality in sensor rows ``[N, nsensordata]`` with the joints' velocities ``[N, J]``."""
        n = sensors.shape[0]
        if self.feet:
            feet = torch.stack([sensors[:, a : a + 5] for a in self.feet], dim=1)  # [N, F, found dist linvel]
            contact, slip = feet[..., 0] > 0, feet[..., 3:5].norm(dim=-1)
        else:
            contact = torch.zeros(n, 0, dtype=torch.bool, device=sensors.device)
            slip = sensors.new_zeros(n, 0)
        found = sensors[:, self.robot] > 0
        return QualitySample(
            foot_contact=contact,
            foot_slip=slip,
            penetration=torch.where(found, (-sensors[:, self.robot + 1]).clamp(min=0), 0.0),
            torque=sensors[:, self.torque],
            joint_vel=joint_vel,
        )
