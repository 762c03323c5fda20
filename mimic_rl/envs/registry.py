"""Env backends by name (``env.backend`` in a config): each names its config class, its env factory and its evaluator.

Backends are registered as import paths (``"module:attribute"``), so reading a config imports only the backend it
names, and a backend whose simulator is not installed fails with one line that says how to install it. Built in:
``mujoco`` (the embedded MuJoCo env), ``mjlab`` (any task in mjlab's registry) and ``isaaclab`` (any Isaac Lab task
through ``gym.make`` and ``isaaclab_rl``'s rsl_rl wrapper). Another package adds one with ``register_backend``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Annotated, Any

from mimic_rl.errors import ConfigError
from mimic_rl.utils import Range

__all__ = [
    "Backend",
    "SimulatorTaskConfig",
    "backend",
    "backend_names",
    "env_config_class",
    "make_env",
    "register_backend",
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
    """``evaluate(policy, cfg, num_envs) -> dict``: the per-clip evaluation from each clip's first frame (the
    embedded env's is ``mimic_rl.runners.evaluation``'s own)."""


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


def register_backend(name: str, config: str, make_env: str, evaluate: str | None = None) -> None:
    """Register (or replace) the backend ``name``."""
    _BACKENDS[name] = Backend(name, config, make_env, evaluate)


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


register_backend(
    "mujoco",
    "mimic_rl.envs.mujoco.config:TrackingEnvConfig",
    "mimic_rl.envs.mujoco.env:MujocoTrackingEnv",
)  # evaluated by mimic_rl.runners.evaluation itself
register_backend(
    "mjlab",
    "mimic_rl.envs.mjlab.config:MjlabEnvConfig",
    "mimic_rl.envs.mjlab.env:make_mjlab_env",
    "mimic_rl.envs.mjlab.evaluation:evaluate_mjlab",
)
register_backend(
    "isaaclab",
    "mimic_rl.envs.isaaclab:IsaacLabEnvConfig",
    "mimic_rl.envs.isaaclab:make_isaaclab_env",
)
