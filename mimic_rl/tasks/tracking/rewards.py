"""Tracking rewards: DeepMimic / BeyondMimic exponential-kernel terms and regularization penalties.

Every tracking term is ``exp(-error / std**2)`` in (0, 1], ``[N]``; penalties are ``>= 0`` and get a negative weight.
Defaults are those of BeyondMimic's ``tracking_env_cfg.py`` (HybridRobotics/whole_body_tracking, mirrored in mjlab's
``tasks/tracking``). Weights here are not multiplied by the step ``dt`` (Isaac Lab's reward manager does that); a
backend that wants the same scale multiplies the total by ``dt`` itself.

Two layers: tensor functions of explicit inputs (``anchor_position_reward``, ...), and the step's terms, functions of
a :class:`~mimic_rl.tasks.tracking.context.StepContext` (``anchor_pos_exp``, ...) that :func:`reward_terms` lists
with the config's weights. A new term: write ``f(ctx, **params) -> [N]``, add a row to :func:`reward_terms` (and a
weight field to :class:`TrackingRewardConfig`), or append a :class:`RewardTerm` to the table a backend evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch

from mimic_rl.rotations import quat_angle_error
from mimic_rl.tasks.tracking.context import StepContext, minimal_layout
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.tasks.tracking.terms import RewardTerm, evaluate_rewards
from mimic_rl.utils import Range

__all__ = [
    "TrackingRewardConfig",
    "action_rate_l2",
    "action_rate_penalty",
    "anchor_ori_exp",
    "anchor_orientation_reward",
    "anchor_pos_exp",
    "anchor_position_reward",
    "body_ang_vel_exp",
    "body_angular_velocity_reward",
    "body_lin_vel_exp",
    "body_linear_velocity_reward",
    "body_ori_exp",
    "body_pos_exp",
    "joint_limit_penalty",
    "joint_limit_violation",
    "joint_pos_exp",
    "joint_position_reward",
    "joint_vel_exp",
    "joint_velocity_reward",
    "relative_body_orientation_reward",
    "relative_body_position_reward",
    "reward_terms",
    "tracking_reward",
]


def _kernel(error: torch.Tensor, std: float) -> torch.Tensor:
    return torch.exp(-error / (std * std))


def anchor_position_reward(ref_anchor_pos_w: torch.Tensor, anchor_pos_w: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-|p_ref - p|^2 / std^2)`` for anchor positions ``[N, 3]`` -> ``[N]``."""
    return _kernel((ref_anchor_pos_w - anchor_pos_w).square().sum(-1), std)


def anchor_orientation_reward(ref_anchor_quat_w: torch.Tensor, anchor_quat_w: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-angle(q_ref, q)^2 / std^2)`` for anchor orientations ``[N, 4]`` (wxyz) -> ``[N]``."""
    return _kernel(quat_angle_error(ref_anchor_quat_w, anchor_quat_w).square(), std)


def relative_body_position_reward(target_pos: torch.Tensor, body_pos_w: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-mean_b |target_b - p_b|^2 / std^2)``; ``[N, B, 3]`` -> ``[N]``.

    ``target_pos`` comes from :func:`~mimic_rl.tasks.tracking.observations.relative_reference_body_poses`.
    """
    return _kernel((target_pos - body_pos_w).square().sum(-1).mean(-1), std)


def relative_body_orientation_reward(target_quat: torch.Tensor, body_quat_w: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-mean_b angle(target_b, q_b)^2 / std^2)``; ``[N, B, 4]`` -> ``[N]``."""
    return _kernel(quat_angle_error(target_quat, body_quat_w).square().mean(-1), std)


def body_linear_velocity_reward(ref_vel: torch.Tensor, vel: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-mean_b |v_ref - v|^2 / std^2)`` for world-frame body linear velocities ``[N, B, 3]`` -> ``[N]``."""
    return _kernel((ref_vel - vel).square().sum(-1).mean(-1), std)


def body_angular_velocity_reward(ref_vel: torch.Tensor, vel: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-mean_b |w_ref - w|^2 / std^2)`` for world-frame body angular velocities ``[N, B, 3]`` -> ``[N]``."""
    return _kernel((ref_vel - vel).square().sum(-1).mean(-1), std)


def joint_position_reward(ref_q: torch.Tensor, q: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-mean_j (q_ref - q)^2 / std^2)``; ``[N, J]`` -> ``[N]``."""
    return _kernel((ref_q - q).square().mean(-1), std)


def joint_velocity_reward(ref_qd: torch.Tensor, qd: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-mean_j (qd_ref - qd)^2 / std^2)``; ``[N, J]`` -> ``[N]``."""
    return _kernel((ref_qd - qd).square().mean(-1), std)


def action_rate_penalty(action: torch.Tensor, prev_action: torch.Tensor) -> torch.Tensor:
    """``sum_a (a_t - a_{t-1})^2``; ``[N, A]`` -> ``[N]`` (>= 0)."""
    return (action - prev_action).square().sum(-1)


def joint_limit_penalty(
    q: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor, soft_ratio: float = 0.9
) -> torch.Tensor:
    """Sum over joints of how far ``q`` lies outside the soft limits; ``[N, J]`` -> ``[N]`` (>= 0).

    The soft range is the central ``soft_ratio`` fraction of ``[lower, upper]`` (``[J]`` or ``[N, J]``):
    ``mid +- soft_ratio (upper - lower) / 2``, as Isaac Lab's ``soft_joint_pos_limits`` and ``joint_pos_limits``.
    A joint without limits (``lower = -inf``, ``upper = inf``: a wheel, a continuous joint) is never penalized.
    """
    finite = torch.isfinite(lower) & torch.isfinite(upper)
    mid = torch.where(finite, 0.5 * (lower + upper), 0.0)
    half = torch.where(finite, 0.5 * soft_ratio * (upper - lower), torch.inf)
    below = (mid - half - q).clamp(min=0.0)
    above = (q - mid - half).clamp(min=0.0)
    return (below + above).sum(-1)


@dataclass(frozen=True, slots=True)  # slots: a simulator's config tree (Isaac Lab) does not rewrite it
class TrackingRewardConfig:
    """Weights and kernel widths of :func:`reward_terms` (and :func:`tracking_reward`); a term with weight 0 is not
    computed.

    Defaults: BeyondMimic's ``RewardsCfg``. It has no joint position / velocity terms (weight 0 here); their stds
    (0.5 rad, 5.0 rad/s) are this package's choice (an early BeyondMimic draft used sqrt(0.5) and 2.0).
    """

    anchor_pos_weight: float = 0.5
    anchor_pos_std: Annotated[float, Range(0, low_exclusive=True)] = 0.3
    anchor_ori_weight: float = 0.5
    anchor_ori_std: Annotated[float, Range(0, low_exclusive=True)] = 0.4
    body_pos_weight: float = 1.0
    body_pos_std: Annotated[float, Range(0, low_exclusive=True)] = 0.3
    body_ori_weight: float = 1.0
    body_ori_std: Annotated[float, Range(0, low_exclusive=True)] = 0.4
    body_lin_vel_weight: float = 1.0
    body_lin_vel_std: Annotated[float, Range(0, low_exclusive=True)] = 1.0
    body_ang_vel_weight: float = 1.0
    body_ang_vel_std: Annotated[float, Range(0, low_exclusive=True)] = 3.14
    joint_pos_weight: float = 0.0
    joint_pos_std: Annotated[float, Range(0, low_exclusive=True)] = 0.5
    joint_vel_weight: float = 0.0
    joint_vel_std: Annotated[float, Range(0, low_exclusive=True)] = 5.0
    action_rate_weight: float = -0.1
    joint_limit_weight: float = -10.0
    joint_limit_soft_ratio: Annotated[float, Range(0, 1)] = 0.9


# ---------------------------------------------------------------------------------------------- terms of a step
# Each term reads one StepContext; ``reward_terms`` lists them with the config's weights and kernel widths.


def anchor_pos_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Anchor position kernel ``[N]`` (:func:`anchor_position_reward` of the reference and robot anchors)."""
    return anchor_position_reward(ctx.ref_anchor_pos_w, ctx.anchor_pos_w, std)


def anchor_ori_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Anchor orientation kernel ``[N]`` (:func:`anchor_orientation_reward`)."""
    return anchor_orientation_reward(ctx.ref_anchor_quat_w, ctx.anchor_quat_w, std)


def body_pos_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Kernel of the tracked bodies' positions against the re-anchored reference ``[N]``."""
    target_pos, _ = ctx.relative_targets()
    return relative_body_position_reward(target_pos, ctx.robot.body_pos_w, std)


def body_ori_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Kernel of the tracked bodies' orientations against the re-anchored reference ``[N]``."""
    _, target_quat = ctx.relative_targets()
    return relative_body_orientation_reward(target_quat, ctx.robot.body_quat_w, std)


def body_lin_vel_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Kernel of the tracked bodies' world linear velocities ``[N]``."""
    return body_linear_velocity_reward(ctx.reference.body_lin_vel_w, ctx.robot.body_lin_vel_w, std)


def body_ang_vel_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Kernel of the tracked bodies' world angular velocities ``[N]``."""
    return body_angular_velocity_reward(ctx.reference.body_ang_vel_w, ctx.robot.body_ang_vel_w, std)


def joint_pos_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Kernel of the joint positions ``[N]``."""
    return joint_position_reward(ctx.reference.joint_pos, ctx.robot.joint_pos, std)


def joint_vel_exp(ctx: StepContext, std: float) -> torch.Tensor:
    """Kernel of the joint velocities ``[N]``."""
    return joint_velocity_reward(ctx.reference.joint_vel, ctx.robot.joint_vel, std)


def action_rate_l2(ctx: StepContext) -> torch.Tensor:
    """Squared change of the action ``[N]`` (>= 0; weight it negatively)."""
    return action_rate_penalty(ctx.action, ctx.previous_action)


def joint_limit_violation(ctx: StepContext, soft_ratio: float) -> torch.Tensor:
    """How far the joints lie outside their soft limits ``[N]`` (>= 0; weight it negatively)."""
    layout = ctx.layout
    return joint_limit_penalty(ctx.robot.joint_pos, layout.joint_lower, layout.joint_upper, soft_ratio)


def reward_terms(cfg: TrackingRewardConfig) -> tuple[RewardTerm, ...]:
    """The reward table of ``cfg``: one row per term in summation (and log) order, weight-0 rows left out."""
    rows = (
        RewardTerm("anchor_pos", anchor_pos_exp, cfg.anchor_pos_weight, {"std": cfg.anchor_pos_std}),
        RewardTerm("anchor_ori", anchor_ori_exp, cfg.anchor_ori_weight, {"std": cfg.anchor_ori_std}),
        RewardTerm("body_pos", body_pos_exp, cfg.body_pos_weight, {"std": cfg.body_pos_std}),
        RewardTerm("body_ori", body_ori_exp, cfg.body_ori_weight, {"std": cfg.body_ori_std}),
        RewardTerm("body_lin_vel", body_lin_vel_exp, cfg.body_lin_vel_weight, {"std": cfg.body_lin_vel_std}),
        RewardTerm("body_ang_vel", body_ang_vel_exp, cfg.body_ang_vel_weight, {"std": cfg.body_ang_vel_std}),
        RewardTerm("joint_pos", joint_pos_exp, cfg.joint_pos_weight, {"std": cfg.joint_pos_std}),
        RewardTerm("joint_vel", joint_vel_exp, cfg.joint_vel_weight, {"std": cfg.joint_vel_std}),
        RewardTerm("action_rate", action_rate_l2, cfg.action_rate_weight),
        RewardTerm(
            "joint_limit", joint_limit_violation, cfg.joint_limit_weight, {"soft_ratio": cfg.joint_limit_soft_ratio}
        ),
    )
    return tuple(row for row in rows if row.weight != 0.0)


def tracking_reward(
    cfg: TrackingRewardConfig,
    robot: BodyState,
    ref: BodyState,
    anchor: int,
    action: torch.Tensor,
    prev_action: torch.Tensor,
    joint_lower: torch.Tensor,
    joint_upper: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The weighted tracking reward ``[N]`` and each weighted term ``{name: [N]}`` for per-term logging.

    ``robot`` and ``ref`` list the same tracked bodies in the same order; ``anchor`` indexes that list. Term names:
    ``anchor_pos, anchor_ori, body_pos, body_ori, body_lin_vel, body_ang_vel, joint_pos, joint_vel, action_rate,
    joint_limit``; terms whose weight is 0 are skipped (absent from the dict). ``evaluate_rewards`` of
    :func:`reward_terms` on a context of these inputs.
    """
    layout = minimal_layout(anchor, robot.joint_pos, joint_lower=joint_lower, joint_upper=joint_upper)
    ctx = StepContext(robot, layout, actions=action, last_actions=prev_action, ref=ref)
    return evaluate_rewards(reward_terms(cfg), ctx)
