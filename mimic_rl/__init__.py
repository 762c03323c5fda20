"""mimic_rl: humanoid motion imitation with reference-aware PPO, AMP, RND, DAgger and distillation."""

__version__ = "0.1.0"
