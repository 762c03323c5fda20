"""The Isaac Lab backend (``env.backend: isaaclab``): any registered Isaac Lab task, built as Isaac Lab's own rsl_rl
train script builds it: ``AppLauncher`` (headless), the task's registered env config (``parse_env_cfg``),
``gym.make``, then ``isaaclab_rl.rsl_rl.RslRlVecEnvWrapper``. That wrapper has the ``VecEnv`` contract of mjlab's,
which this package tests for real; this module itself has not been run (Isaac Lab cannot be installed on the machines
this package is developed on). Without Isaac Lab, ``make_isaaclab_env`` fails with one line that says how to install
it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch

from mimic_rl.envs.registry import SimulatorTaskConfig
from mimic_rl.errors import UsageError

__all__ = ["INSTALL_HINT", "IsaacLabEnvConfig", "make_isaaclab_env"]

INSTALL_HINT = (
    "install Isaac Lab (Isaac Sim 4.5+/5.x and isaaclab, isaaclab_tasks, isaaclab_rl) following "
    "https://isaac-sim.github.io/IsaacLab/main/source/setup/installation/index.html, then pip install -e . in "
    "its Python"
)


@dataclass
class IsaacLabEnvConfig(SimulatorTaskConfig):
    """An Isaac Lab task from its gym registry; tracking tasks whose config has ``commands.motion.motion_file`` read
    the one file in ``motions``."""

    backend: Literal["isaaclab"] = "isaaclab"
    task: str = "Isaac-Velocity-Flat-G1-v0"
    headless: bool = True


def make_isaaclab_env(cfg: IsaacLabEnvConfig) -> Any:
    """The Isaac Lab task ``cfg.task`` as an rsl_rl ``VecEnv`` (``RslRlVecEnvWrapper``) that returns bool dones."""
    try:
        from isaaclab.app import AppLauncher
    except ImportError as exc:
        raise UsageError(f"env.backend isaaclab: Isaac Lab is not installed ({exc}); {INSTALL_HINT}") from None
    AppLauncher(headless=cfg.headless, device=cfg.device)  # starts Isaac Sim: must precede the imports below
    import gymnasium as gym
    import isaaclab_tasks  # noqa: F401  (registers the tasks)
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper
    from isaaclab_tasks.utils import parse_env_cfg

    env_cfg = parse_env_cfg(cfg.task, device=cfg.device, num_envs=cfg.num_envs)
    env_cfg.seed = cfg.seed
    motion = getattr(getattr(env_cfg, "commands", None), "motion", None)
    if motion is not None and hasattr(motion, "motion_file"):
        if len(cfg.motions) != 1:
            raise UsageError(f"--motion: {cfg.task} tracks one motion file, found {len(cfg.motions)}")
        motion.motion_file = cfg.motions[0]
    env = gym.make(cfg.task, cfg=env_cfg)
    return _BoolDones(RslRlVecEnvWrapper(env, clip_actions=cfg.clip_actions))


class _BoolDones:
    """An rsl_rl ``VecEnv`` whose ``step`` returns bool dones; every other attribute is the wrapped env's."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        """One env step with ``dones`` as bool."""
        obs, rewards, dones, extras = self._env.step(actions)
        return obs, rewards, dones.to(torch.bool), extras
