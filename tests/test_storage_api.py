"""RolloutStorageMM's seed API: which buffers exist, input validation, batches, statistics, TensorDict groups."""

from __future__ import annotations

import pytest
import torch
from helpers import fill_storage, make_storage
from tensordict import TensorDict

from mimic_rl.storage import DistillationBatch, PPOBatch, RolloutStorageMM


def test_buffers_exist_only_when_their_condition_holds():
    bare = RolloutStorageMM("rl", 3, 2, (4,), (None,), (None,), (None,), (2,))
    assert bare.privileged_observations is None and bare.reference_observations is None
    assert bare.reference_observations_mask is None and bare.privileged_reference_observations is None
    assert bare.dagger_actions is None and bare.rnd_state is None and bare.privileged_actions is None
    assert bare.values.shape == (2, 3, 1) and bare.mu.shape == (2, 3, 2) and bare.sigma.shape == (2, 3, 2)

    # Critic reference needs both reference shapes.
    only_critic_ref = RolloutStorageMM("rl", 3, 2, (4,), (None,), (5,), (7,), (2,))
    assert only_critic_ref.privileged_observations.shape == (2, 3, 5)
    assert only_critic_ref.privileged_reference_observations is None

    full = RolloutStorageMM("rl", 3, 2, (4,), (6, 5), (5,), (7,), (2,), apply_dagger_actions=True, rnd_state_shape=(9,))
    assert full.reference_observations.shape == (2, 3, 6, 5)
    assert full.reference_observations_mask.shape == (2, 3) and full.reference_observations_mask.dtype == torch.bool
    assert full.privileged_reference_observations.shape == (2, 3, 7)
    assert full.privileged_reference_observations_mask.dtype == torch.bool
    assert full.dagger_actions.shape == (2, 3, 2) and full.rnd_state.shape == (2, 3, 9)

    distill = RolloutStorageMM("distillation", 3, 2, (4,), (6,), (None,), (None,), (2,))
    assert distill.privileged_actions.shape == (2, 3, 2)
    assert distill.values is None and distill.returns is None and distill.mu is None

    with pytest.raises(ValueError, match="training_type"):
        RolloutStorageMM("ppo", 3, 2, (4,), (None,), (None,), (None,), (2,))


def test_transition_has_every_seed_field():
    fields = set(vars(RolloutStorageMM.Transition()))
    seed = {
        "observations", "reference_observations", "reference_observations_mask", "critic_observations",
        "critic_reference_observations", "critic_reference_observations_mask", "actions", "privileged_actions",
        "dagger_actions", "rewards", "dones", "values", "actions_log_prob", "action_mean", "action_sigma",
        "hidden_states", "rnd_state", "time_outs", "bootstrap_values",
    }  # fmt: skip
    assert seed <= fields


def _transition(storage, N=5):
    tr = storage.Transition()
    tr.observations, tr.critic_observations = torch.zeros(N, 4), torch.zeros(N, 6)
    tr.reference_observations, tr.reference_observations_mask = torch.zeros(N, 3), torch.ones(N, dtype=torch.bool)
    tr.critic_reference_observations = torch.zeros(N, 2)
    tr.critic_reference_observations_mask = torch.ones(N, dtype=torch.bool)
    tr.actions, tr.action_mean, tr.action_sigma = torch.zeros(N, 2), torch.zeros(N, 2), torch.ones(N, 2)
    tr.rewards, tr.dones, tr.values, tr.actions_log_prob = (
        torch.zeros(N),
        torch.zeros(N),
        torch.zeros(N, 1),
        torch.zeros(N),
    )
    return tr


def test_errors_name_the_field_and_both_shapes():
    storage = make_storage(T=2, N=5)
    tr = _transition(storage)
    tr.reference_observations = torch.zeros(5, 4)
    with pytest.raises(ValueError, match=r"reference_observations: expected shape \(5, 3\).*got \(5, 4\)"):
        storage.add_transitions(tr)
    tr = _transition(storage)
    tr.actions = torch.zeros(4, 2)
    with pytest.raises(ValueError, match=r"actions: expected shape \(5, 2\).*got \(4, 2\)"):
        storage.add_transitions(tr)
    tr = _transition(storage)
    tr.observations = torch.zeros(5, 4, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"observations: expected dtype torch.float32, got torch.float64"):
        storage.add_transitions(tr)
    tr = _transition(storage)
    tr.reference_observations_mask = torch.ones(5)
    with pytest.raises(TypeError, match=r"reference_observations_mask.*torch.bool.*mask.bool\(\)"):
        storage.add_transitions(tr)
    tr = _transition(storage)
    tr.critic_observations = None
    with pytest.raises(ValueError, match=r"critic_observations is None"):
        storage.add_transitions(tr)
    tr = _transition(storage)
    tr.rewards = torch.zeros(5, 2)
    with pytest.raises(ValueError, match=r"rewards: expected shape \(5, 1\) or \(5,\)"):
        storage.add_transitions(tr)


def test_overflow_raises_and_clear_resets():
    storage = make_storage(T=2, N=5)
    storage.add_transitions(_transition(storage))
    storage.add_transition(_transition(storage))  # seed alias
    with pytest.raises(OverflowError, match="holds 2 transitions per env"):
        storage.add_transitions(_transition(storage))
    storage.clear()
    storage.add_transitions(_transition(storage))
    assert storage.step == 1


def test_rewards_dones_logprob_accept_n_and_n1_and_flags_any_numeric_dtype():
    storage = make_storage(T=2, N=5)
    tr = _transition(storage)
    tr.rewards = torch.arange(5.0)
    tr.dones = torch.tensor([0, 1, 0, 0, 1])  # int64 like many envs
    tr.actions_log_prob = torch.full((5, 1), -1.5)
    storage.add_transitions(tr)
    tr = _transition(storage)
    tr.rewards = torch.arange(5.0).unsqueeze(-1) * 2
    tr.dones = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]).unsqueeze(-1)
    storage.add_transitions(tr)
    assert storage.rewards.squeeze(-1).tolist() == [[0, 1, 2, 3, 4], [0, 2, 4, 6, 8]]
    assert storage.dones.dtype == torch.bool
    assert storage.dones.squeeze(-1).tolist() == [[False, True, False, False, True], [False, False, True, False, False]]
    assert storage.actions_log_prob[0].flatten().tolist() == [-1.5] * 5


def test_missing_reference_mask_means_every_env_has_a_reference():
    storage = make_storage(T=1, N=5)
    tr = _transition(storage)
    tr.reference_observations_mask = None
    storage.reference_observations_mask.fill_(False)
    storage.add_transitions(tr)
    assert storage.reference_observations_mask.all()


def test_get_statistics_leaves_dones_untouched():
    storage = make_storage(T=4, N=2)
    for t in range(4):
        tr = _transition(storage, N=2)
        tr.rewards = torch.tensor([1.0, 3.0])
        tr.dones = torch.tensor([t == 1, False])
        storage.add_transitions(tr)
    before = storage.dones.clone()
    mean_length, mean_reward = storage.get_statistics()
    # env 0: trajectories of 2 and 2 steps (the last one is cut by the rollout); env 1: one of 4.
    assert mean_length.item() == pytest.approx(8 / 3)
    assert mean_reward.item() == pytest.approx(2.0)
    assert torch.equal(storage.dones, before) and not storage.dones[-1].any()


def test_ppo_batch_unpacks_as_the_seed_18_tuple_in_order():
    storage = make_storage(T=3, N=4, apply_dagger_actions=True, rnd_state_shape=(5,))
    rec = fill_storage(storage, seed=0)
    storage.compute_returns(torch.zeros(4), 0.99, 0.95)
    batch = next(storage.mini_batch_generator(1, 1))
    assert isinstance(batch, PPOBatch) and len(batch) == 18
    (obs, ref, critic_obs, critic_ref, actions, target_values, advantages, returns, old_log_prob, old_mu, old_sigma,
     dagger, hidden, masks, rnd_state, obs_prev, ref_prev, ref_prev_mask) = batch  # fmt: skip
    idx = batch.indices
    t, n = idx // 4, idx % 4
    assert torch.equal(obs, rec["observations"][t, n])
    assert torch.equal(ref[0], rec["reference_observations"][t, n])
    assert torch.equal(ref[1], rec["reference_observations_mask"][t, n])
    assert torch.equal(critic_obs, rec["critic_observations"][t, n])
    assert torch.equal(critic_ref[0], rec["critic_reference_observations"][t, n])
    assert torch.equal(critic_ref[1], rec["critic_reference_observations_mask"][t, n])
    assert torch.equal(actions, rec["actions"][t, n])
    assert torch.equal(target_values, rec["values"][t, n])
    assert torch.equal(advantages, storage.advantages[t, n]) and torch.equal(returns, storage.returns[t, n])
    assert torch.equal(old_log_prob, rec["actions_log_prob"][t, n].unsqueeze(-1))
    assert torch.equal(old_mu, rec["action_mean"][t, n]) and torch.equal(old_sigma, rec["action_sigma"][t, n])
    assert torch.equal(dagger, rec["dagger_actions"][t, n]) and torch.equal(rnd_state, rec["rnd_state"][t, n])
    assert hidden == (None, None) and masks is None
    assert obs_prev is None and ref_prev is None and ref_prev_mask is None  # no amp_cfg
    assert batch[4] is batch.actions and batch[-3:] == (None, None, None)


def test_without_critic_buffers_the_batch_reuses_actor_streams():
    storage = make_storage(T=3, N=4, privileged_obs_shape=(None,), privileged_ref_obs_shape=(None,))
    fill_storage(storage, seed=0)
    storage.compute_returns(torch.zeros(4), 0.99, 0.95)
    batch = next(storage.mini_batch_generator(2, 1))
    assert batch.critic_observations is batch.observations and batch.critic_reference is batch.reference


def test_distillation_generator_yields_the_seed_7_tuple_per_step():
    storage = make_storage("distillation", T=3, N=4)
    rec = fill_storage(storage, seed=4)
    batches = list(storage.generator())
    assert len(batches) == 3 and all(isinstance(b, DistillationBatch) and len(b) == 7 for b in batches)
    obs, priv_obs, ref, priv_ref, actions, priv_actions, dones = batches[1]
    assert torch.equal(obs, rec["observations"][1]) and torch.equal(priv_obs, rec["critic_observations"][1])
    assert torch.equal(ref[0], rec["reference_observations"][1]) and torch.equal(
        ref[1], rec["reference_observations_mask"][1]
    )
    assert torch.equal(priv_ref[0], rec["critic_reference_observations"][1])
    assert torch.equal(actions, rec["actions"][1]) and torch.equal(priv_actions, rec["privileged_actions"][1])
    assert torch.equal(dones.squeeze(-1), rec["dones"][1])
    with pytest.raises(ValueError, match="training_type='rl'"):
        next(storage.mini_batch_generator(1, 1))
    with pytest.raises(ValueError, match="distillation"):
        next(make_storage("rl").generator())


def test_tensordict_observations_are_stored_as_tensordict():
    N, T = 3, 2
    example = TensorDict({"policy": torch.zeros(N, 4), "history": torch.zeros(N, 2, 3)}, batch_size=[N])
    storage = RolloutStorageMM("rl", N, T, example, {"frames": (2, 5)}, (None,), (None,), (2,))
    assert isinstance(storage.observations, TensorDict) and storage.observations.batch_size == torch.Size([T, N])
    assert storage.observations["history"].shape == (T, N, 2, 3)
    assert isinstance(storage.reference_observations, TensorDict)
    written = []
    for _ in range(T):
        tr = storage.Transition()
        tr.observations = TensorDict({"policy": torch.randn(N, 4), "history": torch.randn(N, 2, 3)}, batch_size=[N])
        tr.reference_observations = {"frames": torch.randn(N, 2, 5)}
        tr.actions, tr.action_mean, tr.action_sigma = torch.zeros(N, 2), torch.zeros(N, 2), torch.ones(N, 2)
        tr.rewards, tr.dones, tr.values, tr.actions_log_prob = (
            torch.zeros(N),
            torch.zeros(N),
            torch.zeros(N, 1),
            torch.zeros(N),
        )
        storage.add_transitions(tr)
        written.append(tr)
    assert torch.equal(storage.observations["history"][1], written[1].observations["history"])
    storage.compute_returns(torch.zeros(N), 0.99, 0.95)
    batch = next(storage.mini_batch_generator(1, 1))
    t, n = batch.indices // N, batch.indices % N
    assert isinstance(batch.observations, TensorDict) and batch.observations.batch_size == torch.Size([N * T])
    expected = torch.stack([written[i].observations["policy"][j] for i, j in zip(t.tolist(), n.tolist())])
    assert torch.equal(batch.observations["policy"], expected)
    assert batch.reference[0]["frames"].shape == (N * T, 2, 5)

    tr = storage.Transition()
    tr.observations = TensorDict({"policy": torch.randn(N, 4)}, batch_size=[N])
    storage.clear()
    with pytest.raises(KeyError, match="history"):
        storage.add_transitions(tr)
    tr.observations = torch.zeros(N, 4)
    with pytest.raises(TypeError, match="TensorDict"):
        storage.add_transitions(tr)
