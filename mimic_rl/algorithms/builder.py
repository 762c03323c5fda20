"""Build MMPPO, its models and its storage from a config and an example observation TensorDict."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from mimic_rl.algorithms.extensions import (
    BuildContext,
    Extension,
    build_extensions,
    extension_class,
    extension_config_keys,
)
from mimic_rl.algorithms.ppo import MMPPO
from mimic_rl.algorithms.registry import register, register_builder, resolve
from mimic_rl.algorithms.schedules import entropy_schedule
from mimic_rl.config import TrainConfig, register_validator
from mimic_rl.errors import ConfigError
from mimic_rl.models.actor_critic import Actor, Critic, ReferenceModel
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.storage import PolicyRollout
from mimic_rl.utils import check_kwargs

__all__ = [
    "build_mmppo",
    "check_section_kwargs",
    "check_train_sections",
    "describe_groups",
    "observation_layout",
    "strip_class_name",
]


def observation_layout(obs: TensorDictBase, groups: ObsGroups | None = None) -> dict[str, Any]:
    """Per-env input shapes of the actor and the critic (None where absent), for the groups ``groups`` selects
    (default: resolved from ``obs``'s group names)."""
    groups = groups or ObsGroups.resolve(None, obs)
    shapes = groups.shapes(obs)
    separate_critic_ref = groups.critic_reference is not None and groups.critic_reference != groups.actor_reference
    return {
        "policy": (shapes["actor"],),
        "reference": shapes["actor_reference"],
        "critic": (shapes["critic"],) if groups.critic != groups.actor else None,
        "critic_reference": shapes["critic_reference"] if separate_critic_ref else None,
        "critic_reference_or_actor": shapes["critic_reference"],
    }


def describe_groups(obs: TensorDictBase) -> str:
    """``policy 93, reference 5x65, ...``: each observation group and its per-env shape (for messages)."""
    return ", ".join(f"{k} {'x'.join(str(d) for d in obs[k].shape[1:]) or '1'}" for k in obs.keys())


register("model", "Actor")(Actor)
register("model", "Critic")(Critic)


def strip_class_name(
    cfg: dict[str, Any] | None, where: str, expected: str, kind: str = "model"
) -> tuple[dict[str, Any], Any]:
    """A copy of a config section without its ``class_name`` key, and the registered class that key names (default
    ``expected``); a name that is not registered, or not a subclass of ``expected``'s class, is a ``ValueError``."""
    cfg = dict(cfg or {})
    base = resolve(kind, expected, where)
    cls = resolve(kind, cfg.pop("class_name", expected), where)
    if not (isinstance(cls, type) and isinstance(base, type) and issubclass(cls, base)):
        raise ValueError(f"{where}: class_name must name {expected!r} or a registered subclass of it, got {cls!r}")
    return cfg, cls


def check_section_kwargs(
    algorithm: dict[str, Any], actor: dict[str, Any], critic: dict[str, Any], name: str = "{}"
) -> None:
    """Raise ``ConfigError`` naming any key that MMPPO, an extension's config, the actor or the critic does not
    accept.

    ``name`` formats the section name in messages: ``"{}"`` gives ``algorithm``, ``"cfg['{}']"`` gives
    ``cfg['algorithm']``.
    Arguments the builder fills in itself (dimensions, storage, device) are not accepted as keys.
    """
    model_init = ReferenceModel.__init__
    check_kwargs(
        (Actor.__init__, model_init), actor, name.format("actor"), ("obs_dim", "num_actions", "ref_shape", "output_dim")
    )
    check_kwargs((Critic.__init__, model_init), critic, name.format("critic"), ("obs_dim", "ref_shape", "output_dim"))
    sections = {k: v for k, v in algorithm.items() if k in extension_config_keys()}
    reserved = ("actor", "critic", "storage", "device", "multi_gpu_cfg", "obs_groups", "extensions")
    check_kwargs(
        MMPPO.__init__, {k: v for k, v in algorithm.items() if k not in sections}, name.format("algorithm"), reserved
    )
    for key, section in sections.items():
        if section:
            extension_class(key).parse(section, f"{name.format('algorithm')}.{key}")
    if "entropy_coef" in algorithm:
        try:
            entropy_schedule(algorithm["entropy_coef"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def build_mmppo(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device) -> MMPPO:
    """Actor and critic sized from ``obs``, a ``PolicyRollout`` of the env's groups (and the fields the extensions
    need), the extensions their config sections turn on, and MMPPO.

    ``cfg`` keys: ``algorithm`` (MMPPO arguments and extension sections such as ``amp_cfg``), ``actor`` / ``critic``
    (model arguments), ``num_steps_per_env``, optional ``multi_gpu``, ``obs_groups`` (which groups each model reads,
    see ``ObsGroups``; defaults from the env's groups) and ``extensions`` (``Extension`` objects whose hooks run after
    the configured ones). Each section's ``class_name`` selects a registered class
    (``mimic_rl.algorithms.registry``). Unknown keys are errors that name the key.
    """
    groups = ObsGroups.resolve(cfg.get("obs_groups"), obs)
    alg_cfg, alg_cls = strip_class_name(cfg.get("algorithm"), "cfg['algorithm']", "MMPPO", "algorithm")
    actor_cfg, actor_cls = strip_class_name(cfg.get("actor"), "cfg['actor']", "Actor")
    critic_cfg, critic_cls = strip_class_name(cfg.get("critic"), "cfg['critic']", "Critic")
    check_section_kwargs(alg_cfg, actor_cfg, critic_cfg, name="cfg['{}']")
    layout = observation_layout(obs, groups)
    num_actions = int(env.num_actions)
    actor = actor_cls(layout["policy"][-1], num_actions, layout["reference"], **actor_cfg)
    critic = critic_cls((layout["critic"] or layout["policy"])[-1], layout["critic_reference_or_actor"], **critic_cfg)
    sections = _extension_sections(alg_cfg, obs, env, groups)
    stored = {g: obs[g] for g in groups.stored()}  # example tensors: shapes and dtypes of the env's groups
    fields: dict[str, Any] = {}
    for cls, section in sections.values():
        stored.update({g: obs[g] for g in cls.stored_groups(obs, groups)})
        fields.update(cls.rollout_fields(section, obs, env, groups))
    steps = int(cfg.get("num_steps_per_env", 24))
    rollout = PolicyRollout("rl", int(env.num_envs), steps, stored, (num_actions,), fields=fields, device=device)
    ctx = BuildContext(torch.device(device), rollout, groups, env, obs)
    built = build_extensions({key: section for key, (_, section) in sections.items()}, ctx)
    return alg_cls(
        actor,
        critic,
        rollout,
        device=device,
        multi_gpu_cfg=cfg.get("multi_gpu"),
        obs_groups=groups,
        extensions=[*built, *(cfg.get("extensions") or ())],
        **alg_cfg,
    )


def _extension_sections(
    alg_cfg: dict[str, Any], obs: TensorDictBase, env: Any, groups: ObsGroups
) -> dict[str, tuple[type[Extension], Any]]:
    """The extension sections that are on, taken out of ``alg_cfg``, parsed and completed from the env (sizes), in
    ``build_rank`` order: config key -> (extension class, config)."""
    sections = {}
    for key in [k for k in alg_cfg if k in extension_config_keys()]:
        section = alg_cfg.pop(key)
        if section:
            cls = extension_class(key)
            sections[key] = (cls, cls.prepare(cls.parse(section, f"algorithm.{key}"), obs, env, groups))
    return dict(sorted(sections.items(), key=lambda item: item[1][0].build_rank))


def check_train_sections(cfg: Any) -> None:
    """Raise ``ValueError`` naming any key of a ``TrainConfig``'s ``algorithm``, ``actor`` or ``critic`` section that
    MMPPO, an extension or the models reject (registered with ``mimic_rl.config``: run by ``TrainConfig.validate``)."""
    check_section_kwargs(cfg.algorithm, cfg.actor, cfg.critic)


register_builder("MMPPO", build_mmppo)
register_validator(TrainConfig, check_train_sections)
