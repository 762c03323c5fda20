"""Rollout storage for motion-mimic PPO and distillation."""

from mimic_rl.storage.batches import DistillationBatch, PPOBatch
from mimic_rl.storage.policy_rollout import PolicyRollout
from mimic_rl.storage.returns import compute_gae, compute_monte_carlo, normalize_advantages
from mimic_rl.storage.rollout import FieldSpec, RolloutBuffer
from mimic_rl.storage.rollout_storage_mm import RolloutStorageMM, rollout_of
from mimic_rl.storage.sequences import SequenceMode, build_sequences, split_and_pad_trajectories, unpad_trajectories

__all__ = [
    "DistillationBatch",
    "FieldSpec",
    "PPOBatch",
    "PolicyRollout",
    "RolloutBuffer",
    "RolloutStorageMM",
    "SequenceMode",
    "build_sequences",
    "compute_gae",
    "compute_monte_carlo",
    "normalize_advantages",
    "rollout_of",
    "split_and_pad_trajectories",
    "unpad_trajectories",
]
