"""What each ``mimic-rl`` subcommand does (``mimic_rl.cli`` parses the options and catches the errors).

Every file, folder, checkpoint and device a user names is checked before any work starts, and every problem is a
``MimicRLError`` whose message names the flag: the command line turns it into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

from mimic_rl.errors import CheckpointError, ConfigError, UsageError
from mimic_rl.files import check_file, output_file, output_folder, path_problem
from mimic_rl.run_config import resolve_motion, run_config

__all__ = [
    "cmd_eval",
    "cmd_export",
    "cmd_play",
    "cmd_plot",
    "cmd_train",
    "load_policy",
    "resolve_motion",
]


# ---------------------------------------------------------------------------------------------------- train / distill
def _resume_path(args: argparse.Namespace, log_dir: Path) -> Path | None:
    """The checkpoint to resume from (checked), or None."""
    from mimic_rl.serialization import latest_checkpoint

    if args.resume is None:
        return None
    if args.resume != "latest":
        return check_file(args.resume, "--resume", "pass a model_<N>.pt, or --resume alone for the latest in --log-dir")
    latest = latest_checkpoint(log_dir) if log_dir.is_dir() else None
    if latest is None:
        raise UsageError(
            f"{log_dir}: --resume: expected a model_<N>.pt in the run folder (--log-dir), found none; pass "
            "--resume PATH, or the --log-dir of the run to continue"
        )
    return latest


def _refuse_two_courses(log_dir: Path, resume: Path, iteration: int) -> None:
    """A ``UsageError`` when ``log_dir`` holds checkpoints past the resumed ``iteration``: continuing there would
    interleave two courses of training in one folder (its later ``model_<N>.pt`` files, and ``--resume`` alone
    picking one of them up), so the continuation goes to a new folder."""
    from mimic_rl.serialization import numbered_checkpoints

    later = [path.name for n, path in numbered_checkpoints(log_dir) if n > iteration]
    if later:
        shown = ", ".join(later[:3]) + (f" and {len(later) - 3} more" if len(later) > 3 else "")
        raise UsageError(
            f"{log_dir}: --resume: {resume.name} is iteration {iteration}, and this run folder holds later checkpoints "
            f"({shown}) of the course it would replace; continue into a new folder (--resume {resume} --log-dir NEW), "
            "or move the later checkpoints out of the folder first"
        )


def _run_teacher(log_dir: Path | None) -> str:
    """The teacher of the distillation run in ``log_dir`` (its ``config.yaml``), for a ``--resume`` without
    ``--teacher``; a ``UsageError`` when there is none to continue."""
    import yaml

    config = log_dir / "config.yaml" if log_dir is not None else None
    teacher = None
    if config is not None and config.is_file():
        data = yaml.safe_load(config.read_text()) or {}
        teacher = (data.get("teacher") or {}).get("checkpoint") if isinstance(data, dict) else None
    if not teacher:
        raise UsageError(
            "--teacher: expected a training checkpoint, found none; pass --teacher runs/<run>/model_<N>.pt (a resume "
            "of a distillation run in --log-dir uses the teacher its config.yaml names)"
        )
    return str(teacher)


def _start_run(args: argparse.Namespace) -> tuple[Any, Any, Path]:
    """(config, runner, run folder) of train / distill: the folder chosen (a new one, or a run to resume or
    replace), the config loaded, the runner built and resumed; a start that fails leaves no new folder behind."""
    from mimic_rl.run_dirs import choose_log_dir, discard_if_empty, remove_run
    from mimic_rl.runners import DistillationRunner, OnPolicyRunner

    distill = getattr(args, "distill", False)
    if args.log_dir is not None:
        output_folder(args.log_dir, "--log-dir")
    log_dir, made = choose_log_dir(args.log_dir, Path(args.task).stem, args.resume, args.overwrite)
    try:
        resume = _resume_path(args, log_dir)
        if distill and args.teacher is None:
            args.teacher = _run_teacher(log_dir if resume is not None else None)
        if resume is not None and args.task in ("tracking_ppo", "distill") and (log_dir / "config.yaml").exists():
            args.task = str(log_dir / "config.yaml")  # resume with the run's own resolved config
        cfg = run_config(args)
        if args.eval_envs is not None:  # one number for the evaluations during training and the one after it
            cfg.runner.eval_envs = args.eval_envs
        runner = (DistillationRunner if distill else OnPolicyRunner)(cfg, log_dir=log_dir)
        if resume is not None:
            runner.load(resume, what="--resume")
            _refuse_two_courses(log_dir, resume, runner.iteration)
            print(f"resumed from {resume} at iteration {runner.iteration}")
    except BaseException:
        if made:
            discard_if_empty(log_dir)
        raise
    if made:
        print(f"new run folder: {log_dir} (choose one with --log-dir)")
    if args.overwrite and runner.is_main:
        removed = remove_run(log_dir)
        if removed:
            print(f"--overwrite: removed {len(removed)} files of the previous run in {log_dir}")
    return cfg, runner, log_dir


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or distil); then (unless --no-eval) evaluate the final checkpoint and plot."""
    distill = getattr(args, "distill", False)
    cfg, runner, log_dir = _start_run(args)
    what = f"distilling {cfg.teacher.checkpoint} into a student" if distill else "training"
    subject = getattr(cfg.env, "robot", None) or f"{cfg.env.backend}:{cfg.env.task}"
    clips = f" on {cfg.env.motions}" if cfg.env.motions else ""
    print(f"{what}: {subject}{clips} with {runner.env.num_envs} envs, {runner.threads.describe()}; logs in {log_dir}")
    runner.learn()
    runner.close()
    checkpoint = log_dir / f"model_{runner.iteration}.pt"
    print(f"checkpoint: {checkpoint}")
    best = runner.best_eval
    if best is not None:
        from mimic_rl.runners.checkpoint import BEST_CHECKPOINT

        worst = best.get("worst_clip_success_rate", best["success_rate"])
        lowest = f" (lowest clip {worst:.2f})" if len(cfg.env.motions or ()) > 1 else ""
        print(
            f"best evaluation from the clips' start: iteration {best['iteration']} ({best['total_steps'] / 1e6:.2f} M "
            f"env steps), success {best['success_rate']:.2f}{lowest}, global MPJPE {best['global_mpjpe_mm']:.1f} mm: "
            f"{log_dir / BEST_CHECKPOINT} (evaluate it again with more envs: mimic-rl eval --num-envs 64)"
        )
    if not args.no_eval and not cfg.env.motions:  # a simulator's own task without motion clips (e.g. Isaac-Humanoid)
        print(f"eval: skipped ({subject} has no motion clips to evaluate from their first frame)")
    elif not args.no_eval:
        evaluation = _evaluate(checkpoint, cfg.runner.eval_envs, device=cfg.runner.device, threads=cfg.runner.threads)
        (log_dir / "eval.json").write_text(json.dumps(evaluation, indent=2))
        from mimic_rl.plotting import plot_eval

        written = plot_eval(evaluation, log_dir / "plots", run_dir=log_dir)
        _print_summary(evaluation)
        print(f"eval: {log_dir / 'eval.json'}; plots: {', '.join(str(p) for p in written)}")
        if distill:
            _compare_with_teacher(args, evaluation, log_dir, cfg.runner.eval_envs, cfg.runner.device)
    if distill and not args.no_export:
        _export(checkpoint, log_dir / "export", onnx=True)
    return 0


def _compare_with_teacher(
    args: argparse.Namespace, student: dict[str, Any], log_dir: Path, num_envs: int, device: str
) -> None:
    """Evaluate the teacher the same way (when it is this package's checkpoint) and print both."""
    from mimic_rl.serialization import checkpoint_kind, load_checkpoint

    if checkpoint_kind(load_checkpoint(args.teacher, what="--teacher")) != "train":
        return
    teacher = _evaluate(args.teacher, num_envs, what="--teacher", device=device)
    (log_dir / "eval_teacher.json").write_text(json.dumps(teacher, indent=2))
    s, t = student["summary"]["root_mpjpe_mm"], teacher["summary"]["root_mpjpe_mm"]
    print(f"root-relative MPJPE: student {s:.1f} mm, teacher {t:.1f} mm ({100 * (s / t - 1):+.1f}%)")


# ---------------------------------------------------------------------------------------------------- a trained policy
def load_policy(
    checkpoint: str | Path, what: str = "--checkpoint", device: str = "cpu"
) -> tuple[Any, Any, dict[str, Any]]:
    """(config, deployable policy, checkpoint) of a training or a distillation checkpoint, checked; the policy and the
    config's env on ``device`` (whichever device the checkpoint was trained on)."""
    from mimic_rl.config import DistillConfig, TrainConfig, load_config
    from mimic_rl.models.actor_critic import Actor
    from mimic_rl.runners.compat import check_checkpoint_fits
    from mimic_rl.serialization import checkpoint_kind, load_checkpoint

    state = load_checkpoint(checkpoint, what=what)
    kind = checkpoint_kind(state)
    if kind == "rsl_rl":
        raise CheckpointError(
            f"{checkpoint}: {what}: expected a checkpoint of mimic-rl train or distill, found an rsl_rl checkpoint (no "
            "mimic_rl config); use it as a teacher: mimic-rl distill --teacher " + str(checkpoint)
        )
    if kind == "unknown":
        raise CheckpointError(
            f"{checkpoint}: {what}: expected a checkpoint of mimic-rl train or distill, found a dict with keys "
            f"{sorted(state)[:8]}"
        )
    prefix = "student" if kind == "distill" else "actor"
    try:
        cfg = load_config(state["config"], DistillConfig if kind == "distill" else TrainConfig)
    except ConfigError as exc:
        raise CheckpointError(f"{checkpoint}: {what}: its config does not load in this mimic_rl ({exc})") from None
    cfg.env.motions = [resolve_motion(m) for m in cfg.env.motions]
    cfg.runner.device = cfg.env.device = device
    try:
        actor = Actor(**state[f"{prefix}_cfg"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{checkpoint}: {what}: its {prefix}_cfg does not build a policy ({exc})") from None
    check_checkpoint_fits(state, checkpoint, {prefix: actor}, state["config"], what)
    actor.load_state_dict(state[f"{prefix}_state_dict"])
    return cfg, actor.to(device).eval(), state


def _evaluate(
    checkpoint: str | Path,
    num_envs: int,
    motions: list[str] | None = None,
    what: str = "--checkpoint",
    device: str = "cpu",
    threads: int | None = None,
    overrides: list[str] | None = None,
    action_noise: float = 0.0,
) -> dict[str, Any]:
    from mimic_rl.run_config import override_env
    from mimic_rl.runners.evaluation import evaluate_policy

    cfg, actor, state = load_policy(checkpoint, what, device)
    override_env(cfg, list(overrides or []))
    if threads is not None:
        cfg.runner.threads = threads  # --threads
    if motions:
        cfg.env.motions = [resolve_motion(m) for m in motions]
    evaluation = evaluate_policy(
        actor, cfg, num_envs, source=str(checkpoint), trained_config=state["config"], action_noise=action_noise
    )
    evaluation.update(checkpoint=str(Path(checkpoint).resolve()), iteration=int(state.get("iteration", 0)))
    return evaluation


def _print_summary(evaluation: dict[str, Any]) -> None:
    """One line per clip (evaluated from its first frame) and, for several clips, the mean; the walking task's
    falls, speed and motion quality."""
    from mimic_rl.tasks.tracking.from_start import failure_summary

    rows = evaluation["clips"] + ([{"name": "mean", **evaluation["summary"]}] if len(evaluation["clips"]) > 1 else [])
    if evaluation.get("task") == "amp_walk":
        for row in rows:
            print(
                f"  {row['name']}: no fall in {100 * row['no_fall_rate']:.0f}% of the envs, speed along the command "
                f"{row['speed_along_command_m_s']:.2f} m/s for {row['command_speed_m_s']:.2f} commanded (ratio "
                f"{row['speed_ratio']:.2f}, {100 * row['within_20_percent']:.0f}% of the envs within 20%), velocity "
                f"error {row['velocity_error_m_s']:.2f} m/s\n    motion: {_quality_line(row)}"
            )
        return
    for clip in rows:
        where = failure_summary([clip]) if "failure_times_s" in clip else ""
        print(
            f"  {clip['name']}: success {clip['success_rate']:.2f}, global MPJPE {clip['global_mpjpe_mm']:.1f} mm, "
            f"root-relative MPJPE {clip['root_mpjpe_mm']:.1f} mm, joint error {clip['joint_pos_error']:.3f} rad, "
            f"episode length {100 * clip['episode_length_fraction']:.0f}% of the clip{where}"
        )
        if clip.get("torque_rms_nm") is not None:
            print(f"    motion: {_quality_line(clip)}")


def _quality_line(clip: dict[str, Any]) -> str:
    """The motion-quality metrics of an evaluation entry in words (docs/guide.md, "Metrics and what they mean")."""

    def num(key: str, fmt: str) -> str:
        return "-" if clip.get(key) is None else format(clip[key], fmt)

    return (
        f"foot sliding {num('foot_slide_mm_s', '.0f')} mm/s, joint jerk {num('joint_jerk', '.0f')} rad/s^3, "
        f"torque RMS {num('torque_rms_nm', '.1f')} N m, power {num('power_w', '.0f')} W, ground penetration "
        f"{num('penetration_mm', '.1f')} mm (max {num('penetration_max_mm', '.1f')})"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    """Per-clip metrics of a checkpoint, as JSON."""
    from mimic_rl.utils import check_device

    out = output_file(args.output, "--output")
    device = check_device(args.device, "--device")
    evaluation = _evaluate(
        args.checkpoint,
        args.num_envs,
        args.motion,
        device=device,
        threads=args.threads,
        overrides=args.overrides,
        action_noise=args.action_noise,
    )
    if args.action_noise:
        print(f"actions sampled with {args.action_noise:g} x the policy's std, not the deployable mean")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(evaluation, indent=2))
    _print_summary(evaluation)
    print(f"wrote {out}")
    return 0


def read_eval_json(path: str | Path) -> dict[str, Any]:
    """An evaluation written by ``mimic-rl eval`` (or train), checked enough to plot."""
    check_file(path, "eval JSON", "pass the eval.json that mimic-rl eval or train wrote")
    fix = "re-run mimic-rl eval --checkpoint CKPT --output eval.json"
    try:
        evaluation = json.loads(Path(path).read_text())
    except UnicodeDecodeError:
        raise UsageError(f"{path}: eval JSON: expected text (JSON), found binary data; {fix}") from None
    except json.JSONDecodeError as exc:
        found = f"{exc.msg} at line {exc.lineno}"
        raise UsageError(f"{path}: eval JSON: expected valid JSON, found {found}; {fix}") from None
    clips = evaluation.get("clips") if isinstance(evaluation, dict) else None
    needed = ("name", "per_body_mpjpe_mm", "over_time", "success_rate", "global_mpjpe_mm", "root_mpjpe_mm")
    needed += ("num_envs", "duration_s")
    if not isinstance(clips, list) or not clips or not all(isinstance(c, dict) for c in clips):
        raise UsageError(f"{path}: clips: expected a list of evaluated clips, found {type(clips).__name__}; {fix}")
    missing = sorted({k for c in clips for k in needed if k not in c})
    if missing:
        raise UsageError(f"{path}: clips: expected the keys {list(needed)} in every clip, missing {missing}; {fix}")
    series = ("time_s", "global_mpjpe_mm", "root_mpjpe_mm", "alive")
    missing = sorted(
        {k for c in clips for k in series if not isinstance(c["over_time"], dict) or k not in c["over_time"]}
    )
    if missing:
        raise UsageError(f"{path}: over_time: expected the series {list(series)}, missing {missing}; {fix}")
    return evaluation


def cmd_plot(args: argparse.Namespace) -> int:
    """PNGs from an eval JSON (and the training log beside its checkpoint)."""
    from mimic_rl.plotting import plot_eval

    evaluation = read_eval_json(args.eval_json)
    out = output_folder(args.output, "--output")
    run_dir = args.run_dir or (Path(evaluation["checkpoint"]).parent if "checkpoint" in evaluation else None)
    if args.run_dir is not None and path_problem(args.run_dir, "folder") is not None:
        raise UsageError(f"{args.run_dir}: --run-dir: expected a run folder, found {path_problem(args.run_dir)}")
    for path in plot_eval(evaluation, out, run_dir=run_dir):
        print(f"wrote {path}")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """Run a checkpoint, print tracking metrics every second of sim time, optionally write a video."""
    from mimic_rl.envs.registry import has_play_env, make_play_env, render_rollout
    from mimic_rl.runners.compat import check_policy_fits_env
    from mimic_rl.runners.threads import apply_threads, resolve_threads
    from mimic_rl.utils import check_device

    if args.video and Path(args.video).suffix.lower() not in (".gif", ".mp4"):
        raise UsageError(f"{args.video}: --video: expected a .gif or .mp4 file name, found {Path(args.video).suffix!r}")
    video = output_file(args.video, "--video") if args.video else None
    device = check_device(args.device, "--device")
    cfg, actor, state = load_policy(args.checkpoint, device=device)
    if args.threads is not None:
        cfg.runner.threads = args.threads  # --threads
    apply_threads(resolve_threads(cfg.runner.threads))
    if not has_play_env(cfg.env.backend):
        raise UsageError(
            f"{args.checkpoint}: play runs the embedded env, and this policy was trained on {cfg.env.backend}; use "
            f"mimic-rl eval for its metrics, or the simulator's own viewer"
        )
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs = args.num_envs
    if args.motion:
        env_cfg.motions = [resolve_motion(m) for m in args.motion]
    env = make_play_env(env_cfg)
    check_policy_fits_env(actor, env, args.checkpoint, state["config"])

    from mimic_rl.runners.evaluation import ActorPolicy

    policy = ActorPolicy(actor, cfg.obs_groups)  # the groups it was trained on (the walking task: policy, command)
    if video is not None:
        path = render_rollout(env_cfg, env, video, policy=policy, steps=args.steps, on_dones=actor.reset)
        print(f"wrote {path}")
    else:
        _print_play(env, actor, policy, args.steps)
    env.close()
    return 0


def _print_play(env: Any, actor: Any, policy: Any, steps: int) -> None:
    import torch

    obs = env.get_observations()
    per_second = max(1, round(1.0 / env.step_dt))
    with torch.inference_mode():
        for step in range(1, steps + 1):
            obs, _, dones, _ = env.step(policy(obs))
            actor.reset(dones)  # recurrent policies: a new episode starts from a zero state
            if step % per_second == 0:
                s = env.metrics.summary()
                if "speed_along_command" in s:  # the walking task
                    what = f"speed {s['speed_along_command']:.2f} m/s for {s['command_speed']:.2f} commanded  no fall"
                else:
                    what = f"global MPJPE {s['global_mpjpe_mm']:.1f} mm  root-relative {s['root_mpjpe_mm']:.1f} mm"
                    what += "  success"
                ended = "- (no episode ended)"
                if s["episodes"]:
                    ended = f"{s['success_rate']:.2f} ({s['episodes']:.0f} episodes)"
                print(f"t={step * env.step_dt:5.1f}s  {what} {ended}")
                env.metrics.reset()


def cmd_export(args: argparse.Namespace) -> int:
    """ONNX + TorchScript + metadata of a checkpoint's deterministic policy (a distilled student's too)."""
    output = output_folder(args.output, "--output")
    _export(args.checkpoint, output, onnx=not args.no_onnx, bake=args.bake_motion)
    return 0


def _export(checkpoint: str | Path, output: str | Path, onnx: bool, bake: bool = False) -> None:
    """Export ``checkpoint``'s policy into the folder ``output``, all at once (a failure leaves it as it was)."""
    from mimic_rl.envs.registry import has_play_env, make_play_env
    from mimic_rl.export import check_onnx_export, export_policy, policy_metadata
    from mimic_rl.runners.compat import check_policy_fits_env

    if onnx:
        check_onnx_export()  # before any work: a missing onnx is one line, not a traceback after the TorchScript
    cfg, actor, state = load_policy(checkpoint)
    facts = {"checkpoint": str(checkpoint), "iteration": int(state.get("iteration", 0))}
    extra: dict[str, Any] = {}
    if not has_play_env(cfg.env.backend):  # no env is built: the policy's inputs are the config's observation groups
        groups = state.get("obs_groups") or cfg.obs_groups
        meta = policy_metadata(actor, simulator=f"{cfg.env.backend}:{cfg.env.task}", obs_groups=groups, **facts)
    else:
        env_cfg = copy.deepcopy(cfg.env)
        env_cfg.num_envs = 1
        env = make_play_env(env_cfg)
        try:
            check_policy_fits_env(actor, env, checkpoint, state["config"])
            meta = policy_metadata(actor, env, **facts)
            extra = _deploy_files(actor, env, cfg, meta, bake)
        finally:
            env.close()
    if bake and not extra:
        raise UsageError(f"--bake-motion: expected a policy of the embedded MuJoCo env, found {cfg.env.backend}")
    paths = export_policy(actor, output, meta, onnx=onnx, extra_files=extra)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    skipped = json.loads(paths["metadata"].read_text())["check"].get("skipped", [])
    for what in skipped:
        print(f"note: not checked: {what}")


def _deploy_files(actor: Any, env: Any, cfg: Any, meta: dict[str, Any], bake: bool) -> dict[str, Any]:
    """The embedded env's deployment contract (into ``meta``) and the writers of its files: ``robot.mjb`` and, with
    ``bake``, ``reference.npz`` and (a policy reading ``deploy_reference``) ``policy_baked.onnx``; {} for another
    backend's env."""
    if not hasattr(env, "model") or not hasattr(env, "reference_at"):
        return {}
    from mimic_rl.envs.registry import make_play_env
    from mimic_rl.export.contract import bake_reference, deploy_contract, noise_free, observation_layout
    from mimic_rl.models.obs_groups import ObsGroups

    groups = ObsGroups.resolve(cfg.obs_groups, env.get_observations()).to_dict()
    meta["obs_groups"] = groups
    meta["deploy"] = deploy_contract(env, groups)
    meta["observation_layout"] = observation_layout(meta["deploy"], meta["observation_layout"], len(env.joint_names))
    files: dict[str, Any] = {"robot.mjb": env.model}
    if bake:
        if groups.get("actor_reference") is None:
            raise UsageError("--bake-motion: expected a policy that reads a reference command, found one without")
        baking = make_play_env(noise_free(env.cfg))
        try:
            files["reference.npz"] = bake_reference(baking)
        finally:
            baking.close()
        if groups["actor_reference"] == "deploy_reference":  # the graph computes the reference from an IMU's reading
            files["policy_baked.onnx"] = (actor, files["reference.npz"])
    return files
