"""A run's evaluations from each clip's first frame, as a table, and when the mean success first reached a target.

Reads ``RUN/evals.jsonl`` (one line per evaluation during training: env steps, each clip's success and MPJPE) and
prints, per evaluation, the env steps, the mean success over clips, the mean global MPJPE, the mean share of the clips
reached and each clip's success (a resumed run's re-done evaluations replace those of the stretch it lost); then the
first evaluation at which the mean success reached ``--target`` and the env steps per clip-second there (those env steps
divided by the clips' total duration: issue 30's scaling measure), or "not reached"; with several clips, also the
first evaluation at which every clip's success reached ``--each-target`` (issue 30's "≥ 0.9 on each"). A training
evaluation is close to one trial per clip (a clip's envs start alike and the policy is deterministic), so one lucky
evaluation can cross the target; the *held* line gives the first evaluation at which the mean success averaged over it
and the ``--window - 1`` evaluations before it reached the target (known at that evaluation, not later).

    python tools/eval_history.py RUN [RUN ...] [--target 0.8] [--each-target 0.9] [--window 5] [--every 1]
        [--json OUT.json]

``--every K`` prints every K-th evaluation (the first, the crossing and the last are always printed).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from mimic_rl.run_dirs import read_eval_history


@dataclass
class Reached:
    """When a run's mean success over its clips first reached the target (``env_steps`` None: not reached)."""

    run: str
    clips: int
    total_duration_s: float
    evaluations: int
    last_env_steps: int
    last_mean_success: float
    env_steps: int | None
    mean_success: float | None
    env_steps_per_clip_second: float | None
    each_clip_env_steps: int | None = None
    """The env steps of the first evaluation at which every clip's success reached the each-clip target (None: not)."""
    each_clip_lowest: float | None = None
    """The lowest clip's success there (not reached: at the last evaluation)."""
    window: int = 1
    """The number of consecutive evaluations that ``held_env_steps`` averages."""
    held_env_steps: int | None = None
    """The env steps of the first evaluation at which the mean success averaged over the ``window`` evaluations
    ending there reached the target (None: not)."""
    held_mean_success: float | None = None
    """That average (not reached: the highest such average, None with fewer than ``window`` evaluations)."""


def read_history(run: Path) -> list[dict]:
    """The evaluations of ``run`` (its folder or its ``evals.jsonl``), in order, a resumed run's re-done evaluations
    in place of those of the stretch it lost (``read_eval_history``)."""
    return read_eval_history(run / "evals.jsonl" if run.is_dir() else run)


def mean_success(entry: dict) -> float:
    """The evaluation's mean over clips of each clip's success rate (its ``summary``, as the run logged it)."""
    return float(entry["summary"]["success_rate"])


def lowest_success(entry: dict) -> float:
    """The evaluation's lowest clip's success rate."""
    return min(float(c["success_rate"]) for c in entry["clips"])


def held(history: list[dict], target: float, window: int) -> tuple[int | None, float | None]:
    """(env steps, average) of the first evaluation at which the mean success averaged over the ``window``
    evaluations ending there is at least ``target``; (None, the highest such average) when none is; (None, None) with
    fewer than ``window`` evaluations."""
    means = [mean_success(e) for e in history]
    averages = [sum(means[i + 1 - window : i + 1]) / window for i in range(window - 1, len(means))]
    for i, average in enumerate(averages):
        if average >= target:
            return int(history[i + window - 1]["total_steps"]), average
    return None, max(averages, default=None)


def first_reached(run: Path, history: list[dict], target: float, each_target: float = 0.9, window: int = 5) -> Reached:
    """The first evaluation of ``history`` whose mean success is at least ``target``, the first whose every clip's
    success is at least ``each_target`` and the first at which the average over ``window`` evaluations is at least
    ``target``, with the run's totals."""
    if not history:
        raise ValueError(f"{run}: no evaluations in its evals.jsonl; train with runner.eval_interval > 0")
    duration = sum(c["duration_s"] for c in history[-1]["clips"])
    hit = next((e for e in history if mean_success(e) >= target), None)
    steps = None if hit is None else int(hit["total_steps"])
    each = next((e for e in history if lowest_success(e) >= each_target), None)
    held_steps, held_mean = held(history, target, window)
    return Reached(
        run=str(run),
        clips=len(history[-1]["clips"]),
        total_duration_s=duration,
        evaluations=len(history),
        last_env_steps=int(history[-1]["total_steps"]),
        last_mean_success=mean_success(history[-1]),
        env_steps=steps,
        mean_success=None if hit is None else mean_success(hit),
        env_steps_per_clip_second=None if steps is None else steps / duration,
        each_clip_env_steps=None if each is None else int(each["total_steps"]),
        each_clip_lowest=lowest_success(history[-1] if each is None else each),
        window=window,
        held_env_steps=held_steps,
        held_mean_success=held_mean,
    )


def table(history: list[dict], every: int, keep: set[int]) -> list[str]:
    """The evaluations as text rows: env steps (M), mean success, mean global MPJPE (mm), the mean share of the clips
    that the evaluation's episodes reached, each clip's success."""
    names = [c["name"] for c in history[0]["clips"]]
    rows = ["env steps (M)  success  global (mm)  reached  " + "  ".join(names)]
    for i, entry in enumerate(history):
        if i % every and i not in keep:
            continue
        per_clip = {c["name"]: c["success_rate"] for c in entry["clips"]}
        glob, reached = entry["summary"]["global_mpjpe_mm"], entry["summary"]["episode_length_fraction"]
        cells = "  ".join(f"{per_clip.get(n, float('nan')):>{len(n)}.2f}" for n in names)
        steps, success = entry["total_steps"] / 1e6, mean_success(entry)
        rows.append(f"{steps:13.2f}  {success:7.2f}  {glob:11.1f}  {reached:7.0%}  {cells}")
    return rows


def each_clip_line(reached: Reached, each_target: float) -> str:
    """The line that says when every clip's success first reached ``each_target``, or that it did not."""
    if reached.each_clip_env_steps is None:
        return (
            f"every clip's success >= {each_target}: not reached by {reached.last_env_steps / 1e6:.2f} M env steps "
            f"(lowest clip {reached.each_clip_lowest:.2f} there)"
        )
    return (
        f"every clip's success >= {each_target}: at {reached.each_clip_env_steps / 1e6:.2f} M env steps "
        f"(lowest clip {reached.each_clip_lowest:.2f})"
    )


def held_line(reached: Reached, target: float) -> str:
    """The line that says when the mean success averaged over ``reached.window`` evaluations first reached
    ``target``, or that it did not."""
    plural = "s" if reached.window > 1 else ""
    what = f"mean success over {reached.window} evaluation{plural} >= {target} (held)"
    if reached.held_env_steps is not None:
        per_second = reached.held_env_steps / reached.total_duration_s / 1e6
        return (
            f"{what}: at {reached.held_env_steps / 1e6:.2f} M env steps ({reached.held_mean_success:.2f}); "
            f"{per_second:.2f} M env steps per clip-second"
        )
    best = "" if reached.held_mean_success is None else f" (at most {reached.held_mean_success:.2f})"
    return f"{what}: not reached by {reached.last_env_steps / 1e6:.2f} M env steps{best}"


def main(argv: list[str] | None = None) -> int:
    """Print each run's evaluation table and when its mean success reached the target."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (or evals.jsonl files)")
    parser.add_argument("--target", type=float, default=0.8, help="the mean success to reach (default 0.8)")
    parser.add_argument(
        "--each-target", type=float, default=0.9, help="with several clips, the success each clip must reach (0.9)"
    )
    parser.add_argument(
        "--window", type=int, default=5, help="the evaluations the held line averages (default 5; 1: every one)"
    )
    parser.add_argument("--every", type=int, default=1, help="print every K-th evaluation (default 1)")
    parser.add_argument("--json", type=Path, help="also write the results (one entry per run) to this file")
    args = parser.parse_args(argv)
    if args.every < 1 or args.window < 1 or not 0 < args.target <= 1 or not 0 < args.each_target <= 1:
        parser.error("--every and --window must be at least 1, --target and --each-target in (0, 1]")
    results = []
    for run in args.runs:
        history = read_history(run)
        if not history:
            print(f"{run}: no evals.jsonl with evaluations; pass a run folder of mimic-rl train", file=sys.stderr)
            return 2
        reached = first_reached(run, history, args.target, args.each_target, args.window)
        crossing = {i for i, e in enumerate(history) if int(e["total_steps"]) == reached.env_steps}
        print(f"{run}: {reached.clips} clips, {reached.total_duration_s:.1f} s in all")
        print("\n".join(table(history, args.every, {0, len(history) - 1} | crossing)))
        if reached.env_steps is None:
            print(
                f"mean success >= {args.target}: not reached by {reached.last_env_steps / 1e6:.2f} M env steps "
                f"({reached.last_mean_success:.2f} there)"
            )
        else:
            print(
                f"mean success >= {args.target}: at {reached.env_steps / 1e6:.2f} M env steps "
                f"({reached.mean_success:.2f}); "
                f"{reached.env_steps_per_clip_second / 1e6:.2f} M env steps per clip-second"
            )
        if reached.clips > 1:
            print(each_clip_line(reached, args.each_target))
        print(held_line(reached, args.target))
        results.append(asdict(reached))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
