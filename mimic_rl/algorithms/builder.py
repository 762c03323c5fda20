"""Build MMPPO, its models and its storage from a config and an example observation TensorDict."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from mimic_rl.algorithms.ppo import MMPPO
from mimic_rl.algorithms.registry import register, register_builder, resolve
from mimic_rl.errors import ConfigError
from mimic_rl.models.actor_critic import Actor, Critic, ReferenceModel
from mimic_rl.models.obs_groups import ObsGroups
from mimic_rl.storage import PolicyRollout
from mimic_rl.storage.amp_pairs import AmpPairExtractor
from mimic_rl.utils import check_kwargs

__all__ = ["build_mmppo", "check_section_kwargs", "describe_groups", "observation_layout", "strip_class_name"]


def _shape(obs: TensorDictBase, key: str) -> tuple[int, ...] | None:
    return tuple(obs[key].shape[1:]) if key in obs.keys() else None


def observation_layout(obs: TensorDictBase, groups: ObsGroups | None = None) -> dict[str, Any]:
    """Per-env input shapes of the actor, the critic and the optional groups (None where absent), for the groups
    ``groups`` selects (default: resolved from ``obs``'s group names)."""
    groups = groups or ObsGroups.resolve(None, obs)
    shapes = groups.shapes(obs)
    separate_critic_ref = groups.critic_reference is not None and groups.critic_reference != groups.actor_reference
    return {
        "policy": (shapes["actor"],),
        "reference": shapes["actor_reference"],
        "critic": (shapes["critic"],) if groups.critic != groups.actor else None,
        "critic_reference": shapes["critic_reference"] if separate_critic_ref else None,
        "critic_reference_or_actor": shapes["critic_reference"],
        "amp": _shape(obs, "amp"),
        "rnd_state": _shape(obs, "rnd_state"),
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
    """Raise ``ValueError`` naming any key that MMPPO, the actor or the critic does not accept.

    ``name`` formats the section name in messages: ``"{}"`` gives ``algorithm``, ``"cfg['{}']"`` gives
    ``cfg['algorithm']``.
    Arguments the builder fills in itself (dimensions, storage, device) are not accepted as keys.
    """
    model_init = ReferenceModel.__init__
    check_kwargs(
        (Actor.__init__, model_init), actor, name.format("actor"), ("obs_dim", "num_actions", "ref_shape", "output_dim")
    )
    check_kwargs((Critic.__init__, model_init), critic, name.format("critic"), ("obs_dim", "ref_shape", "output_dim"))
    check_kwargs(
        MMPPO.__init__,
        algorithm,
        name.format("algorithm"),
        ("actor", "critic", "storage", "device", "multi_gpu_cfg", "obs_groups", "extensions"),
    )


def build_mmppo(obs: TensorDictBase, env: Any, cfg: dict[str, Any], device: str | torch.device):
    """Actor and critic sized from ``obs``, a ``PolicyRollout`` of the env's groups (and the fields the extensions
    need), and MMPPO.

    ``cfg`` keys: ``algorithm`` (MMPPO arguments), ``actor`` / ``critic`` (model arguments), ``num_steps_per_env``,
    optional ``multi_gpu``, ``obs_groups`` (which groups each model reads, see ``ObsGroups``; defaults from the
    env's groups) and ``extensions`` (``Extension`` objects whose hooks run after the built-in ones). Each section's
    ``class_name`` selects a registered class (``mimic_rl.algorithms.registry``). Unknown keys are errors that name
    the key.
    """
    groups = ObsGroups.resolve(cfg.get("obs_groups"), obs)
    layout = observation_layout(obs, groups)
    alg_cfg, alg_cls = strip_class_name(cfg.get("algorithm"), "cfg['algorithm']", "MMPPO", "algorithm")
    actor_cfg, actor_cls = strip_class_name(cfg.get("actor"), "cfg['actor']", "Actor")
    critic_cfg, critic_cls = strip_class_name(cfg.get("critic"), "cfg['critic']", "Critic")
    check_section_kwargs(alg_cfg, actor_cfg, critic_cfg, name="cfg['{}']")
    num_actions = int(env.num_actions)
    policy_dim = layout["policy"][-1]
    actor = actor_cls(policy_dim, num_actions, layout["reference"], **actor_cfg)
    critic_dim = (layout["critic"] or layout["policy"])[-1]
    critic = critic_cls(critic_dim, layout["critic_reference_or_actor"], **critic_cfg)

    amp_cfg = alg_cfg.get("amp_cfg")
    stored = {g: obs[g] for g in groups.stored()}  # example tensors: shapes and dtypes of the env's groups
    if amp_cfg:
        amp_cfg = dict(amp_cfg)
        if layout["amp"] is not None:
            stored["amp"] = obs["amp"]
        if layout["reference"] is None and not amp_cfg.get("expert_sampler") and hasattr(env, "amp_expert_sampler"):
            amp_cfg["expert_sampler"] = env.amp_expert_sampler  # no reference stream: expert pairs from the env
        amp_cfg["_env"] = env  # for extractors that take an env keyword (the GBC seed's convention)
        if "num_features" not in amp_cfg:
            try:
                features = AmpPairExtractor(amp_cfg).features(obs.select(*stored.keys()))
            except KeyError as exc:
                raise ConfigError(
                    f"algorithm.amp_cfg.amp_obs_extractor: expected the observation group it reads, found the env's "
                    f"groups {sorted(obs.keys())} ({exc}); use an env with an amp group (on mjlab: "
                    "MimicRL-Tracking-G1-AMP)"
                ) from None
            amp_cfg["num_features"] = int(features.shape[-1])
        alg_cfg["amp_cfg"] = amp_cfg
    rnd_cfg = alg_cfg.get("rnd_cfg")
    rnd_shape = None
    if rnd_cfg:
        rnd_shape = layout["rnd_state"] or layout["policy"]
        rnd_cfg = dict(rnd_cfg)
        rnd_cfg.setdefault("num_states", rnd_shape[-1])
        alg_cfg["rnd_cfg"] = rnd_cfg
    storage = PolicyRollout(
        "rl",
        int(env.num_envs),
        int(cfg.get("num_steps_per_env", 24)),
        stored,  # the env's groups under their names; the models pick theirs with obs_groups
        (num_actions,),
        dagger_actions=alg_cfg.get("dagger_cfg") is not None,
        rnd_state_shape=rnd_shape,
        device=device,
    )
    extensions = cfg.get("extensions")
    return alg_cls(
        actor,
        critic,
        storage,
        device=device,
        multi_gpu_cfg=cfg.get("multi_gpu"),
        obs_groups=groups,
        extensions=extensions,
        **alg_cfg,
    )


register_builder("MMPPO", build_mmppo)
