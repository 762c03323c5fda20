"""The ``mimic-rl`` command line: train, distill, play, eval, plot, export and convert.

mimic-rl train [--task tracking_ppo] [--env mujoco|mjlab:TASK|isaaclab:TASK] [--motion FILE_OR_DIR ...]
               [--robot humanoid28|g1] [--num-envs N]
               [--iterations N] [--time-budget S] [--device cpu] [--resume [CKPT]] [--seed N] [--log-dir DIR]
mimic-rl distill --teacher CKPT [--task distill] [the options of train]
mimic-rl eval --checkpoint CKPT --output eval.json
mimic-rl plot eval.json --output DIR
mimic-rl play --checkpoint CKPT [--video rollout.gif]
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
import sys
import warnings
from typing import Any

from mimic_rl.commands import (
    cmd_convert,
    cmd_eval,
    cmd_export,
    cmd_play,
    cmd_plot,
    cmd_train,
    resolve_motion,
)
from mimic_rl.errors import MimicRLError
from mimic_rl.utils import FPS_RANGE

__all__ = ["build_parser", "main", "resolve_motion"]

USER_OS_ERRORS = (errno.ENOENT, errno.EISDIR, errno.ENOTDIR, errno.EACCES, errno.EEXIST, errno.ELOOP, errno.ENOSPC)
"""OS errors about the user's paths or disk (not bugs): shown as one line too."""


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (``error: --flag: problem; see 'mimic-rl train --help'``)."""

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


def _add_run_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--env",
        help="the simulator: mujoco (the embedded env, default), mjlab:<task id> or isaaclab:<task id> (env.backend)",
    )
    cmd.add_argument("--motion", nargs="+", help="motion files or folders (default: the config's)")
    cmd.add_argument("--robot", choices=["humanoid28", "g1"])
    cmd.add_argument("--robot-mjcf", help="the robot's MJCF (needed for g1)")
    cmd.add_argument("--csv-fps", type=_FPS, help="frame rate of CSV motions")
    cmd.add_argument("--num-envs", type=_whole(1))
    cmd.add_argument("--iterations", type=_whole(1), help="iterations to train (overrides the config's time budget)")
    cmd.add_argument("--time-budget", type=_number(0), help="seconds of training (0: no limit)")
    cmd.add_argument("--device", help="cpu, cuda or cuda:N (default: the config's)")
    cmd.add_argument("--resume", nargs="?", const="latest", help="a checkpoint, or the latest in --log-dir")
    cmd.add_argument("--seed", type=_whole(0, 2**32 - 1))
    cmd.add_argument("--log-dir", help="where checkpoints (*.pt), logs and the resolved config go")
    cmd.add_argument("--logger", choices=["tensorboard", "wandb", "none"])
    cmd.add_argument("--no-eval", action="store_true", help="skip the evaluation and plots after training")
    cmd.add_argument(
        "--eval-envs", type=_whole(1), help="envs per clip in every evaluation from the start (runner.eval_envs)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mimic-rl``."""
    parser = _Parser(prog="mimic-rl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show the traceback of an error (or MIMIC_RL_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    train = command("train", "train a tracker (then evaluate and plot)")
    distill = command("distill", "distil a trained tracker into a deployable student (then eval, export)")
    distill.add_argument("--teacher", required=True, help="a training checkpoint (this package's or rsl_rl's)")
    distill.add_argument("--task", default="distill", help="a config in configs/ or a YAML path")
    distill.add_argument("--no-export", action="store_true", help="skip the ONNX/TorchScript export of the student")
    _add_run_options(distill)
    distill.set_defaults(func=cmd_train)
    train.add_argument("--task", default="tracking_ppo", help="a config in configs/ or a YAML path")
    _add_run_options(train)
    train.set_defaults(func=cmd_train)
    ev = command("eval", "per-clip metrics of a checkpoint as JSON")
    ev.add_argument("--checkpoint", required=True)
    ev.add_argument("--output", required=True)
    ev.add_argument("--motion", nargs="+", help="evaluate on these motions instead of the training ones")
    ev.add_argument("--num-envs", type=_whole(1), default=8)
    ev.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    ev.set_defaults(func=cmd_eval)
    pl = command("plot", "PNGs from an eval JSON and the training log")
    pl.add_argument("eval_json")
    pl.add_argument("--output", required=True)
    pl.add_argument("--run-dir", help="the run folder with metrics.jsonl (default: the checkpoint's)")
    pl.set_defaults(func=cmd_plot)
    play = command("play", "run a checkpoint and print tracking metrics (or write a video)")
    play.add_argument("--checkpoint", required=True)
    play.add_argument("--motion", nargs="+")
    play.add_argument("--num-envs", type=_whole(1), default=4)
    play.add_argument("--steps", type=_whole(1), default=500)
    play.add_argument("--video", help="write a GIF or MP4 of env 0 beside its reference")
    play.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    play.set_defaults(func=cmd_play)
    ex = command("export", "ONNX and TorchScript of a checkpoint's policy, with metadata")
    ex.add_argument("--checkpoint", required=True)
    ex.add_argument("--output", required=True)
    ex.add_argument("--no-onnx", action="store_true")
    ex.set_defaults(func=cmd_export)
    cv = command("convert", "convert motion files (or folders of them) to this package's npz")
    cv.add_argument("inputs", nargs="+")
    cv.add_argument("--output", required=True, help="an .npz file (one input) or a folder")
    cv.add_argument("--robot", help="robot MJCF (for CSV and name-less npz, and to check joint names)")
    cv.add_argument("--csv-fps", type=_FPS)
    cv.add_argument("--fps", type=_FPS, help="resample to this frame rate")
    cv.add_argument("--loop-mode", choices=["clamp", "wrap"])
    cv.set_defaults(func=cmd_convert)
    return parser


def _one_line(message: str) -> int:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _show_warning(
    message: Warning | str, category: type, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """Warnings as one line each (``warning: <message>``), like errors."""
    print(f"warning: {' '.join(str(message).split())}", file=sys.stderr if file is None else file)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mimic-rl`` console script: the one error boundary of the command line."""
    warnings.showwarning = _show_warning
    args = build_parser().parse_args(argv)
    debug = bool(getattr(args, "debug", False)) or os.environ.get("MIMIC_RL_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args) or 0)
    except MimicRLError as exc:
        if debug:
            raise
        return _one_line(str(exc))
    except OSError as exc:
        if debug or exc.errno not in USER_OS_ERRORS:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        return _one_line(f"{where}{exc.strerror or exc}; check the path and the disk")
    except KeyboardInterrupt:
        print("interrupted (the last checkpoint written is intact; continue with --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
