"""Plots a user keeps: titles naming the clip and units, zeros drawn as zeros, a legend saying what the band is."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt

from mimic_rl.plotting import plot_eval, read_metrics
from mimic_rl.plotting.tracking import SMOOTH, training_curves_figure


def _rows(n: int = 30) -> list[dict[str, float]]:
    """A training log whose values are known: MPJPE 100 + 10 * (i % 3) mm, success i / n, reward i - 15."""
    return [
        {
            "iteration": i,
            "metrics/global_mpjpe_mm": 100.0 + 10.0 * (i % 3),
            "metrics/root_mpjpe_mm": 50.0,
            "episode/success_rate": i / n,
            "episode/length": 40.0,
            "loss/learning_rate": 1e-3,
            "episode/reward": i - 15.0,
        }
        for i in range(1, n + 1)
    ]


def test_training_curves_start_at_zero_and_say_what_the_band_is():
    """Breakage caught: an axis that starts at the data's minimum (a 100 mm error drawn as if it were near zero), a
    smoothed curve or band that is not the window's mean / min-max, a figure without the clip in its title."""
    fig = training_curves_figure({"seed 0": _rows()}, title="training on humanoid_walk")
    axes = fig.axes
    global_ax, success_ax, reward_ax = axes[0], axes[2], axes[5]
    assert global_ax.get_ylim()[0] == 0 and global_ax.get_ylabel() == "mm"
    assert success_ax.get_ylim() == (0, 1.03)
    assert reward_ax.get_ylim()[0] < 0 < reward_ax.get_ylim()[1]  # a quantity of either sign keeps its zero line
    assert fig._suptitle.get_text() == "training on humanoid_walk"
    labels = [text.get_text() for legend in fig.legends for text in legend.get_texts()]
    assert labels == [
        f"seed 0: min-max of the last {SMOOTH} iterations",
        f"seed 0: mean of the last {SMOOTH} iterations",
    ]
    (line,) = global_ax.get_lines()
    ys = [100.0 + 10.0 * (i % 3) for i in range(1, 31)]
    expected = [sum(ys[max(0, i - SMOOTH + 1) : i + 1]) / len(ys[max(0, i - SMOOTH + 1) : i + 1]) for i in range(30)]
    assert list(line.get_ydata()) == expected
    band = global_ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 100.0 and band.max() == 120.0
    plt.close(fig)


def test_eval_plots_name_the_clip_and_start_at_zero(tmp_path):
    """Breakage caught: plots whose title does not name the clip, or whose error axis does not start at zero."""
    clip = {
        "name": "humanoid_walk",
        "duration_s": 2.6,
        "num_envs": 4,
        "success_rate": 0.0,
        "failure_times_s": [1.0],
        "per_body_mpjpe_mm": {"pelvis": 80.0, "head": 120.0},
        "over_time": {"time_s": [0.0, 0.5, 1.0], "global_mpjpe_mm": [90.0, 95.0, 100.0],
                      "root_mpjpe_mm": [40.0, 45.0, 50.0], "alive": [4, 4, 0]},
    }  # fmt: skip
    captured = []
    original = plt.Figure.savefig

    def keep(fig, *args, **kwargs):
        captured.append([(ax.get_title(), ax.get_ylim()) for ax in fig.axes])
        return original(fig, *args, **kwargs)

    plt.Figure.savefig = keep
    try:
        paths = plot_eval({"clips": [clip]}, tmp_path)
    finally:
        plt.Figure.savefig = original
    assert [p.name for p in paths] == ["per_body_error.png", "error_over_time.png", "success_per_clip.png"]
    per_body, over_time, success = captured
    assert "humanoid_walk" in per_body[0][0] and per_body[0][1][0] == 0
    assert over_time[0][0].startswith("humanoid_walk (2.6 s)") and over_time[0][1][0] == 0
    assert success[0][1][0] == 0


def test_a_training_log_cut_short_by_a_killed_run_still_plots(tmp_path, capsys):
    """Breakage caught: ``mimic-rl plot`` failing with a JSON error on the half-written last line a killed run
    leaves in ``metrics.jsonl``; the whole lines are kept and the cut one is said."""
    rows = _rows(3)
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + json.dumps(rows[0])[:25])
    assert read_metrics(tmp_path) == rows
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'metrics.jsonl'}:4: not a JSON line (cut short?), left out"
