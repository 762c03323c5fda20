"""Build an mjlab task as an rsl_rl ``VecEnv`` the way mjlab's own train script does: the task's registered env
config, ``ManagerBasedRlEnv``, mjlab's ``RslRlVecEnvWrapper``; the task itself is not changed.

This package's own tasks (``MimicRL-Tracking-*``, ``task.py``) are registered in mjlab's registry the first time this
module reaches mjlab. For them ``MjlabVecEnv`` completes the package's contract: the mask and critic-reference
groups, ``extras["final_observations"]`` (the pre-reset observations), ``extras["log"]`` under the embedded env's
keys, ``extras["tracking"]`` (per-env metrics, for the evaluation) and ``extras["termination_terms"]``."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from mimic_rl.envs.common.task_config import apply_tracking_settings, refuse_tracking_settings
from mimic_rl.envs.common.task_env import ManagerTaskVecEnv
from mimic_rl.envs.mjlab.config import MjlabEnvConfig, is_mimic_task
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
    """The ``mjlab.tasks.registry`` module with every built-in task and this package's registered; one line when mjlab
    is missing."""
    try:
        with warnings.catch_warnings():  # torch >= 2.14 deprecates torch.jit.script, which mjlab's imports call
            warnings.simplefilter("ignore", FutureWarning)
            import mjlab.tasks  # noqa: F401  (registers mjlab's tasks)
            from mjlab.tasks import registry
    except ImportError as exc:
        raise UsageError(f"env.backend mjlab: mjlab is not installed ({exc}); {INSTALL_HINT}") from None
    from mimic_rl.envs.mjlab.task import register_tasks

    register_tasks()  # this package's tasks (MimicRL-Tracking-*)
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
    if is_mimic_task(cfg.task):
        _apply_tracking_settings(env_cfg, cfg)
        return env_cfg
    refuse_tracking_settings(cfg, "mjlab")
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


def _apply_tracking_settings(env_cfg: Any, cfg: MjlabEnvConfig) -> None:
    """``cfg``'s motions and tracking settings on the command of a ``MimicRL-Tracking-*`` task; the motions are
    read once here, so that a bad file fails before the env is built."""
    from mimic_rl.envs.mjlab.command import load_clips, robot_kinematics

    command = env_cfg.commands["motion"]
    apply_tracking_settings(command, cfg)
    kinematics = robot_kinematics(env_cfg.scene.entities[command.entity_name])
    load_clips(command.motions, command.csv_fps, kinematics, tuple(command.feet))


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


class MjlabVecEnv(ManagerTaskVecEnv):
    """mjlab's ``RslRlVecEnvWrapper`` with this package's conventions (``ManagerTaskVecEnv``): ``dones`` as bool, the
    task's tracking command (when it has one) at ``motion_command`` (mjlab's tasks) or ``mimic_command``
    (``MimicRL-Tracking-*``).

    Observations are mjlab's TensorDict. On mjlab's tracking tasks an ``amp`` group is added (the robot's joint
    positions and velocities) that only AMP reads; ``amp_expert_sampler`` draws the matching expert pairs from the
    task's motion, and ``extras["log"]`` also holds the step's mean global and root-relative MPJPE (mm, mjlab's metric
    functions). On this package's tasks the groups and extras are the embedded env's (see the module docstring).
    """

    def _groups(self, obs: Any) -> Any:
        """The package's groups, and mjlab's amp group on its tracking tasks."""
        obs = super()._groups(obs)
        if self.motion_command is not None:
            command = self.motion_command
            obs["amp"] = torch.cat((command.robot_joint_pos, command.robot_joint_vel), dim=-1)
        return obs

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        """One env step (``ManagerTaskVecEnv.step``), with mjlab's tracking metrics on its tracking tasks."""
        obs, rewards, dones, extras = super().step(actions)
        if self.motion_command is not None:
            from mjlab.tasks.tracking.mdp import metrics

            command = self.motion_command
            log = extras.setdefault("log", {})
            log["metrics/global_mpjpe_mm"] = 1000 * metrics.compute_mpkpe(command).mean()
            log["metrics/root_mpjpe_mm"] = 1000 * metrics.compute_root_relative_mpkpe(command).mean()
        return obs, rewards, dones, extras

    def amp_expert_sampler(self, num: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``num`` expert AMP pairs (frame t, frame t + 1) of the task's motion, the features as in the ``amp``
        group; one motion frame per env step, as mjlab's tracking command advances it."""
        command = self.motion_command
        if command is None:
            raise ValueError(f"mjlab's {self.cfg.task} has no motion command of mjlab's: AMP needs its tracking task")
        motion = command.motion
        t = torch.randint(0, int(motion.time_step_total) - 1, (num,), device=motion.joint_pos.device)
        features = torch.cat((motion.joint_pos, motion.joint_vel), dim=-1)
        return features[t].to(self.device), features[t + 1].to(self.device)
