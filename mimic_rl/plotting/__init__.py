"""Tracking statistics as PNGs: training curves, per-body errors, error over a clip's time, success per clip."""

from mimic_rl.plotting.tracking import plot_eval, plot_training_curves, read_metrics

__all__ = ["plot_eval", "plot_training_curves", "read_metrics"]
