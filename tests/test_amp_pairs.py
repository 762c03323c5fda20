"""AMP previous-state pairs: every pair is (env n, t-1) -> (env n, t); resets and missing history are invalid."""

from __future__ import annotations

import sys
import types

import pytest
import torch
from helpers import make_storage

import mimic_rl.storage.amp_pairs as amp_module


def _encode(t: int, n: int, rollout: int) -> float:
    return 1000.0 * rollout + 10.0 * t + n


def _fill(storage, rollout: int, dones: torch.Tensor) -> None:
    T, N = storage.num_transitions_per_env, storage.num_envs
    for t in range(T):
        tr = storage.Transition()
        code = torch.tensor([_encode(t, n, rollout) for n in range(N)])
        tr.observations = code.unsqueeze(-1).repeat(1, 4)
        tr.reference_observations = -code.unsqueeze(-1).repeat(1, 3)
        tr.reference_observations_mask = torch.ones(N, dtype=torch.bool)
        tr.reference_observations_mask[N - 1] = t % 2 == 0  # the last env has a reference every other step
        tr.critic_observations = torch.zeros(N, 6)
        tr.critic_reference_observations = torch.zeros(N, 2)
        tr.actions, tr.action_mean, tr.action_sigma = torch.zeros(N, 2), torch.zeros(N, 2), torch.ones(N, 2)
        tr.rewards, tr.values, tr.actions_log_prob = torch.zeros(N), torch.zeros(N, 1), torch.zeros(N)
        tr.dones = dones[t]
        storage.add_transitions(tr)
    storage.compute_returns(torch.zeros(N), 0.99, 0.95)


def _expected_valid(dones: torch.Tensor, t: int, n: int, first_rollout: bool) -> bool:
    if t == 0:
        return not first_rollout and not bool(dones[-1, n])
    return not bool(dones[t - 1, n])


AMP_CFG = {
    "amp_obs_extractor": lambda obs: obs[:, :2] * 1.0,
    "amp_ref_obs_extractor": lambda pair: (pair[0][:, :1], pair[1]),
}


@pytest.mark.parametrize("recurrent", [False, True])
def test_every_pair_is_the_same_env_one_step_back(recurrent):
    T, N = 5, 4
    storage = make_storage(T=T, N=N, amp_cfg=AMP_CFG)
    g = torch.Generator().manual_seed(0)
    previous_dones = None
    for rollout in range(3):
        dones = torch.rand(T, N, generator=g) < 0.25
        dones[:, 0] = False  # env 0 never resets: its t = 0 pairs must use the carried state
        storage.clear()
        _fill(storage, rollout, dones)
        gen = storage.recurrent_mini_batch_generator(2, 2) if recurrent else storage.mini_batch_generator(3, 2)
        seen = 0
        for batch in gen:
            cur = batch.obs_cur_state[..., 0].flatten()
            prev = batch.obs_prev_state[..., 0].flatten()
            valid = batch.amp_pair_valid.flatten()
            rows = batch.masks.flatten() if recurrent else torch.ones_like(valid)
            for c, p, v, real in zip(cur.tolist(), prev.tolist(), valid.tolist(), rows.tolist()):
                if not real:
                    assert not v  # padding is never a valid pair
                    continue
                t, n = int(c % 1000) // 10, int(c % 10)
                assert c == _encode(t, n, rollout)
                expected_valid = _expected_valid(dones if t else previous_dones, t, n, rollout == 0)
                assert v == expected_valid, (rollout, t, n)
                if expected_valid:
                    # (env n, t-1), carried from the previous rollout's last step at t = 0
                    assert p == (_encode(t - 1, n, rollout) if t else _encode(T - 1, n, rollout - 1))
                seen += 1
            # the validity is folded into the reference mask, together with the reference's own mask
            prev_ref_code = -batch.ref_obs_prev_state[..., 0]
            assert torch.equal(prev_ref_code, batch.obs_prev_state[..., 0])
            ref_prev_mask = batch.ref_obs_prev_mask
            assert not (ref_prev_mask & ~batch.amp_pair_valid).any()
            assert batch.ref_obs_cur_state.shape[-1] == 1
        assert seen == 2 * T * N
        previous_dones = dones


def test_reference_prev_mask_combines_the_extractor_mask_and_pair_validity():
    T, N = 4, 3
    storage = make_storage(T=T, N=N, amp_cfg=AMP_CFG)
    dones = torch.zeros(T, N, dtype=torch.bool)
    _fill(storage, 0, dones)
    batch = next(storage.mini_batch_generator(1, 1))
    t, n = batch.indices // N, batch.indices % N
    # Last env: reference only at even t, so the previous step (t - 1) has one only when t is odd.
    prev_has_ref = torch.where(n == N - 1, (t - 1) % 2 == 0, torch.ones_like(t, dtype=torch.bool))
    assert torch.equal(batch.ref_obs_prev_mask, prev_has_ref & (t > 0))
    assert torch.equal(batch.amp_pair_valid, t > 0)


def test_string_extractors_are_resolved_once(monkeypatch):
    module = types.ModuleType("amp_test_extractors")
    module.obs = lambda obs, env=None: obs[:, :1] + (0 if env is None else env)
    module.ref = lambda pair: pair
    monkeypatch.setitem(sys.modules, "amp_test_extractors", module)
    calls = []
    real = amp_module.resolve_callable
    monkeypatch.setattr(amp_module, "resolve_callable", lambda *a, **k: calls.append(a) or real(*a, **k))
    cfg = {
        "amp_obs_extractor": "amp_test_extractors:obs",
        "amp_ref_obs_extractor": "amp_test_extractors.ref",
        "_env": 7,
    }
    storage = make_storage(T=3, N=2, amp_cfg=cfg)
    _fill(storage, 0, torch.zeros(3, 2, dtype=torch.bool))
    batches = list(storage.mini_batch_generator(3, 4))
    assert len(batches) == 12 and len(calls) == 2
    # env= was bound because the callback accepts it
    assert torch.equal(batches[0].obs_cur_state, batches[0].observations[:, :1] + 7)


def test_bad_extractor_spec_fails_at_construction():
    with pytest.raises(ImportError, match="no_such_module"):
        make_storage(amp_cfg={"amp_obs_extractor": "no_such_module:fn"})
    with pytest.raises(AttributeError, match="missing_fn"):
        make_storage(amp_cfg={"amp_obs_extractor": "math:missing_fn"})
