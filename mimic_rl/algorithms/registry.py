"""Registries behind the ``class_name`` keys of the config and behind ``construct_algorithm``.

An algorithm class registers itself under its name (``@register_algorithm("MMPPO")``); its builder registers the
function that makes it from a config and an example observation (``register_builder("MMPPO", build_mmppo)``). A
config section's ``class_name`` then selects the class through ``resolve``, and ``Algorithm.construct_algorithm``
reaches its builder without importing it, so that no module imports another inside a function to break a cycle.
Models (``Actor``, ``Critic``) are registered under the kind ``"model"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["builder_for", "register", "register_algorithm", "register_builder", "registered", "resolve"]

T = TypeVar("T")

_REGISTRY: dict[str, dict[str, Any]] = {"algorithm": {}, "model": {}}
_BUILDERS: dict[str, Callable[..., Any]] = {}


def register(kind: str, name: str) -> Callable[[T], T]:
    """Decorator: register a class (or factory) as ``name`` of ``kind`` (``"algorithm"`` or ``"model"``)."""

    def deco(obj: T) -> T:
        table = _REGISTRY.setdefault(kind, {})
        if name in table and table[name] is not obj:
            raise ValueError(f"{kind} {name!r} is already registered ({table[name]!r})")
        table[name] = obj
        return obj

    return deco


def register_algorithm(name: str) -> Callable[[T], T]:
    """Decorator: register an algorithm class under ``name`` (the value of ``algorithm.class_name``)."""
    return register("algorithm", name)


def register_builder(name: str, builder: Callable[..., Any]) -> None:
    """Register ``builder(obs, env, cfg, device)``, which makes the algorithm ``name`` with its models and storage."""
    _BUILDERS[name] = builder


def registered(kind: str) -> list[str]:
    """The names registered under ``kind``."""
    return sorted(_REGISTRY.get(kind, {}))


def resolve(kind: str, name: str, where: str, allowed: tuple[str, ...] | None = None) -> Any:
    """The object registered as ``name`` of ``kind``; ``ValueError`` naming ``where`` and the choices otherwise.

    ``allowed`` narrows the choices (a section that only takes classes of one family, e.g. the critic).
    """
    table = _REGISTRY.get(kind, {})
    choices = [n for n in sorted(table) if allowed is None or n in allowed]
    if name not in choices:
        raise ValueError(f"{where}: class_name {name!r} is not registered; expected one of {choices}")
    return table[name]


def builder_for(name: str) -> Callable[..., Any]:
    """The builder registered for the algorithm ``name``."""
    if name not in _BUILDERS:
        raise ValueError(f"no builder is registered for the algorithm {name!r}; known: {sorted(_BUILDERS)}")
    return _BUILDERS[name]
