"""Matplotlib figures (Agg backend, no display needed) of training logs and evaluation results.

Names match the progress line and ``eval.json``: success (an episode that ends without a termination; in evaluation
every clip is played from its first frame), global MPJPE (world frame) and root-relative MPJPE.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_eval", "plot_training_curves", "read_metrics"]

CURVES = (
    ("metrics/global_mpjpe_mm", "global MPJPE (mm)", False),
    ("metrics/root_mpjpe_mm", "root-relative MPJPE (mm)", False),
    ("episode/success_rate", "success (training episodes)", False),
    ("episode/length", "episode length (steps)", False),
    ("loss/learning_rate", "learning rate", True),
    ("episode/reward", "episode reward", False),
)


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a run's ``metrics.jsonl`` (a file or the run folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"training log {path} not found")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_training_curves(runs: dict[str, list[dict[str, float]]], output: str | Path, x: str = "iteration") -> Path:
    """Learning curves of one or more runs (``{label: rows}``) against ``iteration``, ``wall`` time or ``samples``:
    global and root-relative MPJPE, success, episode length, learning rate and episode reward."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    for ax, (key, title, log) in zip(axes.flat, CURVES):
        for label, rows in runs.items():
            pts = [(_x(r, x), r[key]) for r in rows if key in r and math.isfinite(r[key])]
            if pts:
                ax.plot(*zip(*pts), label=label, lw=1.2)
        if log:
            ax.set_yscale("log")
        if key == "episode/success_rate":
            ax.set_ylim(-0.03, 1.03)
        ax.set_title(title)
        ax.set_xlabel({"iteration": "iteration", "wall": "wall-clock time (min)", "samples": "env steps"}[x])
        ax.grid(alpha=0.3)
        if len(runs) > 1:
            ax.legend()
    fig.tight_layout()
    return _save(fig, output)


def _x(row: dict[str, float], x: str) -> float:
    if x == "wall":
        return row.get("perf/wall_time", 0.0) / 60.0
    if x == "samples":
        return row.get("perf/total_steps", 0.0)
    return row["iteration"]


def _save(fig: Any, output: str | Path) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


def _per_body(clips: list[dict[str, Any]], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / max(1, len(clips))
    for i, clip in enumerate(clips):
        bodies = list(clip["per_body_mpjpe_mm"])
        xs = [j + i * width for j in range(len(bodies))]
        ax.bar(xs, [clip["per_body_mpjpe_mm"][b] for b in bodies], width=width, label=clip["name"])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(bodies))], bodies, rotation=60, ha="right")
    ax.set_ylabel("mean global position error (mm)")
    ax.set_title("per-body tracking error (evaluation from each clip's start)")
    ax.legend()
    fig.tight_layout()
    return _save(fig, out / "per_body_error.png")


def _over_time(clips: list[dict[str, Any]], out: Path) -> Path:
    """Global and root-relative MPJPE over each clip's time, with the envs still alive (a second axis)."""
    fig, axes = plt.subplots(len(clips), 1, figsize=(10, 3.2 * len(clips)), squeeze=False)
    for ax, clip in zip(axes[:, 0], clips):
        t = clip["over_time"]
        ax.plot(t["time_s"], t["global_mpjpe_mm"], label="global MPJPE", color="tab:blue")
        ax.plot(t["time_s"], t["root_mpjpe_mm"], label="root-relative MPJPE", color="tab:orange")
        ax.set_ylabel("mm (envs alive)")
        ax.set_xlabel("clip time (s)")
        ax.set_xlim(0, max(clip["duration_s"], t["time_s"][-1] if t["time_s"] else 0))
        ax.grid(alpha=0.3)
        alive = ax.twinx()
        alive.step(t["time_s"], t["alive"], where="post", color="tab:gray", ls="--", label="envs alive")
        alive.set_ylim(0, clip["num_envs"] * 1.05)
        alive.set_ylabel("envs alive")
        for when in clip.get("failure_times_s", []):
            ax.axvline(when, color="tab:red", alpha=0.25, lw=1)
        lines = ax.get_legend_handles_labels()[0] + alive.get_legend_handles_labels()[0]
        ax.legend(lines, [h.get_label() for h in lines], loc="upper left", fontsize=8)
        ax.set_title(f"{clip['name']}: success {clip['success_rate']:.2f} (red: terminations)")
    fig.tight_layout()
    return _save(fig, out / "error_over_time.png")


def _success(clips: list[dict[str, Any]], out: Path) -> Path:
    """Success per clip, each value written on its bar (a zero shows as 0.00 on an empty bar)."""
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(clips)), 4))
    names = [c["name"] for c in clips]
    values = [c["success_rate"] for c in clips]
    ax.bar(names, values, color="tab:green", edgecolor="black")
    for i, v in enumerate(values):
        ax.text(i, v + 0.02, f"{v:.2f}", ha="center", va="bottom", fontsize=10, fontweight="bold")
    ax.set_ylim(0, 1.15)
    ax.axhline(0, color="black", lw=1)
    ax.set_ylabel("success rate")
    ax.set_title("success: tracked from the clip's start to its end")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    return _save(fig, out / "success_per_clip.png")


def plot_eval(evaluation: dict[str, Any], output_dir: str | Path, run_dir: str | Path | None = None) -> list[Path]:
    """PNGs of an evaluation (``mimic-rl eval`` JSON) and, when ``run_dir`` has a log, the training curves."""
    out = Path(output_dir)
    clips = evaluation["clips"]
    written = [_per_body(clips, out), _over_time(clips, out), _success(clips, out)]
    if run_dir is not None and (Path(run_dir) / "metrics.jsonl").is_file():
        rows = read_metrics(run_dir)
        written.append(plot_training_curves({"mimic_rl": rows}, out / "training_curves.png"))
    return written
