"""MMPPO.update against rsl_rl's PPO.update: same weights, same data, same hyperparameters -> same result.

This pins the adaptive KL schedule, the clipped value loss, the clipped surrogate, entropy, advantage normalization
and per-model gradient clipping to rsl_rl's behaviour.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from mimic_rl.algorithms import MMPPO
from mimic_rl.models import Actor, Critic
from mimic_rl.storage import RolloutStorageMM

rsl_rl = pytest.importorskip("rsl_rl")


def _rsl_models(obs: TensorDict, num_actions: int):
    from rsl_rl.models import MLPModel

    groups = {"actor": ["policy"], "critic": ["policy"]}
    dist = {"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 0.8}
    actor = MLPModel(obs, groups, "actor", num_actions, hidden_dims=[32, 32], activation="elu", distribution_cfg=dist)
    critic = MLPModel(obs, groups, "critic", 1, hidden_dims=[32, 32], activation="elu")
    return actor, critic


@pytest.mark.parametrize("clipped_value", [True, False])
@pytest.mark.parametrize("desired_kl", [0.01, 1e-5])  # the second forces the learning rate to move every step
def test_update_matches_rsl_rl_ppo(clipped_value, desired_kl):
    from rsl_rl.algorithms import PPO
    from rsl_rl.storage import RolloutStorage

    torch.manual_seed(0)
    N, T, D, A = 32, 8, 6, 3
    obs_example = TensorDict({"policy": torch.zeros(N, D)}, batch_size=[N])
    r_actor, r_critic = _rsl_models(obs_example, A)
    actor = Actor(D, A, hidden_dims=[32, 32], init_noise_std=0.8, obs_normalization=False, min_std=1e-6)
    critic = Critic(D, hidden_dims=[32, 32], obs_normalization=False)
    actor.mlp.load_state_dict(r_actor.mlp.state_dict())
    critic.mlp.load_state_dict(r_critic.mlp.state_dict())
    with torch.no_grad():
        actor.head.std_param.copy_(r_actor.distribution.std_param)

    hyper = {
        "num_learning_epochs": 3, "num_mini_batches": 1, "clip_param": 0.2, "gamma": 0.98, "lam": 0.9,
        "value_loss_coef": 0.7, "entropy_coef": 0.01, "learning_rate": 1e-3, "max_grad_norm": 0.5,
        "use_clipped_value_loss": clipped_value, "schedule": "adaptive", "desired_kl": desired_kl,
    }  # fmt: skip
    st = RolloutStorageMM("rl", N, T, (D,), (None,), (None,), (None,), (A,))
    ours = MMPPO(actor, critic, st, **hyper)
    r_storage = RolloutStorage("rl", N, T, obs_example, [A])
    theirs = PPO(r_actor, r_critic, r_storage, **hyper)

    g = torch.Generator().manual_seed(1)
    for _t in range(T):
        obs = torch.randn(N, D, generator=g)
        with torch.no_grad():
            mean, std = actor.distribution(obs)
            actions = mean + std * torch.randn(N, A, generator=g)
            values = critic(obs)
        log_prob = torch.distributions.Normal(mean, std).log_prob(actions).sum(-1)
        rewards, dones = torch.randn(N, generator=g), torch.rand(N, generator=g) < 0.1
        tr = st.Transition()
        tr.observations, tr.actions, tr.rewards, tr.dones, tr.values = obs, actions, rewards, dones, values
        tr.actions_log_prob, tr.action_mean, tr.action_sigma = log_prob, mean, std
        st.add_transitions(tr)
        rt = RolloutStorage.Transition()
        rt.observations = TensorDict({"policy": obs}, batch_size=[N])
        rt.actions, rt.rewards, rt.dones, rt.values = actions, rewards, dones.float(), values
        rt.actions_log_prob, rt.distribution_params = log_prob, (mean, std)
        r_storage.add_transition(rt)
    last = torch.randn(N, D, generator=g)
    ours.compute_returns(TensorDict({"policy": last}, batch_size=[N]))
    theirs.compute_returns(TensorDict({"policy": last}, batch_size=[N]))
    torch.testing.assert_close(st.advantages, r_storage.advantages, atol=1e-5, rtol=1e-5)

    losses = ours.update()
    r_losses = theirs.update()
    assert ours.learning_rate == pytest.approx(theirs.learning_rate, rel=1e-6)
    if desired_kl < 1e-3:
        assert ours.learning_rate < hyper["learning_rate"]  # the schedule really acted
    for name, value in r_losses.items():
        assert losses[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    torch.testing.assert_close(actor.mlp.state_dict(), r_actor.mlp.state_dict(), atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(critic.mlp.state_dict(), r_critic.mlp.state_dict(), atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(actor.head.std_param, r_actor.distribution.std_param, atol=2e-5, rtol=1e-4)
