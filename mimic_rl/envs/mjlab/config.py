"""Settings of the mjlab backend (``env.backend: mjlab``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from mimic_rl.utils import Range

__all__ = ["MjlabEnvConfig"]


@dataclass
class MjlabEnvConfig:
    """An mjlab task from mjlab's registry, unchanged except for what is set here."""

    backend: Literal["mjlab"] = "mjlab"
    task: str = "Mjlab-Tracking-Flat-Unitree-G1"
    """An mjlab task id (``python -m mjlab.scripts.list_envs`` lists them)."""
    num_envs: Annotated[int | None, Range(1)] = None
    """None: the task's own number."""
    motions: list[str] = field(default_factory=list)
    """Tracking tasks: the one motion file (mjlab's npz: ``fps``, ``joint_pos``, ``body_pos_w``, ...)."""
    play: bool = False
    """Use the task's play config (no randomization, motion from its start)."""
    episode_length_s: Annotated[float | None, Range(0, low_exclusive=True)] = None
    """None: the task's own."""
    clip_actions: Annotated[float | None, Range(0, low_exclusive=True)] = None
    seed: Annotated[int, Range(0)] = 0
    device: str = "cpu"
