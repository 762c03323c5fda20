"""Learning tests on the point-mass toy: MMPPO learns to track, and AMP's discriminator and style reward behave."""

from __future__ import annotations

import torch
from helpers import rollout, toy_cfg

from mimic_rl.algorithms import MMPPO
from mimic_rl.envs import PointMassTrackingEnv


def _errors(logs):
    return float(torch.stack([torch.as_tensor(log["tracking_error"]) for log in logs]).mean())


def test_mmppo_cuts_tracking_error_by_70_percent():
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=64, seed=0)
    obs = env.get_observations()
    alg = MMPPO.construct_algorithm(obs, env, toy_cfg(), "cpu")
    errors = []
    for _ in range(30):  # about 5 s of CPU
        obs, logs = rollout(alg, env, obs, 24)
        errors.append(_errors(logs))
        alg.update()
    first, last = errors[0], sum(errors[-3:]) / 3
    assert last < 0.3 * first, (first, last, errors)


def test_mmppo_learns_with_partial_references_and_a_recurrent_policy():
    """Half the envs have no reference (mask False); a GRU actor-critic trains on trajectory batches."""
    torch.manual_seed(1)
    env = PointMassTrackingEnv(num_envs=64, seed=1, reference_fraction=0.5)
    obs = env.get_observations()
    cfg = toy_cfg(num_mini_batches=2)
    cfg["actor"].update(rnn_type="gru", rnn_hidden_dim=32)
    cfg["critic"].update(rnn_type="gru", rnn_hidden_dim=32)
    alg = MMPPO.construct_algorithm(obs, env, cfg, "cpu")
    errors = []
    for _ in range(25):
        obs, logs = rollout(alg, env, obs, 24)
        errors.append(_errors(logs))
        alg.update()
    assert sum(errors[-3:]) / 3 < 0.5 * sum(errors[:3]) / 3, errors


def test_amp_discriminator_learns_first_then_the_style_reward_rises():
    """Style reward only: expert pairs are consecutive reference velocities (known), policy pairs its own."""
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=64, seed=0)
    obs = env.get_observations()
    amp = {
        "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
        "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor",
        "task_weight": 0.0,
        "style_weight": 1.0,
        "learning_rate": 1e-3,
    }
    alg = MMPPO.construct_algorithm(obs, env, toy_cfg(amp_cfg=amp), "cpu")
    accuracy, style = [], []
    for _ in range(30):
        obs, _ = rollout(alg, env, obs, 24)
        style.append(alg.collection_logs()["amp_style_reward"])
        out = alg.update()
        accuracy.append(0.5 * (out["amp_policy_accuracy"] + out["amp_expert_accuracy"]))
    # the discriminator separates policy from expert pairs early on ...
    assert max(accuracy[:5]) > 0.7, accuracy
    # ... and the policy then earns more style reward than at the discriminator's best
    low = min(style[2:10])
    assert sum(style[-5:]) / 5 > low + 0.1, style
