"""What the extensions compute, against second computations written here from their definitions.

- symmetry: the augmented mini-batch holds exactly the stored rows then their mirrors; the mirror loss is
  ``mean || pi(M s) - M pi(s) ||^2`` (target detached) on the same mini-batch, and it enters the actor's loss times
  ``mirror_loss_coeff``;
- AMP beside symmetry: the discriminator sees the batch's (t - 1, t) pairs of the same env and their mirrors, and its
  losses are the LSGAN + R1 terms of those pairs;
- a recurrent update with AMP, RND and chunked sequences: the padded sequences are exactly the stored steps in
  order, cut as the chunked mode says, start from the stored hidden states and re-run the policy that acted; AMP
  pairs are (t - 1, t) of the same env and invalid across resets (and on padding); the RND loss is the predictor's
  error on the real steps only.

The tests see the update through the public route (``MMPPO.construct_algorithm``, ``update``) plus a recording
extension of their own (its hooks run after the built-in ones) and a wrapper around ``alg.amp.losses``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from helpers import toy_cfg
from tensordict import TensorDictBase

from mimic_rl.algorithms import MMPPO, Extension
from mimic_rl.envs import PointMassTrackingEnv

AMP = {
    "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
    "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor",
}
GRADIENT_PENALTY = 5.0  # AMP's default gradient_penalty_coef (set explicitly in the configs below)


def swap_xy(x: torch.Tensor) -> torch.Tensor:
    """The mirror of the 2-D point-mass task: swap x and y in every (x, y) pair of the last dim (velocities,
    positions, reference offsets and velocities, actions, AMP features)."""
    return x.reshape(*x.shape[:-1], -1, 2).flip(-1).reshape(x.shape)


def swap_critic(x: torch.Tensor) -> torch.Tensor:
    """The critic group: the policy's 4 columns swapped in pairs, the episode progress kept."""
    return torch.cat((swap_xy(x[..., :4]), x[..., 4:]), dim=-1)


SYMMETRY = {
    "mirror_obs": swap_xy,
    "mirror_actions": swap_xy,
    "mirror_reference": swap_xy,
    "mirror_critic_obs": swap_critic,
}


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor | TensorDictBase):
        return x.detach().clone()
    if isinstance(x, tuple | list):
        return type(x)(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


class Recorder(Extension):
    """Records, per mini-batch: the streams after the built-in extensions transformed them, the actor's output, the
    batch itself (indices, masks, hidden states, fields) and copies of the modules the losses were computed with."""

    name = "recorder"
    hook_rank = 10_000  # after every built-in extension

    def __init__(self) -> None:
        self.updates: list[list[dict[str, Any]]] = []

    def before_update(self, alg) -> None:
        self.updates.append([])

    def transform_batch(self, alg, streams):
        self.updates[-1].append({"streams": _clone(streams), "actor": copy.deepcopy(alg.actor)})
        return streams

    def policy_terms(self, alg, streams, out):
        self.updates[-1][-1].update(mean=out.mean.detach().clone(), n=out.n)
        return {}

    def side_loss(self, alg, batch, step):  # after the built-in side losses were made, before any optimizer step
        rec = self.updates[-1][-1]
        rec["batch"] = _clone(dict(batch))
        rec["disc"] = copy.deepcopy(alg.amp.discriminator) if alg.amp is not None else None
        rec["rnd"] = copy.deepcopy(alg.rnd) if alg.rnd is not None else None
        return None


def record_amp_losses(alg) -> list[list[torch.Tensor | None]]:
    """Wrap ``alg.amp.losses``: the list of the arguments of every call (policy prev/cur/valid, expert prev/cur/
    valid)."""
    calls: list[list[torch.Tensor | None]] = []
    losses = alg.amp.losses

    def wrapped(*args):
        calls.append([None if a is None else a.detach().clone() for a in args])
        return losses(*args)

    alg.amp.losses = wrapped
    return calls


def make(cfg: dict, num_envs: int = 8, seed: int = 0) -> tuple[MMPPO, PointMassTrackingEnv, Any, Recorder]:
    """The toy with short, staggered episodes (resets inside every rollout) and a recorder extension."""
    torch.manual_seed(seed)
    env = PointMassTrackingEnv(
        num_envs=num_envs, max_episode_length=10, randomize_initial_episode_length=True, seed=seed
    )
    recorder = Recorder()
    cfg["extensions"] = [recorder]
    obs = env.get_observations()
    return MMPPO.construct_algorithm(obs, env, cfg, "cpu"), env, obs, recorder


def collect(alg, env, obs, steps: int):
    """A rollout; returns (next obs, a copy of the stored rollout ``[T, N]``, per step the (actor, critic) hidden
    states that were the input of the step (None: zeros), per step the real next policy observation)."""
    hidden, next_policy = [], []
    with torch.inference_mode():
        for _ in range(steps):
            hidden.append((_clone(alg.actor.get_hidden_state()), _clone(alg.critic.get_hidden_state())))
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            final = extras["final_observations"]["policy"]
            next_policy.append(torch.where(dones.unsqueeze(-1), final, obs["policy"]).clone())
            alg.process_env_step(obs, rewards, dones, extras)
        alg.compute_returns(obs)
    snapshot = alg.storage.get().clone()
    return obs, snapshot, hidden, torch.stack(next_policy)


# ---------------------------------------------------------------------------------------------- second computations
def rows(snap, index: torch.Tensor) -> dict[str, torch.Tensor]:
    """Stored fields at flat indices ``t * N + n`` (any shape)."""
    N = snap.batch_size[1]
    t, n = index // N, index % N
    obs = snap["obs"]
    return {
        "policy": obs["policy"][t, n],
        "critic": obs["critic"][t, n],
        "reference": obs["reference"][t, n],
        "reference_mask": obs["reference_mask"][t, n],
        "critic_reference": obs["critic_reference"][t, n],
        "critic_reference_mask": obs["critic_reference_mask"][t, n],
        **{k: snap[k][t, n] for k in ("actions", "action_mean", "action_std", "advantages", "returns", "values")},
        "actions_log_prob": snap["actions_log_prob"][t, n],
    }


def expected_pairs(snap, previous_snap, index: torch.Tensor) -> dict[str, torch.Tensor]:
    """AMP pairs of flat rollout indices ``index`` ``[M]`` from the definition: (features at t - 1, at t) of the same
    env, t - 1 being the previous rollout's last step at t = 0 (none before the first rollout); a pair is valid unless
    step t - 1 ended an episode. The expert pair is the reference's current velocity at t - 1 and t, valid where the
    pair is and both steps have a reference."""
    T, N = snap.batch_size
    t, n = index // N, index % N
    obs = snap["obs"]
    dones = snap["dones"].reshape(T, N)
    if previous_snap is None:  # no previous rollout: step 0 has no previous step
        last = {k: torch.zeros_like(obs[k][-1:]) for k in ("amp", "reference", "reference_mask")}
        last_done = torch.ones(1, N, dtype=torch.bool)
    else:
        last = {k: previous_snap["obs"][k][-1:] for k in ("amp", "reference", "reference_mask")}
        last_done = previous_snap["dones"].reshape(T, N)[-1:]
    ext = {k: torch.cat((last[k], obs[k])) for k in last}  # extended row t is step t - 1
    valid = ~torch.cat((last_done, dones))[t, n]
    d = obs["amp"].shape[-1]
    return {
        "policy_prev": ext["amp"][t, n],
        "policy_cur": obs["amp"][t, n],
        "valid": valid,
        "expert_prev": ext["reference"][t, n, 0, d:],
        "expert_cur": obs["reference"][t, n, 0, d:],
        "expert_valid": valid & ext["reference_mask"][t, n] & obs["reference_mask"][t, n],
    }


def hand_amp_terms(disc, p_prev, p_cur, e_prev, e_cur) -> dict[str, torch.Tensor]:
    """LSGAN discriminator terms on valid rows only (targets -1 policy, +1 expert), with the R1 penalty on the expert
    pairs: the squared norm of d logit / d (normalized input), written from the definition."""
    norm = disc.normalizer

    def normalized(prev, cur):
        std = norm.var.sqrt() + norm.eps
        return torch.cat(((prev - norm.mean) / std, (cur - norm.mean) / std), dim=-1)

    with torch.enable_grad():
        policy_logits = disc.net(normalized(p_prev, p_cur)).squeeze(-1)
        x = normalized(e_prev, e_cur).detach().requires_grad_(True)
        expert_logits = disc.net(x).squeeze(-1)
        (grad,) = torch.autograd.grad(expert_logits.sum(), x)
    loss = 0.5 * ((policy_logits + 1).square().mean() + (expert_logits - 1).square().mean())
    penalty = grad.square().sum(-1).mean()
    return {
        "amp_loss": loss.detach(),
        "amp_grad_penalty": penalty,
        "amp_total": loss.detach() + GRADIENT_PENALTY * penalty,
        "amp_policy_accuracy": (policy_logits < 0).float().mean(),
        "amp_expert_accuracy": (expert_logits > 0).float().mean(),
    }


def with_mirrors(x: torch.Tensor) -> torch.Tensor:
    """``[x; M x]`` for AMP features."""
    return torch.cat((x, swap_xy(x)))


def hand_mirror_loss(actor, obs, reference, mask) -> torch.Tensor:
    """``mean || pi(M s) - M pi(s) ||^2`` with ``M pi(s)`` a fixed target (gradients reach ``pi(M s)`` only)."""
    mean, _ = actor.distribution(obs, reference, mask)
    mirrored, _ = actor.distribution(swap_xy(obs), swap_xy(reference), mask)
    return (mirrored - swap_xy(mean).detach()).square().mean()


def hand_rnd_loss(rnd, states: torch.Tensor) -> torch.Tensor:
    """The predictor's squared error against the frozen target on normalized states, mean over states and outputs."""
    norm = rnd.state_normalizer
    x = (states - norm.mean) / (norm.var.sqrt() + norm.eps)
    return (rnd.predictor(x) - rnd.target(x)).square().mean()


def streams_reference(streams: dict[str, Any], critic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(reference, mask) of the actor's (or the critic's) reference stream."""
    return streams["critic_reference" if critic else "reference"]


def mean_over(values: list[torch.Tensor]) -> float:
    return float(torch.stack([v.detach().float() for v in values]).mean())


# ---------------------------------------------------------------------------------------------- symmetry
def test_the_augmented_batch_holds_the_stored_rows_then_their_mirrors_and_the_mirror_loss_is_its_definition():
    """Every stream the losses read is [stored rows; mirrored rows] (observations, references, critic inputs,
    actions and the old policy mirrored, the std through abs, per-sample scalars repeated, masks repeated), and the
    logged ``mirror`` term equals ``mean || pi(M s) - M pi(s) ||^2`` computed here on each mini-batch's stored rows
    with the actor of that mini-batch.

    Catches: a stream doubled without its mirror (identity where the definition flips) or with the wrong mirror, a
    stream left un-doubled or mis-ordered, advantages not repeated, the mirror loss on other rows than the batch's,
    its target not mirrored."""
    sym = {**SYMMETRY, "use_data_augmentation": True, "use_mirror_loss": True, "mirror_loss_coeff": 0.5}
    cfg = toy_cfg(symmetry_cfg=sym, num_mini_batches=2, num_learning_epochs=2)
    alg, env, obs, recorder = make(cfg)
    _, snap, _, _ = collect(alg, env, obs, 24)
    out = alg.update()
    (batches,) = recorder.updates
    assert len(batches) == 4
    mirrors = []
    for k, rec in enumerate(batches):
        s, idx = rec["streams"], rec["batch"]["indices"]
        n, stored = idx.shape[0], rows(snap, idx)
        assert rec["n"] == n and s["obs"].shape[0] == 2 * n
        reference, mask = streams_reference(s)
        critic_reference, critic_mask = streams_reference(s, critic=True)
        expected = {
            "obs": (s["obs"], stored["policy"], swap_xy),
            "critic_obs": (s["critic_obs"], stored["critic"], swap_critic),
            "reference": (reference, stored["reference"], swap_xy),
            "critic_reference": (critic_reference, stored["critic_reference"], swap_xy),
            "actions": (s["actions"], stored["actions"], swap_xy),
            "action_mean": (s["action_mean"], stored["action_mean"], swap_xy),
            "action_std": (s["action_std"], stored["action_std"], lambda x: swap_xy(x).abs()),
            "reference_mask": (mask, stored["reference_mask"], lambda x: x),
            "critic_reference_mask": (critic_mask, stored["critic_reference_mask"], lambda x: x),
        }
        for key in ("advantages", "returns", "values", "actions_log_prob"):
            expected[key] = (s[key], stored[key], lambda x: x)
        for key, (got, original, mirror) in expected.items():
            assert torch.equal(got, torch.cat((original, mirror(original)))), key
        if k == 0:  # nothing stepped yet: the actor on the stored rows is the policy that acted
            torch.testing.assert_close(rec["mean"][:n], stored["action_mean"])
        with torch.no_grad():
            mirrors.append(
                hand_mirror_loss(rec["actor"], stored["policy"], stored["reference"], stored["reference_mask"])
            )
    assert mean_over(mirrors) > 1e-6  # the actor is not equivariant: the term is not trivially zero
    assert out["mirror"] == pytest.approx(mean_over(mirrors), rel=1e-5)


@pytest.mark.parametrize("augmentation", [True, False])
def test_the_mirror_loss_moves_the_actor_by_its_coefficient_times_its_gradient(augmentation):
    """With zero advantages (no surrogate gradient), no entropy bonus, plain SGD, a fixed rate and no clipping, the
    actor's step is exactly ``-lr * mirror_loss_coeff * grad(mirror loss)``, the gradient taken here on a copy of the
    actor over the whole rollout (one mini-batch), with the target ``M pi(s)`` detached.

    Catches: a mirror loss coefficient ignored or 0, a mirror term computed but not added to the loss, a target that
    is not detached (its gradient would be different), a mirror loss on un-mirrored inputs."""
    coef, lr = 0.5, 0.1
    sym = {**SYMMETRY, "use_data_augmentation": augmentation, "use_mirror_loss": True, "mirror_loss_coeff": coef}
    cfg = toy_cfg(symmetry_cfg=sym, num_mini_batches=1, num_learning_epochs=1, optimizer="sgd", learning_rate=lr,
                  schedule="fixed", max_grad_norm=1e9)  # fmt: skip
    alg, env, obs, _ = make(cfg)
    _, _, _, _ = collect(alg, env, obs, 24)
    alg.storage.get()["advantages"].zero_()
    snap = alg.storage.get().clone()
    actor = copy.deepcopy(alg.actor)
    before = {name: p.detach().clone() for name, p in alg.actor.named_parameters()}
    policy, reference, mask = (snap["obs"][k].flatten(0, 1) for k in ("policy", "reference", "reference_mask"))
    hand = hand_mirror_loss(actor, policy, reference, mask)
    hand.backward()
    out = alg.update()
    assert out["mirror"] == pytest.approx(float(hand.detach()), rel=1e-5)
    moved = 0
    for name, p in alg.actor.named_parameters():
        grad = dict(actor.named_parameters())[name].grad
        expected = before[name] - lr * coef * (torch.zeros_like(p) if grad is None else grad)
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-7, msg=name)
        moved += int(not torch.equal(p.detach(), before[name]))
    assert moved >= 4  # the trunk's layers moved (the std, without a mirror gradient, did not)


def test_amp_beside_symmetry_trains_on_the_batch_pairs_and_their_mirrors():
    """With ``mirror_amp`` the discriminator's policy and expert sets are [pairs; mirrored pairs] of the mini-batch's
    rows, the pairs being (t - 1, t) of the same env, invalid across resets (validity repeated for the mirrors); its
    logged losses equal LSGAN + R1 computed here on the valid pairs with the discriminator of each mini-batch.

    Catches: pairs of other rows or steps, mirrored pairs missing or mirrored with another function, a pair across a
    reset counted, a loss term computed otherwise (masking, targets, the penalty on other rows)."""
    sym = {**SYMMETRY, "mirror_amp": swap_xy, "use_data_augmentation": True}
    amp = {**AMP, "gradient_penalty_coef": GRADIENT_PENALTY, "loss_type": "lsgan"}
    alg, env, obs, recorder = make(toy_cfg(symmetry_cfg=sym, amp_cfg=amp, num_mini_batches=2, num_learning_epochs=2))
    calls = record_amp_losses(alg)
    obs, first, _, _ = collect(alg, env, obs, 24)
    alg.update()
    _, snap, _, _ = collect(alg, env, obs, 24)  # the second rollout: step 0 pairs with the first's last step
    out = alg.update()
    batches, calls = recorder.updates[1], calls[len(recorder.updates[0]) :]
    assert len(calls) == len(batches) == 4
    hand: dict[str, list[torch.Tensor]] = {}
    invalid = 0
    for rec, (p_prev, p_cur, p_valid, e_prev, e_cur, e_valid) in zip(batches, calls, strict=True):
        want = expected_pairs(snap, first, rec["batch"]["indices"])
        v, ev = want["valid"], want["expert_valid"]
        invalid += int((~v).sum())
        assert torch.equal(p_valid, v.repeat(2)) and torch.equal(e_valid, ev.repeat(2))
        for got, key, valid in ((p_prev, "policy_prev", v), (p_cur, "policy_cur", v), (e_prev, "expert_prev", ev),
                                (e_cur, "expert_cur", ev)):  # fmt: skip
            mirrored = torch.cat((want[key], swap_xy(want[key])))
            assert torch.equal(got[valid.repeat(2)], mirrored[valid.repeat(2)]), key
        terms = hand_amp_terms(rec["disc"], *(with_mirrors(want[key][v]) for key in ("policy_prev", "policy_cur")),
                               *(with_mirrors(want[key][ev]) for key in ("expert_prev", "expert_cur")))  # fmt: skip
        for key, value in terms.items():
            hand.setdefault(key, []).append(value)
    assert invalid > 0  # resets inside the rollout: some pairs are invalid
    for key, values in hand.items():
        assert out[key] == pytest.approx(mean_over(values), rel=1e-4, abs=1e-6), key


# ---------------------------------------------------------------------------------------------- recurrent
def chunked_table(dones: torch.Tensor, length: int) -> list[tuple[int, int, int]]:
    """(env, start, length) of every chunk, from the definition: each trajectory of each env (cut after a done
    step) is cut into consecutive windows of ``length`` steps."""
    T, N = dones.shape
    out = []
    for n in range(N):
        start = 0
        for t in range(T):
            if bool(dones[t, n]) or t == T - 1 or t + 1 - start == length:
                out.append((n, start, t + 1 - start))
                start = t + 1
    return sorted(out)


def test_recurrent_update_with_amp_rnd_and_chunked_sequences_computes_on_the_stored_steps():
    """Two iterations of a GRU actor and critic with AMP (replay) and RND, chunked sequences of 6 steps. For every
    mini-batch of the second update:

    - each padded column is one chunk of the definition (consecutive steps of one env, cut at episode ends and every
      6 steps; every chunk exactly once per epoch), its real steps a prefix marked by ``masks`` = ``loss_mask``, its
      fields the stored ones at those steps and zeros on padding;
    - its hidden states are the stored ones at the chunk's first step (zeros at an episode start), and on the first
      mini-batch the actor re-run on the sequences gives the action means that were stored;
    - AMP's policy and expert pairs are (t - 1, t) of the same env, valid exactly where no reset and no padding lies
      between; replayed pairs are earlier valid pairs; the logged losses equal LSGAN + R1 computed here;
    - RND's stored states are the real next observations and its logged loss the predictor's error on the real
      steps only.

    Catches: sequences cut or ordered wrongly, padding counted in a loss or pairs, hidden states gathered at another
    step or env, pairs across resets, an RND loss over padding."""
    amp = {**AMP, "replay_buffer_size": 256, "gradient_penalty_coef": GRADIENT_PENALTY, "loss_type": "lsgan"}
    cfg = toy_cfg(sequence_mode="chunked", max_seq_len=6, num_mini_batches=2, num_learning_epochs=2, amp_cfg=amp,
                  rnd_cfg={"weight": 0.1})  # fmt: skip
    cfg["actor"].update(rnn_type="gru", rnn_hidden_dim=16)
    cfg["critic"].update(rnn_type="gru", rnn_hidden_dim=16)
    alg, env, obs, recorder = make(cfg, seed=2)
    calls = record_amp_losses(alg)
    obs, first, _, _ = collect(alg, env, obs, 24)
    # The seed gives a first rollout whose last step of env 0 is no episode end, so that a padded step that points
    # at (t = 0, env 0) has a real previous step: only the padding mask can mark its pair invalid.
    assert not bool(first["dones"][-1, 0])
    alg.update()
    pool = [c[0][c[2]] for c in calls], [c[1][c[2]] for c in calls]  # the valid policy pairs pushed so far
    _, snap, hidden, next_policy = collect(alg, env, obs, 24)
    out = alg.update()
    T, N = snap.batch_size
    dones = snap["dones"].reshape(T, N)
    batches, calls = recorder.updates[1], calls[len(recorder.updates[0]) :]
    assert len(batches) == len(calls) == 4
    torch.testing.assert_close(snap["rnd_state"], next_policy)  # RND reads the real next state
    hand: dict[str, list[torch.Tensor]] = {}
    rnd_losses, episode_starts, invalid = [], 0, 0
    for k, (rec, call) in enumerate(zip(batches, calls, strict=True)):
        batch = rec["batch"]
        index, masks = batch["indices"], batch["masks"]
        L, B = index.shape
        assert torch.equal(batch["loss_mask"], masks)  # chunked: every real step counts
        # -- the sequences
        lengths = masks.sum(0)
        assert torch.equal(masks, torch.arange(L).unsqueeze(1) < lengths)  # real steps first, then padding
        t0, n0 = index[0] // N, index[0] % N
        steps = (t0 + torch.arange(L).unsqueeze(1)) * N + n0
        assert torch.equal(index[masks], steps[masks])  # consecutive steps of one env
        if k % 2 == 0:
            seen = []
        seen += [(int(n), int(t), int(m)) for n, t, m in zip(n0, t0, lengths)]
        if k % 2 == 1:  # an epoch: every chunk of the definition exactly once
            assert sorted(seen) == chunked_table(dones, 6)
        stored = rows(snap, index.clamp(min=0))
        for key, got in (("policy", batch["obs"]["policy"]), ("reference", batch["obs"]["reference"]),
                         ("actions", batch["actions"]), ("advantages", batch["advantages"]),
                         ("returns", batch["returns"])):  # fmt: skip
            assert torch.equal(got[masks], stored[key][masks]), key
            assert torch.all(got[~masks] == 0), key
        # -- hidden states at each chunk's first step
        for which, got in enumerate(batch["hidden_states"]):
            want = torch.stack([
                torch.zeros(1, 16) if hidden[int(t)][which] is None else hidden[int(t)][which][:, int(n)]
                for t, n in zip(t0, n0)
            ], dim=1)  # fmt: skip
            assert torch.equal(got, want)
            starts = (t0 > 0) & dones[(t0 - 1).clamp(min=0), n0]
            assert torch.all(got[:, starts] == 0)
            episode_starts += int(starts.sum())
        if k == 0:  # nothing stepped yet: the sequences re-run from the stored states give the stored means
            torch.testing.assert_close(rec["mean"][masks], stored["action_mean"][masks], rtol=1e-4, atol=1e-5)
        # -- AMP pairs (rows are the padded [L, B] flattened), then the replayed pairs
        p_prev, p_cur, p_valid, e_prev, e_cur, e_valid = call
        want = expected_pairs(snap, first, index.reshape(-1))
        real = masks.reshape(-1)
        v, ev = want["valid"] & real, want["expert_valid"] & real
        invalid += int((real & ~v).sum())
        M = L * B
        assert torch.equal(p_valid[:M], v) and torch.equal(e_valid, ev)
        assert torch.equal(p_prev[:M][v], want["policy_prev"][v]) and torch.equal(p_cur[:M][v], want["policy_cur"][v])
        assert torch.equal(e_prev[ev], want["expert_prev"][ev]) and torch.equal(e_cur[ev], want["expert_cur"][ev])
        replay = torch.stack((p_prev[M:], p_cur[M:]), 1)
        assert replay.shape[0] == M and bool(p_valid[M:].all())
        earlier = torch.stack((torch.cat(pool[0]), torch.cat(pool[1])), 1)
        assert bool((replay.unsqueeze(1) == earlier.unsqueeze(0)).all(-1).all(-1).any(1).all())
        pool[0].append(want["policy_prev"][v])
        pool[1].append(want["policy_cur"][v])
        terms = hand_amp_terms(rec["disc"], torch.cat((want["policy_prev"][v], replay[:, 0])),
                               torch.cat((want["policy_cur"][v], replay[:, 1])), want["expert_prev"][ev],
                               want["expert_cur"][ev])  # fmt: skip
        for key, value in terms.items():
            hand.setdefault(key, []).append(value)
        # -- RND on the real steps
        with torch.no_grad():
            rnd_losses.append(hand_rnd_loss(rec["rnd"], snap["rnd_state"][index // N, index % N][masks]))
    assert episode_starts > 0 and invalid > 0 and out["nonfinite_batches"] == 0  # resets inside the rollout
    for key, values in hand.items():
        assert out[key] == pytest.approx(mean_over(values), rel=1e-4, abs=1e-6), key
    assert out["rnd"] == pytest.approx(mean_over(rnd_losses), rel=1e-5)
