"""What MMPPO's add-ons (AMP, RND, DAgger guidance, symmetry, a user's own) may do, as a small set of hooks.

An extension is one object in one file: its config dataclass (``Config``), how it is built from that config
(``prepare`` / ``rollout_fields`` / ``build``), its hooks and its checkpoint state. It registers itself with
``@register_extension``; then ``algorithm: {<config_key>: {...}}`` in a config (or the keyword ``<config_key>=`` of
``MMPPO``) turns it on. MMPPO never names one: it builds every registered extension whose config key it was given,
and calls the hooks of all of them at fixed points, in ``hook_rank`` order:

- collection: ``on_act`` (after the policy acted: labels, features of the current state) and ``on_step`` (the step's
  outcome before it is stored: reward terms, extra stored data); both may add fields to ``alg.transition``, the step
  being collected (a dict under the rollout's field names, e.g. ``dagger_actions``, ``rnd_state``);
- update: ``before_update`` (once, before the first mini-batch), ``transform_batch`` (the mini-batch's streams
  before the forward pass), ``policy_terms`` / ``policy_loss`` (terms on the actor's output, added to the PPO loss),
  ``side_loss`` (a loss with its own optimizer, on the mini-batch itself: a dict of the rollout's fields plus
  ``indices``, ``hidden_states``, ``masks``/``loss_mask`` for sequences and, for the fields named in
  ``previous_keys``, ``previous`` and ``previous_valid``), ``after_update`` (once, after the last mini-batch:
  normalizers);
- between extensions: ``mirror`` (a mirror function of a stream, for another extension's augmentation);
- checkpoints: ``state_dict`` / ``load_state_dict`` (saved with the model) and ``runtime_state_dict`` /
  ``load_runtime_state_dict`` (only what an exact resume needs).

Hooks see the algorithm through ``Host``, a protocol: this module imports no algorithm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar

import torch
from tensordict import TensorDictBase
from torch import nn

from mimic_rl.config import from_dict
from mimic_rl.errors import ConfigError

__all__ = [
    "BuildContext",
    "Extension",
    "Host",
    "PolicyOutput",
    "SideLoss",
    "build_extensions",
    "extension_class",
    "extension_config_keys",
    "flat_rows",
    "register_extension",
    "registered_extension_names",
]

E = TypeVar("E", bound=type)


class Host(Protocol):
    """What an extension's hooks may read and call of the algorithm that hosts it (``MMPPO``)."""

    actor: Any
    critic: Any
    rollout: Any
    obs_groups: Any
    transition: dict[str, Any]
    iteration: int
    device: torch.device
    num_mini_batches: int
    is_multi_gpu: bool

    def log_step(self, key: str, value: torch.Tensor) -> None: ...

    def stored_observations(self, obs: TensorDictBase) -> TensorDictBase: ...

    def reduce_parameters(self, params: Any = None) -> None: ...

    def mirror(self, stream: str) -> Callable[[torch.Tensor], torch.Tensor] | None: ...


@dataclass
class BuildContext:
    """What an extension is built with: the device, the rollout it reads (``obs_view`` for user callbacks), the
    observation groups the models read, the env (for callbacks that take an ``env`` keyword) and an example
    observation TensorDict of the env (sizes)."""

    device: torch.device
    rollout: Any = None
    obs_groups: Any = None
    env: Any = None
    obs: TensorDictBase | None = None


@dataclass
class PolicyOutput:
    """The actor's output on a mini-batch: ``mean``/``std`` over all (possibly augmented) rows, the first ``n`` of
    them the stored samples, and the loss mask of the stored samples (None: every row counts)."""

    mean: torch.Tensor
    std: torch.Tensor
    n: int
    mask: torch.Tensor | None


@dataclass
class SideLoss:
    """A loss trained by its own optimizer in the same mini-batch step as PPO.

    ``checked``: its gradient norm joins the non-finite check that skips the whole step. ``after_step`` runs after
    its optimizer stepped (replay buffers, counters).
    """

    terms: dict[str, torch.Tensor]
    loss: torch.Tensor
    optimizer: torch.optim.Optimizer
    params: list[nn.Parameter]
    checked: bool = False
    after_step: Callable[[], None] | None = None


class Extension:
    """An add-on of MMPPO: every hook does nothing unless overridden (see the module docstring)."""

    name: ClassVar[str] = ""
    """Its key in ``load_cfg``, and the attribute of the algorithm that reaches it (``alg.amp``)."""
    config_key: ClassVar[str | None] = None
    """The MMPPO keyword and ``algorithm:`` config entry that turns it on (``"amp_cfg"``); None: given as an object."""
    Config: ClassVar[type | None] = None
    """Its config dataclass: every key of its config section, with the defaults."""
    build_rank: ClassVar[int] = 100
    """Extensions are built in this order (it fixes their random initialization)."""
    hook_rank: ClassVar[int] = 100
    """Their hooks run in this order."""
    previous_keys: tuple[str, ...] = ()
    """Rollout fields this extension reads at step t - 1 of the same env in every mini-batch (AMP: ``("obs",)``)."""

    # ------------------------------------------------------------------ construction (class methods)
    @classmethod
    def parse(cls, section: Mapping[str, Any] | Any, where: str) -> Any:
        """The config section as ``Config`` (unknown keys and wrong types: ``ConfigError`` naming the key)."""
        if cls.Config is None or isinstance(section, cls.Config):
            return section
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where}: expected a mapping of {cls.__name__} settings, found {section!r}")
        return from_dict(cls.Config, dict(section), where)

    @classmethod
    def config_of(cls, cfg: Any, fields: Mapping[str, Any]) -> Any:
        """``cfg`` with ``fields`` replaced, or a ``Config`` of ``fields`` alone: what a constructor that takes its
        config or its fields as keywords (``AMP(num_features=5)``) works from."""
        return dataclasses.replace(cfg, **fields) if cfg is not None else cls.Config(**fields)

    @classmethod
    def prepare(cls, cfg: Any, obs: TensorDictBase, env: Any, obs_groups: Any) -> Any:
        """The config with what is read off the env filled in (sizes), before the rollout is made."""
        return cfg

    @classmethod
    def stored_groups(cls, obs: TensorDictBase, obs_groups: Any) -> tuple[str, ...]:
        """Observation groups the rollout keeps for this extension beyond those the models read."""
        return ()

    @classmethod
    def rollout_fields(cls, cfg: Any, obs: TensorDictBase, env: Any, obs_groups: Any) -> dict[str, Any]:
        """Fields this extension stores in the rollout beyond PPO's: name -> per-env shape, or an example tensor."""
        return {}

    @classmethod
    def build(cls, cfg: Any, ctx: BuildContext) -> Extension:
        """The extension from its (prepared) config."""
        raise NotImplementedError(f"{cls.__name__} does not say how it is built from its config")

    # ------------------------------------------------------------------ hooks
    def modules(self) -> list[nn.Module]:
        """Learnable modules: train/eval mode, broadcast across ranks, non-finite row counts."""
        return []

    def check(self, alg: Host) -> None:
        """Raise ``ValueError`` if ``alg`` (its models, its rollout) cannot host this extension."""

    def on_act(self, alg: Host, obs: TensorDictBase) -> None:
        """After the policy acted on ``obs``; may add fields to ``alg.transition``."""

    def on_step(self, alg: Host, next_obs: TensorDictBase, rewards: torch.Tensor) -> torch.Tensor:
        """The step's outcome (``next_obs``: the real next state, before any reset); returns the rewards to store."""
        return rewards

    def before_update(self, alg: Host) -> None:
        """Once per update, before the first mini-batch."""

    def transform_batch(self, alg: Host, streams: dict[str, Any]) -> dict[str, Any]:
        """The mini-batch's streams (``obs``, ``reference``, ``actions``, ``advantages``, ...) before the forward
        pass."""
        return streams

    def policy_terms(self, alg: Host, streams: dict[str, Any], out: PolicyOutput) -> dict[str, torch.Tensor]:
        """Loss terms on the actor's output; reported, and added to the PPO loss by ``policy_loss``."""
        return {}

    def policy_loss(self, alg: Host, terms: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """This extension's weighted share of the PPO loss (None: nothing)."""
        return None

    def side_loss(self, alg: Host, batch: dict[str, Any], step: int) -> SideLoss | None:
        """A loss with its own optimizer on mini-batch number ``step`` of the update (None: none this step)."""
        return None

    def after_update(self, alg: Host) -> None:
        """Once per update, after the last mini-batch, before the rollout is cleared (normalizers)."""

    def mirror(self, stream: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """A mirror function of ``stream`` (``"amp"``, ``"obs"``, ...) this extension provides (None: none)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Top-level checkpoint entries (merged into ``MMPPO.save()``)."""
        return {}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Inverse of ``state_dict`` on a whole checkpoint dict (entries it does not find are left alone)."""

    def runtime_state_dict(self) -> dict[str, Any]:
        """What an exact resume needs beyond ``state_dict`` (merged into ``MMPPO.runtime_state_dict()``)."""
        return {}

    def load_runtime_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of ``runtime_state_dict``."""


_REGISTRY: dict[str, type[Extension]] = {}


def register_extension(cls: E) -> E:
    """Class decorator: ``algorithm: {cls.config_key: {...}}`` (or ``MMPPO(..., <config_key>=...)``) builds ``cls``."""
    key = cls.config_key
    if not key or not cls.name:
        raise ValueError(f"{cls.__name__}: an extension needs a name and a config_key to be registered")
    if key in _REGISTRY and _REGISTRY[key] is not cls:
        raise ValueError(f"extension config key {key!r} is already registered ({_REGISTRY[key].__name__})")
    _REGISTRY[key] = cls
    return cls


def extension_config_keys() -> list[str]:
    """The config keys of the registered extensions (``amp_cfg``, ``dagger_cfg``, ...)."""
    return sorted(_REGISTRY)


def registered_extension_names() -> list[str]:
    """The names of the registered extensions (``amp``, ``dagger``, ...): the attributes an algorithm answers."""
    return sorted(cls.name for cls in _REGISTRY.values())


def extension_class(config_key: str) -> type[Extension]:
    """The extension registered under ``config_key``."""
    if config_key not in _REGISTRY:
        raise ValueError(f"no extension is registered for {config_key!r}; known: {extension_config_keys()}")
    return _REGISTRY[config_key]


def build_extensions(sections: Mapping[str, Any], ctx: BuildContext, where: str = "algorithm") -> list[Extension]:
    """The registered extensions whose config sections are set (a falsy section is off), built in ``build_rank``
    order and returned in ``hook_rank`` order."""
    on = [(extension_class(key), section) for key, section in sections.items() if section]
    built = [
        (cls, cls.build(cls.parse(section, f"{where}.{cls.config_key}"), ctx))
        for cls, section in sorted(on, key=lambda item: item[0].build_rank)
    ]
    return [ext for _, ext in sorted(built, key=lambda item: item[0].hook_rank)]


def flat_rows(x: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """Rows of a padded ``[L, B, ...]`` recurrent batch as ``[L * B, ...]``; a flat batch (``masks`` None) as it is."""
    return x if masks is None else x.reshape(-1, *x.shape[2:])
