"""Typed configs loaded from YAML: nested dataclasses, where an unknown key is an error that names it.

``TrainConfig`` is one training run: the runner's settings, the env (``TrackingEnvConfig``), and the algorithm,
actor and critic arguments (plain dicts, checked against ``MMPPO``, ``Actor`` and ``Critic``'s signatures, so there is
one source of truth for their defaults). ``load_config`` reads a YAML file (or a built-in name from ``configs/``),
``save_config`` writes the resolved config that every run keeps beside its checkpoints.

This module sits below the env backends and the algorithms and imports neither: each registers its part here. A
backend registers its env config class (``register_env_config``, done by ``mimic_rl.envs.registry.register_backend``),
the algorithm layer the validators of its sections (``register_validator``). The built-in ones register themselves
when the modules named in ``BUILTIN_REGISTRARS`` are imported, by name, the first time a config needs them; so
``load_config`` checks every section even when only this module was imported.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml

from mimic_rl.config_files import CONFIG_DIR, apply_overrides, override_for, read_config_file
from mimic_rl.errors import ConfigError
from mimic_rl.utils import Range, unknown_key_message

__all__ = [
    "BUILTIN_REGISTRARS",
    "CONFIG_DIR",
    "ConfigError",
    "DistillConfig",
    "RunnerConfig",
    "TeacherConfig",
    "TrainConfig",
    "env_config",
    "env_config_class",
    "env_config_names",
    "from_dict",
    "load_config",
    "read_config_file",
    "register_env_config",
    "register_validator",
    "save_config",
    "to_dict",
]


@dataclass
class RunnerConfig:
    """How long to train, how often to save and log, and where."""

    num_steps_per_env: Annotated[int, Range(1)] = 24
    max_iterations: Annotated[int, Range(1)] = 1500
    time_budget_s: Annotated[float | None, Range(0)] = None
    """Stop after this many seconds of training (checked after each iteration); None: no limit."""
    save_interval: Annotated[int, Range(1)] = 100
    eval_interval: Annotated[int, Range(0)] = 0
    """Every this many iterations, evaluate the policy from each clip's first frame (``eval/*`` in the logs); 0: off.
    The evaluation after training (``mimic-rl train``) does not depend on it."""
    eval_envs: Annotated[int, Range(1)] = 8
    """Envs per clip in those evaluations."""
    keep_best: bool = True
    """Save the checkpoint of the best of those evaluations as ``model_best.pt`` (a higher mean success; at equal
    success a larger share of the clips reached, then a lower global MPJPE; its ``best_eval`` says which); the best of
    many small evaluations is biased up, so evaluate it again (``mimic-rl eval --num-envs 64``)."""
    best_by: Literal["mean", "worst_clip"] = "mean"
    """How ``keep_best`` ranks evaluations of several clips: ``mean``, the mean success over clips first;
    ``worst_clip``, the lowest clip's success first, then the mean (for a policy that must track every clip)."""
    seed: Annotated[int, Range(0)] = 0
    device: str = "cpu"
    logger: Literal["tensorboard", "wandb", "none"] = "tensorboard"
    """``tensorboard``, ``wandb`` (when installed) or ``none``; a JSON-lines log is always written."""
    wandb_project: str | None = None
    threads: Annotated[int | None, Range(1)] = None
    """Torch and MuJoCo threads for this process (``--threads``); None: what the machine can give without
    oversubscription (``OMP_NUM_THREADS`` is respected)."""


# ---------------------------------------------------------------------------------------------------- registrations
BUILTIN_REGISTRARS = ("mimic_rl.envs.registry", "mimic_rl.algorithms")
"""Modules that register the built-in backends' env configs and the validators of the algorithm sections when they
are imported; imported by name (``importlib``) the first time a config needs a registration."""

_ENV_CONFIGS: dict[str, str | type] = {}
_VALIDATORS: dict[type, list[str | Callable[[Any], None]]] = {}
_registrars_loaded = False


def register_env_config(backend: str, config: str | type) -> None:
    """Register (or replace) the env config dataclass of backend ``backend``: a class or its ``"module:Class"``."""
    _ENV_CONFIGS[backend] = config


def register_validator(kind: type, validator: str | Callable[[Any], None]) -> None:
    """Add a check of ``kind`` configs (``TrainConfig``, ``DistillConfig``) that ``validate()`` runs: a callable of the
    config, or its ``"module:function"``, that raises ``ValueError`` (or ``ConfigError``) naming the bad key."""
    _VALIDATORS.setdefault(kind, []).append(validator)


def _resolve(entry: str | Any) -> Any:
    """A registered ``"module:attribute"`` as the attribute it names (anything else as it is)."""
    if not isinstance(entry, str):
        return entry
    module, _, attribute = entry.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _load_registrars() -> None:
    """Import the ``BUILTIN_REGISTRARS`` once (they call ``register_*`` as they load)."""
    global _registrars_loaded
    if not _registrars_loaded:
        _registrars_loaded = True  # first: a registrar that loads a config while it imports finds no loop
        try:
            for name in BUILTIN_REGISTRARS:
                importlib.import_module(name)
        except BaseException:
            _registrars_loaded = False
            raise


def env_config_names() -> list[str]:
    """The backends with a registered env config."""
    _load_registrars()
    return sorted(_ENV_CONFIGS)


def env_config_class(name: str, where: str = "env.backend") -> type:
    """The env config dataclass of backend ``name``; an unknown name is a ``ConfigError`` that lists the known ones."""
    _load_registrars()
    if name not in _ENV_CONFIGS:
        raise ConfigError(f"{where}: expected one of {env_config_names()}, found {name!r}")
    return _resolve(_ENV_CONFIGS[name])


def _validate(cfg: Any) -> None:
    """Run the validators registered for ``type(cfg)``; their ``ValueError`` becomes a ``ConfigError``."""
    _load_registrars()
    for validator in _VALIDATORS.get(type(cfg), []):
        try:
            _resolve(validator)(cfg)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def default_env_config() -> Any:
    """The embedded MuJoCo env's default config."""
    return env_config({})


def env_config(data: dict[str, Any] | Any, path: str = "env") -> Any:
    """The config of the backend that ``data["backend"]`` names (default ``mujoco``), built from ``data``."""
    if not isinstance(data, dict):
        if dataclasses.is_dataclass(data):
            return data
        raise ConfigError(f"{path}: expected a mapping of env settings, got {type(data).__name__}")
    name = data.get("backend", "mujoco")
    if not isinstance(name, str):
        raise ConfigError(f"{path}.backend: expected a backend name, found {name!r}")
    return from_dict(env_config_class(name, f"{path}.backend"), data, path)


@dataclass
class TrainConfig:
    """A training run: runner, env (the config of the backend ``env.backend`` names), obs_groups (which observation
    groups each model reads, see ``mimic_rl.models.obs_groups``), algorithm (MMPPO arguments), actor and critic
    (model arguments)."""

    runner: RunnerConfig = field(default_factory=RunnerConfig)
    env: Any = field(default_factory=default_env_config)
    obs_groups: dict[str, Any] = field(default_factory=dict)
    algorithm: dict[str, Any] = field(default_factory=dict)
    actor: dict[str, Any] = field(default_factory=dict)
    critic: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = env_config(self.env)

    def validate(self) -> TrainConfig:
        """Check the algorithm, actor and critic keys against the classes they configure (``register_validator``)."""
        _validate(self)
        return self


@dataclass
class TeacherConfig:
    """Where the teacher of a distillation run comes from."""

    checkpoint: str | None = None
    """A trained policy: this package's training checkpoint, or an rsl_rl one (``actor_state_dict``)."""
    obs_groups: list[str] = field(default_factory=lambda: ["policy", "reference"])
    """rsl_rl checkpoints only: the observation groups its MLP reads, concatenated in this order."""
    activation: str = "elu"
    """rsl_rl checkpoints only: the MLP's activation."""


@dataclass
class DistillConfig:
    """A distillation run: runner, env, obs_groups (the student reads ``actor`` and, with ``use_reference``, its
    reference; see ``mimic_rl.models.obs_groups``), algorithm (Distillation arguments), student (Actor arguments and
    ``use_reference``) and teacher."""

    runner: RunnerConfig = field(default_factory=RunnerConfig)
    env: Any = field(default_factory=default_env_config)
    obs_groups: dict[str, Any] = field(default_factory=dict)
    algorithm: dict[str, Any] = field(default_factory=dict)
    student: dict[str, Any] = field(default_factory=dict)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)

    def __post_init__(self) -> None:
        self.env = env_config(self.env)

    def validate(self) -> DistillConfig:
        """Check the algorithm and student keys against the classes they configure (``register_validator``)."""
        _validate(self)
        return self


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def describe_type(tp: Any) -> str:
    """What a value of the annotated type ``tp`` looks like in YAML (``a whole number``, ``a list of numbers``, ...)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return describe_type(typing.get_args(tp)[0])
    if origin is typing.Literal:
        return f"one of {list(typing.get_args(tp))}"
    if _is_dataclass_type(tp):
        return f"a mapping of {tp.__name__} settings"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) if a is not type(None) else "null" for a in typing.get_args(tp))
    if origin in (list, tuple):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        items = {describe_type(a) for a in args}
        if len(items) != 1 or "Any" in str(args):
            return "a list"
        item = items.pop().removeprefix("a ").removeprefix("an ")
        plural = {"whole number": "whole numbers", "number": "numbers", "string": "strings"}.get(item, f"({item})")
        return f"a list of {plural}"
    if origin is dict or tp is dict:
        return "a mapping"
    return {int: "a whole number", float: "a number", str: "a string", bool: "true or false"}.get(tp, str(tp))


def _convert(value: Any, tp: Any, path: str) -> Any:
    """Coerce a YAML value to the annotated type ``tp`` (dataclasses recursively, tuples from lists), checking
    ``Literal`` choices and ``Annotated[..., Range(...)]`` bounds."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *extras = typing.get_args(tp)
        value = _convert(value, base, path)
        for extra in extras:
            if isinstance(extra, Range) and value is not None:
                extra.check(value, path)
        return value
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        if value not in choices:
            raise ConfigError(f"{path}: expected one of {list(choices)}, found {value!r}")
        return value
    if _is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected {describe_type(tp)}, found {value!r}")
        return from_dict(tp, value, path)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _convert(value, args[0], path) if len(args) == 1 else value
    if origin in (tuple, list) and not isinstance(value, list | tuple):
        raise ConfigError(f"{path}: expected {describe_type(tp)}, found {value!r}")
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(v, args[0], f"{path}[{i}]") for i, v in enumerate(value))
        if args and len(args) != len(value):
            raise ConfigError(f"{path}: expected a list of {len(args)} values, found {value!r}")
        return tuple(_convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is list:
        (item,) = typing.get_args(tp) or (Any,)
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)] if item is not Any else list(value)
    if (origin is dict or tp is dict) and not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a mapping, found {value!r}")
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in (int, float, str, bool) and (not isinstance(value, tp) or (tp is not bool and isinstance(value, bool))):
        raise ConfigError(f"{path}: expected {describe_type(tp)}, found {value!r}")
    return value


def from_dict(cls: type, data: dict[str, Any], path: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``; an unknown key or a wrong type raises ``ConfigError`` naming its full
    path (``algorithm.amp_cfg.style_weight``), what was expected and, for a key, the closest valid one."""
    hints = typing.get_type_hints(cls, include_extras=True)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names, key=str)
    if unknown:
        raise ConfigError(unknown_key_message(path, unknown[0], names))
    kwargs = {k: _convert(v, hints[k], f"{path}.{k}" if path else k) for k, v in data.items()}
    return cls(**kwargs)


def to_dict(obj: Any) -> Any:
    """A dataclass (recursively) as plain YAML-friendly data (tuples become lists)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    return obj


def load_config(
    source: str | Path | dict[str, Any],
    kind: type = TrainConfig,
    what: str = "--task",
    overrides: list[str] | tuple[str, ...] = (),
) -> Any:
    """A validated ``kind`` (``TrainConfig`` or ``DistillConfig``) from a YAML path, a built-in name
    (``configs/<name>.yaml``) or a dict, its ``base:`` resolved, then the ``--set KEY.PATH=VALUE`` ``overrides``
    applied; an error names the ``--set`` it comes from, else the file."""
    overrides = list(overrides)
    data = source if isinstance(source, dict) else read_config_file(source, what)
    data = apply_overrides(data, overrides) if overrides else data
    try:
        return from_dict(kind, data).validate()
    except ConfigError as exc:
        culprit = override_for(str(exc), overrides)
        if culprit is not None:
            raise ConfigError(f"--set {culprit}: {exc}") from None
        if isinstance(source, dict):
            raise
        raise ConfigError(f"{source}: {exc}") from None


def save_config(cfg: Any, path: str | Path) -> Path:
    """Write the resolved config as YAML."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return path
