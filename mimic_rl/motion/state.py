"""BodyState: joint and body states of a batch (robots, or their reference motion), world frame, quaternions wxyz.

The motion library returns it, backends build it from their simulator, and the tracking MDP core consumes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch

__all__ = ["BodyState"]

Indices = Sequence[int] | torch.Tensor


@dataclass(frozen=True)
class BodyState:
    """Shapes (``N`` envs, optionally ``K`` frames, ``J`` joints, ``B`` bodies): ``joint_pos`` / ``joint_vel``
    ``[..., J]``, ``body_pos_w`` / ``body_lin_vel_w`` / ``body_ang_vel_w`` ``[..., B, 3]``, ``body_quat_w``
    ``[..., B, 4]``. A robot state and its reference state must list the same bodies in the same order.
    """

    joint_pos: torch.Tensor
    joint_vel: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor

    @property
    def num_bodies(self) -> int:
        """Number of bodies ``B``."""
        return self.body_pos_w.shape[-2]

    @property
    def num_joints(self) -> int:
        """Number of joints ``J``."""
        return self.joint_pos.shape[-1]

    def map(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> BodyState:
        """Apply ``fn(tensor, trailing_dims)`` to every field (1 trailing dim for joints, 2 for bodies)."""
        return BodyState(
            **{f.name: fn(getattr(self, f.name), 1 if f.name.startswith("joint") else 2) for f in fields(self)}
        )

    def reshape(self, *lead: int) -> BodyState:
        """Change the leading (batch) shape."""
        return self.map(lambda x, t: x.reshape(*lead, *x.shape[x.dim() - t :]))

    def select(self, indices: Indices) -> BodyState:
        """The same state restricted to the bodies ``indices`` (in that order); joints are kept unchanged."""
        return BodyState(
            joint_pos=self.joint_pos,
            joint_vel=self.joint_vel,
            body_pos_w=self.body_pos_w[..., indices, :],
            body_quat_w=self.body_quat_w[..., indices, :],
            body_lin_vel_w=self.body_lin_vel_w[..., indices, :],
            body_ang_vel_w=self.body_ang_vel_w[..., indices, :],
        )

    def body(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Position ``[..., 3]``, orientation ``[..., 4]``, linear and angular velocity ``[..., 3]`` of one body."""
        return (
            self.body_pos_w[..., index, :],
            self.body_quat_w[..., index, :],
            self.body_lin_vel_w[..., index, :],
            self.body_ang_vel_w[..., index, :],
        )
