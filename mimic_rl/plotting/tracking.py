"""Matplotlib figures (Agg backend, no display needed) of training logs and evaluation results.

Names match the progress line and ``eval.json``: success (an episode that ends without a termination; in evaluation
every clip is played from its first frame), global MPJPE (world frame) and root-relative MPJPE.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from mimic_rl.run_dirs import read_jsonl

__all__ = ["plot_eval", "plot_training_curves", "read_metrics", "training_curves_figure"]

CURVES = (
    ("metrics/global_mpjpe_mm", "global MPJPE (training episodes)", "mm", "zero"),
    ("metrics/root_mpjpe_mm", "root-relative MPJPE (training episodes)", "mm", "zero"),
    ("episode/success_rate", "success (training episodes)", "fraction of episodes", "unit"),
    ("episode/length", "episode length", "policy steps", "zero"),
    ("loss/learning_rate", "learning rate", "learning rate (log scale)", "log"),
    ("episode/reward", "episode reward", "return per episode", "free"),
)
"""Each panel: the metrics.jsonl key, its title, the y-axis label with units, and its scale (``zero``: the axis starts
at 0; ``unit``: 0 to 1; ``log``; ``free``: matplotlib's limits, for values of either sign)."""
SMOOTH = 10
"""Iterations in the window of the smoothed curve and of its band."""


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a run's ``metrics.jsonl`` (a file or the run folder); a line cut short by a killed run is left out and
    said on stderr (``read_jsonl``)."""
    path = Path(path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"training log {path} not found")
    return read_jsonl(path)


def plot_training_curves(
    runs: dict[str, list[dict[str, float]]], output: str | Path, x: str = "iteration", title: str | None = None
) -> Path:
    """Learning curves of one or more runs (``{label: rows}``) against ``iteration``, ``wall`` time or ``samples``:
    global and root-relative MPJPE, success, episode length, learning rate and episode reward. Each run is drawn as
    its mean over a window of ``SMOOTH`` iterations, with a band from the window's minimum to its maximum (the legend
    says so); ``title`` (e.g. the clips trained on) heads the figure."""
    return _save(training_curves_figure(runs, x, title), output)


def training_curves_figure(
    runs: dict[str, list[dict[str, float]]], x: str = "iteration", title: str | None = None
) -> Any:
    """The matplotlib figure of ``plot_training_curves`` (not saved)."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    for ax, (key, name, unit, scale) in zip(axes.flat, CURVES):
        for i, (label, rows) in enumerate(runs.items()):
            pts = [(_x(r, x), r[key]) for r in rows if key in r and math.isfinite(r[key])]
            if pts:
                _smoothed(ax, pts, label, f"C{i}")
        _axis_scale(ax, scale)
        ax.set_title(name)
        ax.set_ylabel(unit)
        ax.set_xlabel({"iteration": "iteration", "wall": "wall-clock time (min)", "samples": "env steps"}[x])
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=9, frameon=False)
    fig.suptitle(title or "training curves", fontsize=13)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return fig


def _smoothed(ax: Any, pts: list[tuple[float, float]], label: str, color: str) -> None:
    """The mean of each point's trailing window of ``SMOOTH`` values, and the window's min-max as a band."""
    xs, ys = zip(*pts)
    windows = [ys[max(0, i - SMOOTH + 1) : i + 1] for i in range(len(ys))]
    mean = [sum(w) / len(w) for w in windows]
    ax.fill_between(xs, [min(w) for w in windows], [max(w) for w in windows], color=color, alpha=0.2, lw=0,
                    label=f"{label}: min-max of the last {SMOOTH} iterations")  # fmt: skip
    ax.plot(xs, mean, color=color, lw=1.4, label=f"{label}: mean of the last {SMOOTH} iterations")


def _axis_scale(ax: Any, scale: str) -> None:
    """Zero drawn as zero: non-negative quantities start at 0, fractions span 0-1."""
    if scale == "log":
        ax.set_yscale("log")
    elif scale == "zero":
        ax.set_ylim(bottom=0)
    elif scale == "unit":
        ax.set_ylim(0, 1.03)
    else:
        ax.axhline(0, color="black", lw=0.8)


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
    ax.set_ylim(bottom=0)
    ax.set_title(f"per-body tracking error, evaluated from the start of {_clip_names(clips)}")
    ax.legend(title="clip")
    fig.tight_layout()
    return _save(fig, out / "per_body_error.png")


def _over_time(clips: list[dict[str, Any]], out: Path) -> Path:
    """Global and root-relative MPJPE over each clip's time, with the envs still alive (a second axis)."""
    fig, axes = plt.subplots(len(clips), 1, figsize=(10, 3.2 * len(clips)), squeeze=False)
    for ax, clip in zip(axes[:, 0], clips):
        t = clip["over_time"]
        ax.plot(t["time_s"], t["global_mpjpe_mm"], label="global MPJPE", color="tab:blue")
        ax.plot(t["time_s"], t["root_mpjpe_mm"], label="root-relative MPJPE", color="tab:orange")
        ax.set_ylabel("MPJPE over the envs alive (mm)")
        ax.set_ylim(bottom=0)
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
        ax.legend(lines, [h.get_label() for h in lines], loc="upper right", fontsize=8, framealpha=0.9)
        ax.set_title(
            f"{clip['name']} ({clip['duration_s']:.1f} s), evaluated from its first frame: success "
            f"{clip['success_rate']:.2f} of {clip['num_envs']} envs (red lines: terminations)"
        )
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
    ax.set_ylabel("success rate (fraction of envs)")
    ax.set_title("success: envs that tracked each clip\nfrom its first frame to its end")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    return _save(fig, out / "success_per_clip.png")


def _clip_names(clips: list[dict[str, Any]]) -> str:
    """``walk``, ``walk and run``, ``walk, run and 4 more clips``."""
    names = [c["name"] for c in clips]
    if len(names) <= 2:
        return " and ".join(names)
    return f"{names[0]}, {names[1]} and {len(names) - 2} more clip{'s' if len(names) > 3 else ''}"


def plot_eval(evaluation: dict[str, Any], output_dir: str | Path, run_dir: str | Path | None = None) -> list[Path]:
    """PNGs of an evaluation (``mimic-rl eval`` JSON; a tracking task's) and, when ``run_dir`` has a log, the training
    curves."""
    out = Path(output_dir)
    clips = evaluation["clips"]
    tracking = evaluation.get("task", "tracking") == "tracking"  # the walking task has no per-body errors
    written = [_per_body(clips, out), _over_time(clips, out), _success(clips, out)] if tracking else []
    if run_dir is not None and (Path(run_dir) / "metrics.jsonl").is_file():
        rows = read_metrics(run_dir)
        title = f"training on {_clip_names(clips)} ({Path(run_dir).name})"
        written.append(plot_training_curves({"mimic_rl": rows}, out / "training_curves.png", title=title))
    return written
