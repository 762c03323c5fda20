"""Build an mjlab task as an rsl_rl ``VecEnv`` the way mjlab's own train script does: the task's registered env
config, ``ManagerBasedRlEnv``, mjlab's ``RslRlVecEnvWrapper``; the task itself is not changed."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from mimic_rl.envs.mjlab.config import MjlabEnvConfig
from mimic_rl.errors import MotionFormatError, UsageError
from mimic_rl.files import check_file

__all__ = [
    "INSTALL_HINT",
    "MOTION_KEYS",
    "MjlabVecEnv",
    "amp_obs_extractor",
    "import_mjlab",
    "make_mjlab_env",
    "mjlab_env_config",
]

INSTALL_HINT = 'install it with pip install -e ".[mjlab]" (mjlab 1.6; best in a virtual environment of its own)'
MOTION_KEYS = ("fps", "joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
"""The arrays of mjlab's (and BeyondMimic's) motion npz."""


def import_mjlab() -> Any:
    """The ``mjlab.tasks.registry`` module with every built-in task registered; one line when mjlab is missing."""
    try:
        with warnings.catch_warnings():  # torch >= 2.14 deprecates torch.jit.script, which mjlab's imports call
            warnings.simplefilter("ignore", FutureWarning)
            import mjlab.tasks  # noqa: F401  (registers mjlab's tasks)
            from mjlab.tasks import registry
    except ImportError as exc:
        raise UsageError(f"env.backend mjlab: mjlab is not installed ({exc}); {INSTALL_HINT}") from None
    return registry


def _check_motion(path: str) -> str:
    """``path`` as mjlab's motion npz, or a ``MotionFormatError`` that names what is missing."""
    check_file(path, "--motion", "pass an mjlab motion npz (mjlab's csv_to_npz writes one)")
    try:
        with np.load(path) as data:
            missing = [k for k in MOTION_KEYS if k not in data.files]
    except (OSError, ValueError) as exc:
        raise MotionFormatError(
            f"{path}: --motion: expected mjlab's motion npz, found an unreadable file ({exc})"
        ) from None
    if missing:
        raise MotionFormatError(
            f"{path}: --motion: expected mjlab's motion npz with {list(MOTION_KEYS)}, missing {missing}; convert a CSV "
            "with python -m mjlab.scripts.csv_to_npz"
        )
    return path


def mjlab_env_config(cfg: MjlabEnvConfig) -> Any:
    """The task's registered env config with ``cfg``'s settings (envs, seed, motion, episode length) applied."""
    registry = import_mjlab()
    if cfg.task not in registry.list_tasks():
        tasks = ", ".join(t for t in registry.list_tasks() if "Tracking" in t) or ", ".join(registry.list_tasks())
        raise UsageError(f"--env mjlab:{cfg.task}: expected a registered mjlab task id (e.g. {tasks}), found none")
    env_cfg = registry.load_env_cfg(cfg.task, play=cfg.play)
    if cfg.num_envs is not None:
        env_cfg.scene.num_envs = cfg.num_envs
    env_cfg.seed = cfg.seed
    if cfg.episode_length_s is not None:
        env_cfg.episode_length_s = cfg.episode_length_s
    command = (getattr(env_cfg, "commands", None) or {}).get("motion")
    if command is not None and hasattr(command, "motion_file"):
        if len(cfg.motions) != 1:
            raise UsageError(
                f"--motion: mjlab's {cfg.task} tracks one motion file, found {len(cfg.motions)}; pass one mjlab npz"
            )
        command.motion_file = _check_motion(cfg.motions[0])
    elif cfg.motions:
        raise UsageError(f"--motion: mjlab's {cfg.task} is not a motion-tracking task; leave --motion out")
    return env_cfg


def make_mjlab_env(cfg: MjlabEnvConfig) -> MjlabVecEnv:
    """The mjlab task ``cfg.task`` as this package's ``VecEnv``."""
    env_cfg = mjlab_env_config(cfg)
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper

    env = ManagerBasedRlEnv(cfg=env_cfg, device=str(cfg.device))
    return MjlabVecEnv(RslRlVecEnvWrapper(env, clip_actions=cfg.clip_actions), cfg)


def amp_obs_extractor(obs: Any) -> torch.Tensor:
    """AMP features of the robot: the ``amp`` group (joint positions, then joint velocities)."""
    return obs["amp"]


class MjlabVecEnv:
    """mjlab's ``RslRlVecEnvWrapper`` with this package's conventions: ``dones`` as bool, the task's tracking
    command (when it has one) at ``motion_command``.

    Observations are mjlab's TensorDict, plus on tracking tasks an ``amp`` group (the robot's joint positions and
    velocities) that only AMP reads; ``amp_expert_sampler`` draws the matching expert pairs from the task's motion.
    """

    def __init__(self, wrapped: Any, cfg: MjlabEnvConfig) -> None:
        self.wrapped = wrapped
        self.cfg = cfg
        self.num_envs = int(wrapped.num_envs)
        self.num_actions = int(wrapped.num_actions)
        self.max_episode_length = int(wrapped.max_episode_length)
        self.device = torch.device(wrapped.device)
        self.step_dt = float(wrapped.unwrapped.step_dt)

    @property
    def unwrapped(self) -> Any:
        """mjlab's ``ManagerBasedRlEnv``."""
        return self.wrapped.unwrapped

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """``[N]`` steps taken in each env's current episode."""
        return self.wrapped.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.wrapped.episode_length_buf = value

    @property
    def motion_command(self) -> Any:
        """The task's ``MotionCommand`` (tracking tasks), else None."""
        manager = self.unwrapped.command_manager
        return manager.get_term("motion") if "motion" in manager.active_terms else None

    def _with_amp(self, obs: Any) -> Any:
        command = self.motion_command
        if command is not None:
            obs["amp"] = torch.cat((command.robot_joint_pos, command.robot_joint_vel), dim=-1)
        return obs

    def get_observations(self) -> Any:
        """The current observation TensorDict."""
        return self._with_amp(self.wrapped.get_observations())

    def reset(self) -> Any:
        """Reset every env; returns the observations."""
        return self._with_amp(self.wrapped.reset()[0])

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        """One env step: ``(obs, rewards [N], dones [N] bool, extras)`` with ``extras["time_outs"]``; on tracking
        tasks ``extras["log"]`` also holds the mean global and root-relative MPJPE (mm) of the step, as the
        embedded env's does (mjlab's metric functions)."""
        obs, rewards, dones, extras = self.wrapped.step(actions)
        command = self.motion_command
        if command is not None:
            from mjlab.tasks.tracking.mdp import metrics

            log = extras.setdefault("log", {})
            log["metrics/global_mpjpe_mm"] = 1000 * metrics.compute_mpkpe(command).mean()
            log["metrics/root_mpjpe_mm"] = 1000 * metrics.compute_root_relative_mpkpe(command).mean()
        return self._with_amp(obs), rewards, dones.to(torch.bool), extras

    def amp_expert_sampler(self, num: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``num`` expert AMP pairs (frame t, frame t + 1) of the task's motion, the features as in the ``amp``
        group; one motion frame per env step, as mjlab's tracking command advances it."""
        command = self.motion_command
        if command is None:
            raise ValueError(f"mjlab's {self.cfg.task} has no motion command: AMP needs a tracking task")
        motion = command.motion
        t = torch.randint(0, int(motion.time_step_total) - 1, (num,), device=motion.joint_pos.device)
        features = torch.cat((motion.joint_pos, motion.joint_vel), dim=-1)
        return features[t].to(self.device), features[t + 1].to(self.device)

    def close(self) -> None:
        """Close the mjlab env."""
        self.wrapped.close()
