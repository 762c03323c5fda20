"""The ``mimic-rl`` command line: train, distill, play, eval, plot, export and convert.

mimic-rl train [--task tracking_ppo|my.yaml] [--set KEY.PATH=VALUE ...] [--env mujoco|mjlab:TASK|isaaclab:TASK]
               [--motion FILE_OR_DIR ...] [--robot humanoid28|g1] [--num-envs N] [--iterations N] [--time-budget S]
               [--device cpu] [--resume [CKPT] | --overwrite] [--seed N] [--log-dir DIR] [--threads N]
mimic-rl distill --teacher CKPT [--task distill] [the options of train]   (--resume --log-dir RUN: its own teacher)
mimic-rl eval --checkpoint CKPT --output eval.json [--threads N]
mimic-rl plot eval.json --output DIR
mimic-rl play --checkpoint CKPT [--video rollout.gif] [--threads N]
mimic-rl export --checkpoint CKPT --output DIR
mimic-rl convert IN [IN ...] --output OUT [--robot g1.xml --csv-fps 60 --fps 50]

Errors a user can fix (a bad file, key, option or checkpoint) print one line, ``error: <what>: <expected, found>;
<fix>``, and exit with code 2; ``--debug`` (or ``MIMIC_RL_DEBUG=1``) shows the traceback instead.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import re
import select
import signal
import sys
import threading
import warnings
from typing import Any

from mimic_rl.commands import (
    cmd_eval,
    cmd_export,
    cmd_play,
    cmd_plot,
    cmd_train,
    resolve_motion,
)
from mimic_rl.convert_command import BUILT_IN, cmd_convert
from mimic_rl.errors import MimicRLError, Terminated
from mimic_rl.utils import FPS_RANGE

__all__ = ["build_parser", "main", "resolve_motion"]

USER_OS_ERRORS = (errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.EACCES, errno.EEXIST, errno.ELOOP, errno.ENOSPC)
"""OS errors about the user's paths or disk (not bugs): shown as one line too."""


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (``error: --FLAG: problem; see 'mimic-rl train --help'``)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = re.sub(r"^argument ([^:]+): ", r"\1: ", message)
        required = re.match(r"the following arguments are required: (.*)", message)
        if required:
            message = f"{required.group(1)}: expected a value, found none (required)"
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown:
            message = f"{unknown.group(1)}: unrecognized option(s)"
        self.exit(2, f"error: {message}; see '{self.prog} --help'\n")


def _whole(low: int, high: int | None = None):
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        what = f"a whole number >= {low}" if high is None else f"a whole number between {low} and {high}"
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, found {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}, found {value}")
        return value

    return parse


def _number(low: float, high: float | None = None, what: str = ""):
    """An argparse type: a finite number in [low, high]."""

    def parse(text: str) -> float:
        expected = what or (f"a number >= {low:g}" if high is None else f"a number between {low:g} and {high:g}")
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, found {text!r}") from None
        if not math.isfinite(value) or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {expected}, found {text}")
        return value

    return parse


_FPS = _number(*FPS_RANGE, what=f"a frame rate between {FPS_RANGE[0]:g} and {FPS_RANGE[1]:g} fps")


THREADS_HELP = (
    "torch and MuJoCo threads for this process (default: OMP_NUM_THREADS when set, else the CPUs this process may "
    "use; waiting threads sleep, so a shared machine stays usable)"
)

EPILOGS = {
    "train": """example:
  mimic-rl train --iterations 50 --set algorithm.learning_rate=3e-4 --log-dir runs/first

outputs (in --log-dir; default: a new runs/<task>-<YYYYmmdd-HHMMSS>, printed at the start):
  config.yaml          the resolved config (base: and --set applied)
  model_<N>.pt         checkpoints (continue with --resume)
  metrics.jsonl        one line of scalars per iteration; TensorBoard events beside it (--logger)
  evals.jsonl          each clip's evaluation from its start every runner.eval_interval iterations
  eval.json, plots/    the evaluation of the last checkpoint (unless --no-eval)
A --log-dir that holds a run already is refused: pass --resume to continue it, --overwrite to replace it.""",
    "distill": """example:
  mimic-rl distill --teacher runs/first/model_300.pt --iterations 100 --log-dir runs/student
  mimic-rl distill --resume --log-dir runs/student --iterations 100   # 100 more, with the run's teacher and config

outputs (in --log-dir; default: a new runs/<task>-<YYYYmmdd-HHMMSS>, printed at the start):
  config.yaml, model_<N>.pt, metrics.jsonl   as for train
  eval.json, eval_teacher.json, plots/       the student's evaluation beside the teacher's (unless --no-eval)
  export/                                    policy.onnx, policy.pt and policy.json (unless --no-export)""",
    "eval": """example:
  mimic-rl eval --checkpoint runs/first/model_300.pt --output runs/first/eval.json

output: the JSON file --output (per-clip success, MPJPE, errors over time, when and why episodes terminated);
draw it with mimic-rl plot.""",
    "plot": """example:
  mimic-rl plot runs/first/eval.json --output runs/first/plots

outputs: PNGs in --output (per-body error, error over time, success per clip, training curves).""",
    "play": """example:
  mimic-rl play --checkpoint runs/first/model_300.pt --video rollout.gif

output: tracking metrics printed every second of simulated time, or the --video file.""",
    "export": """example:
  mimic-rl export --checkpoint runs/first/model_300.pt --output runs/first/export

outputs in --output, all or nothing: policy.onnx (unless --no-onnx), policy.pt (TorchScript), policy.json (the
deployment contract: observation terms in order with sizes, units, noise and latency; joints, action scale and offset,
PD gains, control rate), README.md and, for the embedded env, robot.mjb (the MuJoCo model with its sensors); with
--bake-motion reference.npz and policy_baked.onnx. Run it without torch: python tools/sim2sim.py DIR.""",
    "convert": """example:
  mimic-rl convert B_HandsUp.csv --robot g1.xml --csv-fps 60 --fps 50 --output hands_up.npz
  mimic-rl convert humanoid_run.npz --robot humanoid28 --pin-feet --output run_pinned.npz

output: --output (one .npz), or one <name>.npz per input in the folder --output.""",
}
"""Each subcommand's example and where its outputs go (the end of its --help)."""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; each option's default appended to its help (unless it says it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required:
            return f"{text} (required)"
        if "default" in text or not action.option_strings or action.default in (None, argparse.SUPPRESS):
            return text
        if action.default is False:
            return f"{text} (default: off)"
        return f"{text} (default: %(default)s)"


def _add_config_options(cmd: argparse.ArgumentParser) -> None:
    """train / distill: the options that change the config (``--set``) and its env."""
    cmd.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="KEY.PATH=VALUE",
        help="override one config key, the value read as YAML (repeatable; applied after the YAML and its base:), "
        "e.g. --set algorithm.learning_rate=3e-4 --set 'actor.hidden_dims=[256,128]' (default: none)",
    )
    cmd.add_argument(
        "--env",
        help="the simulator: mujoco (the embedded env), mjlab:<task id> or isaaclab:<task id> (default: the "
        "config's env.backend, mujoco)",
    )
    cmd.add_argument("--motion", nargs="+", help="motion files or folders (default: the config's env.motions)")
    cmd.add_argument("--robot", choices=["humanoid28", "g1"], help="the robot (default: the config's env.robot)")
    cmd.add_argument(
        "--robot-mjcf",
        metavar="XML",
        help="the robot's MJCF, needed for --robot g1; isaaclab:MimicRL-Tracking-G1 makes its USD from it (default: "
        "the config's)",
    )
    cmd.add_argument("--csv-fps", type=_FPS, help="frame rate of CSV motions (default: the config's env.csv_fps)")
    cmd.add_argument(
        "--num-envs", type=_whole(1), metavar="N", help="parallel envs (default: the config's env.num_envs)"
    )


def _add_run_options(cmd: argparse.ArgumentParser) -> None:
    """train / distill: the config's options, then how long, where and how to run."""
    _add_config_options(cmd)
    cmd.add_argument(
        "--iterations",
        type=_whole(1),
        metavar="N",
        help="iterations to train; overrides the config's time budget (default: the config's runner.max_iterations)",
    )
    cmd.add_argument(
        "--time-budget",
        type=_number(0),
        metavar="SECONDS",
        help="seconds of training, 0: no limit (default: runner.time_budget_s)",
    )
    cmd.add_argument("--device", help="cpu, cuda or cuda:N (default: the config's runner.device)")
    cmd.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        metavar="CKPT",
        help="continue from a checkpoint; alone: the latest in --log-dir (without --log-dir: the latest "
        "runs/<task>-* run) (default: a new run)",
    )
    cmd.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in --log-dir: its checkpoints, config, logs, eval and plots are deleted first "
        "(other files stay)",
    )
    cmd.add_argument(
        "--seed", type=_whole(0, 2**32 - 1), metavar="N", help="random seed (default: the config's runner.seed)"
    )
    cmd.add_argument(
        "--log-dir",
        metavar="DIR",
        help="the run folder: checkpoints (*.pt), logs, the resolved config, eval (default: a new "
        "runs/<task>-<YYYYmmdd-HHMMSS>)",
    )
    cmd.add_argument(
        "--logger", choices=["tensorboard", "wandb", "none"], help="where scalars go (default: runner.logger)"
    )
    cmd.add_argument("--threads", type=_whole(1), metavar="N", help=THREADS_HELP)
    cmd.add_argument("--no-eval", action="store_true", help="skip the evaluation and plots after training")
    cmd.add_argument(
        "--eval-envs",
        type=_whole(1),
        metavar="N",
        help="envs per clip in every evaluation from the start (default: the config's runner.eval_envs)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mimic-rl``."""
    parser = _Parser(prog="mimic-rl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the traceback of an error (or MIMIC_RL_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help, description=help, epilog=EPILOGS[name], parents=[common], formatter_class=_HelpFormatter
        )

    train = command("train", "train a tracker (then evaluate and plot)")
    distill = command("distill", "distil a trained tracker into a deployable student (then eval, export)")
    distill.add_argument(
        "--teacher", help="a training checkpoint, this package's or rsl_rl's (default: with --resume, the run's own)"
    )
    distill.add_argument("--task", default="distill", help="a config in configs/ or a YAML path")
    distill.add_argument("--no-export", action="store_true", help="skip the ONNX/TorchScript export of the student")
    _add_run_options(distill)
    distill.set_defaults(func=cmd_train, distill=True)
    train.add_argument("--task", default="tracking_ppo", help="a config in configs/ or a YAML path")
    _add_run_options(train)
    train.set_defaults(func=cmd_train)
    ev = command("eval", "per-clip metrics of a checkpoint as JSON")
    ev.add_argument("--checkpoint", required=True, help="a model_<N>.pt of mimic-rl train or distill")
    ev.add_argument("--output", required=True, help="the JSON file to write")
    ev.add_argument("--motion", nargs="+", help="evaluate on these motions (default: the training ones)")
    ev.add_argument("--num-envs", type=_whole(1), default=8, help="envs per clip")
    ev.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ev.add_argument("--threads", type=_whole(1), metavar="N", help=THREADS_HELP)
    ev.add_argument(
        "--action-noise",
        type=_number(0.0),
        default=0.0,
        metavar="S",
        help="sample actions with S x the policy's own std around its mean (1: as training does; 0: the deterministic "
        "policy a robot runs)",
    )
    ev.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="env.KEY=VALUE",
        help="override one key of the checkpoint's env config (repeatable), e.g. --set env.deploy.noise=false "
        "(default: none)",
    )
    ev.set_defaults(func=cmd_eval)
    pl = command("plot", "PNGs from an eval JSON and the training log")
    pl.add_argument("eval_json", help="an eval.json of mimic-rl eval or train")
    pl.add_argument("--output", required=True, help="the folder for the PNGs")
    pl.add_argument("--run-dir", help="the run folder with metrics.jsonl (default: the checkpoint's)")
    pl.set_defaults(func=cmd_plot)
    play = command("play", "run a checkpoint and print tracking metrics (or write a video)")
    play.add_argument("--checkpoint", required=True, help="a model_<N>.pt of mimic-rl train or distill")
    play.add_argument("--motion", nargs="+", help="play these motions (default: the training ones)")
    play.add_argument("--num-envs", type=_whole(1), default=4, help="parallel envs")
    play.add_argument("--steps", type=_whole(1), default=500, help="policy steps to run")
    play.add_argument("--video", help="write a GIF or MP4 of env 0 beside its reference (default: no video)")
    play.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    play.add_argument("--threads", type=_whole(1), metavar="N", help=THREADS_HELP)
    play.set_defaults(func=cmd_play)
    ex = command("export", "ONNX and TorchScript of a checkpoint's policy, with metadata")
    ex.add_argument("--checkpoint", required=True, help="a model_<N>.pt of mimic-rl train or distill")
    ex.add_argument("--output", required=True, help="the folder to write")
    ex.add_argument("--no-onnx", action="store_true", help="write the TorchScript and metadata only")
    ex.add_argument(
        "--bake-motion",
        action="store_true",
        help="also write reference.npz (the first clip at every control step, for tools/sim2sim.py) and "
        "policy_baked.onnx (that clip inside the graph: inputs policy, time_step, anchor_quat_w)",
    )
    ex.set_defaults(func=cmd_export)
    cv = command("convert", "convert motion files (or folders of them) to this package's npz")
    _add_convert_options(cv)
    cv.set_defaults(func=cmd_convert)
    return parser


def _add_convert_options(cv: argparse.ArgumentParser) -> None:
    """The inputs and options of ``mimic-rl convert``."""
    cv.add_argument("inputs", nargs="+", help="motion files (npz, CSV) or folders of them")
    cv.add_argument("--output", required=True, help="an .npz file (one input) or a folder")
    cv.add_argument(
        "--robot",
        help=f"the robot's MJCF (for CSV and name-less npz, to check joint names, for --pin-feet), or {BUILT_IN} (the "
        "built-in model: its clips written in the model's hinge joints) (default: none)",
    )
    cv.add_argument("--csv-fps", type=_FPS, help="frame rate of CSV motions (default: none; needed for CSV)")
    cv.add_argument("--fps", type=_FPS, help="resample to this frame rate (default: the input's)")
    cv.add_argument(
        "--loop-mode", choices=["clamp", "wrap"], help="what a clip does past its end (default: the input's)"
    )
    cv.add_argument(
        "--pin-feet",
        action="store_true",
        help="write each clip with its feet planted on the floor: moved up or down so that a foot that stands still "
        "stands on the floor, lifted where a foot is still in it, and moved so that a foot on the floor stays where it "
        "is unless it sweeps past faster than 1.25 m/s (for clips whose feet skate or float; needs --robot)",
    )
    cv.add_argument(
        "--feet",
        nargs="+",
        metavar="BODY",
        help="the robot's foot bodies for --pin-feet and the foot checks (default: the G1's or humanoid28's, if the "
        "model has them)",
    )


def _one_line(message: str) -> int:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return 2


_SHOWN: set[str] = set()
"""The warning lines this process has printed."""


def _show_warning(
    message: Warning | str, category: type, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """Warnings as one line each (``warning: <message>``), like errors; a line already printed is not printed again
    (a run's training env and its evaluation env load the same clips, and say the same of them)."""
    text = f"warning: {' '.join(str(message).split())}"
    if text not in _SHOWN:
        _SHOWN.add(text)
        print(text, file=sys.stderr if file is None else file)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mimic-rl`` console script: the one error boundary of the command line."""
    warnings.showwarning = _show_warning
    args = build_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False)) or os.environ.get("MIMIC_RL_DEBUG", "") not in ("", "0")
    previous = _terminate_as_interrupt()
    try:
        return int(args.func(args) or 0)
    except MimicRLError as exc:
        if debug:
            raise
        return _one_line(str(exc))
    except BrokenPipeError:  # stdout closed by its reader (`mimic-rl ... | head`): stop as a SIGPIPE would, quietly
        if debug or not _stdout_closed():
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes stdout
        print("stopped: the standard output was closed (broken pipe)", file=sys.stderr)
        return 141
    except OSError as exc:
        if debug or exc.errno not in USER_OS_ERRORS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        return _one_line(f"{where}{exc.strerror or exc}; check the path and the disk")
    except KeyboardInterrupt as exc:
        what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"{what} (the last checkpoint written is intact; continue with --resume)", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll reports an error or hang-up on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows) or no stdout file descriptor
        return False


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def _terminate_as_interrupt() -> Any:
    """Make SIGTERM raise ``Terminated`` (a KeyboardInterrupt) in the main thread; returns the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_terminated)


if __name__ == "__main__":
    raise SystemExit(main())
