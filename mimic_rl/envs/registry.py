"""Env backends by name (``env.backend`` in a config): each names its config class, its env factory, its evaluator and
(where it has them) a small env to watch a policy in and a video renderer.

Only ``mimic_rl/envs/<backend>/`` imports a backend: the runners and the command line reach one through the functions
here. Backends are registered as import paths (``"module:attribute"``), so reading a config imports only the backend it
names, and a backend whose simulator is not installed fails with one line that says how to install it. Registering a
backend also registers its config class with ``mimic_rl.config``. Built in:
``mujoco`` (the embedded MuJoCo env), ``mujoco_amp_walk`` (its style-only walking task),
``mjlab`` (any task in mjlab's registry) and ``isaaclab`` (any Isaac Lab 3.0
task through ``gym.make`` and ``isaaclab_rl``'s rsl_rl wrapper, without Isaac Sim). Another package adds one with
``register_backend``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from mimic_rl.config import register_env_config
from mimic_rl.errors import ConfigError, UsageError
from mimic_rl.utils import Range

__all__ = [
    "Backend",
    "SimulatorTaskConfig",
    "backend",
    "backend_names",
    "built_in_robot",
    "env_config_class",
    "evaluate",
    "has_play_env",
    "load_attribute",
    "make_env",
    "make_play_env",
    "register_backend",
    "render_rollout",
]


@dataclass(frozen=True)
class Backend:
    """Import paths (``"module:attribute"``) of a backend's parts."""

    name: str
    config: str
    """A dataclass with a ``backend`` field, ``num_envs``, ``motions``, ``seed`` and ``device``."""
    make_env: str
    """``make_env(env_cfg) -> VecEnv``."""
    evaluate: str | None = None
    """``evaluate(policy, cfg, num_envs, robot=None, check_env=None) -> dict``: the per-clip evaluation of ``policy``
    (a callable of the observation TensorDict with ``reset(dones)``) from each clip's first frame; ``check_env(env)``
    may refuse a policy that does not fit the env (``CheckpointError``), ``robot`` overrides the config's."""
    play: str | None = None
    """``play_env(env_cfg) -> VecEnv``: a small env for a short look at a policy (``mimic-rl play``) and for the robot
    metadata of an export; None: a simulator with its own viewer (play refuses, export writes no robot metadata)."""
    render: str | None = None
    """``render_rollout(env, path, policy=None, steps=100, on_dones=None) -> Path``: a video of a play env."""


@dataclass
class SimulatorTaskConfig:
    """What every backend that runs a simulator's registered task (mjlab, Isaac Lab) sets; the task is otherwise
    unchanged. Subclasses fix ``backend`` and add their own settings."""

    backend: str = ""
    task: str = ""
    """A task id of the simulator's registry."""
    num_envs: Annotated[int | None, Range(1)] = None
    """None: the task's own number."""
    motions: list[str] = field(default_factory=list)
    """Tracking tasks: the one motion file the task's motion command reads."""
    clip_actions: Annotated[float | None, Range(0, low_exclusive=True)] = None
    seed: Annotated[int, Range(0)] = 0
    device: str = "cpu"


_BACKENDS: dict[str, Backend] = {}


def register_backend(
    name: str,
    config: str,
    make_env: str,
    evaluate: str | None = None,
    play: str | None = None,
    render: str | None = None,
) -> None:
    """Register (or replace) the backend ``name`` (import paths of its parts, see ``Backend``) and its config class."""
    _BACKENDS[name] = Backend(name, config, make_env, evaluate, play, render)
    register_env_config(name, config)


def backend_names() -> list[str]:
    """The registered backend names."""
    return sorted(_BACKENDS)


def backend(name: str, where: str = "env.backend") -> Backend:
    """The backend ``name``; an unknown name is a ``ConfigError`` that lists the known ones."""
    if name not in _BACKENDS:
        raise ConfigError(f"{where}: expected one of {backend_names()}, found {name!r}")
    return _BACKENDS[name]


def load_attribute(path: str) -> Any:
    """The attribute a ``"module:attribute"`` path names."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def env_config_class(name: str, where: str = "env.backend") -> type:
    """The config dataclass of backend ``name``."""
    return load_attribute(backend(name, where).config)


def make_env(env_cfg: Any) -> Any:
    """The ``VecEnv`` that ``env_cfg`` (a backend's config) describes."""
    return load_attribute(backend(env_cfg.backend).make_env)(env_cfg)


def evaluate(policy: Any, cfg: Any, num_envs: int, **options: Any) -> dict[str, Any]:
    """Evaluate ``policy`` on ``cfg.env`` from each clip's first frame with the backend's evaluator (``options``:
    ``robot``, ``check_env``; those that are None are left out)."""
    evaluator = backend(cfg.env.backend).evaluate
    if evaluator is None:
        raise UsageError(f"env.backend {cfg.env.backend!r} has no evaluation from the clips' start; use --no-eval")
    return load_attribute(evaluator)(policy, cfg, num_envs, **{k: v for k, v in options.items() if v is not None})


def has_play_env(name: str) -> bool:
    """Whether backend ``name`` has a small env to watch a policy in (``make_play_env``)."""
    return backend(name).play is not None


def make_play_env(env_cfg: Any) -> Any:
    """A small env of ``env_cfg`` for a short look at a policy (``mimic-rl play``, export metadata)."""
    found = backend(env_cfg.backend)
    if found.play is None:
        raise UsageError(
            f"env.backend {found.name!r} has no env to play in; use mimic-rl eval, or the simulator's own viewer"
        )
    return load_attribute(found.play)(env_cfg)


def built_in_robot(name: str, mjcf: str | Path | None = None) -> Any:
    """The embedded backend's robot ``name`` (``humanoid28``, or ``g1`` with its MJCF) as its ``RobotConfig``: the
    MJCF, the foot bodies and ``load_clip`` (its clip conventions), for the command line outside a backend
    (``mimic-rl convert``)."""
    return load_attribute("mimic_rl.envs.mujoco.robots:robot_config")(name, mjcf)


def render_rollout(env_cfg: Any, env: Any, path: str | Path, **options: Any) -> Path:
    """A video of ``env`` (a play env of ``env_cfg``'s backend) at ``path``; ``options``: ``policy``, ``steps``,
    ``on_dones``."""
    found = backend(env_cfg.backend)
    if found.render is None:
        raise UsageError(f"{path}: --video: env.backend {found.name!r} has no video renderer; leave --video out")
    return load_attribute(found.render)(env, path, **options)


register_backend(
    "mujoco",
    "mimic_rl.envs.mujoco.config:TrackingEnvConfig",
    "mimic_rl.envs.mujoco.env:MujocoTrackingEnv",
    "mimic_rl.envs.mujoco.evaluation:evaluate_mujoco",
    "mimic_rl.envs.mujoco.evaluation:play_env",
    "mimic_rl.envs.mujoco.render:render_rollout",
)
register_backend(
    "mujoco_amp_walk",
    "mimic_rl.envs.mujoco.amp_walk:AmpWalkEnvConfig",
    "mimic_rl.envs.mujoco.amp_walk:MujocoAmpWalkEnv",
    "mimic_rl.envs.mujoco.amp_walk:evaluate_amp_walk",
    "mimic_rl.envs.mujoco.amp_walk:play_env",
    "mimic_rl.envs.mujoco.render:render_rollout",
)
register_backend(
    "mjlab",
    "mimic_rl.envs.mjlab.config:MjlabEnvConfig",
    "mimic_rl.envs.mjlab.env:make_mjlab_env",
    "mimic_rl.envs.mjlab.evaluation:evaluate_mjlab",
)
register_backend(
    "isaaclab",
    "mimic_rl.envs.isaaclab.config:IsaacLabEnvConfig",
    "mimic_rl.envs.isaaclab.env:make_isaaclab_env",
    "mimic_rl.envs.isaaclab.evaluation:evaluate_isaaclab",
)
