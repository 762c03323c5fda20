"""Coefficient schedules over training iterations or env steps (RND weight, DAgger imitation coefficient, teacher
probability, PPO's entropy bonus)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["ENTROPY_EXAMPLE", "Schedule", "entropy_schedule"]

_MODES = ("constant", "step", "linear", "exponential")
_UNITS = ("iterations", "env_steps")


@dataclass(frozen=True)
class Schedule:
    """A value over iterations, or over env steps (``unit: env_steps``; ``start`` and ``end`` then count env steps
    collected before the update, all ranks together, the count the runner logs as ``perf/total_steps``).

    - ``constant``: ``initial``.
    - ``step``: ``initial`` before ``end``, ``final`` from then on.
    - ``linear``: ``initial`` until ``start``, then linearly to ``final`` at ``end``, then ``final``.
    - ``exponential``: ``initial * decay ** max(0, it - start)``, never past ``final`` (iterations only).
    """

    mode: str = "constant"
    initial: float = 1.0
    final: float = 0.0
    start: int = 0
    end: int = 0
    decay: float = 1.0
    unit: str = "iterations"

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise ValueError(f"schedule mode must be one of {_MODES}, got {self.mode!r}")
        if self.unit not in _UNITS:
            raise ValueError(f"schedule unit must be one of {_UNITS}, got {self.unit!r}")
        if self.unit == "env_steps" and self.mode == "exponential":
            raise ValueError("an exponential schedule decays per iteration; over env steps use step or linear")
        if self.mode == "linear" and self.end < self.start:
            raise ValueError(f"linear schedule needs end >= start, got start={self.start}, end={self.end}")
        if self.mode == "exponential" and not 0.0 < self.decay <= 1.0:
            raise ValueError(f"exponential schedule needs 0 < decay <= 1, got {self.decay}")

    @classmethod
    def from_any(
        cls,
        spec: Any,
        name: str = "schedule",
        required: tuple[str, ...] = (),
        example: str = "",
        units: tuple[str, ...] = ("iterations",),
    ) -> Schedule:
        """A finite number (constant), a dict of the fields above (the ``required`` ones given), or a Schedule, in
        one of ``units``; ``ValueError`` naming ``name`` and the bad field (``example``, when given, in the message)."""
        if isinstance(spec, Schedule):
            _check_unit(name, spec.unit, units)
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
        _check_unit(f"{name}.unit", spec.get("unit", "iterations"), units)
        whole = {key: int(spec[key]) for key in ("start", "end") if key in spec}  # 1.0e+7 env steps: a whole number
        try:
            return cls(**{**spec, **whole})
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None

    def at(self, iteration: int, env_steps: int) -> float:
        """Value after ``iteration`` updates and ``env_steps`` env steps, on the clock of ``unit``."""
        return self(env_steps if self.unit == "env_steps" else iteration)

    def __call__(self, iteration: int) -> float:
        """Value at position ``iteration`` of its clock (an iteration, or an env step count when ``unit`` says so)."""
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
    """``ValueError`` naming ``path`` when a schedule field has the wrong kind: mode and unit names, start/end whole
    numbers (of iterations or env steps; 1.0e+7 counts as whole), the rest finite numbers."""
    if key == "mode":
        ok, what = isinstance(value, str), f"one of {_MODES}"
    elif key == "unit":
        ok, what = value in _UNITS, f"one of {_UNITS}"
    elif key in ("start", "end"):
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        ok = whole and not isinstance(value, bool) and value >= 0
        what = "a whole number >= 0 (underscores are fine: 9_830_400)"
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        what = "a finite number"
    if not ok:
        raise ValueError(f"{path}: expected {what}, found {value!r}")


def _check_unit(path: str, unit: Any, units: tuple[str, ...]) -> None:
    """``ValueError`` naming ``path`` when this schedule cannot run on the clock ``unit``."""
    if unit in _UNITS and unit not in units:
        raise ValueError(f"{path}: this schedule runs over {' or '.join(units)}, not {unit}")


ENTROPY_EXAMPLE = "{mode: step, initial: 0.005, final: 0.0, end: 9_830_400, unit: env_steps}"
"""An ``algorithm.entropy_coef`` schedule: the bonus for the first 9.83 M env steps, none from then on."""


def entropy_schedule(entropy_coef: float | dict[str, Any] | Schedule) -> Schedule:
    """``algorithm.entropy_coef`` as a ``Schedule`` over MMPPO's iterations or env steps: a number (constant) or a
    schedule's fields with ``mode`` and ``initial`` given (Schedule's default initial, 1.0, would be 200x the usual
    bonus)."""
    return Schedule.from_any(
        entropy_coef, "algorithm.entropy_coef", ("mode", "initial"), ENTROPY_EXAMPLE, ("iterations", "env_steps")
    )
