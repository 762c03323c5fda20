"""Settings of the Isaac Lab backend (``env.backend: isaaclab``): any task in Isaac Lab 3.0's gym registry, run
without Isaac Sim on its Newton backend, and this package's tracking task there (``MimicRL-Tracking-G1``).

The tracking settings (``csv_fps``, ``num_future_frames``, ``reward``, ...; ``mimic_rl.envs.common.task_config``) apply
to this package's task only, as on mjlab.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mimic_rl.envs.common.task_config import TrackingTaskConfig

__all__ = ["IsaacLabEnvConfig"]


@dataclass
class IsaacLabEnvConfig(TrackingTaskConfig):
    """An Isaac Lab task from its gym registry (Isaac Lab 3.0 ids have no ``-v0``: ``Isaac-Humanoid``,
    ``Isaac-Velocity-Flat-G1``, ...) or ``MimicRL-Tracking-G1``."""

    backend: Literal["isaaclab"] = "isaaclab"
    task: str = "Isaac-Humanoid"
    presets: list[str] = field(default_factory=lambda: ["newton_mjwarp"])
    """Isaac Lab's config presets (its ``presets=`` override): ``newton_mjwarp`` is Newton with MuJoCo Warp, which
    needs no Isaac Sim; a task that has no preset of a name ignores it."""
    robot_mjcf: str | None = None
    """``MimicRL-Tracking-G1``: the G1's MJCF that its USD is made from (None: ``$MIMIC_RL_DATA/robots/unitree_g1/
    g1.xml``)."""
