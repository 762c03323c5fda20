"""One policy step of the tracking MDP assembled from this package's terms: the observation groups, the reward, the
terminations, the time-outs, the metrics and the per-step log of every backend (the embedded env, mjlab's task),
as pure tensor functions of body states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from mimic_rl.motion import MotionLibrary
from mimic_rl.tasks.tracking.context import StepContext, TrackingLayout
from mimic_rl.tasks.tracking.metrics import tracking_metrics
from mimic_rl.tasks.tracking.observation_terms import observation_terms
from mimic_rl.tasks.tracking.rewards import TrackingRewardConfig, reward_terms
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.tasks.tracking.terminations import TerminationConfig, termination_terms
from mimic_rl.tasks.tracking.terms import (
    ObservationTerm,
    RewardTerm,
    TerminationTerm,
    evaluate_observations,
    evaluate_rewards,
    evaluate_terminations,
)

__all__ = ["TrackingLayout", "clip_ends", "observation_groups", "step_evaluation"]


def observation_groups(
    robot: BodyState,
    future: BodyState,
    layout: TrackingLayout,
    last_actions: torch.Tensor,
    deployable: bool = False,
    amp: str = "joints",
) -> dict[str, torch.Tensor]:
    """``policy``, ``reference``, ``critic`` and ``amp`` from the robot's tracked bodies and ``future`` reference
    frames of the anchor alone (``[N, K]`` states with one body), as the embedded env builds them.

    ``policy``: joint positions relative to the default pose, joint velocities, the anchor's linear and angular
    velocity in its own frame, its projected gravity, the last action. ``reference``: ``reference_observation`` of
    the K frames, ``[N, K, 2 J + 9]``. ``critic``: ``policy``, every tracked body's pose in the anchor frame, the
    anchor's height. ``amp``: joint positions and velocities (``amp="body"``: the anchor and end effectors too). The
    groups of :func:`~mimic_rl.tasks.tracking.observation_terms.observation_terms` (with ``deployable``, the
    deployable groups too).
    """
    ctx = StepContext(robot, layout, actions=last_actions, future=future)
    return evaluate_observations(observation_terms(deployable, amp), ctx)


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
    *,
    reward_table: Sequence[RewardTerm] | None = None,
    termination_table: Sequence[TerminationTerm] | None = None,
    observation_table: Mapping[str, Sequence[ObservationTerm]] | None = None,
) -> dict[str, Any]:
    """Everything a policy step computes from the robot's new state (a pure function of fixed shapes).

    ``ref`` is the reference's current frame of the tracked bodies, ``future`` its K frames of the anchor alone;
    ``actions`` the action just applied and ``last_actions`` the one before; ``truncated`` bool ``[N]`` the episode
    limit or the clip's end. ``reward_scale`` multiplies the logged total (the step's dt when rewards are scaled by
    it). Returns ``reward`` (unscaled), ``terminated``, ``time_outs`` (truncated and not terminated), per-env
    ``values`` (metrics), ``termination_terms``, ``body_error_mm`` ``[N, B]``, the per-step ``log`` means under the
    embedded env's keys, and the pre-reset observation groups ``obs``.

    The terms are the tables of the two configs and :func:`observation_terms`; a ``*_table`` given replaces its
    table (e.g. ``(*reward_terms(cfg), RewardTerm(...))``; its config is then unused).
    """
    ctx = StepContext(robot, layout, actions=actions, last_actions=last_actions, ref=ref, future=future)
    if reward_table is None:
        reward_table = reward_terms(reward_cfg)
    if termination_table is None:
        termination_table = termination_terms(termination_cfg, has_end_effectors=len(layout.end_effectors) > 0)
    if observation_table is None:
        observation_table = observation_terms()
    reward, terms = evaluate_rewards(reward_table, ctx)
    terminated, term_terms = evaluate_terminations(termination_table, ctx)
    time_outs = truncated & ~terminated
    values = tracking_metrics(robot, ref, layout.root, layout.end_effectors)
    keys = [f"reward/{k}" for k in terms] + [f"termination/{k}" for k in term_terms] + [f"metrics/{k}" for k in values]
    rows = [*terms.values(), *(v.float() for v in term_terms.values()), *values.values(), reward * reward_scale]
    log = dict(zip([*keys, "reward/total"], torch.stack(rows).mean(-1).unbind()))  # one reduction for every mean
    return {
        "reward": reward,
        "terminated": terminated,
        "time_outs": time_outs,
        "values": values,
        "termination_terms": term_terms,
        "body_error_mm": 1000.0 * (robot.body_pos_w - ref.body_pos_w).norm(dim=-1),
        "log": log,
        "obs": evaluate_observations(observation_table, ctx),  # ctx.actions: the action just applied is the last
    }
