"""Tracking terminations (BeyondMimic): the robot fell too far from its reference. Each returns bool ``[N]``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import torch

from mimic_rl.tasks.tracking.observations import projected_gravity
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.utils import Range

__all__ = [
    "TerminationConfig",
    "anchor_height_termination",
    "anchor_position_termination",
    "anchor_tilt_termination",
    "end_effector_height_termination",
    "tracking_terminations",
]


def anchor_height_termination(
    ref_anchor_pos_w: torch.Tensor, anchor_pos_w: torch.Tensor, threshold: float
) -> torch.Tensor:
    """``|z_ref - z| > threshold`` for anchor positions ``[N, 3]`` -> bool ``[N]`` (BeyondMimic ``anchor_pos``)."""
    return (ref_anchor_pos_w[..., 2] - anchor_pos_w[..., 2]).abs() > threshold


def anchor_position_termination(
    ref_anchor_pos_w: torch.Tensor, anchor_pos_w: torch.Tensor, threshold: float
) -> torch.Tensor:
    """``|p_ref - p| > threshold`` (world frame, all three axes) for anchor positions ``[N, 3]`` -> bool ``[N]``.

    The robot lost the reference's root: it lags behind (or runs ahead of) the motion. BeyondMimic checks the height
    alone (``anchor_height_termination``); a robot that drifts in the plane then keeps its episode, and its global
    error grows without bound.
    """
    return (ref_anchor_pos_w - anchor_pos_w).norm(dim=-1) > threshold


def anchor_tilt_termination(
    ref_anchor_quat_w: torch.Tensor, anchor_quat_w: torch.Tensor, threshold: float
) -> torch.Tensor:
    """``|g_ref.z - g.z| > threshold`` with ``g`` the projected gravity of each anchor ``[N, 4]`` -> bool ``[N]``.

    BeyondMimic's ``bad_anchor_ori``: ``g.z = -cos(tilt)``, so an upright reference and a robot pitched by 90 degrees
    differ by 1.
    """
    return (projected_gravity(ref_anchor_quat_w)[..., 2] - projected_gravity(anchor_quat_w)[..., 2]).abs() > threshold


def end_effector_height_termination(
    ref_ee_pos_w: torch.Tensor, ee_pos_w: torch.Tensor, threshold: float
) -> torch.Tensor:
    """Any end effector with ``|z_ref - z| > threshold``; ``[N, E, 3]`` -> bool ``[N]``.

    The relative-body targets keep the reference heights, so world reference heights give the same test as
    BeyondMimic's ``bad_motion_body_pos_z_only``.
    """
    return ((ref_ee_pos_w[..., 2] - ee_pos_w[..., 2]).abs() > threshold).any(-1)


@dataclass(frozen=True)
class TerminationConfig:
    """Thresholds of :func:`tracking_terminations`; ``None`` switches a term off.

    Defaults: BeyondMimic's ``TerminationsCfg`` (anchor height 0.25 m, tilt 0.8, end-effector height 0.25 m).
    """

    anchor_height: Annotated[float | None, Range(0, low_exclusive=True)] = 0.25
    anchor_position: Annotated[float | None, Range(0, low_exclusive=True)] = None
    """Metres of anchor position error (all axes) that end an episode; None: off (BeyondMimic checks height only)."""
    anchor_tilt: Annotated[float | None, Range(0, low_exclusive=True)] = 0.8
    ee_height: Annotated[float | None, Range(0, low_exclusive=True)] = 0.25


def tracking_terminations(
    cfg: TerminationConfig,
    robot: BodyState,
    ref: BodyState,
    anchor: int,
    ee_indices: Sequence[int] | torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Whether each env terminates, bool ``[N]``, and each enabled term ``{name: bool [N]}``.

    ``robot`` and ``ref`` list the same bodies; ``anchor`` and ``ee_indices`` index that list. Term names:
    ``anchor_height, anchor_position, anchor_tilt, ee_height``. Time-outs are the caller's business (they truncate,
    not terminate).
    """
    terms: dict[str, torch.Tensor] = {}
    if cfg.anchor_height is not None:
        terms["anchor_height"] = anchor_height_termination(
            ref.body_pos_w[..., anchor, :], robot.body_pos_w[..., anchor, :], cfg.anchor_height
        )
    if cfg.anchor_position is not None:
        terms["anchor_position"] = anchor_position_termination(
            ref.body_pos_w[..., anchor, :], robot.body_pos_w[..., anchor, :], cfg.anchor_position
        )
    if cfg.anchor_tilt is not None:
        terms["anchor_tilt"] = anchor_tilt_termination(
            ref.body_quat_w[..., anchor, :], robot.body_quat_w[..., anchor, :], cfg.anchor_tilt
        )
    if cfg.ee_height is not None and len(ee_indices) > 0:
        terms["ee_height"] = end_effector_height_termination(
            ref.body_pos_w[..., ee_indices, :], robot.body_pos_w[..., ee_indices, :], cfg.ee_height
        )
    done = torch.zeros(robot.body_pos_w.shape[:-2], dtype=torch.bool, device=robot.body_pos_w.device)
    for value in terms.values():
        done = done | value
    return done, terms
