"""How a policy moves, next to how well it tracks: foot sliding, joint jerk, torque, mechanical power and ground
penetration, accumulated per clip over the steps each env is alive in its first episode (``FromStartEvaluation``).

A backend that can measure them hands a :class:`QualitySample` per policy step to the evaluation (the embedded env
with ``env.quality_metrics``, which ``mimic-rl eval`` turns on). Definitions (``docs/guide.md``, "Metrics"), with
``A`` the (env, step) pairs in which the env is alive, ``c`` a foot's contact with the floor, ``Δt`` the policy step:

- ``foot_slide_mm_s``: ``1000 Σ_{A, feet} c · v_slip / Σ_{A, feet} c``: the mean tangential slip speed between a foot
  and the floor at the foot's deepest contact, over the steps in which that foot touches the floor (mm/s).
- ``joint_jerk``: ``sqrt(mean_{A', joints} ((q̇_t - 2 q̇_{t-1} + q̇_{t-2}) / Δt²)²)`` over the steps ``A'`` of ``A``
  that have two earlier steps in the same episode (rad/s³; the third derivative of the joint positions by finite
  differences of the velocities at the policy rate).
- ``torque_rms_nm``: ``sqrt(mean_{A, joints} τ²)`` of the actuators' torques (N m).
- ``power_w``: ``mean_A Σ_joints |τ q̇|``: absolute mechanical power of the actuators, positive and negative work
  alike (W).
- ``penetration_mm`` / ``penetration_max_mm``: the mean / maximum over ``A`` of the deepest penetration of any of the
  robot's geoms into the floor, 0 without contact (mm).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["QUALITY_METRICS", "MotionQuality", "QualitySample", "joint_jerk", "mechanical_power"]

QUALITY_METRICS = ("foot_slide_mm_s", "joint_jerk", "torque_rms_nm", "power_w", "penetration_mm", "penetration_max_mm")
"""The keys :meth:`MotionQuality.result` adds to a clip's evaluation entry (``None`` where nothing was measured)."""


@dataclass(frozen=True)
class QualitySample:
    """What one policy step measured of every env's motion."""

    foot_contact: torch.Tensor
    """bool ``[N, F]``: the foot touches the floor."""
    foot_slip: torch.Tensor
    """``[N, F]`` m/s: tangential slip speed at the foot's deepest contact (any value where it has none)."""
    penetration: torch.Tensor
    """``[N]`` m, >= 0: the deepest penetration of any robot geom into the floor."""
    torque: torch.Tensor
    """``[N, J]`` N m: each actuated joint's actuator torque."""
    joint_vel: torch.Tensor
    """``[N, J]`` rad/s."""


def joint_jerk(qd: torch.Tensor, qd_1: torch.Tensor, qd_2: torch.Tensor, dt: float) -> torch.Tensor:
    """Per-joint jerk (rad/s³) from the joint velocities of three consecutive steps ``dt`` apart (``qd_1`` one step
    earlier, ``qd_2`` two): ``(qd - 2 qd_1 + qd_2) / dt²``."""
    return (qd - 2.0 * qd_1 + qd_2) / (dt * dt)


def mechanical_power(torque: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
    """Absolute mechanical power (W) of ``[..., J]`` torques at joint velocities ``qd``: ``Σ_j |τ_j q̇_j|``."""
    return (torque * qd).abs().sum(-1)


class MotionQuality:
    """Per-clip sums of the quality metrics over ``num_clips x num_envs`` envs (env ``i`` of clip ``c`` at ``[c, i]``);
    ``record`` each step with the envs still alive, then ``result`` per clip. Stays on the device."""

    def __init__(self, num_clips: int, num_envs: int, step_dt: float, device: Any = "cpu") -> None:
        self.c, self.n, self.dt = int(num_clips), int(num_envs), float(step_dt)
        keys = ("slide", "contacts", "jerk_sq", "jerk_n", "torque_sq", "torque_n", "power", "pen", "pen_max", "steps")
        self.sums = {k: torch.zeros(self.c, dtype=torch.float64, device=device) for k in keys}
        self._qd: list[torch.Tensor] = []
        """The joint velocities ``[C, N, J]`` of the two previous steps, the older first."""

    def record(self, sample: QualitySample, alive: torch.Tensor, earlier_steps: torch.Tensor) -> None:
        """Add one step of ``sample`` (``[C * N, ...]`` rows) for the envs ``alive`` (bool ``[C, N]``), each of which
        has lived ``earlier_steps`` (``[C, N]``) steps before this one."""
        c, n, s = self.c, self.n, self.sums
        contact = sample.foot_contact.reshape(c, n, -1) & alive.unsqueeze(-1)
        s["slide"] += torch.where(contact, sample.foot_slip.reshape(c, n, -1).double(), 0.0).sum((1, 2))
        s["contacts"] += contact.sum((1, 2)).double()
        qd = sample.joint_vel.reshape(c, n, -1).double()
        if len(self._qd) == 2:
            valid = alive & (earlier_steps >= 2)
            jerk_sq = joint_jerk(qd, self._qd[1], self._qd[0], self.dt).square()
            s["jerk_sq"] += torch.where(valid.unsqueeze(-1), jerk_sq, 0.0).sum((1, 2))
            s["jerk_n"] += valid.sum(-1).double() * qd.shape[-1]
        self._qd = [*self._qd[-1:], qd]
        tau = sample.torque.reshape(c, n, -1).double()
        mask = alive.unsqueeze(-1)
        s["torque_sq"] += torch.where(mask, tau.square(), 0.0).sum((1, 2))
        s["torque_n"] += alive.sum(-1).double() * tau.shape[-1]
        s["power"] += torch.where(alive, mechanical_power(tau, qd), 0.0).sum(-1)
        pen = torch.where(alive, sample.penetration.reshape(c, n).double(), 0.0)
        s["pen"] += pen.sum(-1)
        s["pen_max"] = torch.maximum(s["pen_max"], pen.amax(-1))
        s["steps"] += alive.sum(-1).double()

    def result(self, clip: int = 0) -> dict[str, float | None]:
        """The metrics of clip ``clip`` (:data:`QUALITY_METRICS`; ``None`` where no step counted)."""
        v = {k: float(t[clip]) for k, t in self.sums.items()}

        def ratio(num: float, den: float, scale: float = 1.0, root: bool = False) -> float | None:
            if den <= 0:
                return None
            value = num / den
            return scale * (math.sqrt(value) if root else value)

        return {
            "foot_slide_mm_s": ratio(v["slide"], v["contacts"], 1000.0),
            "joint_jerk": ratio(v["jerk_sq"], v["jerk_n"], root=True),
            "torque_rms_nm": ratio(v["torque_sq"], v["torque_n"], root=True),
            "power_w": ratio(v["power"], v["steps"]),
            "penetration_mm": ratio(v["pen"], v["steps"], 1000.0),
            "penetration_max_mm": 1000.0 * v["pen_max"] if v["steps"] > 0 else None,
        }
