"""Build an Isaac Lab 3.0 task as an rsl_rl ``VecEnv`` without Isaac Sim, the way Isaac Lab 3.0's own train script
does on its Newton backend: the task's config resolved with its presets (``resolve_task_config``, ``newton_mjwarp`` by
default), the simulation launched for it (``launch_simulation``: kit-less for Newton), ``gym.make``, then
``isaaclab_rl.rsl_rl.RslRlVecEnvWrapper``; the task itself is not changed.

Assets: unless ``ISAACSIM_ASSET_ROOT`` is set, it points at a local root made by ``assets.prepare_asset_root`` (the
ground plane and the humanoid), set before Isaac Lab is imported (Isaac Lab reads it at import).

This package's own tasks (``MimicRL-Tracking-G1[-AMP]``, ``task.py``) are registered in gym's registry the first time
this module reaches Isaac Lab; ``IsaacLabVecEnv`` completes the package's contract for them (``ManagerTaskVecEnv``).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import os
import warnings
from pathlib import Path
from typing import Any

from mimic_rl.envs.common.task_config import apply_tracking_settings, is_mimic_task, refuse_tracking_settings
from mimic_rl.envs.common.task_env import ManagerTaskVecEnv
from mimic_rl.envs.isaaclab.config import IsaacLabEnvConfig
from mimic_rl.errors import UsageError
from mimic_rl.files import check_file

__all__ = ["INSTALL_HINT", "IsaacLabVecEnv", "import_isaaclab", "isaaclab_env_config", "make_isaaclab_env"]

INSTALL_HINT = (
    "install Isaac Lab 3.0 with python tools/install_isaaclab.py (Python 3.11 with the CPU torch, in a virtual "
    "environment of its own; on Python 3.12: pip install isaaclab==3.0.0), then pip install -e . there "
    "(docs/isaaclab.md)"
)
ASSET_ROOT_VARIABLE = "ISAACSIM_ASSET_ROOT"


def import_isaaclab() -> Any:
    """gym's registry with Isaac Lab's tasks and this package's; one line when Isaac Lab is missing. Points
    ``ISAACSIM_ASSET_ROOT`` at the local assets first, unless it is set."""
    modules = ("isaaclab", "isaaclab_tasks", "isaaclab_rl", "newton")
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(f"env.backend isaaclab: Isaac Lab is not installed (no module {missing[0]!r}); {INSTALL_HINT}")
    if not os.environ.get(ASSET_ROOT_VARIABLE):  # Isaac Lab reads it at import
        from mimic_rl.envs.isaaclab.assets import prepare_asset_root

        os.environ[ASSET_ROOT_VARIABLE] = str(prepare_asset_root())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            import gymnasium as gym
            import isaaclab_tasks  # noqa: F401  (registers Isaac Lab's tasks)
            from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"env.backend isaaclab: Isaac Lab does not import ({exc}); {INSTALL_HINT}") from None
    from mimic_rl.envs.isaaclab.task import register_tasks

    register_tasks()
    return gym.registry


def _check_task(task: str, registry: Any) -> None:
    """A ``UsageError`` with the closest task ids when ``task`` is not registered."""
    if task in registry:
        return
    known = [t for t in registry if t.startswith(("Isaac-", "MimicRL-"))]
    close = difflib.get_close_matches(task, known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"e.g. {', '.join(sorted(known)[:3])}"
    raise UsageError(f"--env isaaclab:{task}: expected a registered Isaac Lab task id, found none; {hint}")


def default_g1_mjcf() -> str | None:
    """``$MIMIC_RL_DATA/robots/unitree_g1/g1.xml`` when it exists."""
    path = Path(os.environ.get("MIMIC_RL_DATA", "/nonexistent")) / "robots" / "unitree_g1" / "g1.xml"
    return str(path) if path.is_file() else None


def isaaclab_env_config(cfg: IsaacLabEnvConfig) -> Any:
    """The task's env config, resolved with ``cfg.presets``, with ``cfg``'s settings (envs, seed, device, motions,
    episode length) applied."""
    registry = import_isaaclab()
    _check_task(cfg.task, registry)
    from isaaclab_tasks.utils.hydra import resolve_task_config

    overrides = (f"presets={','.join(cfg.presets)}",) if cfg.presets else ()
    try:
        env_cfg, _ = resolve_task_config(cfg.task, "rsl_rl_cfg_entry_point", play_mode=cfg.play, overrides=overrides)
    except ValueError as exc:
        raise UsageError(f"--env isaaclab:{cfg.task}: {str(exc).splitlines()[0]}; check env.presets") from None
    if cfg.num_envs is not None:
        env_cfg.scene.num_envs = cfg.num_envs
    env_cfg.seed = cfg.seed
    env_cfg.sim.device = str(cfg.device)
    if cfg.episode_length_s is not None:
        env_cfg.episode_length_s = cfg.episode_length_s
    if is_mimic_task(cfg.task):
        _apply_tracking_settings(env_cfg, cfg)
        return env_cfg
    refuse_tracking_settings(cfg, "Isaac Lab")
    if cfg.motions:
        raise UsageError(
            f"--motion: Isaac Lab's {cfg.task} is not a motion-tracking task of this package's; leave it out"
        )
    return env_cfg


def _apply_tracking_settings(env_cfg: Any, cfg: IsaacLabEnvConfig) -> None:
    """The robot's USD (made from its MJCF), the motions and the tracking settings of a ``MimicRL-Tracking-*``
    task; the motions are read once here, so that a bad file fails before the env is built."""
    from mimic_rl.envs.common.tracking_command import load_clips
    from mimic_rl.envs.isaaclab.assets import g1_usd
    from mimic_rl.envs.isaaclab.command import mujoco_model
    from mimic_rl.motion import RobotKinematics

    mjcf = cfg.robot_mjcf or default_g1_mjcf()
    if mjcf is None:
        raise UsageError(
            f"--robot-mjcf: expected the G1's MJCF for {cfg.task} (its USD is made from it), found none; pass "
            "--robot-mjcf PATH/TO/g1.xml, or set MIMIC_RL_DATA"
        )
    check_file(mjcf, "--robot-mjcf", "pass the G1's MJCF (XML) file")
    command = env_cfg.commands.motion
    apply_tracking_settings(command, cfg)
    command.robot_mjcf = str(Path(mjcf).resolve())
    env_cfg.scene.robot.spawn.usd_path = str(g1_usd(mjcf))
    load_clips(command.motions, command.csv_fps, RobotKinematics(mujoco_model(command.robot_mjcf)), tuple(command.feet))


def make_isaaclab_env(cfg: IsaacLabEnvConfig, env_cfg: Any = None) -> IsaacLabVecEnv:
    """The Isaac Lab task ``cfg.task`` as this package's ``VecEnv`` (kit-less: no Isaac Sim, no viewer);
    ``env_cfg``: the task's config from ``isaaclab_env_config(cfg)``, changed further (default: made here)."""
    env_cfg = isaaclab_env_config(cfg) if env_cfg is None else env_cfg
    import gymnasium as gym
    from isaaclab.app import launch_simulation
    from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper

    stack = contextlib.ExitStack()
    try:
        stack.enter_context(launch_simulation(env_cfg, {"viz": "none", "headless": True, "device": str(cfg.device)}))
        env = gym.make(cfg.task, cfg=env_cfg)
    except FileNotFoundError as exc:
        stack.close()
        raise UsageError(
            f"--env isaaclab:{cfg.task}: an asset is missing ({exc}); point {ASSET_ROOT_VARIABLE} at a folder that "
            f"holds it (now {os.environ.get(ASSET_ROOT_VARIABLE)!r}), or unset it to use this package's local assets"
        ) from None
    except BaseException:
        stack.close()
        raise
    return IsaacLabVecEnv(RslRlVecEnvWrapper(env, clip_actions=cfg.clip_actions), cfg, stack)


class IsaacLabVecEnv(ManagerTaskVecEnv):
    """Isaac Lab's ``RslRlVecEnvWrapper`` with this package's conventions (``ManagerTaskVecEnv``); ``close`` also
    ends the simulation launched for it."""

    def __init__(self, wrapped: Any, cfg: IsaacLabEnvConfig, stack: contextlib.ExitStack | None = None) -> None:
        super().__init__(wrapped, cfg)
        self._stack = stack

    def close(self) -> None:
        """Close the Isaac Lab env and its simulation."""
        try:
            super().close()
        finally:
            if self._stack is not None:
                self._stack.close()
                self._stack = None
