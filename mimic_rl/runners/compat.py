"""Does a checkpoint fit this run? Say which part, tensor and dimensions differ and what the checkpoint was trained
with, before any ``load_state_dict`` fails with a tensor-size error.

``check_checkpoint_fits`` compares the models (actor, critic, student) and their layouts; ``check_state_fits`` compares
every part of the algorithm's ``save()`` (models, optimizer, extensions such as ``amp`` or ``rnd``) with what the
checkpoint holds, by key and tensor shape; ``carry_fits`` whether the rollout's carried row can be restored.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mimic_rl.config import CONFIG_DIR, TrainConfig, load_config, to_dict
from mimic_rl.errors import CheckpointError, ConfigError

__all__ = [
    "carry_fits",
    "check_checkpoint_fits",
    "check_policy_fits_env",
    "check_state_fits",
    "describe_layout",
    "structure_mismatches",
    "trained_on",
    "trained_with",
]

MATCHED_SECTIONS = ("algorithm", "actor", "critic", "obs_groups")
"""The config sections that tell which built-in ``--task`` a run was trained with."""


def describe_layout(cfg: Mapping[str, Any] | None) -> str:
    """``observations 93, reference 5x65, 28 actions`` from a model's ``config`` (``Actor.config`` and friends)."""
    if not cfg:
        return "an unknown layout"
    parts = [f"observations {cfg.get('obs_dim')}"]
    if cfg.get("ref_shape"):
        parts.append("reference " + "x".join(str(int(s)) for s in cfg["ref_shape"]))
    if cfg.get("num_actions") is not None:
        parts.append(f"{cfg['num_actions']} actions")
    return ", ".join(parts)


def trained_on(config: Mapping[str, Any] | None) -> str:
    """``robot humanoid28 on humanoid_walk.npz`` from a checkpoint's (or run's) resolved config dict."""
    env = (config or {}).get("env") or {}
    motions = [Path(str(m)).name for m in env.get("motions") or []]
    shown = ", ".join(motions[:3]) + (f" and {len(motions) - 3} more" if len(motions) > 3 else "")
    return f"robot {env.get('robot', '?')}" + (f" on {shown}" if shown else "")


def builtin_task(config: Mapping[str, Any] | None) -> str | None:
    """The built-in config (``configs/<name>.yaml``) whose algorithm, model and observation-group sections ``config``
    (a resolved config dict) has; None when none matches."""
    if not config:
        return None
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        try:
            builtin = to_dict(load_config(path.stem, TrainConfig))
        except (ConfigError, OSError):
            continue  # a built-in of another kind (distillation)
        if all(builtin.get(k) == config.get(k) for k in MATCHED_SECTIONS):
            return path.stem
    return None


def trained_with(state: Mapping[str, Any], path: str | Path, run_config: Mapping[str, Any] | None) -> str:
    """The likely cause and the fix of a mismatch: the ``--task`` the checkpoint was trained with (its run's
    ``config.yaml`` beside it, or the built-in config it matches) against this run's."""
    saved_yaml = Path(path).parent / "config.yaml"
    theirs, ours = builtin_task(state.get("config")), builtin_task(run_config)
    source = str(saved_yaml) if saved_yaml.is_file() else theirs
    cause = "it was trained with another task or config"
    if theirs is not None and theirs != ours:
        cause = f"it was trained with --task {theirs}" + (f", this run is --task {ours}" if ours else "")
    fix = f"pass --task {source} to continue it" if source else "pass the config it was trained with as --task"
    return f"{cause}; {fix}, or start a new --log-dir without --resume"


def _shape(value: Any) -> str:
    return "(" + ", ".join(str(int(n)) for n in value.shape) + ")"


def _holds_tensors(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, Mapping):
        return any(_holds_tensors(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_tensors(v) for v in value)
    return False


def structure_mismatches(saved: Any, expected: Any, where: str) -> list[str]:
    """How ``saved`` (from a checkpoint) differs from ``expected`` (this run's) in keys and tensor shapes, at any depth:
    ``where.key: checkpoint (256, 112), this config (256, 100)``, ``where.key: missing in the checkpoint``, ``where.key:
    not in this config``, and lists of another length (``params``: an optimizer's parameters). Other values (numbers,
    settings) are not compared."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(saved, torch.Tensor):
            return [f"{where}: checkpoint {type(saved).__name__}, this config a tensor {_shape(expected)}"]
        return (
            []
            if saved.shape == expected.shape
            else [f"{where}: checkpoint {_shape(saved)}, this config {_shape(expected)}"]
        )
    if isinstance(expected, Mapping) and isinstance(saved, Mapping) and _is_optimizer_state(expected):
        # An optimizer's per-parameter state (Adam's moments) appears at its first step: a fresh run has none, so
        # compare the parameter groups, and the state only where both have it.
        both = {k: v for k, v in expected["state"].items() if k in saved["state"]}
        out = structure_mismatches(saved["param_groups"], expected["param_groups"], f"{where}.param_groups")
        return out + structure_mismatches({k: saved["state"][k] for k in both}, both, f"{where}.state")
    if isinstance(expected, Mapping):
        if not isinstance(saved, Mapping):
            return (
                [f"{where}: checkpoint {type(saved).__name__}, this config a mapping"]
                if _holds_tensors(expected)
                else []
            )
        out = [
            f"{where}.{k}: missing in the checkpoint"
            for k, v in expected.items()
            if k not in saved and _holds_tensors(v)
        ]
        out += [f"{where}.{k}: not in this config" for k, v in saved.items() if k not in expected and _holds_tensors(v)]
        for k, v in expected.items():
            if k in saved:
                out += structure_mismatches(saved[k], v, f"{where}.{k}")
        return out
    if isinstance(expected, list | tuple) and isinstance(saved, list | tuple):
        if len(saved) != len(expected) and (where.endswith("params") or _holds_tensors(expected)):
            return [f"{where}: checkpoint {len(saved)} entries, this config {len(expected)}"]
        if len(saved) == len(expected):
            return [
                m for i, (a, b) in enumerate(zip(saved, expected)) for m in structure_mismatches(a, b, f"{where}[{i}]")
            ]
    return []


def _is_optimizer_state(value: Mapping[str, Any]) -> bool:
    """Whether ``value`` is a ``torch.optim.Optimizer.state_dict()``."""
    return set(value) == {"state", "param_groups"}


def _part(key: str) -> str:
    """``amp_state_dict`` -> ``amp``, ``optimizer_state_dict`` -> ``optimizer``."""
    return key.removesuffix("_state_dict")


def check_state_fits(
    state: Mapping[str, Any],
    path: str | Path,
    expected: Mapping[str, Any],
    run_config: Mapping[str, Any],
    what: str = "--resume",
    skip: tuple[str, ...] = (),
) -> None:
    """Raise ``CheckpointError`` unless every part of ``expected`` (the algorithm's ``save()`` for this config: models,
    optimizer, extensions) has the keys and tensor shapes of the checkpoint's, and the checkpoint holds no part this
    config lacks; ``skip`` names parts not loaded (``optimizer``). The message names the part, the tensor, both
    shapes, the likely cause and the fix."""
    problems: dict[str, list[str]] = {}
    for key, value in expected.items():
        if _part(key) in skip or not _holds_tensors(value):
            continue
        name = _part(key)
        found = (
            structure_mismatches(state[key], value, name) if key in state else [f"{name}: missing in the checkpoint"]
        )
        if found:
            problems.setdefault(name, found)
    for key, value in state.items():
        if key.endswith("_state_dict") and key not in expected and _part(key) not in skip and _holds_tensors(value):
            problems.setdefault(_part(key), [f"{_part(key)}: in the checkpoint, not in this config"])
    if not problems:
        return
    part, found = next(iter(problems.items()))
    more = sum(len(v) for v in problems.values()) - 1
    others = [p for p in problems if p != part]
    extra = f"; {more} more difference(s)" + (f", also in {', '.join(others)}" if others else "") if more else ""
    if found[0] == f"{part}: missing in the checkpoint":
        found_what = f"one without the {part} part this config trains"
    elif found[0] == f"{part}: in the checkpoint, not in this config":
        found_what = f"one with an {part} part this config does not have"
    else:
        found_what = f"one whose {part} does not fit ({found[0]})"
    raise CheckpointError(
        f"{path}: {what}: expected a checkpoint of this run's config, found {found_what}{extra}; "
        f"{trained_with(state, path, run_config)}"
    )


def carry_fits(saved: Any, expected: Mapping[str, Any] | None) -> bool:
    """Whether a checkpoint's rollout carry row (``storage_carry``) has the layout of this run's (the same stores and
    widths); a checkpoint or an algorithm without one fits."""
    return saved is None or expected is None or not structure_mismatches(saved, expected, "storage")


def _mismatches(module: nn.Module, saved: Mapping[str, Any]) -> list[str]:
    own = module.state_dict()
    out = [f"{k}: missing in the checkpoint" for k in own if k not in saved]
    out += [f"{k}: not in this config" for k in saved if k not in own]
    out += [
        f"{k}: checkpoint {tuple(saved[k].shape)}, this config {tuple(v.shape)}"
        for k, v in own.items()
        if k in saved and hasattr(saved[k], "shape") and tuple(saved[k].shape) != tuple(v.shape)
    ]
    return out


def check_checkpoint_fits(
    state: Mapping[str, Any],
    path: str | Path,
    models: Mapping[str, nn.Module],
    run_config: Mapping[str, Any],
    what: str = "--resume",
) -> None:
    """Raise ``CheckpointError`` unless every ``models[name]`` (``"actor"``, ``"critic"``, ``"student"``) can load
    ``state[f"{name}_state_dict"]``; the message compares the layouts and what each was trained on."""
    for name, module in models.items():
        saved = state.get(f"{name}_state_dict")
        if saved is None:
            raise CheckpointError(
                f"{path}: {what}: expected a checkpoint with {name}_state_dict (this kind of run's), found keys "
                f"{sorted(state)[:8]}; pass a checkpoint of a {'distill' if name == 'student' else 'train'} run"
            )
        problems = _mismatches(module, saved)
        if not problems:
            continue
        theirs = describe_layout(state.get(f"{name}_cfg"))
        ours = describe_layout(getattr(module, "config", None))
        fix = (
            trained_with(state, path, run_config)
            if what == "--resume"
            else "use the config it was trained with (the config.yaml beside it)"
        )
        if theirs != ours:
            raise CheckpointError(
                f"{path}: {what}: expected a checkpoint of this run's task, found one whose {name} was trained on "
                f"{trained_on(state.get('config'))} ({theirs}); this run has {trained_on(run_config)} ({ours}); "
                f"{name}.{problems[0]}; {fix}"
            )
        raise CheckpointError(
            f"{path}: {what}: expected the {name} network of this run's config, found another architecture "
            f"({'; '.join(f'{name}.{p}' for p in problems[:3])}); {fix}"
        )


def check_policy_fits_env(
    actor: nn.Module, env: Any, path: str | Path, trained_config: Mapping[str, Any], what: str = "--checkpoint"
) -> None:
    """Raise ``CheckpointError`` unless ``actor`` reads ``env``'s observations and acts with its number of actions (an
    evaluation on motions of another robot, say); ``trained_config`` is the checkpoint's config dict."""
    from mimic_rl.models.obs_groups import ObsGroups

    obs = env.get_observations()
    mine = dict(getattr(actor, "config", None) or {})
    ref = mine.get("ref_shape")
    theirs = {
        "obs_dim": mine.get("obs_dim"),
        "ref_shape": list(ref) if ref else None,
        "num_actions": mine.get("num_actions"),
    }
    try:  # the groups it was trained on (a deployable student reads deploy_policy and deploy_reference)
        groups = ObsGroups.resolve(trained_config.get("obs_groups"), obs)
    except ValueError as exc:
        raise CheckpointError(
            f"{path}: {what}: expected a policy for this env, found one trained on {trained_on(trained_config)} "
            f"that reads groups this env lacks ({exc}); evaluate it with the env it was trained in"
        ) from None
    reference = groups.actor_reference
    here = {
        "obs_dim": int(groups.actor_obs(obs).shape[-1]),
        "ref_shape": list(obs[reference].shape[1:]) if ref and reference else None,
        "num_actions": int(env.num_actions),
    }
    if theirs != here:
        raise CheckpointError(
            f"{path}: {what}: expected a policy for this env, found one trained on {trained_on(trained_config)} "
            f"({describe_layout(theirs)}); this env gives {describe_layout(here)}; use motions of the robot it was "
            "trained for"
        )
