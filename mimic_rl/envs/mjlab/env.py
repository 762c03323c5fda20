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
from tensordict import TensorDict

from mimic_rl.envs.mjlab.config import MIMIC_TASK_PREFIX, TRACKING_FIELDS, MjlabEnvConfig, is_mimic_task
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
    given = [name for name in TRACKING_FIELDS if getattr(cfg, name) is not None]
    if given:
        raise UsageError(
            f"env.{given[0]}: applies to this package's tasks ({MIMIC_TASK_PREFIX}*), not to mjlab's {cfg.task}; "
            "leave it out"
        )
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

    if not cfg.motions:
        raise UsageError(
            f"--motion: {cfg.task} tracks motion files, found none; pass --motion FILE_OR_DIR ... (npz, or CSV with "
            "--csv-fps)"
        )
    command = env_cfg.commands["motion"]
    command.motions, command.csv_fps = list(cfg.motions), cfg.csv_fps
    for name in (n for n in TRACKING_FIELDS if n != "csv_fps"):
        value = getattr(cfg, name)
        if value is not None:
            setattr(command, name, value)
    load_clips(command.motions, command.csv_fps, robot_kinematics(env_cfg.scene.entities[command.entity_name]))


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
    command (when it has one) at ``motion_command`` (mjlab's tasks) or ``mimic_command`` (``MimicRL-Tracking-*``).

    Observations are mjlab's TensorDict. On mjlab's tracking tasks an ``amp`` group is added (the robot's joint
    positions and velocities) that only AMP reads; ``amp_expert_sampler`` draws the matching expert pairs from the
    task's motion. On this package's tasks the groups are the embedded env's (see the module docstring).
    """

    def __init__(self, wrapped: Any, cfg: MjlabEnvConfig) -> None:
        self.wrapped = wrapped
        self.cfg = cfg
        self.num_envs = int(wrapped.num_envs)
        self.num_actions = int(wrapped.num_actions)
        self.max_episode_length = int(wrapped.max_episode_length)
        self.device = torch.device(wrapped.device)
        self.step_dt = float(wrapped.unwrapped.step_dt)
        from mimic_rl.envs.mjlab.command import MimicMotionCommand

        manager = self.unwrapped.command_manager
        term = manager.get_term("motion") if "motion" in getattr(manager, "active_terms", ()) else None
        mimic = isinstance(term, MimicMotionCommand)
        self.mimic_command = term if mimic else None
        """This package's motion command (``MimicRL-Tracking-*``), else None."""
        self.motion_command = None if mimic else term
        """mjlab's ``MotionCommand`` (mjlab's tracking tasks), else None."""

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

    def _groups(self, obs: Any) -> Any:
        """The package's groups: mjlab's amp group on its tracking tasks, the reference mask on this package's (the
        critic reads the actor's reference: one group, stored once)."""
        if self.mimic_command is not None:
            obs["reference_mask"] = self.mimic_command.reference_mask
        elif self.motion_command is not None:
            command = self.motion_command
            obs["amp"] = torch.cat((command.robot_joint_pos, command.robot_joint_vel), dim=-1)
        return obs

    def get_observations(self) -> Any:
        """The current observation TensorDict."""
        return self._groups(self.wrapped.get_observations())

    def reset(self) -> Any:
        """Reset every env; returns the observations."""
        return self._groups(self.wrapped.reset()[0])

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        """One env step: ``(obs, rewards [N], dones [N] bool, extras)`` with ``extras["time_outs"]``. On mjlab's
        tracking tasks ``extras["log"]`` also holds the mean global and root-relative MPJPE (mm) of the step
        (mjlab's metric functions); on this package's tasks the extras are the embedded env's (module docstring)."""
        obs, rewards, dones, extras = self.wrapped.step(actions)
        dones = dones.to(torch.bool)
        obs = self._groups(obs)
        if self.mimic_command is not None:
            self._mimic_extras(obs, dones, extras)
        elif self.motion_command is not None:
            from mjlab.tasks.tracking.mdp import metrics

            command = self.motion_command
            log = extras.setdefault("log", {})
            log["metrics/global_mpjpe_mm"] = 1000 * metrics.compute_mpkpe(command).mean()
            log["metrics/root_mpjpe_mm"] = 1000 * metrics.compute_root_relative_mpkpe(command).mean()
        return obs, rewards, dones, extras

    def _mimic_extras(self, obs: TensorDict, dones: torch.Tensor, extras: dict) -> None:
        """The step's MDP result (computed before mjlab's resets) as the embedded env's extras."""
        result = self.mimic_command.step_result()
        final = {}
        for name, value in obs.items():
            pre = result["obs"].get(name)
            if name.endswith("_mask") or pre is None:
                final[name] = value
                continue
            done = dones.reshape(-1, *([1] * (value.dim() - 1)))
            final[name] = torch.where(done, pre, value)
        extras["final_observations"] = TensorDict(final, batch_size=[self.num_envs], device=self.device)
        extras["log"] = dict(result["log"])
        extras["tracking"] = {"terminated": result["terminated"], "body_error_mm": result["body_error_mm"]}
        extras["tracking"].update(result["values"])
        extras["termination_terms"] = result["termination_terms"]

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the env: on this package's tasks the adaptive sampler's statistics (the physics
        is not saved: a resumed run starts fresh episodes); nothing on mjlab's tasks."""
        if self.mimic_command is None:
            return {}
        return {"adaptive_sampler": self.mimic_command.library.adaptive.stats.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``; failure statistics of other clips (another bin layout) are left out, with a
        warning."""
        if self.mimic_command is None or not {"adaptive_sampler", "adaptive_failures"} & state.keys():
            return
        sampler = self.mimic_command.library.adaptive
        found = sampler.load_saved(state)
        if found is not None:
            warnings.warn(
                f"env state: adaptive sampling statistics of {found} (EMAs, clips, bins), this run has "
                f"{tuple(sampler.stats.shape)}: other motions; its sampling starts afresh",
                UserWarning,
                stacklevel=2,
            )

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

    def close(self) -> None:
        """Close the mjlab env."""
        self.wrapped.close()
