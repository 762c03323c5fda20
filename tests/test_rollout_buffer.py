"""RolloutBuffer: in-place and step-by-step filling, returns, mini-batches, previous-step pairs, sequences, errors."""

from __future__ import annotations

import pytest
import torch
from helpers import fill_storage, make_storage
from tensordict import TensorDict

from mimic_rl.storage.returns import compute_gae
from mimic_rl.storage.rollout import FieldSpec, RolloutBuffer

T, N = 5, 4
SCALAR = FieldSpec((1,), scalar=True)
FLAG = FieldSpec((1,), torch.bool, scalar=True, lenient=True)


def spec() -> dict:
    return {
        "obs": (3,),
        "ref": {"frames": (2, 3), "phase": (1,)},
        "ref_mask": FieldSpec((), torch.bool),
        "motion_id": FieldSpec((), torch.int64),  # a loose (non-packed) store
        "actions": (2,),
        "values": SCALAR,
        "returns": FieldSpec((1,), scalar=True, computed=True),
        "advantages": FieldSpec((1,), scalar=True, computed=True),
        "rewards": SCALAR,
        "bootstrap_values": SCALAR,
        "dones": FLAG,
        "time_outs": FLAG,
    }


def raw_rollout(seed: int = 0, done_prob: float = 0.3) -> dict:
    """Random ``[T, N, ...]`` data for ``spec()``, scalars as ``[T, N]`` and dones as int64 like many envs."""
    g = torch.Generator().manual_seed(seed)
    dones = torch.rand(T, N, generator=g) < done_prob
    return {
        "obs": torch.randn(T, N, 3, generator=g),
        "ref": {"frames": torch.randn(T, N, 2, 3, generator=g), "phase": torch.rand(T, N, 1, generator=g)},
        "ref_mask": torch.rand(T, N, generator=g) > 0.3,
        "motion_id": torch.randint(0, 100, (T, N), generator=g),
        "actions": torch.randn(T, N, 2, generator=g),
        "values": torch.randn(T, N, generator=g),
        "rewards": torch.randn(T, N, generator=g),
        "bootstrap_values": torch.randn(T, N, generator=g),
        "dones": dones.long(),
        "time_outs": (dones & (torch.rand(T, N, generator=g) < 0.5)).long(),
    }


def step_of(raw: dict, t: int) -> dict:
    return {k: ({g: v[t] for g, v in x.items()} if isinstance(x, dict) else x[t]) for k, x in raw.items()}


def fill_in_place(buf: RolloutBuffer, raw: dict) -> TensorDict:
    """Write ``raw`` through ``start_rollout()``'s views: a whole step TensorDict, single fields and slices."""
    view = buf.start_rollout()
    for t in range(T):
        step = TensorDict(
            {"obs": raw["obs"][t], "ref": {k: v[t] for k, v in raw["ref"].items()}, "ref_mask": raw["ref_mask"][t]},
            batch_size=[N],
        )
        view[t] = step
        view["actions"][t].copy_(raw["actions"][t])
    view["motion_id"][:] = raw["motion_id"]
    for name in ("values", "rewards", "bootstrap_values"):
        view[name].copy_(raw[name].unsqueeze(-1))
    view["dones"].copy_(raw["dones"].bool().unsqueeze(-1))
    view["time_outs"].copy_(raw["time_outs"].bool().unsqueeze(-1))
    buf.add()
    return view


def fill_by_step(buf: RolloutBuffer, raw: dict) -> None:
    buf.clear()
    for t in range(T):
        buf.add_step(step_of(raw, t))


def leaves(td: TensorDict) -> dict:
    return {k: v for k, v in td.items(include_nested=True, leaves_only=True)}


def assert_same_td(a: TensorDict, b: TensorDict) -> None:
    la, lb = leaves(a), leaves(b)
    assert la.keys() == lb.keys()
    for key in la:
        assert la[key].dtype == lb[key].dtype and torch.equal(la[key], lb[key]), key


def assert_matches_raw(td: TensorDict, raw: dict) -> None:
    """The stored rollout against the raw data it was written from (scalars gain a trailing 1)."""
    assert td.batch_size == (T, N)
    assert torch.equal(td["obs"], raw["obs"]) and torch.equal(td["actions"], raw["actions"])
    assert torch.equal(td["ref", "frames"], raw["ref"]["frames"])
    assert torch.equal(td["ref", "phase"], raw["ref"]["phase"])
    assert torch.equal(td["ref_mask"], raw["ref_mask"]) and td["ref_mask"].dtype == torch.bool
    assert torch.equal(td["motion_id"], raw["motion_id"]) and td["motion_id"].dtype == torch.int64
    for name in ("values", "rewards", "bootstrap_values"):
        assert torch.equal(td[name], raw[name].unsqueeze(-1)), name
    for name in ("dones", "time_outs"):
        assert td[name].dtype == torch.bool and torch.equal(td[name], raw[name].bool().unsqueeze(-1)), name


def hand_gae(raw: dict, last: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scalar float64 loop from the definition: cut on termination, bootstrap on a time-out."""
    v, r, b = raw["values"].double(), raw["rewards"].double(), raw["bootstrap_values"].double()
    adv = torch.zeros(T, N, dtype=torch.float64)
    for n in range(N):
        a = 0.0
        for t in reversed(range(T)):
            if raw["dones"][t, n]:
                next_v, trace = (b[t, n].item() if raw["time_outs"][t, n] else 0.0), 0.0
            else:
                next_v, trace = (v[t + 1, n].item() if t + 1 < T else float(last[n])), 1.0
            a = r[t, n].item() + gamma * next_v - v[t, n].item() + gamma * lam * trace * a
            adv[t, n] = a
    return adv + v, adv


def gae_into(buf: RolloutBuffer, last: torch.Tensor) -> None:
    td = buf.get()
    returns, adv = compute_gae(
        td["rewards"], td["values"], td["dones"], last, 0.97, 0.9, td["time_outs"], td["bootstrap_values"]
    )
    td["returns"].copy_(returns)
    td["advantages"].copy_(adv)


def test_in_place_and_step_by_step_give_the_same_rollout_returns_and_batches():
    raw = raw_rollout(seed=1)
    a, b = RolloutBuffer(T, N, spec()), RolloutBuffer(T, N, spec())
    view = fill_in_place(a, raw)
    fill_by_step(b, raw)
    assert a.is_full and b.is_full and a.step == b.step == T
    assert view is a.get() and a.transition_view is a.get()
    assert_matches_raw(a.get(), raw)
    assert_matches_raw(b.get(), raw)
    assert_same_td(a.get(), b.get())

    last = torch.randn(N)
    gae_into(a, last)
    gae_into(b, last)
    assert torch.equal(a.get()["returns"], b.get()["returns"])
    assert torch.equal(a.get()["advantages"], b.get()["advantages"])
    ref_returns, ref_adv = hand_gae(raw, last, 0.97, 0.9)
    torch.testing.assert_close(a.get()["advantages"].squeeze(-1).double(), ref_adv, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.get()["returns"].squeeze(-1).double(), ref_returns, atol=1e-5, rtol=1e-5)

    batches = {}
    for name, buf in (("a", a), ("b", b)):
        torch.manual_seed(7)
        batches[name] = list(buf.mini_batches(3, 2, previous_keys=["obs", "ref"]))
    assert len(batches["a"]) == 6
    for x, y in zip(batches["a"], batches["b"]):
        assert_same_td(x, y)


def test_mini_batches_are_one_permutation_per_epoch_and_hold_the_right_rows():
    raw = raw_rollout(seed=2)
    buf = RolloutBuffer(T, N, spec())
    fill_by_step(buf, raw)
    torch.manual_seed(3)
    batches = list(buf.mini_batches(3, 2))
    torch.manual_seed(3)
    perms = [torch.randperm(T * N), torch.randperm(T * N)]
    flat = buf.get(flatten=True)
    for epoch in range(2):
        chunk = batches[3 * epoch : 3 * epoch + 3]
        assert [len(b["indices"]) for b in chunk] == [7, 7, 6]  # uneven split included
        index = torch.cat([b["indices"] for b in chunk])
        assert torch.equal(index, perms[epoch])  # every sample once, reshuffled each epoch
        for b in chunk:
            i = b["indices"]
            assert b.batch_size == (len(i),)
            t, n = i // N, i % N
            assert torch.equal(b["obs"], raw["obs"][t, n])
            assert torch.equal(b["ref", "frames"], raw["ref"]["frames"][t, n])
            assert torch.equal(b["motion_id"], raw["motion_id"][t, n])
            assert torch.equal(b["dones"].squeeze(-1), raw["dones"][t, n].bool())
            assert_same_td(b.exclude("indices"), flat[i])
    assert not torch.equal(perms[0], perms[1])


def test_keys_restrict_the_batch_and_windowed_columns_are_right():
    raw = raw_rollout(seed=4)
    buf = RolloutBuffer(T, N, spec())
    fill_by_step(buf, raw)
    (batch,) = buf.mini_batches(1, 1, keys=["actions", "values", "motion_id"])
    assert set(batch.keys()) == {"actions", "values", "motion_id", "indices"}
    t, n = batch["indices"] // N, batch["indices"] % N
    assert torch.equal(batch["actions"], raw["actions"][t, n])  # float columns gathered from a window, not 0
    assert torch.equal(batch["values"].squeeze(-1), raw["values"][t, n])
    assert torch.equal(batch["motion_id"], raw["motion_id"][t, n])
    with pytest.raises(KeyError, match="nope"):
        buf.mini_batches(1, 1, keys=["nope"])


def test_shuffle_false_yields_the_rollout_step_by_step():
    raw = raw_rollout(seed=5)
    buf = RolloutBuffer(T, N, spec())
    fill_by_step(buf, raw)
    batches = list(buf.mini_batches(T, 1, shuffle=False))
    assert len(batches) == T
    for t, b in enumerate(batches):
        assert torch.equal(b["indices"], torch.arange(N) + t * N)
        assert_same_td(b.exclude("indices"), buf.get()[t])


def coded(rollout: int) -> dict:
    """obs[t, n] = 1000 * rollout + 10 * t + n + 1."""
    code = torch.tensor([[1000.0 * rollout + 10 * t + n + 1 for n in range(N)] for t in range(T)])
    return {"obs": code.unsqueeze(-1).repeat(1, 1, 3), "dones": torch.zeros(T, N, dtype=torch.bool)}


def test_previous_pairs_across_resets_and_rollouts():
    pair_spec = {"obs": (3,), "dones": FLAG}
    buf = RolloutBuffer(T, N, pair_spec)
    dones = [torch.zeros(T, N, dtype=torch.bool), torch.zeros(T, N, dtype=torch.bool)]
    dones[0][1, 0] = dones[0][4, 1] = dones[0][4, 3] = True  # env 1 and 3 end the first rollout done
    dones[1][0, 2] = dones[1][3, 2] = True
    # previous_valid[t, n] by hand; rollout 0 has no history at t = 0
    expected_valid = [
        torch.tensor(
            [[0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1]], dtype=torch.bool
        ),
        torch.tensor(
            [[1, 0, 1, 0], [1, 1, 0, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 1]], dtype=torch.bool
        ),
    ]  # fmt: skip
    for rollout in range(2):
        raw = coded(rollout)
        raw["dones"] = dones[rollout]
        if rollout == 0:
            view = buf.start_rollout()
            view["obs"].copy_(raw["obs"])
            view["dones"].copy_(raw["dones"].unsqueeze(-1))
            buf.add()
        else:
            fill_by_step(buf, {"obs": raw["obs"], "dones": raw["dones"].unsqueeze(-1)})
        for batch in buf.mini_batches(4, 1, keys=["obs"], previous_keys=["obs"]):
            t, n = batch["indices"] // N, batch["indices"] % N
            assert torch.equal(batch["previous_valid"], expected_valid[rollout][t, n])
            prev_code = batch["previous", "obs"][:, 0]
            if rollout == 0:
                expected = torch.where(t > 0, 10.0 * (t - 1) + n + 1, 0.0)  # the carry row starts zeroed
            else:
                expected = torch.where(t > 0, 1000.0 + 10 * (t - 1) + n + 1, 10.0 * (T - 1) + n + 1)
            assert torch.equal(prev_code, expected)
            assert torch.equal(batch["obs"][:, 0], 1000.0 * rollout + 10 * t + n + 1)


def test_sequence_batches_are_padded_trajectories():
    buf = RolloutBuffer(4, 2, {"obs": (1,), "dones": FLAG})
    view = buf.start_rollout()
    view["obs"].copy_(torch.arange(1.0, 9.0).reshape(4, 2, 1))  # obs = flat index + 1
    view["dones"][1, 0] = True  # env 0: [t0, t1] and [t2, t3]; env 1: [t0 .. t3]
    buf.add()
    (batch,) = buf.mini_batches(1, 1, previous_keys=["obs"], sequences="trajectory", shuffle=False)
    assert batch.batch_size == (4, 3)
    # sequences in env-major order; padding points at index 0 and is False in the masks
    assert batch["indices"].tolist() == [[0, 4, 1], [2, 6, 3], [0, 0, 5], [0, 0, 7]]
    masks = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 0, 1], [0, 0, 1]], dtype=torch.bool)
    assert torch.equal(batch["masks"], masks) and torch.equal(batch["loss_mask"], masks)
    expected_obs = [[1.0, 5.0, 2.0], [3.0, 7.0, 4.0], [0.0, 0.0, 6.0], [0.0, 0.0, 8.0]]
    assert batch["obs"].squeeze(-1).tolist() == expected_obs  # padding zeroed
    assert not batch["dones"][~masks].any()
    # previous steps: within a trajectory only; first steps (t = 0 without history, or after a reset) are invalid
    valid = torch.tensor([[0, 0, 0], [1, 1, 1], [0, 0, 1], [0, 0, 1]], dtype=torch.bool)
    assert torch.equal(batch["previous_valid"], valid)
    assert batch["previous", "obs"].squeeze(-1)[valid].tolist() == [1.0, 5.0, 2.0, 4.0, 6.0]

    # Second rollout, same dones: t = 0 now has the carried history (env 0 and 1 were not done at t = 3), while
    # padding (which points at the carry row of env 0, not done) stays invalid.
    view = buf.start_rollout()
    view["obs"].copy_(torch.arange(11.0, 19.0).reshape(4, 2, 1))
    view["dones"][1, 0] = True
    buf.add()
    (batch,) = buf.mini_batches(1, 1, previous_keys=["obs"], sequences="trajectory", shuffle=False)
    valid = torch.tensor([[1, 0, 1], [1, 1, 1], [0, 0, 1], [0, 0, 1]], dtype=torch.bool)
    assert torch.equal(batch["previous_valid"], valid)
    assert batch["previous", "obs"].squeeze(-1)[valid].tolist() == [7.0, 8.0, 11.0, 15.0, 12.0, 14.0, 16.0]


def test_shuffled_chunked_sequences_cover_every_step_once_per_epoch():
    raw = raw_rollout(seed=6, done_prob=0.3)
    buf = RolloutBuffer(T, N, spec())
    fill_by_step(buf, raw)
    counts = torch.zeros(T * N, dtype=torch.long)
    for batch in buf.mini_batches(2, 3, sequences="chunked", max_seq_len=2):
        assert batch["indices"].shape[0] == 2
        counts += torch.bincount(batch["indices"][batch["loss_mask"]], minlength=T * N)
        t, n = batch["indices"] // N, batch["indices"] % N
        real = batch["masks"]
        assert torch.equal(batch["obs"][real], raw["obs"][t, n][real])
        assert not batch["obs"][~real].any()
        # a sequence never runs past an episode end: every step but its last is not done
        assert not (batch["dones"].squeeze(-1)[:-1] & real[1:]).any()
    assert torch.equal(counts, torch.full_like(counts, 3))


def test_bad_input_names_the_field():
    buf = RolloutBuffer(T, N, spec())
    good = step_of(raw_rollout(), 0)
    bad = dict(good, actions=torch.zeros(N, 3))
    with pytest.raises(ValueError, match=r"RolloutBuffer: actions: expected shape \(4, 2\).*got \(4, 3\)"):
        buf.add_step(bad)
    bad = dict(good, obs=torch.zeros(N, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"obs: expected dtype torch.float32, got torch.float64"):
        buf.add_step(bad)
    bad = dict(good, ref_mask=torch.ones(N))
    with pytest.raises(TypeError, match=r"ref_mask: expected dtype torch.bool, got torch.float32"):
        buf.add_step(bad)
    bad = dict(good, rewards=torch.zeros(N, 2))
    with pytest.raises(ValueError, match=r"rewards: expected shape \(4, 1\) or \(4,\)"):
        buf.add_step(bad)
    bad = dict(good, ref={"frames": good["ref"]["frames"]})
    with pytest.raises(KeyError, match=r"ref: missing observation group\(s\) \['phase'\]"):
        buf.add_step(bad)
    bad = {k: v for k, v in good.items() if k != "values"}
    with pytest.raises(KeyError, match=r"missing field\(s\) \['values'\]"):
        buf.add_step(bad)
    with pytest.raises(KeyError, match=r"unknown field\(s\) \['extra'\]"):
        buf.add_step(dict(good, extra=torch.zeros(N)))
    with pytest.raises(ValueError, match="actions is None"):
        buf.add_step(dict(good, actions=None))
    assert buf.step == 0  # nothing was added
    raw = raw_rollout()
    raw["obs"] = raw["obs"][:, :, :2]
    with pytest.raises(ValueError, match=r"obs: expected shape \(5, 4, 3\) \(\[rows, num_envs, \.\.\.\]\), got"):
        buf.add(raw)
    labelled = RolloutBuffer(T, N, spec(), labels={"obs": "observations"}, error_prefix="Transition.")
    with pytest.raises(ValueError, match=r"^Transition.observations: expected shape"):
        labelled.add_step(dict(good, obs=torch.zeros(N, 4)))


def test_overflow_order_and_locked_view():
    raw = raw_rollout()
    buf = RolloutBuffer(T, N, spec())
    with pytest.raises(RuntimeError, match="needs a full rollout"):
        buf.mini_batches(1, 1)
    buf.add_step(step_of(raw, 0))
    with pytest.raises(RuntimeError, match="already added with add_step"):
        buf.add()
    for t in range(1, T):
        buf.add_step(step_of(raw, t))
    with pytest.raises(OverflowError, match="holds 5 steps per env"):
        buf.add_step(step_of(raw, 0))
    with pytest.raises(OverflowError, match="holds 5 steps per env"):
        buf.add()
    with pytest.raises(ValueError, match=r"num_mini_batches must be in \[1, 20\]"):
        buf.mini_batches(21, 1)
    view = buf.start_rollout()
    assert buf.step == 0
    with pytest.raises(RuntimeError, match="locked"):  # replacing an entry would detach it from the store
        view["actions"] = torch.zeros(T, N, 2)
    buf.add(raw)  # a separate rollout is validated and copied in
    assert_matches_raw(buf.get(), raw)


def test_flat_view_writes_through_and_spec_from_an_example_step():
    example = TensorDict(
        {
            "obs": torch.zeros(N, 3),
            "groups": {"a": torch.zeros(N, 2)},
            "ids": torch.zeros(N, dtype=torch.int32),
            "dones": torch.zeros(N, dtype=torch.bool),
        },
        batch_size=[N],
    )
    buf = RolloutBuffer(T, N, example)
    td = buf.get()
    assert td["ids"].dtype == torch.int32 and td["dones"].dtype == torch.bool and td["groups", "a"].shape == (T, N, 2)
    flat = buf.get(flatten=True)
    assert flat.batch_size == (T * N,)
    flat["obs"][2 * N + 1].fill_(5.0)  # flat index t * N + n
    assert (td["obs"][2, 1] == 5.0).all() and td["obs"].sum() == 15.0
    assert buf.store.stores["float"][3, 1, :3].tolist() == [5.0, 5.0, 5.0]  # row 0 is the carry row


def test_storage_adapter_batches_are_the_core_batches():
    """The seed adapter is a view of its core PolicyRollout: the same stores, and each PPOBatch is a core mini-batch
    under the seed's names (observation groups of the core's obs TensorDict, mu/sigma as action_mean/action_std)."""
    storage = make_storage(T=4, N=3, amp_cfg={"amp_obs_extractor": lambda o: o[:, :2]})
    fill_storage(storage, seed=2)
    storage.compute_returns(torch.randn(3), 0.99, 0.95)
    core = storage.core.get()
    assert storage.buffer is storage.core.buffer
    assert torch.equal(core["action_mean"], storage.mu) and core["action_mean"].data_ptr() == storage.mu.data_ptr()
    assert torch.equal(core["obs", "critic"], storage.privileged_observations)
    torch.manual_seed(11)
    seed_batches = list(storage.mini_batch_generator(2, 2))
    torch.manual_seed(11)
    core_batches = list(storage.core.mini_batches(2, 2, previous_keys=["obs"]))
    for s, b in zip(seed_batches, core_batches, strict=True):
        assert torch.equal(s.indices, b["indices"]) and torch.equal(s.old_mu, b["action_mean"])
        assert torch.equal(s.critic_observations, b["obs"]["critic"])
        assert torch.equal(s.reference[0], b["obs"]["reference"])
        assert torch.equal(s.obs_prev_state, b["previous"]["obs"]["policy"][:, :2])
        assert torch.equal(s.amp_pair_valid, b["previous_valid"])
