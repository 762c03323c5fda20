"""Tracking rewards: DeepMimic / BeyondMimic exponential-kernel terms and regularization penalties.

Every tracking term is ``exp(-error / std**2)`` in (0, 1], ``[N]``; penalties are ``>= 0`` and get a negative weight.
Defaults are those of BeyondMimic's ``tracking_env_cfg.py`` (HybridRobotics/whole_body_tracking, mirrored in mjlab's
``tasks/tracking``). Weights here are not multiplied by the step ``dt`` (Isaac Lab's reward manager does that); a
backend that wants the same scale multiplies the total by ``dt`` itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import torch

from mimic_rl.rotations import quat_angle_error
from mimic_rl.tasks.tracking.observations import relative_reference_body_poses
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.utils import Range

__all__ = [
    "TrackingRewardConfig",
    "action_rate_penalty",
    "anchor_orientation_reward",
    "anchor_position_reward",
    "body_angular_velocity_reward",
    "body_linear_velocity_reward",
    "joint_limit_penalty",
    "joint_position_reward",
    "joint_velocity_reward",
    "relative_body_orientation_reward",
    "relative_body_position_reward",
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


@dataclass(frozen=True)
class TrackingRewardConfig:
    """Weights and kernel widths of :func:`tracking_reward`; a term with weight 0 is not computed.

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
    joint_limit``; terms whose weight is 0 are skipped (absent from the dict).
    """
    terms: dict[str, torch.Tensor] = {}
    anchor_pos, anchor_quat = robot.body_pos_w[..., anchor, :], robot.body_quat_w[..., anchor, :]
    ref_anchor_pos, ref_anchor_quat = ref.body_pos_w[..., anchor, :], ref.body_quat_w[..., anchor, :]
    if cfg.anchor_pos_weight != 0.0:
        terms["anchor_pos"] = cfg.anchor_pos_weight * anchor_position_reward(
            ref_anchor_pos, anchor_pos, cfg.anchor_pos_std
        )
    if cfg.anchor_ori_weight != 0.0:
        terms["anchor_ori"] = cfg.anchor_ori_weight * anchor_orientation_reward(
            ref_anchor_quat, anchor_quat, cfg.anchor_ori_std
        )
    if cfg.body_pos_weight != 0.0 or cfg.body_ori_weight != 0.0:
        target_pos, target_quat = relative_reference_body_poses(
            ref.body_pos_w, ref.body_quat_w, ref_anchor_pos, ref_anchor_quat, anchor_pos, anchor_quat
        )
        if cfg.body_pos_weight != 0.0:
            terms["body_pos"] = cfg.body_pos_weight * relative_body_position_reward(
                target_pos, robot.body_pos_w, cfg.body_pos_std
            )
        if cfg.body_ori_weight != 0.0:
            terms["body_ori"] = cfg.body_ori_weight * relative_body_orientation_reward(
                target_quat, robot.body_quat_w, cfg.body_ori_std
            )
    if cfg.body_lin_vel_weight != 0.0:
        terms["body_lin_vel"] = cfg.body_lin_vel_weight * body_linear_velocity_reward(
            ref.body_lin_vel_w, robot.body_lin_vel_w, cfg.body_lin_vel_std
        )
    if cfg.body_ang_vel_weight != 0.0:
        terms["body_ang_vel"] = cfg.body_ang_vel_weight * body_angular_velocity_reward(
            ref.body_ang_vel_w, robot.body_ang_vel_w, cfg.body_ang_vel_std
        )
    if cfg.joint_pos_weight != 0.0:
        terms["joint_pos"] = cfg.joint_pos_weight * joint_position_reward(
            ref.joint_pos, robot.joint_pos, cfg.joint_pos_std
        )
    if cfg.joint_vel_weight != 0.0:
        terms["joint_vel"] = cfg.joint_vel_weight * joint_velocity_reward(
            ref.joint_vel, robot.joint_vel, cfg.joint_vel_std
        )
    if cfg.action_rate_weight != 0.0:
        terms["action_rate"] = cfg.action_rate_weight * action_rate_penalty(action, prev_action)
    if cfg.joint_limit_weight != 0.0:
        terms["joint_limit"] = cfg.joint_limit_weight * joint_limit_penalty(
            robot.joint_pos, joint_lower, joint_upper, cfg.joint_limit_soft_ratio
        )
    if terms:
        total = torch.stack(list(terms.values()), dim=0).sum(0)
    else:
        total = torch.zeros(robot.joint_pos.shape[:-1], dtype=robot.joint_pos.dtype, device=robot.joint_pos.device)
    return total, terms
