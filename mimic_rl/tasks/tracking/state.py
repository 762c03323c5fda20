"""A batched body-state container: the tensors a backend hands to the tracking MDP core."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["BodyState"]

Indices = Sequence[int] | torch.Tensor


@dataclass(frozen=True)
class BodyState:
    """Joint and body states of a batch of robots (or of their reference motion), world frame, quaternions wxyz.

    Shapes (``N`` envs, ``J`` joints, ``B`` bodies; any further leading dimensions are allowed):
    ``joint_pos``/``joint_vel`` ``[N, J]``, ``body_pos_w``/``body_lin_vel_w``/``body_ang_vel_w`` ``[N, B, 3]``,
    ``body_quat_w`` ``[N, B, 4]``. A robot state and its reference state must list the same bodies in the same
    order, so that body ``i`` of one tracks body ``i`` of the other.
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

    def select(self, indices: Indices) -> BodyState:
        """The same state restricted to the bodies ``indices`` (in that order); joints are kept unchanged.

        ``indices`` is a list of ints or a long tensor on the state's device (pass a tensor on a hot path to avoid
        building one from a list on every call).
        """
        return BodyState(
            joint_pos=self.joint_pos,
            joint_vel=self.joint_vel,
            body_pos_w=self.body_pos_w[..., indices, :],
            body_quat_w=self.body_quat_w[..., indices, :],
            body_lin_vel_w=self.body_lin_vel_w[..., indices, :],
            body_ang_vel_w=self.body_ang_vel_w[..., indices, :],
        )

    def body(self, index: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Position ``[N, 3]``, orientation ``[N, 4]``, linear and angular velocity ``[N, 3]`` of one body."""
        return (
            self.body_pos_w[..., index, :],
            self.body_quat_w[..., index, :],
            self.body_lin_vel_w[..., index, :],
            self.body_ang_vel_w[..., index, :],
        )
