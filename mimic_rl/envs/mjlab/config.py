"""Settings of the mjlab backend (``env.backend: mjlab``).

One config class serves every mjlab task. The tracking settings (``csv_fps``, ``num_future_frames``, ``reward``, ...;
``mimic_rl.envs.common.task_config``) are those of the embedded env's ``TrackingEnvConfig`` and apply to this
package's own tasks (``MimicRL-Tracking-*``); None keeps the task's default, and setting one for another mjlab task is
an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mimic_rl.envs.common.task_config import MIMIC_TASK_PREFIX, TRACKING_FIELDS, TrackingTaskConfig, is_mimic_task
from mimic_rl.tasks.tracking import InitNoise

__all__ = ["MIMIC_TASK_PREFIX", "TRACKING_FIELDS", "InitNoise", "MjlabEnvConfig", "is_mimic_task"]


@dataclass
class MjlabEnvConfig(TrackingTaskConfig):
    """An mjlab task from mjlab's registry (``python -m mjlab.scripts.list_envs`` lists them). ``motions``: for
    mjlab's own tracking tasks one mjlab motion npz; for ``MimicRL-Tracking-*`` any number of motion files or folders
    in every format this package reads (CSV needs ``csv_fps``)."""

    backend: Literal["mjlab"] = "mjlab"
    task: str = "Mjlab-Tracking-Flat-Unitree-G1"
