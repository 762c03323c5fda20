"""The config of a ``mimic-rl train`` / ``distill`` run from its command line: the YAML (``--task``, its ``base:``
resolved), the ``--set`` overrides, then the other options (``--env``, ``--motion``, ``--robot``, ``--iterations``,
...) over it; every problem is a ``MimicRLError`` naming the flag or key."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from mimic_rl.errors import CheckpointError, ConfigError, UsageError
from mimic_rl.files import check_file

__all__ = ["PACKAGE_ROOT", "resolve_motion", "run_config"]

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def resolve_motion(path: str) -> str:
    """Motion paths relative to the working directory, else to the repository (for the shipped ``motions/``)."""
    p = Path(path)
    if p.exists() or p.is_symlink() or p.is_absolute():
        return str(p)
    shipped = PACKAGE_ROOT / p
    return str(shipped) if shipped.exists() else str(p)


def _distill_source(args: argparse.Namespace) -> dict[str, Any]:
    """The distillation YAML as data, its env laid over the env of the teacher's checkpoint (when it has one)."""
    from mimic_rl.config import read_config_file
    from mimic_rl.serialization import checkpoint_kind, load_checkpoint

    data = read_config_file(args.task, "--task")
    teacher = load_checkpoint(args.teacher, what="--teacher")
    kind = checkpoint_kind(teacher)
    if kind == "unknown":
        raise CheckpointError(
            f"{args.teacher}: --teacher: expected a trained policy (a checkpoint of mimic-rl train, or rsl_rl's with "
            f"actor_state_dict), found keys {sorted(teacher)[:8]}"
        )
    teacher_env = (teacher.get("config") or {}).get("env")
    if teacher_env is not None:
        data["env"] = {**teacher_env, **(data.get("env") or {})}
    data.setdefault("teacher", {})["checkpoint"] = str(Path(args.teacher).resolve())
    return data


def override_env(cfg: Any, overrides: list[str]) -> None:
    """Lay ``--set env.KEY=VALUE`` ``overrides`` over ``cfg.env`` (``mimic-rl eval``: e.g. the deployable sensors'
    noise off); another key is a ``UsageError``."""
    from mimic_rl.config import env_config, to_dict
    from mimic_rl.config_files import apply_overrides, override_for

    others = [text for text in overrides if not text.strip().startswith("env.")]
    if others:
        raise UsageError(f"--set {others[0]}: expected an env.* key here (an evaluation changes only the env)")
    if not overrides:
        return
    try:
        cfg.env = env_config(apply_overrides({"env": to_dict(cfg.env)}, overrides)["env"])
    except ConfigError as exc:
        culprit = override_for(str(exc), overrides)
        raise ConfigError(f"--set {culprit}: {exc}" if culprit else str(exc)) from None


def _env_option(cfg: Any, option: str | None, overrides: list[str] = ()) -> None:
    """``--env mujoco | mjlab:TASK | isaaclab:TASK``: replace the config's env section by that backend's defaults (the
    config's own env section stays when it already names that backend and task) with the ``--set env.*``
    ``overrides`` applied again."""
    from mimic_rl.config import env_config
    from mimic_rl.config_files import apply_overrides, override_for
    from mimic_rl.envs.registry import backend_names, env_config_class

    if option is None:
        return
    name, _, task = option.partition(":")
    takes_task = name in backend_names() and "task" in {f.name for f in dataclasses.fields(env_config_class(name))}
    if name not in backend_names() or takes_task != bool(task):
        raise UsageError(
            f"--env: expected mujoco, mjlab:<task id> or isaaclab:<task id>, found {option!r}; e.g. --env "
            "mjlab:Mjlab-Tracking-Flat-Unitree-G1"
        )
    if cfg.env.backend == name and (not task or cfg.env.task == task):
        return  # the config describes this env already
    data = {"env": {"backend": name, **({"task": task} if task else {}), "seed": cfg.env.seed}}
    env_overrides = [text for text in overrides if text.strip().startswith("env.")]
    try:
        cfg.env = env_config(apply_overrides(data, env_overrides)["env"])
    except ConfigError as exc:
        culprit = override_for(str(exc), env_overrides)
        raise ConfigError(f"--set {culprit}: {exc}" if culprit else str(exc)) from None


def run_config(args: argparse.Namespace) -> Any:
    """The run's config: the YAML (``--task``, its ``base:`` resolved), the ``--set`` overrides, then the other
    command-line options over it."""
    from mimic_rl.config import DistillConfig, load_config
    from mimic_rl.utils import check_device

    overrides = list(getattr(args, "overrides", None) or [])
    if getattr(args, "distill", False):
        cfg = load_config(_distill_source(args), DistillConfig, overrides=overrides)
    else:
        cfg = load_config(args.task, what="--task", overrides=overrides)
    _env_option(cfg, getattr(args, "env", None), overrides)
    _env_overrides(cfg, args)
    if args.iterations is not None:
        cfg.runner.max_iterations = args.iterations
        cfg.runner.time_budget_s = None if args.time_budget is None else cfg.runner.time_budget_s
    if args.time_budget is not None:
        cfg.runner.time_budget_s = args.time_budget if args.time_budget > 0 else None
    if args.device is not None:
        cfg.runner.device = check_device(args.device, "--device")
    if args.seed is not None:
        cfg.runner.seed = cfg.env.seed = args.seed
    if args.logger:
        cfg.runner.logger = args.logger
    if getattr(args, "threads", None) is not None:
        cfg.runner.threads = args.threads
    return cfg


def _env_overrides(cfg: Any, args: argparse.Namespace) -> None:
    """``--motion``, ``--robot``, ``--robot-mjcf``, ``--csv-fps`` and ``--num-envs`` over the config's env."""
    if args.motion:
        cfg.env.motions = list(args.motion)
    cfg.env.motions = [resolve_motion(m) for m in cfg.env.motions]
    overrides = {
        "robot": args.robot,
        "robot_mjcf": args.robot_mjcf,
        "csv_fps": args.csv_fps,
        "num_envs": args.num_envs,
    }
    for key, value in overrides.items():
        if value is None:
            continue
        if not hasattr(cfg.env, key):
            flag = "--" + key.replace("_", "-")
            raise UsageError(
                f"{flag}: applies to the embedded env (--env mujoco), not to {cfg.env.backend}; leave it out"
            )
        setattr(cfg.env, key, value)
    if hasattr(cfg.env, "robot"):
        _check_robot_mjcf(cfg.env.robot, cfg.env.robot_mjcf, given=args.robot_mjcf is not None)
    elif getattr(cfg.env, "robot_mjcf", None) is not None:  # a simulator task made from the robot's MJCF
        check_file(cfg.env.robot_mjcf, "--robot-mjcf", "pass the robot's MJCF (XML) file, e.g. the G1's g1.xml")


def _check_robot_mjcf(robot: Any, mjcf: str | None, given: bool) -> None:
    """The robot's MJCF, checked before the env is built: needed for g1 (a hint with a path that exists), of no use
    for humanoid28 (it has its own model)."""
    import os

    if robot == "g1" and mjcf is None:
        shipped = Path(os.environ.get("MIMIC_RL_DATA", "/nonexistent")) / "robots/unitree_g1/g1.xml"
        where = f"e.g. --robot-mjcf {shipped}" if shipped.is_file() else "--robot-mjcf PATH/TO/g1.xml"
        raise UsageError(
            f"--robot-mjcf: expected the G1's MJCF for --robot g1, found none; pass Unitree's G1 model ({where}), or "
            "set env.robot_mjcf in the config"
        )
    if given and robot == "humanoid28":
        raise UsageError(
            "--robot-mjcf: applies to --robot g1, not to humanoid28 (it has its own model); add --robot g1 or leave "
            "out --robot-mjcf"
        )
    if mjcf is not None:
        check_file(mjcf, "--robot-mjcf", "pass the robot's MJCF (XML) file, e.g. g1.xml of --robot g1")
