"""Config YAML files as data: built-in names, ``base:`` inheritance and ``--set key.path=value`` overrides.

A file may start with ``base: tracking_ppo`` (a built-in config) or ``base: other.yaml`` (relative to the file's
folder): the base is read first (bases chain) and the file's keys are laid over it, mappings merged key by key, any
other value (a list, a number) replaced. ``apply_overrides`` lays ``--set`` values over the result. Type checks happen
later, once, when ``mimic_rl.config`` builds the dataclasses.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import yaml

from mimic_rl.errors import ConfigError, UsageError
from mimic_rl.files import path_problem

__all__ = ["CONFIG_DIR", "apply_overrides", "merge", "parse_override", "read_config_file"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
SWITCH_KEYS = ("backend", "class_name")
"""A mapping whose ``backend`` or ``class_name`` changes is replaced, not merged: the other class has other keys."""
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def builtin_names() -> list[str]:
    """The built-in configs (``configs/<name>.yaml``)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _locate(source: str | Path, folder: Path | None) -> Path:
    """``source`` as a path: a built-in name (no suffix, no such file), else relative to ``folder`` (or the working
    directory)."""
    path = Path(source)
    if folder is not None and not path.is_absolute():
        path = folder / path
    if not Path(source).suffix and not path.exists():
        path = CONFIG_DIR / f"{source}.yaml"
    return path


def _read_yaml(path: Path, source: str | Path, what: str) -> dict[str, Any]:
    """One YAML file as a mapping; every problem a ``ConfigError`` naming the file and ``what`` named it."""
    problem = path_problem(path, "file")
    if problem is not None and problem != "an empty file":
        raise ConfigError(
            f"{source}: {what}: expected a built-in config ({', '.join(builtin_names())}) or a YAML file, found "
            f"{problem}"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: {what}: expected a YAML text file, found binary data") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"{path}: {what}: expected valid YAML, found a syntax error{where} ({problem})") from None
    if data is None:
        raise ConfigError(
            f"{path}: {what}: expected a mapping of config sections (runner, env, algorithm, ...), found an empty "
            "file; restore it (a run's config.yaml is rewritten at its next start) or pass --task"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: {what}: expected a mapping of config sections at the top level, found a {type(data).__name__}"
        )
    return data


def read_config_file(source: str | Path, what: str = "--task", _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """A config YAML as a dict with its ``base:`` resolved: a path, or a built-in name (``configs/<name>.yaml``).
    ``what`` names the option or file the name came from in error messages."""
    path = _locate(source, None) if not _chain else Path(source)
    data = _read_yaml(path, source, what)
    if "base" not in data:
        return data
    base = data.pop("base")
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: base: expected a built-in config name or a YAML path, found {base!r}")
    base_path = _locate(base, path.parent)
    chain = (*_chain, path.resolve())
    if base_path.resolve() in chain:
        names = " -> ".join(p.name for p in (*chain, base_path.resolve()))
        raise ConfigError(f"{path}: base: the bases form a cycle ({names}); remove one of these base: lines")
    if not base_path.exists():
        raise ConfigError(
            f"{path}: base: expected a built-in config ({', '.join(builtin_names())}) or a YAML file relative to "
            f"{path.resolve().parent}, found {base!r} (no such file)"
        )
    return merge(read_config_file(base_path, f"base of {path}", chain), data)


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` laid over ``base`` (neither is changed): mappings merged recursively, other values replaced; a
    mapping whose ``backend`` or ``class_name`` differs replaces the base's."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        old = out.get(key)
        switched = isinstance(old, dict) and isinstance(value, dict)
        switched = switched and any(k in value and value[k] != old.get(k, value[k]) for k in SWITCH_KEYS)
        if isinstance(old, dict) and isinstance(value, dict) and not switched:
            out[key] = merge(old, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b.c=value"`` as (``["a", "b", "c"]``, the value read as YAML: ``3e-4``, ``[256, 128]``, ``null``, ...)."""
    key, sep, raw = text.partition("=")
    keys = key.strip().split(".")
    if not sep or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in keys):
        raise UsageError(f"--set: expected KEY.PATH=VALUE (e.g. --set algorithm.learning_rate=3e-4), found {text!r}")
    raw = raw.strip()
    if _NUMBER.match(raw) and not re.fullmatch(r"[-+]?\d+", raw):
        value: Any = float(raw)  # YAML 1.1 reads 3e-4 as a string
        return keys, value if math.isfinite(value) else raw
    try:
        return keys, yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        raise UsageError(
            f"--set {text}: expected a YAML value (a number, a string, true/false, null or a list like [256, 128]), "
            "found a syntax error; quote the value for the shell, e.g. --set 'actor.hidden_dims=[256, 128]'"
        ) from None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``data`` with each ``--set KEY.PATH=VALUE`` applied in order (missing sections are created; checks come when
    the config is built)."""
    out = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = out
        for i, key in enumerate(keys[:-1]):
            child = node.setdefault(key, {})
            if child is None:
                child = node[key] = {}
            if not isinstance(child, dict):
                where = ".".join(keys[: i + 1])
                raise UsageError(f"--set {text}: {where} is {child!r}, not a section with keys; set {where}=VALUE")
            node = child
        node[keys[-1]] = value
    return out


def override_for(message: str, overrides: list[str]) -> str | None:
    """The ``--set`` whose key path the error ``message`` (which starts with a key path) is about, if any."""
    path = message.split(":", 1)[0].strip()
    for text in reversed(overrides):
        key = text.partition("=")[0].strip()
        if path == key or path.startswith(key + ".") or path.startswith(key + "[") or key.startswith(path + "."):
            return text
    return None
