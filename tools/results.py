"""Regenerate docs/results.md: plain PPO against PPO + AMP on the same clips and seeds, and today's default teacher
against its deployable student, from runs this script makes (or finds already made) under ``--runs``.

    python tools/results.py --plan                 # what is done, what is left, and an estimate of how long
    python tools/results.py --jobs 2               # run what is missing (resumable: a killed run resumes), then report
    python tools/results.py --report-only          # rewrite docs/results.md from the runs as they are
    python tools/results.py --eval-only            # evaluate the runs that finished training, train nothing
    python tools/results.py --only walk handsup    # the clips to work on (default: all; amp_walk: the walking task)

Every run is a ``mimic-rl`` command (printed before it starts; its output in ``<run>.log``), one torch thread each,
``--jobs`` of them side by side. A run is finished when its final checkpoint exists; a run with an earlier checkpoint
resumes from it (``--resume``: bitwise the same as running straight through). After training each run is evaluated
from each clip's first frame with ``mimic-rl eval --num-envs 64`` (tracking and motion-quality metrics, with the
initial-state noise, ``results_eval.json``) and from the exact first frame (``results_exact.json``); each student is
also exported with its clip and run in ``tools/sim2sim.py`` (64 noise seeds, ``results_sim2sim.json``). The
style-only walk (``amp_walk``) is evaluated by ``tools/amp_walk_report.py`` (``results_report.json``: falls, speed
against the command, the discriminator's score) and filmed (``results_walk_<iterations>.mp4``). Wall times of
the steps it ran go to ``<runs>/times.json``. The report: tables of the mean and range over seeds, and curves of the
training's own evaluations (``evals.jsonl``) with a band from the lowest to the highest seed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("MIMIC_RL_DATA", ROOT.parent / "shared" / "data"))
EXACT = "env.init_noise={joint_pos: 0, root_pos: 0, root_rot: 0, velocity: 0}"
ENV_STEPS_PER_ITERATION = 256 * 24  # the default configs' envs x steps per env


@dataclass(frozen=True)
class Clip:
    """A clip of the matrix and what training on it takes."""

    key: str
    motion: str
    iterations: int
    robot_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Job:
    """One run: ``kind`` train (``config`` = tracking_ppo or tracking_ppo_amp) or distill (from ``teacher``)."""

    name: str
    kind: str
    clip: Clip
    seed: int
    config: str
    iterations: int
    teacher: str | None = None
    after: tuple[str, ...] = field(default_factory=tuple)


def clips() -> list[Clip]:
    """The clips of the matrix: the two that the defaults were tuned on and the 15 s dance (issue 30)."""
    g1 = ("--robot", "g1", "--robot-mjcf", str(DATA / "robots/unitree_g1/g1.xml"), "--csv-fps", "60")
    return [
        Clip("walk", str(DATA / "motions/humanoid28/humanoid_walk.npz"), 600),
        Clip("handsup", str(DATA / "motions/g1/B_HandsUp.csv"), 350, g1),
        Clip("dance", str(DATA / "motions/humanoid28/humanoid_dance.npz"), 1630),  # 10.0 M env steps
    ]


CONFIGS = ("tracking_ppo", "tracking_ppo_amp")
PINNED_KL = "algorithm.desired_kl=0.01"  # docs/results.md was measured at 0.01, the default until issue 30
SEEDS = (0, 1, 2)
DISTILLED = ("walk", "handsup")
DISTILL_ITERATIONS = 1200  # configs/distill_deploy.yaml's
AMP_WALK = Clip("amp_walk", str(DATA / "motions/humanoid28/humanoid_walk.npz"), 4880)  # 30 M env steps, no tracking
AMP_WALK_SEEDS = (0,)
VIDEO_STEPS = 500  # 10 s of walking


def matrix(only: list[str] | None) -> list[Job]:
    """Every run: configs x clips x seeds, then a student per (walk, handsup) x seed of the PPO teacher, and the
    style-only walk (``configs/amp_walk.yaml``)."""
    jobs = []
    if not only or AMP_WALK.key in only:
        jobs += [
            Job(f"amp_walk/s{seed}", "train", AMP_WALK, seed, "amp_walk", AMP_WALK.iterations)
            for seed in AMP_WALK_SEEDS
        ]
    for clip in clips():
        if only and clip.key not in only:
            continue
        for config in CONFIGS:
            for seed in SEEDS:
                jobs.append(Job(f"{clip.key}/{config}/s{seed}", "train", clip, seed, config, clip.iterations))
        if clip.key in DISTILLED:
            for seed in SEEDS:
                teacher = f"{clip.key}/tracking_ppo/s{seed}"
                jobs.append(
                    Job(
                        f"{clip.key}/student/s{seed}",
                        "distill",
                        clip,
                        seed,
                        "distill_deploy",
                        DISTILL_ITERATIONS,
                        teacher=teacher,
                        after=(teacher,),
                    )
                )
    return jobs


def latest_checkpoint(run: Path) -> int:
    """The highest iteration with a ``model_<it>.pt`` in ``run`` (0 without any)."""
    its = [int(p.stem.split("_")[1]) for p in run.glob("model_*.pt") if p.stem.split("_")[1].isdigit()]
    return max(its, default=0)


def train_command(job: Job, runs: Path) -> list[str]:
    """The ``mimic-rl`` command that trains ``job`` from where its folder stands."""
    run = runs / job.name
    done = latest_checkpoint(run)
    if done:
        return [
            "mimic-rl",
            job.kind,
            "--resume",
            "--log-dir",
            str(run),
            "--iterations",
            str(job.iterations - done),
            "--threads",
            "1",
        ]
    common = ["--seed", str(job.seed), "--iterations", str(job.iterations), "--threads", "1"]
    common += ["--log-dir", str(run), "--overwrite"]
    if job.kind == "distill":
        teacher = runs / str(job.teacher) / f"model_{latest_checkpoint(runs / str(job.teacher))}.pt"
        return ["mimic-rl", "distill", "--teacher", str(teacher), "--task", job.config, "--eval-envs", "16", *common]
    common += ["--set", PINNED_KL] if job.config in CONFIGS else []
    return ["mimic-rl", "train", "--task", job.config, "--motion", job.clip.motion, *job.clip.robot_args, *common]


def eval_commands(job: Job, runs: Path) -> list[tuple[Path, list[str]]]:
    """(output, command) of each evaluation of a finished run that is not there yet."""
    run = runs / job.name
    ckpt = str(run / f"model_{job.iterations}.pt")
    base = ["mimic-rl", "eval", "--checkpoint", ckpt, "--num-envs", "64", "--threads", "1", "--output"]
    todo = [(run / "results_eval.json", [*base, str(run / "results_eval.json")])]
    if job.config == "amp_walk":  # walking, the discriminator's score, and a video, of the final checkpoint
        report = [sys.executable, str(ROOT / "tools/amp_walk_report.py"), "--checkpoint", ckpt, "--output"]
        todo = [(run / "results_report.json", [*report, str(run / "results_report.json")])]
        video = run / f"results_walk_{job.iterations}.mp4"
        play = ["mimic-rl", "play", "--checkpoint", ckpt, "--num-envs", "1", "--steps", str(VIDEO_STEPS)]
        todo.append((video, [*play, "--threads", "1", "--video", str(video)]))
        return [(out, cmd) for out, cmd in todo if not _done(out, ckpt)]
    todo.append((run / "results_exact.json", [*base, str(run / "results_exact.json"), "--set", EXACT]))
    if job.kind == "distill":
        export = ["mimic-rl", "export", "--checkpoint", ckpt, "--output", str(run / "results_deploy"), "--bake-motion"]
        sim = [sys.executable, str(ROOT / "tools/sim2sim.py"), str(run / "results_deploy"), "--seeds", "64"]
        todo.append((run / "results_deploy" / "policy.onnx", export))
        todo.append((run / "results_sim2sim.json", [*sim, "--output", str(run / "results_sim2sim.json")]))
    return [(out, cmd) for out, cmd in todo if not out.exists()]


def _done(out: Path, checkpoint: str) -> bool:
    """``out`` exists and, for a walking report, is of ``checkpoint`` (one of an earlier checkpoint is redone)."""
    if not out.exists():
        return False
    if out.suffix != ".json":
        return True
    return json.loads(out.read_text()).get("checkpoint", checkpoint) == str(Path(checkpoint).resolve())


def finished(job: Job, runs: Path) -> bool:
    """The run reached its iterations and every evaluation is there."""
    return (runs / job.name / f"model_{job.iterations}.pt").exists() and not eval_commands(job, runs)


def steps_left(job: Job, runs: Path) -> int:
    """Env steps of training the job still needs."""
    return max(0, job.iterations - latest_checkpoint(runs / job.name)) * ENV_STEPS_PER_ITERATION


def run_job(job: Job, runs: Path, train: bool = True) -> list[tuple[str, float]]:
    """Train (or resume; unless not ``train``) and evaluate one job; returns (step, wall seconds) of what it ran.
    Raises on a failure."""
    run, times = runs / job.name, []
    run.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MIMIC_RL_DATA": str(DATA)}
    steps = []
    if train and latest_checkpoint(run) < job.iterations:
        steps.append(("train", train_command(job, runs)))
    with open(runs / f"{job.name}.log", "a") as log:
        for step, cmd in steps:
            times.append((step, _call(cmd, log, env)))
        for out, cmd in eval_commands(job, runs):
            times.append((out.name, _call(cmd, log, env)))
    return times


def _call(cmd: list[str], log, env: dict[str, str]) -> float:
    print(f"  $ {shlex.join(cmd)}", flush=True)
    log.write(f"$ {shlex.join(cmd)}\n")
    log.flush()
    start = time.time()
    code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    if code != 0:
        raise RuntimeError(f"exit code {code}: {shlex.join(cmd)} (see its log)")
    return time.time() - start


def schedule(jobs: list[Job], runs: Path, parallel: int, eval_only: bool = False) -> None:
    """Run the unfinished jobs, ``parallel`` at a time, a job only after those it needs; progress and ETA per event.
    ``eval_only``: only the missing evaluations of the runs that finished training."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    todo = [j for j in jobs if not finished(j, runs)]
    if eval_only:
        todo = [j for j in todo if latest_checkpoint(runs / j.name) >= j.iterations]
        jobs = todo  # nothing waits on a run this call does not train
    total_steps = sum(steps_left(j, runs) for j in todo) or 1
    done_steps, start, failed = 0, time.time(), set()
    times_file = runs / "times.json"
    times = json.loads(times_file.read_text()) if times_file.exists() else {}
    running: dict = {}
    with ThreadPoolExecutor(parallel) as pool:
        while todo or running:
            ready = [j for j in todo if eval_only or all(finished(_job(jobs, a), runs) for a in j.after)]
            blocked = [j for j in todo if any(a in failed for a in j.after)]
            for job in blocked:
                todo.remove(job)
                print(f"skipped {job.name}: a run it needs failed", flush=True)
            for job in ready[: parallel - len(running)]:
                todo.remove(job)
                print(f"start {job.name} ({len(todo)} waiting)", flush=True)
                running[pool.submit(run_job, job, runs, not eval_only)] = (job, steps_left(job, runs))
            if not running:
                print(f"waiting on runs outside this matrix: {[j.name for j in todo]}", flush=True)
                break
            for future in wait(running, return_when=FIRST_COMPLETED).done:
                job, steps = running.pop(future)
                try:
                    times.setdefault(job.name, []).extend(future.result())
                except RuntimeError as exc:
                    failed.add(job.name)
                    print(f"FAILED {job.name}: {exc}", flush=True)
                times_file.write_text(json.dumps(times, indent=1))
                done_steps += steps
                rate = done_steps / max(1.0, time.time() - start)
                left = sum(steps_left(j, runs) for j in todo) + sum(s for _, s in running.values())
                eta = f", ETA {left / rate / 3600:.1f} h" if rate > 0 and done_steps else ""
                print(f"done {job.name}: {done_steps / total_steps:.0%} of the env steps{eta}", flush=True)
    if failed:
        raise SystemExit(f"results: {len(failed)} run(s) failed: {sorted(failed)}; rerun to retry them")


def _job(jobs: list[Job], name: str) -> Job:
    return next(j for j in jobs if j.name == name)


def plan(jobs: list[Job], runs: Path) -> None:
    """Print each job's state and the env steps left."""
    left = 0
    for job in jobs:
        it = latest_checkpoint(runs / job.name)
        state = "done" if finished(job, runs) else f"{it}/{job.iterations} iterations"
        if it >= job.iterations and not finished(job, runs):
            state = "trained, evaluations missing"
        print(f"{job.name:34s} {state}")
        left += steps_left(job, runs)
    print(f"left: {left / 1e6:.1f} M env steps of training (~{left / 2500 / 3600:.1f} h at 2,500 env steps/s per core)")


def main(argv: list[str] | None = None) -> int:
    """Run the matrix and/or write the report (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "results", help="where the runs live")
    parser.add_argument("--jobs", type=int, default=2, help="runs side by side, one thread each (default 2)")
    keys = [c.key for c in clips()] + [AMP_WALK.key]
    parser.add_argument("--only", nargs="+", choices=keys, help="clips (and amp_walk) to work on")
    parser.add_argument("--plan", action="store_true", help="print what is done and left, run nothing")
    parser.add_argument("--report-only", action="store_true", help="write the report from the runs as they are")
    parser.add_argument("--eval-only", action="store_true", help="evaluate the trained runs, train nothing")
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "results.md", help="the report")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: expected a number >= 1, found {args.jobs}")
    jobs = matrix(args.only)
    if args.plan:
        plan(jobs, args.runs)
        return 0
    if not args.report_only:
        schedule(jobs, args.runs, args.jobs, eval_only=args.eval_only)
    from results_report import write_report  # tools/results_report.py

    write_report(matrix(None), args.runs, args.output, machine())
    print(f"wrote {args.output}")
    return 0


def machine() -> str:
    """The machine and software the report's numbers come from."""
    import mujoco
    import torch

    versions = f"Python {platform.python_version()}, torch {torch.__version__}, MuJoCo {mujoco.__version__}"
    return f"{platform.node()}: {os.cpu_count()} CPU cores, {versions}"


if __name__ == "__main__":
    sys.exit(main())
