"""One policy step of the tracking MDP assembled from this package's terms: the observation groups, the reward, the
terminations, the time-outs, the metrics and the per-step log of every backend (the embedded env, mjlab's task),
as pure tensor functions of body states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mimic_rl.motion import MotionLibrary
from mimic_rl.rotations import quat_apply_inverse
from mimic_rl.tasks.tracking.metrics import tracking_metrics
from mimic_rl.tasks.tracking.observations import body_pose_in_anchor_frame, projected_gravity, reference_observation
from mimic_rl.tasks.tracking.rewards import TrackingRewardConfig, tracking_reward
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.tasks.tracking.terminations import TerminationConfig, tracking_terminations

__all__ = ["TrackingLayout", "clip_ends", "observation_groups", "step_evaluation"]


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


def observation_groups(
    robot: BodyState, future: BodyState, layout: TrackingLayout, last_actions: torch.Tensor
) -> dict[str, torch.Tensor]:
    """``policy``, ``reference``, ``critic`` and ``amp`` from the robot's tracked bodies and ``future`` reference
    frames of the anchor alone (``[N, K]`` states with one body), as the embedded env builds them.

    ``policy``: joint positions relative to the default pose, joint velocities, the anchor's linear and angular
    velocity in its own frame, its projected gravity, the last action. ``reference``: ``reference_observation`` of
    the K frames, ``[N, K, 2 J + 9]``. ``critic``: ``policy``, every tracked body's pose in the anchor frame, the
    anchor's height. ``amp``: joint positions and velocities.
    """
    a = layout.anchor
    anchor_pos, anchor_quat = robot.body_pos_w[:, a], robot.body_quat_w[:, a]
    lin = quat_apply_inverse(anchor_quat, robot.body_lin_vel_w[:, a])
    ang = quat_apply_inverse(anchor_quat, robot.body_ang_vel_w[:, a])
    policy = torch.cat(
        (
            robot.joint_pos - layout.default_joint_pos,
            robot.joint_vel,
            lin,
            ang,
            projected_gravity(anchor_quat),
            last_actions,
        ),
        dim=-1,
    )
    reference = reference_observation(
        future.joint_pos,
        future.joint_vel,
        future.body_pos_w[:, :, 0],
        future.body_quat_w[:, :, 0],
        anchor_pos,
        anchor_quat,
    )
    bodies = body_pose_in_anchor_frame(robot.body_pos_w, robot.body_quat_w, anchor_pos, anchor_quat)
    critic = torch.cat((policy, bodies.flatten(1), anchor_pos[:, 2:3]), dim=-1)
    return {
        "policy": policy,
        "reference": reference,
        "critic": critic,
        "amp": torch.cat((robot.joint_pos, robot.joint_vel), dim=-1),
    }


def clip_ends(
    library: MotionLibrary, clip_ids: torch.Tensor, motion_time: torch.Tensor, step_dt: float
) -> torch.Tensor:
    """bool ``[N]``: the next policy step would pass the end of a (non-looping) clip, so the episode times out now."""
    return ~library.clip_wrap[clip_ids] & (motion_time + step_dt > library.clip_duration[clip_ids] + 1e-6)


def step_evaluation(
    reward_cfg: TrackingRewardConfig,
    termination_cfg: TerminationConfig,
    robot: BodyState,
    ref: BodyState,
    future: BodyState,
    layout: TrackingLayout,
    actions: torch.Tensor,
    last_actions: torch.Tensor,
    truncated: torch.Tensor,
    reward_scale: float,
) -> dict[str, Any]:
    """Everything a policy step computes from the robot's new state (a pure function of fixed shapes).

    ``ref`` is the reference's current frame of the tracked bodies, ``future`` its K frames of the anchor alone;
    ``actions`` the action just applied and ``last_actions`` the one before; ``truncated`` bool ``[N]`` the episode
    limit or the clip's end. ``reward_scale`` multiplies the logged total (the step's dt when rewards are scaled by
    it). Returns ``reward`` (unscaled), ``terminated``, ``time_outs`` (truncated and not terminated), per-env
    ``values`` (metrics), ``termination_terms``, ``body_error_mm`` ``[N, B]``, the per-step ``log`` means under the
    embedded env's keys, and the pre-reset observation groups ``obs``.
    """
    reward, terms = tracking_reward(
        reward_cfg, robot, ref, layout.anchor, actions, last_actions, layout.joint_lower, layout.joint_upper
    )
    terminated, term_terms = tracking_terminations(termination_cfg, robot, ref, layout.anchor, layout.end_effectors)
    time_outs = truncated & ~terminated
    values = tracking_metrics(robot, ref, layout.root, layout.end_effectors)
    log = {f"reward/{k}": v.mean() for k, v in terms.items()}
    log.update({f"termination/{k}": v.float().mean() for k, v in term_terms.items()})
    log.update({f"metrics/{k}": v.mean() for k, v in values.items()})
    log["reward/total"] = (reward * reward_scale).mean()
    return {
        "reward": reward,
        "terminated": terminated,
        "time_outs": time_outs,
        "values": values,
        "termination_terms": term_terms,
        "body_error_mm": 1000.0 * (robot.body_pos_w - ref.body_pos_w).norm(dim=-1),
        "log": log,
        "obs": observation_groups(robot, future, layout, actions),  # the action just applied is the "last action"
    }
