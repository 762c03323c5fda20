"""Environments: the ``VecEnv`` protocol and the backends that implement it."""

from mimic_rl.envs.toy import PointMassTrackingEnv, amp_obs_extractor, amp_reference_extractor
from mimic_rl.envs.vec_env import VecEnv

__all__ = ["PointMassTrackingEnv", "VecEnv", "amp_obs_extractor", "amp_reference_extractor"]
