"""Returns and advantages against a float64 hand loop and against rsl_rl's own PPO.compute_returns."""

from __future__ import annotations

import types
import warnings

import pytest
import torch
from helpers import fill_storage, make_storage

from mimic_rl.storage import compute_gae, compute_monte_carlo

GAMMA, LAM = 0.97, 0.9


def reference_returns(rec, last_values, gamma, lam, use_timeouts=True):
    """Scalar float64 loop, written from the definition: cut on termination, bootstrap V(s') on a time-out."""
    r = rec["rewards"].double().reshape(rec["rewards"].shape[0], -1)
    v = rec["values"].double().squeeze(-1)
    d = rec["dones"].bool().reshape(r.shape)
    to = rec["time_outs"].bool().reshape(r.shape) if use_timeouts else torch.zeros_like(d)
    boot = rec["bootstrap_values"].double().squeeze(-1) if "bootstrap_values" in rec else v
    T, N = r.shape
    adv = torch.zeros(T, N, dtype=torch.float64)
    for n in range(N):
        a = 0.0
        for t in reversed(range(T)):
            if d[t, n]:
                next_v = boot[t, n].item() if to[t, n] else 0.0
                trace = 0.0
            else:
                next_v = v[t + 1, n].item() if t + 1 < T else float(last_values[n])
                trace = 1.0
            delta = r[t, n].item() + gamma * next_v - v[t, n].item()
            a = delta + gamma * lam * trace * a
            adv[t, n] = a
    return adv + v, adv


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("done_prob", [0.0, 0.15, 0.6])
def test_gae_matches_float64_loop(normalize, done_prob):
    storage = make_storage(T=12, N=7)
    rec = fill_storage(storage, done_prob=done_prob, timeout_prob=0.5, seed=3)
    last = torch.randn(7)
    storage.compute_returns(last, GAMMA, LAM, normalize_advantage=normalize)
    ref_returns, ref_adv = reference_returns(rec, last, GAMMA, LAM)
    torch.testing.assert_close(storage.returns.squeeze(-1).double(), ref_returns, atol=1e-5, rtol=1e-5)
    if normalize:
        ref_adv = (ref_adv - ref_adv.mean()) / (ref_adv.std() + 1e-8)
    torch.testing.assert_close(storage.advantages.squeeze(-1).double(), ref_adv, atol=1e-5, rtol=1e-5)


def test_timeout_bootstrap_changes_the_return_exactly_where_expected():
    """A time-out bootstraps from the given V(s'), a termination does not; hand-computed on one env."""
    storage = make_storage(T=3, N=1, ref_obs_shape=(None,), privileged_ref_obs_shape=(None,))
    rewards, dones, timeouts = [1.0, 2.0, 3.0], [False, True, False], [False, True, False]
    values, boot = [0.5, 0.25, 0.125], 10.0
    for t in range(3):
        tr = storage.Transition()
        tr.observations, tr.critic_observations = torch.zeros(1, 4), torch.zeros(1, 6)
        tr.actions, tr.action_mean, tr.action_sigma = torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2)
        tr.rewards, tr.dones, tr.time_outs = (
            torch.tensor([rewards[t]]),
            torch.tensor([dones[t]]),
            torch.tensor([timeouts[t]]),
        )
        tr.values, tr.actions_log_prob = torch.tensor([[values[t]]]), torch.zeros(1)
        tr.bootstrap_values = torch.tensor([[boot]])
        storage.add_transitions(tr)
    g, lam, last = 0.5, 1.0, 4.0
    storage.compute_returns(torch.tensor([last]), g, lam, normalize_advantage=False)
    # Step 2: r + g * last = 3 + 2 = 5. Step 1 (time-out): r + g * boot = 2 + 5 = 7. Step 0: 1 + g * 7 = 4.5.
    assert storage.returns.flatten().tolist() == pytest.approx([4.5, 7.0, 5.0])
    # Turn the time-out into a termination: step 1 becomes 2 and step 0 becomes 2.
    storage.time_outs.zero_()
    storage.compute_returns(torch.tensor([last]), g, lam, normalize_advantage=False)
    assert storage.returns.flatten().tolist() == pytest.approx([2.0, 2.0, 5.0])


def _rsl_rl_compute_returns(rec, last_values, gamma, lam, normalize):
    """Run rsl_rl's PPO.compute_returns (unbound) on an rsl_rl RolloutStorage holding the same data."""
    from rsl_rl.algorithms.ppo import PPO
    from rsl_rl.storage import RolloutStorage
    from tensordict import TensorDict

    T, N = rec["rewards"].shape[:2]
    obs = TensorDict({"policy": torch.zeros(N, 1)}, batch_size=[N])
    st = RolloutStorage("rl", N, T, obs, [2])
    st.rewards.copy_(rec["rewards"].reshape(T, N, 1))
    st.values.copy_(rec["values"])
    st.dones.copy_(rec["dones"].reshape(T, N, 1))

    class Critic:  # the three calls rsl_rl's compute_returns makes on its critic
        def get_hidden_state(self):
            return None

        def reset(self, hidden_state=None):
            return None

        def __call__(self, observations):
            return last_values.reshape(N, 1)

    critic = Critic()
    fake_ppo = types.SimpleNamespace(
        storage=st, critic=critic, gamma=gamma, lam=lam, normalize_advantage_per_mini_batch=not normalize
    )
    PPO.compute_returns(fake_ppo, obs)
    return st.returns, st.advantages


@pytest.mark.parametrize("normalize", [False, True])
def test_gae_matches_rsl_rl_without_timeouts(normalize):
    pytest.importorskip("rsl_rl")
    storage = make_storage(T=16, N=9)
    rec = fill_storage(storage, done_prob=0.2, timeout_prob=0.0, seed=5)
    last = torch.randn(9)
    storage.compute_returns(last, GAMMA, LAM, normalize_advantage=normalize)
    returns, advantages = _rsl_rl_compute_returns(rec, last, GAMMA, LAM, normalize)
    torch.testing.assert_close(storage.returns, returns, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(storage.advantages, advantages, atol=1e-5, rtol=1e-5)


def test_timeout_fallback_equals_rsl_rl_shortcut_and_warns_once():
    """Without bootstrap values a time-out falls back to rsl_rl's r += gamma * V(s_t), with one warning."""
    pytest.importorskip("rsl_rl")
    storage = make_storage(T=10, N=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = fill_storage(storage, done_prob=0.3, timeout_prob=0.6, seed=7, with_bootstrap=False)
    fallback = [w for w in caught if "shortcut" in str(w.message)]
    assert len(fallback) == 1
    last = torch.randn(6)
    storage.compute_returns(last, GAMMA, LAM, normalize_advantage=False)
    shortcut = dict(rec)
    # rsl_rl PPO.process_env_step: rewards += gamma * values * time_outs, then GAE cuts at the done.
    shortcut["rewards"] = rec["rewards"] + GAMMA * rec["values"].squeeze(-1) * rec["time_outs"].float()
    returns, advantages = _rsl_rl_compute_returns(shortcut, last, GAMMA, LAM, normalize=False)
    torch.testing.assert_close(storage.returns, returns, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(storage.advantages, advantages, atol=1e-5, rtol=1e-5)


def test_monte_carlo_equals_gae_lambda_one_and_loop():
    storage = make_storage(T=9, N=4)
    rec = fill_storage(storage, done_prob=0.25, timeout_prob=0.5, seed=11)
    last = torch.randn(4)
    storage.compute_returns(last, GAMMA, 1.0, normalize_advantage=False, method="mc")
    ref_returns, _ = reference_returns(rec, last, GAMMA, 1.0)
    torch.testing.assert_close(storage.returns.squeeze(-1).double(), ref_returns, atol=1e-5, rtol=1e-5)
    # The pure functions agree with each other for lambda = 1.
    args = (storage.rewards, storage.values, storage.dones, last.reshape(4, 1))
    kw = {"time_outs": storage.time_outs, "bootstrap_values": storage.bootstrap_values}
    gae_ret, gae_adv = compute_gae(*args, GAMMA, 1.0, **kw)
    mc_ret, mc_adv = compute_monte_carlo(*args, GAMMA, **kw)
    torch.testing.assert_close(gae_ret, mc_ret, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gae_adv, mc_adv, atol=1e-5, rtol=1e-5)


def test_non_finite_rewards_raise_and_name_the_field():
    storage = make_storage(T=4, N=3)
    fill_storage(storage, seed=1)
    storage.rewards[2, 1] = float("nan")
    with pytest.raises(FloatingPointError, match=r"rewards.*\[2, 1, 0\]"):
        storage.compute_returns(torch.zeros(3), GAMMA, LAM)
    storage.rewards[2, 1] = 0.0
    with pytest.raises(FloatingPointError, match="last_values"):
        storage.compute_returns(torch.tensor([0.0, float("inf"), 0.0]), GAMMA, LAM)


def test_compute_returns_needs_a_full_rollout_and_rl():
    storage = make_storage(T=4, N=3)
    with pytest.raises(RuntimeError, match="full rollout"):
        storage.compute_returns(torch.zeros(3), GAMMA, LAM)
    distill = make_storage("distillation", T=4, N=3)
    with pytest.raises(ValueError, match="training_type='rl'"):
        distill.compute_returns(torch.zeros(3), GAMMA, LAM)
    fill_storage(storage, seed=2)
    with pytest.raises(ValueError, match="method"):
        storage.compute_returns(torch.zeros(3), GAMMA, LAM, method="td")
