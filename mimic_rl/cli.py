"""The ``mimic-rl`` command line: train, distill, play, eval, plot, export and convert.

mimic-rl train [--task tracking_ppo] [--motion FILE_OR_DIR ...] [--robot humanoid28|g1] [--num-envs N]
               [--iterations N] [--time-budget S] [--device cpu] [--resume [CKPT]] [--seed N] [--log-dir DIR]
mimic-rl distill --teacher CKPT [--task distill] [the options of train]
mimic-rl eval --checkpoint CKPT --output eval.json
mimic-rl plot eval.json --output DIR
mimic-rl play --checkpoint CKPT [--video rollout.gif]
mimic-rl export --checkpoint CKPT --output DIR
mimic-rl convert IN [IN ...] --output OUT [--robot g1.xml --csv-fps 60 --fps 50]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def resolve_motion(path: str) -> str:
    """Motion paths relative to the working directory, else to the repository (for the shipped ``motions/``)."""
    p = Path(path)
    if p.exists() or p.is_absolute():
        return str(p)
    shipped = PACKAGE_ROOT / p
    return str(shipped) if shipped.exists() else str(p)


def _distill_source(args: argparse.Namespace) -> dict[str, Any]:
    """The distillation YAML as data, its env laid over the env of the teacher's checkpoint (when it has one)."""
    import yaml

    from mimic_rl.config import CONFIG_DIR
    from mimic_rl.runners.checkpoint import load_checkpoint

    path = Path(args.task)
    if not path.suffix and not path.exists():
        path = CONFIG_DIR / f"{args.task}.yaml"
    if not path.is_file():
        raise SystemExit(f"error: config {args.task!r} not found")
    data = yaml.safe_load(path.read_text()) or {}
    if not Path(args.teacher).is_file():
        raise SystemExit(f"error: teacher checkpoint {args.teacher} does not exist")
    teacher = load_checkpoint(args.teacher)
    teacher_env = (teacher.get("config") or {}).get("env") if isinstance(teacher, dict) else None
    if teacher_env is not None:
        data["env"] = {**teacher_env, **(data.get("env") or {})}
    data.setdefault("teacher", {})["checkpoint"] = str(Path(args.teacher).resolve())
    return data


def _config(args: argparse.Namespace) -> Any:
    from mimic_rl.config import DistillConfig, load_config

    if getattr(args, "teacher", None) is not None:
        cfg = load_config(_distill_source(args), DistillConfig)
    else:
        cfg = load_config(args.task)
    if args.motion:
        cfg.env.motions = list(args.motion)
    cfg.env.motions = [resolve_motion(m) for m in cfg.env.motions]
    if args.robot:
        cfg.env.robot = args.robot
    if args.robot_mjcf:
        cfg.env.robot_mjcf = args.robot_mjcf
    if args.csv_fps:
        cfg.env.csv_fps = args.csv_fps
    if args.num_envs:
        cfg.env.num_envs = args.num_envs
    if args.iterations is not None:
        cfg.runner.max_iterations = args.iterations
        cfg.runner.time_budget_s = None if args.time_budget is None else cfg.runner.time_budget_s
    if args.time_budget is not None:
        cfg.runner.time_budget_s = args.time_budget if args.time_budget > 0 else None
    if args.device:
        cfg.runner.device = args.device
    if args.seed is not None:
        cfg.runner.seed = cfg.env.seed = args.seed
    if args.logger:
        cfg.runner.logger = args.logger
    return cfg


def cmd_train(args: argparse.Namespace) -> int:
    """Train (or distil, with --teacher); then (unless --no-eval) evaluate the final checkpoint and plot."""
    from mimic_rl.runners import DistillationRunner, OnPolicyRunner, latest_checkpoint

    log_dir = Path(args.log_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    resume = None
    if args.resume is not None:
        resume = Path(args.resume) if args.resume != "latest" else latest_checkpoint(log_dir)
        if resume is None or not resume.is_file():
            print(f"error: no checkpoint to resume ({args.resume!r} in {log_dir})", file=sys.stderr)
            return 2
    distill = getattr(args, "teacher", None) is not None
    if resume is not None and args.task in ("tracking_ppo", "distill") and (log_dir / "config.yaml").is_file():
        args.task = str(log_dir / "config.yaml")  # resume with the run's own resolved config
    cfg = _config(args)
    runner = (DistillationRunner if distill else OnPolicyRunner)(cfg, log_dir=log_dir)
    if resume is not None:
        runner.load(resume)
        print(f"resumed from {resume} at iteration {runner.iteration}")
    what = f"distilling {cfg.teacher.checkpoint} into a student" if distill else "training"
    print(f"{what}: {cfg.env.robot} on {cfg.env.motions} with {cfg.env.num_envs} envs; logs in {log_dir}")
    runner.learn()
    runner.close()
    checkpoint = log_dir / f"model_{runner.iteration}.pt"
    print(f"checkpoint: {checkpoint}")
    if not args.no_eval:
        evaluation = _evaluate(checkpoint, args.eval_envs)
        (log_dir / "eval.json").write_text(json.dumps(evaluation, indent=2))
        from mimic_rl.plotting import plot_eval

        written = plot_eval(evaluation, log_dir / "plots", run_dir=log_dir)
        _print_summary(evaluation)
        print(f"eval: {log_dir / 'eval.json'}; plots: {', '.join(str(p) for p in written)}")
        if distill:
            _compare_with_teacher(args, evaluation, log_dir)
    if distill and not args.no_export:
        _export(checkpoint, log_dir / "export", onnx=True)
    return 0


def _compare_with_teacher(args: argparse.Namespace, student: dict[str, Any], log_dir: Path) -> None:
    """Evaluate the teacher the same way (when it is this package's checkpoint) and print both."""
    from mimic_rl.runners.checkpoint import load_checkpoint

    if "config" not in load_checkpoint(args.teacher):
        return
    teacher = _evaluate(args.teacher, args.eval_envs)
    (log_dir / "eval_teacher.json").write_text(json.dumps(teacher, indent=2))
    s, t = student["summary"]["root_mpjpe_mm"], teacher["summary"]["root_mpjpe_mm"]
    print(f"root-relative MPJPE: student {s:.1f} mm, teacher {t:.1f} mm ({100 * (s / t - 1):+.1f}%)")


def _load(checkpoint: str | Path) -> tuple[Any, Any, dict[str, Any]]:
    """(config, deployable policy, checkpoint) of a training or a distillation checkpoint."""
    from mimic_rl.config import DistillConfig, TrainConfig, load_config
    from mimic_rl.models.actor_critic import Actor
    from mimic_rl.runners.checkpoint import load_checkpoint

    state = load_checkpoint(checkpoint)
    student = "student_state_dict" in state  # a distillation checkpoint: its policy is the student
    prefix = "student" if student else "actor"
    if "config" not in state or f"{prefix}_cfg" not in state:
        raise SystemExit(f"error: {checkpoint} is not a mimic_rl training or distillation checkpoint")
    cfg = load_config(state["config"], DistillConfig if student else TrainConfig)
    cfg.env.motions = [resolve_motion(m) for m in cfg.env.motions]
    actor = Actor(**state[f"{prefix}_cfg"])
    actor.load_state_dict(state[f"{prefix}_state_dict"])
    return cfg, actor.eval(), state


def _evaluate(checkpoint: str | Path, num_envs: int, motions: list[str] | None = None) -> dict[str, Any]:
    from mimic_rl.runners.evaluation import evaluate_policy

    cfg, actor, state = _load(checkpoint)
    if motions:
        cfg.env.motions = [resolve_motion(m) for m in motions]
    evaluation = evaluate_policy(actor, cfg, num_envs=num_envs)
    evaluation.update(checkpoint=str(Path(checkpoint).resolve()), iteration=int(state.get("iteration", 0)))
    return evaluation


def _print_summary(evaluation: dict[str, Any]) -> None:
    for clip in evaluation["clips"]:
        print(
            f"  {clip['name']}: MPJPE {clip['mpjpe_mm']:.1f} mm, root-relative {clip['root_mpjpe_mm']:.1f} mm, "
            f"joint error {clip['joint_pos_error']:.3f} rad, success {clip['success_rate']:.2f}, episode length "
            f"{100 * clip['episode_length_fraction']:.0f}% of the clip"
        )


def cmd_eval(args: argparse.Namespace) -> int:
    """Per-clip metrics of a checkpoint, as JSON."""
    evaluation = _evaluate(args.checkpoint, args.num_envs, args.motion)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(evaluation, indent=2))
    _print_summary(evaluation)
    print(f"wrote {out}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """PNGs from an eval JSON (and the training log beside its checkpoint)."""
    from mimic_rl.plotting import plot_eval

    evaluation = json.loads(Path(args.eval_json).read_text())
    run_dir = args.run_dir or (Path(evaluation["checkpoint"]).parent if "checkpoint" in evaluation else None)
    for path in plot_eval(evaluation, args.output, run_dir=run_dir):
        print(f"wrote {path}")
    return 0


def cmd_play(args: argparse.Namespace) -> int:
    """Run a checkpoint, print tracking metrics every second of sim time, optionally write a video."""
    import copy

    from mimic_rl.envs.mujoco import MujocoTrackingEnv

    cfg, actor, _ = _load(args.checkpoint)
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs = args.num_envs
    env_cfg.compile = False  # a short run: compiling the step (a minute or more per env size) would not pay off
    if args.motion:
        env_cfg.motions = [resolve_motion(m) for m in args.motion]
    env = MujocoTrackingEnv(env_cfg)

    def policy(obs: Any) -> torch.Tensor:
        return actor(obs["policy"], obs.get("reference", None), obs.get("reference_mask", None))

    if args.video:
        from mimic_rl.envs.mujoco.render import render_rollout

        print(f"wrote {render_rollout(env, args.video, policy=policy, steps=args.steps, on_dones=actor.reset)}")
    else:
        obs = env.get_observations()
        per_second = max(1, round(1.0 / env.step_dt))
        with torch.inference_mode():
            for step in range(1, args.steps + 1):
                obs, _, dones, _ = env.step(policy(obs))
                actor.reset(dones)  # recurrent policies: a new episode starts from a zero state
                if step % per_second == 0:
                    s = env.metrics.summary()
                    print(
                        f"t={step * env.step_dt:5.1f}s  MPJPE {s['mpjpe_mm']:.1f} mm  root-relative "
                        f"{s['root_mpjpe_mm']:.1f} mm  success {s['success_rate']:.2f} ({s['episodes']:.0f} episodes)"
                    )
                    env.metrics.reset()
    env.close()
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """ONNX + TorchScript + metadata of a checkpoint's deterministic policy (a distilled student's too)."""
    _export(args.checkpoint, args.output, onnx=not args.no_onnx)
    return 0


def _export(checkpoint: str | Path, output: str | Path, onnx: bool) -> None:
    import copy

    from mimic_rl.envs.mujoco import MujocoTrackingEnv
    from mimic_rl.export import export_policy, policy_metadata

    cfg, actor, state = _load(checkpoint)
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs = 1
    env = MujocoTrackingEnv(env_cfg)
    meta = policy_metadata(actor, env, checkpoint=str(checkpoint), iteration=int(state.get("iteration", 0)))
    env.close()
    for kind, path in export_policy(actor, output, meta, onnx=onnx).items():
        print(f"{kind}: {path}")


def cmd_convert(args: argparse.Namespace) -> int:
    """Convert motion files to this package's npz."""
    from mimic_rl.motion import MotionFormatError, RobotKinematics, load_motion, save_motion

    robot = RobotKinematics(args.robot) if args.robot else None
    single = Path(args.output).suffix == ".npz"
    if single and len(args.inputs) > 1:
        print("error: --output is a file but several inputs were given; pass a folder", file=sys.stderr)
        return 2
    for path in args.inputs:
        try:
            clip = load_motion(path, robot=robot, csv_fps=args.csv_fps, fps=args.fps)
        except (MotionFormatError, FileNotFoundError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.loop_mode:
            clip.metadata["loop_mode"] = args.loop_mode
        out = Path(args.output) if single else Path(args.output) / f"{Path(path).stem}.npz"
        save_motion(clip, out)
        print(
            f"{path} -> {out}: {clip.num_frames} frames at {clip.fps:g} fps, {clip.num_joints} joints, "
            f"{clip.num_bodies} bodies ({clip.metadata['format']})"
        )
    return 0


def _add_run_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--motion", nargs="+", help="motion files or folders (default: the config's)")
    cmd.add_argument("--robot", choices=["humanoid28", "g1"])
    cmd.add_argument("--robot-mjcf", help="the robot's MJCF (needed for g1)")
    cmd.add_argument("--csv-fps", type=float, help="frame rate of CSV motions")
    cmd.add_argument("--num-envs", type=int)
    cmd.add_argument("--iterations", type=int, help="iterations to train (overrides the config's time budget)")
    cmd.add_argument("--time-budget", type=float, help="seconds of training (0: no limit)")
    cmd.add_argument("--device")
    cmd.add_argument("--resume", nargs="?", const="latest", help="a checkpoint, or the latest in --log-dir")
    cmd.add_argument("--seed", type=int)
    cmd.add_argument("--log-dir", help="where checkpoints (*.pt), logs and the resolved config go")
    cmd.add_argument("--logger", choices=["tensorboard", "wandb", "none"])
    cmd.add_argument("--no-eval", action="store_true", help="skip the evaluation and plots after training")
    cmd.add_argument("--eval-envs", type=int, default=8)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mimic-rl``."""
    parser = argparse.ArgumentParser(
        prog="mimic-rl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a tracker (then evaluate and plot)")
    distill = sub.add_parser("distill", help="distil a trained tracker into a deployable student (then eval, export)")
    distill.add_argument("--teacher", required=True, help="a training checkpoint (this package's or rsl_rl's)")
    distill.add_argument("--task", default="distill", help="a config in configs/ or a YAML path")
    distill.add_argument("--no-export", action="store_true", help="skip the ONNX/TorchScript export of the student")
    _add_run_options(distill)
    distill.set_defaults(func=cmd_train)
    train.add_argument("--task", default="tracking_ppo", help="a config in configs/ or a YAML path")
    _add_run_options(train)
    train.set_defaults(func=cmd_train)
    ev = sub.add_parser("eval", help="per-clip metrics of a checkpoint as JSON")
    ev.add_argument("--checkpoint", required=True)
    ev.add_argument("--output", required=True)
    ev.add_argument("--motion", nargs="+", help="evaluate on these motions instead of the training ones")
    ev.add_argument("--num-envs", type=int, default=8)
    ev.set_defaults(func=cmd_eval)
    pl = sub.add_parser("plot", help="PNGs from an eval JSON and the training log")
    pl.add_argument("eval_json")
    pl.add_argument("--output", required=True)
    pl.add_argument("--run-dir", help="the run folder with metrics.jsonl (default: the checkpoint's)")
    pl.set_defaults(func=cmd_plot)
    play = sub.add_parser("play", help="run a checkpoint and print tracking metrics (or write a video)")
    play.add_argument("--checkpoint", required=True)
    play.add_argument("--motion", nargs="+")
    play.add_argument("--num-envs", type=int, default=4)
    play.add_argument("--steps", type=int, default=500)
    play.add_argument("--video", help="write a GIF or MP4 of env 0 beside its reference")
    play.set_defaults(func=cmd_play)
    ex = sub.add_parser("export", help="ONNX and TorchScript of a checkpoint's policy, with metadata")
    ex.add_argument("--checkpoint", required=True)
    ex.add_argument("--output", required=True)
    ex.add_argument("--no-onnx", action="store_true")
    ex.set_defaults(func=cmd_export)
    cv = sub.add_parser("convert", help="convert motion files to this package's npz")
    cv.add_argument("inputs", nargs="+")
    cv.add_argument("--output", required=True, help="an .npz file (one input) or a folder")
    cv.add_argument("--robot", help="robot MJCF (for CSV and name-less npz, and to check joint names)")
    cv.add_argument("--csv-fps", type=float)
    cv.add_argument("--fps", type=float, help="resample to this frame rate")
    cv.add_argument("--loop-mode", choices=["clamp", "wrap"])
    cv.set_defaults(func=cmd_convert)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mimic-rl`` console script."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
