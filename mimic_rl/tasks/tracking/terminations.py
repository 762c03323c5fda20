"""Tracking terminations (BeyondMimic): the robot fell too far from its reference. Each returns bool ``[N]``.

Two layers, as in ``rewards.py``: tensor functions of explicit inputs (``anchor_height_termination``, ...), and the
step's terms, functions of a :class:`~mimic_rl.tasks.tracking.context.StepContext` (``bad_anchor_height``, ...) that
:func:`termination_terms` lists with the config's thresholds. A new term: write ``f(ctx, **params) -> bool [N]``
and add a row to :func:`termination_terms` (with a threshold field in :class:`TerminationConfig`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import torch

from mimic_rl.tasks.tracking.context import StepContext, minimal_layout
from mimic_rl.tasks.tracking.observations import projected_gravity_z
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.tasks.tracking.terms import TerminationTerm, evaluate_terminations
from mimic_rl.utils import Range

__all__ = [
    "TerminationConfig",
    "anchor_height_termination",
    "anchor_position_termination",
    "anchor_tilt_termination",
    "bad_anchor_height",
    "bad_anchor_position",
    "bad_anchor_tilt",
    "bad_ee_height",
    "end_effector_height_termination",
    "termination_terms",
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
    return (projected_gravity_z(ref_anchor_quat_w) - projected_gravity_z(anchor_quat_w)).abs() > threshold


def end_effector_height_termination(
    ref_ee_pos_w: torch.Tensor, ee_pos_w: torch.Tensor, threshold: float
) -> torch.Tensor:
    """Any end effector with ``|z_ref - z| > threshold``; ``[N, E, 3]`` -> bool ``[N]``.

    The relative-body targets keep the reference heights, so world reference heights give the same test as
    BeyondMimic's ``bad_motion_body_pos_z_only``.
    """
    return ((ref_ee_pos_w[..., 2] - ee_pos_w[..., 2]).abs() > threshold).any(-1)


@dataclass(frozen=True, slots=True)  # slots: a simulator's config tree (Isaac Lab) does not rewrite it
class TerminationConfig:
    """Thresholds of :func:`termination_terms` (and :func:`tracking_terminations`); ``None`` switches a term off.

    Defaults: BeyondMimic's ``TerminationsCfg`` (anchor height 0.25 m, tilt 0.8, end-effector height 0.25 m).
    """

    anchor_height: Annotated[float | None, Range(0, low_exclusive=True)] = 0.25
    anchor_position: Annotated[float | None, Range(0, low_exclusive=True)] = None
    """Metres of anchor position error (all axes) that end an episode; None: off (BeyondMimic checks height only)."""
    anchor_tilt: Annotated[float | None, Range(0, low_exclusive=True)] = 0.8
    ee_height: Annotated[float | None, Range(0, low_exclusive=True)] = 0.25


# ---------------------------------------------------------------------------------------------- terms of a step


def bad_anchor_height(ctx: StepContext, threshold: float) -> torch.Tensor:
    """The anchor's height is off the reference's by more than ``threshold``, bool ``[N]``."""
    return anchor_height_termination(ctx.ref_anchor_pos_w, ctx.anchor_pos_w, threshold)


def bad_anchor_position(ctx: StepContext, threshold: float) -> torch.Tensor:
    """The anchor is farther than ``threshold`` from the reference's, bool ``[N]``."""
    return anchor_position_termination(ctx.ref_anchor_pos_w, ctx.anchor_pos_w, threshold)


def bad_anchor_tilt(ctx: StepContext, threshold: float) -> torch.Tensor:
    """The anchor's projected gravity z is off the reference's by more than ``threshold``, bool ``[N]``."""
    return anchor_tilt_termination(ctx.ref_anchor_quat_w, ctx.anchor_quat_w, threshold)


def bad_ee_height(ctx: StepContext, threshold: float) -> torch.Tensor:
    """An end effector's height is off the reference's by more than ``threshold``, bool ``[N]``."""
    ee = ctx.layout.end_effectors
    return end_effector_height_termination(
        ctx.reference.body_pos_w[..., ee, :], ctx.robot.body_pos_w[..., ee, :], threshold
    )


def termination_terms(cfg: TerminationConfig, has_end_effectors: bool = True) -> tuple[TerminationTerm, ...]:
    """The termination table of ``cfg`` in log order; rows whose threshold is ``None`` are left out, and so is
    ``ee_height`` when the layout lists no end effectors (``has_end_effectors`` false)."""
    rows = [
        TerminationTerm("anchor_height", bad_anchor_height, {"threshold": cfg.anchor_height}),
        TerminationTerm("anchor_position", bad_anchor_position, {"threshold": cfg.anchor_position}),
        TerminationTerm("anchor_tilt", bad_anchor_tilt, {"threshold": cfg.anchor_tilt}),
    ]
    if has_end_effectors:
        rows.append(TerminationTerm("ee_height", bad_ee_height, {"threshold": cfg.ee_height}))
    return tuple(row for row in rows if row.params["threshold"] is not None)


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
    not terminate). ``evaluate_terminations`` of :func:`termination_terms` on a context of these inputs.
    """
    ee = torch.as_tensor(ee_indices, dtype=torch.long, device=robot.body_pos_w.device)
    ctx = StepContext(robot, minimal_layout(anchor, robot.joint_pos, end_effectors=ee), ref=ref)
    return evaluate_terminations(termination_terms(cfg, has_end_effectors=len(ee_indices) > 0), ctx)
