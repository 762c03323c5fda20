"""Settings of the mjlab backend (``env.backend: mjlab``).

One config class serves every mjlab task. The tracking settings below it (``csv_fps``, ``num_future_frames``,
``reward``, ...) are those of the embedded env's ``TrackingEnvConfig`` and apply to this package's own tasks
(``MimicRL-Tracking-*``); None keeps the task's default, and setting one for another mjlab task is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from mimic_rl.envs.registry import SimulatorTaskConfig
from mimic_rl.motion.clip import FPS_RANGE
from mimic_rl.tasks.tracking import InitNoise, TerminationConfig, TrackingRewardConfig
from mimic_rl.utils import Range

__all__ = ["MIMIC_TASK_PREFIX", "TRACKING_FIELDS", "InitNoise", "MjlabEnvConfig", "is_mimic_task"]

MIMIC_TASK_PREFIX = "MimicRL-Tracking-"
"""Task ids of this package's own tracking tasks on mjlab (``MimicRL-Tracking-G1``, ``MimicRL-Tracking-G1-AMP``)."""


def is_mimic_task(task: str) -> bool:
    """Whether ``task`` is one of this package's tracking tasks (they take the tracking settings of the config)."""
    return task.startswith(MIMIC_TASK_PREFIX)


@dataclass
class MjlabEnvConfig(SimulatorTaskConfig):
    """An mjlab task from mjlab's registry (``python -m mjlab.scripts.list_envs`` lists them). ``motions``: for
    mjlab's own tracking tasks one mjlab motion npz; for ``MimicRL-Tracking-*`` any number of motion files or folders
    in every format this package reads (CSV needs ``csv_fps``)."""

    backend: Literal["mjlab"] = "mjlab"
    task: str = "Mjlab-Tracking-Flat-Unitree-G1"
    play: bool = False
    """Use the task's play config (no randomization, motion from its start)."""
    episode_length_s: Annotated[float | None, Range(0, low_exclusive=True)] = None
    """None: the task's own."""
    # -- MimicRL-Tracking-* only (None: the task's default, which is the embedded env's) --
    csv_fps: Annotated[float | None, Range(*FPS_RANGE)] = None
    """Frame rate of CSV motions (they carry none)."""
    num_future_frames: Annotated[int | None, Range(1)] = None
    future_stride: Annotated[int | None, Range(1)] = None
    """Future reference frames are ``future_stride`` policy steps apart."""
    sampling_mode: Literal["start", "uniform", "adaptive"] | None = None
    clip_start_probability: Annotated[float | None, Range(0, 1)] = None
    init_noise: InitNoise | None = None
    reward: TrackingRewardConfig | None = None
    termination: TerminationConfig | None = None


TRACKING_FIELDS = (
    "csv_fps",
    "num_future_frames",
    "future_stride",
    "sampling_mode",
    "clip_start_probability",
    "init_noise",
    "reward",
    "termination",
)
"""The settings that only ``MimicRL-Tracking-*`` tasks take."""
