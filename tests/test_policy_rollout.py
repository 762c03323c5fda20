"""PolicyRollout, the storage MMPPO and Distillation write into: the env's TensorDict under its own group names, one
name per field from collection to loss, defaults for time-outs, carried AMP rows, recurrent states."""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers import toy_cfg
from test_distillation import ToyExpert

from mimic_rl.algorithms import MMPPO, Distillation
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.models.distributions import gaussian_log_prob
from mimic_rl.storage import PolicyRollout
from mimic_rl.storage.returns import compute_gae

T, N = 6, 8


def _rollout(**kwargs) -> PolicyRollout:
    obs = {"policy": (3,), "reference": (2, 4), "reference_mask": torch.zeros(N, dtype=torch.bool)}
    return PolicyRollout("rl", N, T, obs, (2,), **kwargs)


def _step(g: torch.Generator, **extra) -> dict:
    obs = {
        "policy": torch.randn(N, 3, generator=g),
        "reference": torch.randn(N, 2, 4, generator=g),
        "reference_mask": torch.rand(N, generator=g) > 0.2,
    }
    step = {
        "obs": obs,
        "actions": torch.randn(N, 2, generator=g),
        "values": torch.randn(N, 1, generator=g),
        "actions_log_prob": torch.randn(N, generator=g),
        "action_mean": torch.randn(N, 2, generator=g),
        "action_std": torch.rand(N, 2, generator=g) + 0.1,
        "rewards": torch.randn(N, generator=g),
        "dones": torch.rand(N, generator=g) < 0.2,
    }
    step.update(extra)
    return step


def test_mmppo_stores_the_envs_groups_and_its_own_fields_under_one_name_each():
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=N, seed=0)
    obs = env.get_observations()
    alg = MMPPO.construct_algorithm(obs, env, toy_cfg(), "cpu")
    seen = []
    with torch.inference_mode():
        for _ in range(24):
            before = obs.clone()
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            seen.append((before, actions.clone(), rewards.clone(), dones.clone(), extras["time_outs"].clone()))
            alg.process_env_step(obs, rewards, dones, extras)
    stored = alg.storage.get()
    assert set(stored["obs"].keys()) == set(alg.obs_groups.stored())  # the env's names, nothing renamed
    for t in (0, 11, 23):
        before, actions, rewards, dones, time_outs = seen[t]
        for group in stored["obs"].keys():
            assert torch.equal(stored["obs"][group][t], before[group]), group
        assert torch.equal(stored["actions"][t], actions)
        assert torch.equal(stored["rewards"][t].squeeze(-1), rewards) and torch.equal(stored["dones"][t, :, 0], dones)
        assert torch.equal(stored["time_outs"][t, :, 0], time_outs)
        with torch.no_grad():  # a second computation of what the policy and the critic said
            mean, std = alg.actor.distribution(*alg.obs_groups.actor_inputs(before))
            value = alg.critic(*alg.obs_groups.critic_inputs(before))
        torch.testing.assert_close(stored["action_mean"][t], mean)
        torch.testing.assert_close(stored["action_std"][t], std)
        torch.testing.assert_close(stored["values"][t], value)
        torch.testing.assert_close(stored["actions_log_prob"][t].squeeze(-1), gaussian_log_prob(actions, mean, std))


def test_left_out_time_outs_and_bootstrap_values_follow_rsl_rl_with_one_warning():
    g = torch.Generator().manual_seed(0)
    rollout = _rollout()
    steps = [_step(g) for _ in range(T)]
    for s in steps[:3]:
        rollout.add_step(s)  # no time-outs at all: no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in steps[3:]:
            rollout.add_step({**s, "time_outs": s["dones"]})  # time-outs, but no bootstrap values
    assert sum("shortcut" in str(w.message) for w in caught) == 1
    stored = rollout.get()
    assert not stored["time_outs"][:3].any() and torch.equal(stored["time_outs"][3:, :, 0], stored["dones"][3:, :, 0])
    assert torch.equal(stored["bootstrap_values"], stored["values"])  # V(s_t): rsl_rl's shortcut
    last = torch.randn(N, generator=g)
    rollout.compute_returns(last, 0.99, 0.95)
    expected, _ = compute_gae(
        torch.stack([s["rewards"] for s in steps]).unsqueeze(-1),
        torch.stack([s["values"] for s in steps]),
        stored["dones"],
        last.unsqueeze(-1),
        0.99,
        0.95,
        time_outs=stored["time_outs"],
        bootstrap_values=torch.stack([s["values"] for s in steps]),
    )
    torch.testing.assert_close(stored["returns"], expected)


def test_bad_steps_name_the_field_and_the_group():
    g = torch.Generator().manual_seed(0)
    rollout = _rollout()
    step = _step(g)
    del step["obs"]["reference_mask"]
    with pytest.raises(KeyError, match=r"obs: missing observation group\(s\) \['reference_mask'\]"):
        rollout.add_step(step)
    with pytest.raises(ValueError, match=r"obs\['reference'\]: expected shape \(8, 2, 4\)"):
        rollout.add_step(_step(g, obs={**_step(g)["obs"], "reference": torch.zeros(N, 4)}))
    with pytest.raises(KeyError, match=r"unknown field\(s\) \['mu'\]"):
        rollout.add_step(_step(g, mu=torch.zeros(N, 2)))
    assert rollout.step == 0
    for _ in range(T):
        rollout.add_step(_step(g))
    with pytest.raises(OverflowError, match="holds 6 steps per env"):
        rollout.add_step(_step(g))


def test_the_carry_row_round_trips_and_pairs_step_zero_with_the_last_step():
    g = torch.Generator().manual_seed(1)
    rollout = _rollout()
    for _ in range(T):
        rollout.add_step(_step(g, dones=torch.zeros(N, dtype=torch.bool)))
    last = rollout.get()["obs"]["policy"][-1].clone()
    rollout.clear()  # the last step becomes the carry row
    fresh = _rollout()
    fresh.load_carry_state(rollout.carry_state())  # as a resumed run restores it
    for r in (rollout, fresh):
        for _ in range(T):
            r.add_step(_step(g, dones=torch.zeros(N, dtype=torch.bool)))
        batch = next(r.mini_batches(1, previous_keys=["obs"], shuffle=False))
        first = batch["indices"] < N  # step 0 of each env
        assert torch.equal(batch["previous"]["obs"]["policy"][first], last) and batch["previous_valid"][first].all()
    first_ever = next(_rollout_full(g).mini_batches(1, previous_keys=["obs"]))
    assert not first_ever["previous_valid"][first_ever["indices"] < N].any()  # a first rollout has no step -1


def _rollout_full(g: torch.Generator) -> PolicyRollout:
    """A first rollout: step 0 has no previous step."""
    rollout = _rollout()
    for _ in range(T):
        rollout.add_step(_step(g))
    return rollout


def test_recurrent_batches_start_from_the_stored_hidden_state():
    g = torch.Generator().manual_seed(2)
    rollout = _rollout()
    for t in range(T):
        code = torch.arange(N, dtype=torch.float32) + 100 * t  # hidden state of (t, n): 100 t + n
        hidden = (code.view(1, N, 1).repeat(2, 1, 3), None)  # a 2-layer GRU actor, no recurrent critic
        rollout.add_step(_step(g, dones=torch.rand(N, generator=g) < 0.3), hidden)
    for batch in rollout.mini_batches(2, 2, sequence_mode="trajectory"):
        start = batch["indices"][0]
        actor, critic = batch["hidden_states"]
        assert critic is None and actor.shape == (2, start.numel(), 3)
        assert torch.equal(actor[1, :, 0], (start // N * 100 + start % N).float())
        assert batch["obs"]["policy"].shape[:2] == batch["masks"].shape


def test_distillation_stores_the_students_groups_and_the_teachers_labels():
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=N, seed=0)
    obs = env.get_observations()
    cfg = {"algorithm": {"teacher_action_prob": 0.0}, "student": {"hidden_dims": [16]}, "teacher": ToyExpert()}
    alg = Distillation.construct_algorithm(obs, env, cfg, "cpu")
    firsts = []
    with torch.inference_mode():
        for _ in range(3):
            firsts.append(obs.clone())
            obs, rew, dones, extras = env.step(alg.act(obs))
            alg.process_env_step(obs, rew, dones, extras)
    stored = alg.storage.get()
    assert list(stored["obs"].keys()) == ["policy", "reference", "reference_mask"]  # no privileged group
    for t, before in enumerate(firsts):
        assert torch.equal(stored["obs"]["reference"][t], before["reference"])
        torch.testing.assert_close(stored["privileged_actions"][t], ToyExpert()(before))
