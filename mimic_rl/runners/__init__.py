"""Runners: training loops, checkpoints and logging."""

from mimic_rl.runners.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from mimic_rl.runners.distillation import DistillationRunner
from mimic_rl.runners.on_policy import OnPolicyRunner, make_env, seed_everything

__all__ = [
    "DistillationRunner",
    "OnPolicyRunner",
    "latest_checkpoint",
    "load_checkpoint",
    "make_env",
    "save_checkpoint",
    "seed_everything",
]
