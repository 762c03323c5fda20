"""Coefficient schedules over training iterations (RND weight, DAgger imitation coefficient, teacher probability,
PPO's entropy bonus)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["ENTROPY_EXAMPLE", "Schedule", "entropy_schedule"]

_MODES = ("constant", "step", "linear", "exponential")


@dataclass(frozen=True)
class Schedule:
    """A value over iterations.

    - ``constant``: ``initial``.
    - ``step``: ``initial`` before iteration ``end``, ``final`` from then on.
    - ``linear``: ``initial`` until ``start``, then linearly to ``final`` at ``end``, then ``final``.
    - ``exponential``: ``initial * decay ** max(0, it - start)``, never past ``final``.
    """

    mode: str = "constant"
    initial: float = 1.0
    final: float = 0.0
    start: int = 0
    end: int = 0
    decay: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"schedule mode must be one of {_MODES}, got {self.mode!r}")
        if self.mode == "linear" and self.end < self.start:
            raise ValueError(f"linear schedule needs end >= start, got start={self.start}, end={self.end}")
        if self.mode == "exponential" and not 0.0 < self.decay <= 1.0:
            raise ValueError(f"exponential schedule needs 0 < decay <= 1, got {self.decay}")

    @classmethod
    def from_any(cls, spec: Any, name: str = "schedule", required: tuple[str, ...] = (), example: str = "") -> Schedule:
        """A finite number (constant), a dict of the fields above (the ``required`` ones given), or a Schedule;
        ``ValueError`` naming ``name`` and the bad field (``example``, when given, in the message)."""
        if isinstance(spec, Schedule):
            return spec
        like = f" like {example}" if example else " (a mapping of its fields)"
        if isinstance(spec, bool) or not isinstance(spec, int | float | dict):
            raise ValueError(f"{name}: expected a number or a schedule{like}, found {spec!r}")
        if not isinstance(spec, dict):
            _check_field(name, "initial", spec)
            return cls("constant", float(spec))
        unknown = set(spec) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"{name}: unknown key(s) {sorted(unknown)}; allowed {sorted(cls.__dataclass_fields__)}")
        for key in required:
            if key not in spec:
                hint = f", e.g. {example}" if example else ""
                raise ValueError(f"{name}.{key}: missing; a schedule needs {' and '.join(required)}{hint}")
        for key, value in spec.items():
            _check_field(f"{name}.{key}", key, value)
        try:
            return cls(**spec)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None

    def __call__(self, iteration: int) -> float:
        """Value at ``iteration``."""
        if self.mode == "constant":
            return self.initial
        if self.mode == "step":
            return self.initial if iteration < self.end else self.final
        if self.mode == "linear":
            if iteration <= self.start:
                return self.initial
            if iteration >= self.end:
                return self.final
            frac = (iteration - self.start) / max(1, self.end - self.start)
            return self.initial + frac * (self.final - self.initial)
        value = self.initial * self.decay ** max(0, iteration - self.start)
        return max(value, self.final) if self.initial >= self.final else min(value, self.final)


def _check_field(path: str, key: str, value: Any) -> None:
    """``ValueError`` naming ``path`` when a schedule field has the wrong kind: mode a name, start/end whole numbers
    of iterations, the rest finite numbers."""
    if key == "mode":
        ok, what = isinstance(value, str), f"one of {_MODES}"
    elif key in ("start", "end"):
        ok, what = isinstance(value, int) and not isinstance(value, bool) and value >= 0, "a whole number >= 0"
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        what = "a finite number"
    if not ok:
        raise ValueError(f"{path}: expected {what}, found {value!r}")


ENTROPY_EXAMPLE = "{mode: step, initial: 0.005, final: 0.0, end: 1600}"
"""An ``algorithm.entropy_coef`` schedule: the bonus until the 1,600th update, none from then on."""


def entropy_schedule(entropy_coef: float | dict[str, Any] | Schedule) -> Schedule:
    """``algorithm.entropy_coef`` as a ``Schedule`` over MMPPO's iterations: a number (constant) or a schedule's
    fields with ``mode`` and ``initial`` given (Schedule's default initial, 1.0, would be 200x the usual bonus)."""
    return Schedule.from_any(entropy_coef, "algorithm.entropy_coef", ("mode", "initial"), ENTROPY_EXAMPLE)
