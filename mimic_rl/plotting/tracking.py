"""Matplotlib figures (Agg backend, no display needed) of training logs and evaluation results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

__all__ = ["plot_eval", "plot_training_curves", "read_metrics"]

CURVES = (
    ("metrics/root_mpjpe_mm", "root-relative MPJPE (mm)"),
    ("metrics/mpjpe_mm", "MPJPE (mm)"),
    ("train/episode_length", "episode length (steps)"),
    ("train/episode_reward", "episode reward"),
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
    """Learning curves of one or more runs (``{label: rows}``) against ``iteration``, ``wall`` time or ``samples``."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (key, title) in zip(axes.flat, CURVES):
        for label, rows in runs.items():
            pts = [(_x(r, x), r[key]) for r in rows if key in r]
            if pts:
                ax.plot(*zip(*pts), label=label)
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


def plot_eval(evaluation: dict[str, Any], output_dir: str | Path, run_dir: str | Path | None = None) -> list[Path]:
    """PNGs of an evaluation (``mimic-rl eval`` JSON) and, when ``run_dir`` has a log, the training curves."""
    out = Path(output_dir)
    clips = evaluation["clips"]
    written = []
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / max(1, len(clips))
    for i, clip in enumerate(clips):
        bodies = list(clip["per_body_mpjpe_mm"])
        xs = [j + i * width for j in range(len(bodies))]
        ax.bar(xs, [clip["per_body_mpjpe_mm"][b] for b in bodies], width=width, label=clip["name"])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(bodies))], bodies, rotation=60, ha="right")
    ax.set_ylabel("mean position error (mm)")
    ax.set_title("per-body tracking error")
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "per_body_error.png"))

    fig, ax = plt.subplots(figsize=(9, 4))
    for clip in clips:
        ax.plot(clip["over_time"]["time_s"], clip["over_time"]["mpjpe_mm"], label=clip["name"])
    ax.set_xlabel("clip time (s)")
    ax.set_ylabel("MPJPE (mm)")
    ax.set_title("tracking error over the clip")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    written.append(_save(fig, out / "error_over_time.png"))

    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(clips)), 4))
    ax.bar([c["name"] for c in clips], [c["success_rate"] for c in clips], color="tab:green")
    ax.set_ylim(0, 1)
    ax.set_ylabel("success rate")
    ax.set_title("clips tracked to the end")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    written.append(_save(fig, out / "success_per_clip.png"))

    if run_dir is not None and (Path(run_dir) / "metrics.jsonl").is_file():
        rows = read_metrics(run_dir)
        written.append(plot_training_curves({"mimic_rl": rows}, out / "training_curves.png"))
    return written
