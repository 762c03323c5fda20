"""What every term of the tracking MDP reads: the robot's layout and one step's states, actions and shared results.

A reward, termination or observation term is a pure function ``f(ctx: StepContext, **params) -> Tensor``; the term
tables (``rewards.reward_terms``, ``terminations.termination_terms``, ``observations.observation_terms``) list the
terms of a task with their weights and parameters, and ``terms.py`` evaluates them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from mimic_rl.tasks.tracking.observations import relative_reference_body_poses
from mimic_rl.tasks.tracking.state import BodyState

__all__ = ["StepContext", "TrackingLayout", "minimal_layout"]


@dataclass(frozen=True)
class TrackingLayout:
    """Where the MDP finds things in a robot's ``BodyState`` of tracked bodies, and the robot's joint facts (all
    tensors on the env's device, joints in the motion library's order)."""

    anchor: int
    """Index of the anchor body (the observation frame, e.g. the G1's torso) in the tracked bodies."""
    root: int
    """Index of the root body (root-relative MPJPE) in the tracked bodies."""
    end_effectors: torch.Tensor
    """Indices of the end effectors in the tracked bodies (long)."""
    default_joint_pos: torch.Tensor
    """``[J]`` or ``[N, J]``: the pose that joint positions are observed relative to (the action offset)."""
    joint_lower: torch.Tensor
    joint_upper: torch.Tensor


@dataclass(frozen=True)
class StepContext:
    """The inputs of one evaluation of the MDP's terms (``N`` envs, ``B`` tracked bodies, ``J`` joints).

    ``robot`` is the robot's state of the tracked bodies; ``ref`` the reference's current frame of the same bodies
    (rewards, terminations); ``future`` the reference's K frames of the anchor alone, ``[N, K]`` states with one body
    (the reference observation). ``actions`` is the action just applied (``[N, A]``, what the policy observes as its
    last action) and ``last_actions`` the one before it (the action-rate penalty). Inputs a term set does not read
    may be left ``None``; a term that needs a missing one raises ``ValueError``.

    Results that several terms share (the relative body targets of ``body_pos`` and ``body_ori``) are computed once
    per context and kept in ``cache``: build one context per step.
    """

    robot: BodyState
    layout: TrackingLayout
    actions: torch.Tensor | None = None
    last_actions: torch.Tensor | None = None
    ref: BodyState | None = None
    future: BodyState | None = None
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def reference(self) -> BodyState:
        """``ref``, required: the reference's current frame of the tracked bodies."""
        return _required(self.ref, "ref")

    @property
    def future_reference(self) -> BodyState:
        """``future``, required: the reference's future frames of the anchor alone."""
        return _required(self.future, "future")

    @property
    def action(self) -> torch.Tensor:
        """``actions``, required: the action just applied, ``[N, A]``."""
        return _required(self.actions, "actions")

    @property
    def previous_action(self) -> torch.Tensor:
        """``last_actions``, required: the action before the one just applied, ``[N, A]``."""
        return _required(self.last_actions, "last_actions")

    @property
    def anchor_pos_w(self) -> torch.Tensor:
        """The robot anchor's world position ``[N, 3]``."""
        return self.cached("anchor_pos_w", lambda: self.robot.body_pos_w[..., self.layout.anchor, :])

    @property
    def anchor_quat_w(self) -> torch.Tensor:
        """The robot anchor's world orientation ``[N, 4]`` (wxyz)."""
        return self.cached("anchor_quat_w", lambda: self.robot.body_quat_w[..., self.layout.anchor, :])

    @property
    def ref_anchor_pos_w(self) -> torch.Tensor:
        """The reference anchor's world position ``[N, 3]``."""
        return self.cached("ref_anchor_pos_w", lambda: self.reference.body_pos_w[..., self.layout.anchor, :])

    @property
    def ref_anchor_quat_w(self) -> torch.Tensor:
        """The reference anchor's world orientation ``[N, 4]`` (wxyz)."""
        return self.cached("ref_anchor_quat_w", lambda: self.reference.body_quat_w[..., self.layout.anchor, :])

    def relative_targets(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference bodies re-anchored at the robot's xy position and heading, ``(pos [N, B, 3], quat [N, B,
        4])`` (:func:`~mimic_rl.tasks.tracking.observations.relative_reference_body_poses`), computed once."""
        return self.cached(
            "relative_targets",
            lambda: relative_reference_body_poses(
                self.reference.body_pos_w,
                self.reference.body_quat_w,
                self.ref_anchor_pos_w,
                self.ref_anchor_quat_w,
                self.anchor_pos_w,
                self.anchor_quat_w,
            ),
        )

    def cached(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, evaluated on the first call with ``key`` and kept in ``cache`` for this context's terms."""
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]


def _required(value: Any, name: str) -> Any:
    if value is None:
        raise ValueError(f"this term reads StepContext.{name}, which is None: pass it when building the context")
    return value


def minimal_layout(
    anchor: int,
    like: torch.Tensor,
    end_effectors: torch.Tensor | None = None,
    joint_lower: torch.Tensor | None = None,
    joint_upper: torch.Tensor | None = None,
) -> TrackingLayout:
    """A layout for callers that know only the anchor and some of the rest (the per-kind entry points such as
    ``tracking_reward``): the root is the anchor, no end effectors unless given, a zero default pose and unlimited
    joints unless given; ``like`` (e.g. joint positions ``[..., J]``) gives the joint count, dtype and device."""
    num_joints, device = like.shape[-1], like.device
    if end_effectors is None:
        end_effectors = torch.zeros(0, dtype=torch.long, device=device)
    if joint_lower is None:
        joint_lower = torch.full((num_joints,), -torch.inf, dtype=like.dtype, device=device)
    if joint_upper is None:
        joint_upper = torch.full((num_joints,), torch.inf, dtype=like.dtype, device=device)
    default_pose = torch.zeros(num_joints, dtype=like.dtype, device=device)
    return TrackingLayout(anchor, anchor, end_effectors, default_pose, joint_lower, joint_upper)
