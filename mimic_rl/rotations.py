"""Quaternion and rotation helpers in torch. Quaternions are **wxyz** everywhere in the package.

All functions broadcast over leading dimensions and work in the input's dtype (use float64 for conversions that
must be exact).
"""

from __future__ import annotations

import torch

__all__ = [
    "axis_angle_from_quat",
    "matrix_from_quat",
    "normalize_quat",
    "quat_angle_error",
    "quat_apply",
    "quat_apply_inverse",
    "quat_conjugate",
    "quat_conjugate_mul",
    "quat_from_axis_angle",
    "quat_from_matrix",
    "quat_mul",
    "quat_slerp",
    "quat_to_6d",
    "quat_wxyz_to_xyzw",
    "quat_xyzw_to_wxyz",
    "so3_central_derivative",
    "yaw_quat",
]


def quat_xyzw_to_wxyz(q: torch.Tensor) -> torch.Tensor:
    """Reorder xyzw to wxyz."""
    return q[..., [3, 0, 1, 2]]


def quat_wxyz_to_xyzw(q: torch.Tensor) -> torch.Tensor:
    """Reorder wxyz to xyzw."""
    return q[..., [1, 2, 3, 0]]


def normalize_quat(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Unit quaternion."""
    return q / q.norm(dim=-1, keepdim=True).clamp(min=eps)


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate (the inverse of a unit quaternion)."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a * b`` (apply ``b`` first, then ``a``)."""
    wa, va = a[..., :1], a[..., 1:]
    wb, vb = b[..., :1], b[..., 1:]
    w = wa * wb - (va * vb).sum(-1, keepdim=True)
    v = wa * vb + wb * va + torch.linalg.cross(va, vb, dim=-1)
    return torch.cat((w, v), dim=-1)


def quat_conjugate_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``quat_mul(quat_conjugate(a), b)``, the rotation from ``a`` to ``b`` for unit ``a``, without the conjugate."""
    wa, va = a[..., :1], a[..., 1:]
    wb, vb = b[..., :1], b[..., 1:]
    w = wa * wb + (va * vb).sum(-1, keepdim=True)
    v = wa * vb - wb * va - torch.linalg.cross(va, vb, dim=-1)
    return torch.cat((w, v), dim=-1)


def quat_apply(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` (``[..., 3]``) by unit quaternions ``q``."""
    w, xyz = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v + w * t + torch.linalg.cross(xyz, t, dim=-1)


def quat_apply_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors by the inverse of ``q`` (world to the frame of ``q``): ``quat_apply(quat_conjugate(q), v)``."""
    w, xyz = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v - w * t + torch.linalg.cross(xyz, t, dim=-1)


def axis_angle_from_quat(q: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """Rotation vector (axis * angle, angle in [0, pi]) of unit quaternions."""
    q = torch.where(q[..., :1] < 0, -q, q)
    s = q[..., 1:].norm(dim=-1, keepdim=True)
    angle = 2.0 * torch.atan2(s, q[..., :1])
    # angle / sin(angle / 2) -> 2 as the angle -> 0
    scale = torch.where(s > eps, angle / s.clamp(min=eps), 2.0 + angle.square() / 12.0)
    return q[..., 1:] * scale


def quat_from_axis_angle(rotvec: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """Unit quaternion of a rotation vector."""
    angle = rotvec.norm(dim=-1, keepdim=True)
    half = 0.5 * angle
    scale = torch.where(angle > eps, torch.sin(half) / angle.clamp(min=eps), 0.5 - angle.square() / 48.0)
    return torch.cat((torch.cos(half), rotvec * scale), dim=-1)


def quat_angle_error(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rotation angle between ``a`` and ``b`` in [0, pi], sign-agnostic."""
    rel = quat_conjugate_mul(a, b)
    return 2.0 * torch.atan2(rel[..., 1:].norm(dim=-1), rel[..., 0].abs())


def quat_slerp(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Spherical interpolation from ``a`` (t = 0) to ``b`` (t = 1) along the shorter arc; ``t`` is ``[...]``.

    ``sin((1 - t) theta) a + sin(t theta) b``, normalized: the common ``1 / sin(theta)`` cancels in the normalization,
    and an angle under 1e-6 rad is taken as 1e-6, where the weights are those of a linear interpolation to 1e-12.
    """
    t = t.unsqueeze(-1)
    dot = (a * b).sum(-1, keepdim=True)
    b = torch.where(dot < 0, -b, b)
    theta = torch.acos(dot.abs().clamp(max=1.0)).clamp(min=1e-6)
    return normalize_quat(torch.sin((1.0 - t) * theta) * a + torch.sin(t * theta) * b)


def matrix_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``[..., 3, 3]``."""
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
        ),
        dim=-1,
    ).reshape(*q.shape[:-1], 3, 3)  # fmt: skip


def quat_from_matrix(m: torch.Tensor) -> torch.Tensor:
    """Unit quaternion (w >= 0) of rotation matrices ``[..., 3, 3]``."""
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    candidates = torch.stack(
        (
            torch.stack((1 + m00 + m11 + m22, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0],
                         m[..., 1, 0] - m[..., 0, 1]), -1),
            torch.stack((m[..., 2, 1] - m[..., 1, 2], 1 + m00 - m11 - m22, m[..., 0, 1] + m[..., 1, 0],
                         m[..., 0, 2] + m[..., 2, 0]), -1),
            torch.stack((m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 - m00 + m11 - m22,
                         m[..., 1, 2] + m[..., 2, 1]), -1),
            torch.stack((m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                         1 - m00 - m11 + m22), -1),
        ),
        dim=-2,
    )  # fmt: skip
    best = torch.stack((1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), -1)
    idx = best.argmax(-1, keepdim=True).unsqueeze(-1).expand(*best.shape[:-1], 1, 4)
    q = normalize_quat(torch.gather(candidates, -2, idx).squeeze(-2))
    return torch.where(q[..., :1] < 0, -q, q)


def quat_to_6d(q: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix, flattened row by row ``[r00, r01, r10, r11, r20, r21]``."""
    w, x, y, z = q.unbind(-1)  # the entries of matrix_from_quat (unit q), without the third column
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    return torch.stack(
        (1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (xz - wy), 2 * (yz + wx)), dim=-1
    )


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The heading (rotation about world z) part of ``q``."""
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    zeros = torch.zeros_like(yaw)
    return torch.stack((torch.cos(0.5 * yaw), zeros, zeros, torch.sin(0.5 * yaw)), -1)


def so3_central_derivative(q: torch.Tensor, dt: float) -> torch.Tensor:
    """World-frame angular velocity ``[T, ..., 3]`` of a quaternion sequence by central differences.

    omega_t = rotvec(q_{t+1} q_{t-1}^*) / (2 dt); the first and last frames repeat their neighbours' values (the
    convention of BeyondMimic's converter). Needs T >= 3; with T == 2 both frames get the forward difference.
    """
    if q.shape[0] < 2:
        raise ValueError("so3_central_derivative needs at least 2 frames")
    if q.shape[0] == 2:
        omega = axis_angle_from_quat(quat_mul(q[1:], quat_conjugate(q[:1]))) / dt
        return torch.cat((omega, omega), dim=0)
    omega = axis_angle_from_quat(quat_mul(q[2:], quat_conjugate(q[:-2]))) / (2.0 * dt)
    return torch.cat((omega[:1], omega, omega[-1:]), dim=0)
