"""Settings of the mjlab backend (``env.backend: mjlab``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from mimic_rl.envs.registry import SimulatorTaskConfig
from mimic_rl.utils import Range

__all__ = ["MjlabEnvConfig"]


@dataclass
class MjlabEnvConfig(SimulatorTaskConfig):
    """An mjlab task from mjlab's registry (``python -m mjlab.scripts.list_envs`` lists them); ``motions``: mjlab's
    motion npz (``fps``, ``joint_pos``, ``body_pos_w``, ...)."""

    backend: Literal["mjlab"] = "mjlab"
    task: str = "Mjlab-Tracking-Flat-Unitree-G1"
    play: bool = False
    """Use the task's play config (no randomization, motion from its start)."""
    episode_length_s: Annotated[float | None, Range(0, low_exclusive=True)] = None
    """None: the task's own."""
