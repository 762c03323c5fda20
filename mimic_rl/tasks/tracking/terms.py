"""Typed rows of the MDP's term tables and the functions that evaluate a table on a :class:`StepContext`.

A term is a pure function of the step's context and its keyword parameters, ``func(ctx, **params) -> Tensor``:

- :class:`RewardTerm`: ``[N]`` float, entering the total as ``weight * value``;
- :class:`TerminationTerm`: ``[N]`` bool, ORed into ``terminated``;
- :class:`ObservationTerm`: ``[N, ..., D]``, concatenated in order along the last dim into its group.

Evaluation is traceable by ``torch.compile``: the tables are Python data fixed per config, the terms tensor code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from mimic_rl.tasks.tracking.context import StepContext

__all__ = [
    "ObservationTerm",
    "RewardTerm",
    "TermFunction",
    "TerminationTerm",
    "evaluate_observations",
    "evaluate_rewards",
    "evaluate_terminations",
]

TermFunction = Callable[..., torch.Tensor]
"""``func(ctx: StepContext, **params) -> Tensor``."""


@dataclass(frozen=True)
class RewardTerm:
    """One reward term: its log ``name``, ``func(ctx, **params) -> [N]`` and the ``weight`` it enters the total with."""

    name: str
    func: TermFunction
    weight: float
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TerminationTerm:
    """One termination term: its log ``name`` and ``func(ctx, **params) -> bool [N]``."""

    name: str
    func: TermFunction
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ObservationTerm:
    """One observation term: its ``name`` and ``func(ctx, **params) -> [N, ..., D]``.

    A name stands for one value within an evaluation: groups that list the same name share it (computed once).
    """

    name: str
    func: TermFunction
    params: Mapping[str, Any] = field(default_factory=dict)


def evaluate_rewards(terms: Sequence[RewardTerm], ctx: StepContext) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The total reward ``[N]`` and each weighted term ``{name: weight * value}`` in table order.

    The total is the terms stacked in table order and summed over the stack (zeros of the joints' batch shape and
    dtype when the table is empty).
    """
    weighted = {term.name: term.weight * term.func(ctx, **term.params) for term in terms}
    if weighted:
        total = torch.stack(list(weighted.values()), dim=0).sum(0)
    else:
        q = ctx.robot.joint_pos
        total = torch.zeros(q.shape[:-1], dtype=q.dtype, device=q.device)
    return total, weighted


def evaluate_terminations(
    terms: Sequence[TerminationTerm], ctx: StepContext
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Whether each env terminates, bool ``[N]`` (any term true), and each term ``{name: bool [N]}`` in table order."""
    values = {term.name: term.func(ctx, **term.params) for term in terms}
    pos = ctx.robot.body_pos_w
    done = torch.zeros(pos.shape[:-2], dtype=torch.bool, device=pos.device)
    for value in values.values():
        done = done | value
    return done, values


def evaluate_observations(groups: Mapping[str, Sequence[ObservationTerm]], ctx: StepContext) -> dict[str, torch.Tensor]:
    """Each group ``{name: concat of its terms along the last dim}``, in the order of ``groups``.

    Each distinct term name is evaluated once, even when several groups list it.
    """
    values: dict[str, torch.Tensor] = {}
    out: dict[str, torch.Tensor] = {}
    for group, terms in groups.items():
        parts = []
        for term in terms:
            if term.name not in values:
                values[term.name] = term.func(ctx, **term.params)
            parts.append(values[term.name])
        out[group] = torch.cat(parts, dim=-1)
    return out
