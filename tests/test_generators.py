"""Mini-batch generators: coverage and reshuffling, recurrent padding, masks, hidden states and sequence modes."""

from __future__ import annotations

import pytest
import torch
from helpers import fill_storage, make_storage

from mimic_rl.storage import SequenceMode, build_sequences, split_and_pad_trajectories, unpad_trajectories


def _codes(storage):
    """Observations whose first entry encodes the flat index t * N + n."""
    N = storage.num_envs
    return lambda t: torch.arange(N, dtype=torch.float32).add(t * N).unsqueeze(-1).repeat(1, 4)


@pytest.mark.parametrize("num_mini_batches", [1, 3, 7])
def test_every_sample_exactly_once_per_epoch_and_reshuffled(num_mini_batches):
    storage = make_storage(T=5, N=4)
    fill_storage(storage, obs_fn=_codes(storage))
    storage.compute_returns(torch.zeros(4), 0.99, 0.95)
    epochs = 4
    batches = list(storage.mini_batch_generator(num_mini_batches, epochs))
    assert len(batches) == epochs * num_mini_batches
    orders = []
    for e in range(epochs):
        chunk = batches[e * num_mini_batches : (e + 1) * num_mini_batches]
        seen = torch.cat([b.observations[:, 0] for b in chunk]).long()
        assert sorted(seen.tolist()) == list(range(20))  # 20 samples, uneven split included
        assert torch.equal(torch.cat([b.indices for b in chunk]), seen)
        orders.append(seen)
    assert len({tuple(o.tolist()) for o in orders}) == epochs  # a fresh permutation each epoch


def _recurrent_storage(dones, hidden_dim=3, lstm=True):
    T, N = dones.shape
    storage = make_storage(T=T, N=N)
    codes = _codes(storage)
    for t in range(T):
        tr = storage.Transition()
        tr.observations = codes(t)
        tr.reference_observations, tr.reference_observations_mask = codes(t)[:, :3], torch.ones(N, dtype=torch.bool)
        tr.critic_observations, tr.critic_reference_observations = torch.zeros(N, 6), torch.zeros(N, 2)
        tr.actions = codes(t)[:, :2]
        tr.action_mean, tr.action_sigma = torch.zeros(N, 2), torch.ones(N, 2)
        tr.rewards, tr.values, tr.actions_log_prob = torch.zeros(N), torch.zeros(N, 1), torch.zeros(N)
        tr.dones = dones[t]
        # hidden state of step t, env n = code at (t, n) in every layer/unit; critic = minus that
        h = codes(t)[:, :1].expand(N, hidden_dim).unsqueeze(0).repeat(2, 1, 1)  # [layers=2, N, H]
        tr.hidden_states = ((h, h + 0.5), -h) if lstm else (h, -h)
        storage.add_transitions(tr)
    storage.compute_returns(torch.zeros(N), 0.99, 0.95)
    return storage


def _check_sequences(storage, batches, mode, max_len):
    N = storage.num_envs
    loss_counts = torch.zeros(storage.num_transitions_per_env * N, dtype=torch.long)
    for b in batches:
        codes = b.observations[..., 0]
        assert torch.equal(codes, torch.where(b.masks, b.indices.float(), torch.zeros_like(codes)))
        assert torch.equal(b.actions[..., 0], codes)  # every field is padded the same way
        assert (b.observations[~b.masks] == 0).all()  # padding is zeroed
        assert not (b.loss_mask & ~b.masks).any()
        # each sequence's steps are consecutive steps of one env, and none crosses an episode end
        for s in range(codes.shape[1]):
            steps = b.indices[:, s][b.masks[:, s]]
            assert len(steps) >= 1 and len(steps) <= (max_len or storage.num_transitions_per_env)
            assert torch.equal(steps % N, torch.full_like(steps, int(steps[0] % N)))
            assert torch.equal(torch.diff(steps // N), torch.ones(len(steps) - 1, dtype=torch.long))
            t_steps = (steps // N).tolist()
            for t in t_steps[:-1]:
                assert not storage.dones[t, int(steps[0] % N)]
            # a sequence starts at a trajectory start or mid-trajectory (truncated BPTT); its hidden state is that
            # stored at its first step
            h_actor, h_critic = b.hidden_states
            assert torch.equal(h_actor[0][:, s], torch.full_like(h_actor[0][:, s], float(steps[0])))
            assert torch.equal(h_actor[1][:, s], h_actor[0][:, s] + 0.5)
            assert torch.equal(h_critic[:, s], -h_actor[0][:, s])
        loss_counts += torch.bincount(b.indices[b.loss_mask], minlength=loss_counts.numel())
    return loss_counts


DONE_PATTERNS = {
    "random": lambda T, N: torch.rand(T, N, generator=torch.Generator().manual_seed(1)) < 0.3,
    "none": lambda T, N: torch.zeros(T, N, dtype=torch.bool),  # trajectories that span the whole rollout
    "every_step": lambda T, N: torch.ones(T, N, dtype=torch.bool),  # every trajectory ends early
    "last_two": lambda T, N: torch.arange(T).unsqueeze(1).expand(T, N) >= T - 2,
}


@pytest.mark.parametrize("pattern", sorted(DONE_PATTERNS))
@pytest.mark.parametrize(
    "mode,max_len",
    [(SequenceMode.TRAJECTORY, None), (SequenceMode.CHUNKED, 3), (SequenceMode.FIFTY_PERCENT_OVERLAPPING, 4),
     (SequenceMode.MAXIMUM, 3)],
)  # fmt: skip
def test_recurrent_batches_cover_every_step_once_in_the_loss(pattern, mode, max_len):
    T, N = 9, 4
    storage = _recurrent_storage(DONE_PATTERNS[pattern](T, N))
    table = build_sequences(storage.dones, mode, max_len)
    num_mb = min(3, len(table))
    batches = list(storage.recurrent_mini_batch_generator(num_mb, 2, sequence_mode=mode, max_seq_len=max_len))
    assert len(batches) == 2 * num_mb
    counts = _check_sequences(storage, batches, mode, max_len)
    assert torch.equal(counts, torch.full_like(counts, 2))  # each step once per epoch, over 2 epochs


def test_overlap_and_maximum_give_context_before_the_loss_steps():
    dones = torch.zeros(10, 1, dtype=torch.bool)
    half = build_sequences(dones, "fifty_percent_overlapping", 4)
    assert half.start.tolist() == [0, 2, 4, 6] and half.length.tolist() == [4, 4, 4, 4]
    assert half.loss_offset.tolist() == [0, 2, 2, 2]
    full = build_sequences(dones, "maximum", 3)
    assert full.start.tolist() == [0, 0, 0, 1, 2, 3, 4, 5, 6, 7]
    assert full.length.tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3, 3]
    chunked = build_sequences(dones, "chunked", 4)
    assert chunked.start.tolist() == [0, 4, 8] and chunked.length.tolist() == [4, 4, 2]
    with pytest.raises(ValueError, match="max_seq_len"):
        build_sequences(dones, "chunked")


def test_gru_hidden_states_and_trajectory_starts():
    dones = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 1]], dtype=torch.bool)
    storage = _recurrent_storage(dones, lstm=False)
    # the seed's layout [T, layers, N, H]: step 2, env 1 holds its flat index 2 * 2 + 1
    (actor,) = storage.saved_hidden_states_a
    assert (
        actor.shape == (4, 2, 2, 3)
        and (actor[2, :, 1] == 5).all()
        and (storage.saved_hidden_states_c[0] == -actor).all()
    )
    (batch,) = storage.recurrent_mini_batch_generator(1, 1)
    # Trajectories: env0 [t0,t1], env0 [t2,t3], env1 [t0..t3]; each starts from the state stored at its start.
    starts = sorted(batch.hidden_states[0][0, :, 0].tolist())
    assert starts == [0.0, 1.0, 4.0]  # flat indices (t=0,n=0), (t=0,n=1), (t=2,n=0)
    assert batch.masks.sum(0).sort().values.tolist() == [2, 2, 4]


def test_split_and_pad_matches_rsl_rl():
    pytest.importorskip("rsl_rl")
    from rsl_rl.utils import split_and_pad_trajectories as rsl_split
    from rsl_rl.utils import unpad_trajectories as rsl_unpad

    g = torch.Generator().manual_seed(3)
    x = torch.randn(8, 5, 3, generator=g)
    dones = (torch.rand(8, 5, 1, generator=g) < 0.3).float()
    ours, masks = split_and_pad_trajectories(x, dones)
    theirs, their_masks = rsl_split(x, dones)
    assert torch.equal(ours, theirs) and torch.equal(masks, their_masks)
    assert torch.equal(unpad_trajectories(ours, masks), rsl_unpad(theirs, their_masks))
    assert torch.equal(unpad_trajectories(ours, masks), x)
