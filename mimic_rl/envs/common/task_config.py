"""Settings shared by the backends that run a simulator's registered tasks (mjlab, Isaac Lab), and how they reach this
package's own tracking tasks there (``MimicRL-Tracking-*``).

The tracking settings (``csv_fps``, ``num_future_frames``, ``reward``, ...) are those of the embedded env's
``TrackingEnvConfig`` and apply to this package's tasks only; None keeps the task's default, which is the embedded
env's, and setting one for another task is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mimic_rl.envs.registry import SimulatorTaskConfig
from mimic_rl.errors import UsageError
from mimic_rl.motion.clip import FPS_RANGE
from mimic_rl.tasks.tracking import InitNoise, TerminationConfig, TrackingRewardConfig
from mimic_rl.utils import Range

__all__ = [
    "MIMIC_TASK_PREFIX",
    "TRACKING_FIELDS",
    "TrackingTaskConfig",
    "apply_tracking_settings",
    "is_mimic_task",
    "refuse_tracking_settings",
]

MIMIC_TASK_PREFIX = "MimicRL-Tracking-"
"""Task ids of this package's own tracking tasks (``MimicRL-Tracking-G1``, ...)."""


def is_mimic_task(task: str) -> bool:
    """Whether ``task`` is one of this package's tracking tasks (they take the tracking settings of the config)."""
    return task.startswith(MIMIC_TASK_PREFIX)


@dataclass
class TrackingTaskConfig(SimulatorTaskConfig):
    """A simulator's registered task; ``motions``: for the simulator's own tracking tasks its one motion file, for
    ``MimicRL-Tracking-*`` any number of motion files or folders in every format this package reads (CSV needs
    ``csv_fps``)."""

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


def apply_tracking_settings(command: Any, cfg: TrackingTaskConfig) -> None:
    """``cfg``'s motions and tracking settings on the command config of a ``MimicRL-Tracking-*`` task."""
    if not cfg.motions:
        raise UsageError(
            f"--motion: {cfg.task} tracks motion files, found none; pass --motion FILE_OR_DIR ... (npz, or CSV with "
            "--csv-fps)"
        )
    command.motions, command.csv_fps = list(cfg.motions), cfg.csv_fps
    for name in (n for n in TRACKING_FIELDS if n != "csv_fps"):
        value = getattr(cfg, name)
        if value is not None:
            setattr(command, name, value)


def refuse_tracking_settings(cfg: TrackingTaskConfig, simulator: str) -> None:
    """A ``UsageError`` when ``cfg`` sets a tracking setting for a task that is not this package's."""
    given = [name for name in TRACKING_FIELDS if getattr(cfg, name) is not None]
    if given:
        raise UsageError(
            f"env.{given[0]}: applies to this package's tasks ({MIMIC_TASK_PREFIX}*), not to {simulator}'s "
            f"{cfg.task}; leave it out"
        )
