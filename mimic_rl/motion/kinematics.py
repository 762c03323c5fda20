"""Forward kinematics and body velocities of a robot MJCF with MuJoCo (``mj_kinematics`` / ``mj_comVel``).

Conventions match BeyondMimic's converter, which the shipped G1 npz files come from: body states are the body-frame
origins (``xpos`` / ``xquat``); joint velocities and the root's linear velocity are central differences
(``np.gradient``); the root's angular velocity is the central SO(3) difference; every body's velocity then follows
from the kinematic chain (``J(q) qdot``).
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import torch

from mimic_rl.errors import UsageError
from mimic_rl.files import check_file
from mimic_rl.rotations import so3_central_derivative

__all__ = ["RobotKinematics", "load_mjcf", "mj_kinematics"]


def mj_kinematics(model: mujoco.MjModel, data: mujoco.MjData, qpos: np.ndarray) -> None:
    """Set ``qpos`` and run MuJoCo's forward kinematics (body poses in ``data.xpos`` / ``data.xquat``)."""
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)


def load_mjcf(path: str | Path) -> mujoco.MjModel:
    """Compile the MJCF at ``path``; a missing or invalid file is a ``UsageError`` naming ``--robot-mjcf``."""
    check_file(path, "--robot-mjcf", "pass the robot's MJCF (XML) file")
    try:
        return mujoco.MjModel.from_xml_path(str(path))
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"{path}: --robot-mjcf: expected a MuJoCo MJCF (XML) model, found one MuJoCo cannot load ({first})"
        ) from None


class RobotKinematics:
    """A floating-base robot: joint and body names in MuJoCo's order, limits, FK and velocities."""

    def __init__(self, mjcf: str | Path | mujoco.MjModel) -> None:
        if isinstance(mjcf, mujoco.MjModel):
            self.model = mjcf
            self.source = "<MjModel>"
        else:
            self.model = load_mjcf(mjcf)
            self.source = str(mjcf)
        m = self.model
        if m.njnt == 0 or int(m.jnt_type[0]) != int(mujoco.mjtJoint.mjJNT_FREE):
            raise UsageError(
                f"{self.source}: --robot-mjcf: expected a floating-base robot (a free joint first), found "
                f"{'no joints' if m.njnt == 0 else 'a fixed base'}; pass the MJCF of a humanoid with a free root joint"
            )
        joints = list(range(1, m.njnt))
        one_dof = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        bad = [m.joint(j).name for j in joints if int(m.jnt_type[j]) not in one_dof]
        if bad:
            raise UsageError(
                f"{self.source}: --robot-mjcf: expected hinge and slide joints after the root, found {bad[:5]}"
            )
        self.joint_names = [m.joint(j).name for j in joints]
        self.body_names = [m.body(b).name for b in range(1, m.nbody)]
        self.joint_qpos = np.array([m.jnt_qposadr[j] for j in joints], dtype=np.int64)
        self.joint_dof = np.array([m.jnt_dofadr[j] for j in joints], dtype=np.int64)
        limited = np.array([bool(m.jnt_limited[j]) for j in joints])
        ranges = np.array([m.jnt_range[j] for j in joints], dtype=np.float64).reshape(-1, 2)
        self.joint_lower = np.where(limited, ranges[:, 0], -np.inf)
        self.joint_upper = np.where(limited, ranges[:, 1], np.inf)
        self.data = mujoco.MjData(m)

    @property
    def num_joints(self) -> int:
        """Number of actuated (non-root) joints."""
        return len(self.joint_names)

    def _qpos(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray) -> np.ndarray:
        qpos = np.tile(self.model.qpos0, (root_pos.shape[0], 1))
        qpos[:, :3] = root_pos
        qpos[:, 3:7] = root_quat
        qpos[:, self.joint_qpos] = joint_pos
        return qpos

    def _check(self, joint_pos: np.ndarray) -> None:
        if joint_pos.shape[-1] != self.num_joints:
            raise ValueError(
                f"{self.source}: the robot has {self.num_joints} joints ({self.joint_names[:3]}...), "
                f"the motion has {joint_pos.shape[-1]}"
            )

    def forward(
        self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Body positions ``[T, B, 3]`` and quaternions ``[T, B, 4]`` (wxyz) for each frame (float64)."""
        self._check(joint_pos)
        m, d = self.model, self.data
        qpos = self._qpos(root_pos, root_quat, joint_pos)
        pos = np.empty((len(qpos), m.nbody - 1, 3))
        quat = np.empty((len(qpos), m.nbody - 1, 4))
        for t, q in enumerate(qpos):
            mj_kinematics(m, d, q)
            pos[t] = d.xpos[1:]
            quat[t] = d.xquat[1:]
        return pos, quat

    def velocities(
        self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, fps: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint velocities ``[T, J]`` and body linear / angular velocities ``[T, B, 3]`` (world frame, float64)."""
        self._check(joint_pos)
        dt = 1.0 / fps
        joint_vel = np.gradient(joint_pos, dt, axis=0)
        root_lin = np.gradient(root_pos, dt, axis=0)
        root_ang = so3_central_derivative(torch.from_numpy(np.ascontiguousarray(root_quat, np.float64)), dt).numpy()
        m, d = self.model, self.data
        qpos = self._qpos(root_pos, root_quat, joint_pos)
        lin = np.empty((len(qpos), m.nbody - 1, 3))
        ang = np.empty((len(qpos), m.nbody - 1, 3))
        rot = np.empty(9)
        for t, q in enumerate(qpos):
            d.qpos[:] = q
            d.qvel[:] = 0.0
            d.qvel[:3] = root_lin[t]
            mujoco.mju_quat2Mat(rot, q[3:7])
            d.qvel[3:6] = rot.reshape(3, 3).T @ root_ang[t]  # the free joint's angular velocity is in its local frame
            d.qvel[self.joint_dof] = joint_vel[t]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            # cvel is [angular, linear] at the subtree centre of mass of each body's root; move it to the body origin
            cvel = d.cvel[1:]
            offset = d.xpos[1:] - d.subtree_com[m.body_rootid[1:]]
            ang[t] = cvel[:, :3]
            lin[t] = cvel[:, 3:] + np.cross(cvel[:, :3], offset)
        return joint_vel, lin, ang

    def lowest_point(
        self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, bodies: list[str] | None = None
    ) -> np.ndarray:
        """Per frame, the lowest z of the collision geometry of ``bodies`` (default: every body), ``[T]``."""
        m, d = self.model, self.data
        body_ids = range(1, m.nbody) if bodies is None else [m.body(name).id for name in bodies]
        colliding = (m.geom_contype != 0) | (m.geom_conaffinity != 0)  # visual geoms (a mesh's box) do not touch
        geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] in set(body_ids) and colliding[g]]
        if not geoms:
            raise ValueError(f"{self.source}: bodies {bodies} have no collision geometry to put on the ground")
        out = np.empty(root_pos.shape[0])
        for t, q in enumerate(self._qpos(root_pos, root_quat, joint_pos)):
            mj_kinematics(m, d, q)
            out[t] = min(_geom_bottom(m, d, g) for g in geoms)
        return out


def _geom_bottom(m: mujoco.MjModel, d: mujoco.MjData, g: int) -> float:
    """Lowest world z of geom ``g`` (exact for spheres, capsules, boxes, ellipsoids, cylinders; AABB for meshes)."""
    pos, rot, size = d.geom_xpos[g], d.geom_xmat[g].reshape(3, 3), m.geom_size[g]
    kind = int(m.geom_type[g])
    if kind == int(mujoco.mjtGeom.mjGEOM_SPHERE):
        return float(pos[2] - size[0])
    if kind == int(mujoco.mjtGeom.mjGEOM_CAPSULE):
        return float(pos[2] - abs(rot[2, 2]) * size[1] - size[0])
    if kind == int(mujoco.mjtGeom.mjGEOM_CYLINDER):
        axis = rot[2, 2]
        return float(pos[2] - abs(axis) * size[1] - np.sqrt(max(0.0, 1 - axis * axis)) * size[0])
    if kind == int(mujoco.mjtGeom.mjGEOM_BOX):
        return float(pos[2] - np.abs(rot[2, :]) @ size[:3])
    if kind == int(mujoco.mjtGeom.mjGEOM_ELLIPSOID):
        return float(pos[2] - np.sqrt((rot[2, :] * size[:3]) @ (rot[2, :] * size[:3])))
    if kind == int(mujoco.mjtGeom.mjGEOM_PLANE):
        return float("inf")
    center, half = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
    return float(pos[2] + rot[2, :] @ center - np.abs(rot[2, :]) @ half)
