"""Does a checkpoint fit this run? Say which dimensions differ and what the checkpoint was trained on, before any
``load_state_dict`` fails with a tensor-size error."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from mimic_rl.errors import CheckpointError

__all__ = ["check_checkpoint_fits", "check_policy_fits_env", "describe_layout", "trained_on"]


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


def _mismatches(module: nn.Module, saved: Mapping[str, Any]) -> list[str]:
    own = module.state_dict()
    out = [f"{k} missing" for k in own if k not in saved]
    out += [f"{k} unexpected" for k in saved if k not in own]
    out += [
        f"{k}: checkpoint {tuple(saved[k].shape)}, this run {tuple(v.shape)}"
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
        if theirs != ours:
            raise CheckpointError(
                f"{path}: {what}: expected a checkpoint of this run's task, found one whose {name} was trained on "
                f"{trained_on(state.get('config'))} ({theirs}); this run has {trained_on(run_config)} ({ours}); use "
                "the config it was trained with (the config.yaml beside it), or start a new --log-dir"
            )
        raise CheckpointError(
            f"{path}: {what}: expected the {name} network of this run's config, found another architecture "
            f"({'; '.join(problems[:3])}); use the config it was trained with (the config.yaml beside it)"
        )


def check_policy_fits_env(
    actor: nn.Module, env: Any, path: str | Path, trained_config: Mapping[str, Any], what: str = "--checkpoint"
) -> None:
    """Raise ``CheckpointError`` unless ``actor`` reads ``env``'s observations and acts with its number of actions (an
    evaluation on motions of another robot, say); ``trained_config`` is the checkpoint's config dict."""
    obs = env.get_observations()
    mine = dict(getattr(actor, "config", None) or {})
    ref = mine.get("ref_shape")
    theirs = {
        "obs_dim": mine.get("obs_dim"),
        "ref_shape": list(ref) if ref else None,
        "num_actions": mine.get("num_actions"),
    }
    here = {
        "obs_dim": int(obs["policy"].shape[-1]),
        "ref_shape": list(obs["reference"].shape[1:]) if ref and "reference" in obs.keys() else None,
        "num_actions": int(env.num_actions),
    }
    if theirs != here:
        raise CheckpointError(
            f"{path}: {what}: expected a policy for this env, found one trained on {trained_on(trained_config)} "
            f"({describe_layout(theirs)}); this env gives {describe_layout(here)}; use motions of the robot it was "
            "trained for"
        )
