"""Where tracking episodes start: reference-state initialization's settings, shared by every backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from mimic_rl.utils import Range

__all__ = ["InitNoise", "ResetSettings"]


@dataclass(frozen=True, slots=True)  # slots: a simulator's config tree (Isaac Lab) does not rewrite it
class InitNoise:
    """Reference-state initialization noise (uniform +-)."""

    joint_pos: Annotated[float, Range(0)] = 0.05
    root_pos: Annotated[float, Range(0)] = 0.02
    root_rot: Annotated[float, Range(0)] = 0.05
    velocity: Annotated[float, Range(0)] = 0.1


@dataclass(frozen=True)
class ResetSettings:
    """What reference-state initialization reads of a backend's config: the library's sampling mode, the share of
    episodes that start at their clip's first frame, the noise, and the interval of the push timer (``(0, 0)`` where
    pushes are the simulator's own events)."""

    sampling_mode: str = "adaptive"
    clip_start_probability: float = 0.0
    init_noise: InitNoise = field(default_factory=InitNoise)
    push_interval_s: tuple[float, float] = (0.0, 0.0)
