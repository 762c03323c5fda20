"""MotionLibrary: vectorized sampling and interpolation, clamp/wrap, weights, future frames, adaptive sampling."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from mimic_rl.motion import MotionClip, MotionFormatError, MotionLibrary
from mimic_rl.motion.adaptive import AdaptiveSamplingConfig, Unrestored, inverse_cdf


def ramp_clip(T=11, fps=10.0, J=2, B=2, offset=0.0, loop_mode="clamp") -> MotionClip:
    """Joint j at frame f = offset + f + 10 j; body positions likewise; rotations about z by 0.1 rad per frame."""
    f = np.arange(T, dtype=np.float32)
    joint = offset + f[:, None] + 10 * np.arange(J, dtype=np.float32)[None]
    pos = np.repeat(joint[:, :1, None], 3, axis=2).repeat(B, axis=1)
    angle = 0.1 * f
    quat = np.stack([np.cos(angle / 2), 0 * angle, 0 * angle, np.sin(angle / 2)], -1)[:, None].repeat(B, axis=1)
    zeros = np.zeros((T, B, 3), np.float32)
    return MotionClip(fps, [f"j{i}" for i in range(J)], [f"b{i}" for i in range(B)], joint, joint * 0, pos, quat,
                      zeros, zeros, {"loop_mode": loop_mode})  # fmt: skip


def test_interpolation_clamp_and_wrap():
    lib = MotionLibrary([ramp_clip(), ramp_clip(offset=100, loop_mode="wrap")])
    ids = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    times = torch.tensor([0.25, -1.0, 5.0, 1.0, 0.25, 1.25, -0.25])
    q = lib.state(ids, times).joint_pos[:, 0]
    # clip 0 (clamp, duration 1 s): 2.5 frames; before the start -> frame 0; after the end -> frame 10
    # clip 1 (wrap): 1.25 s -> 0.25 s; -0.25 s -> 0.75 s
    assert q.tolist() == pytest.approx([2.5, 0.0, 10.0, 10.0, 102.5, 102.5, 107.5])
    angle = 2 * torch.atan2(
        lib.state(ids[:1], times[:1]).body_quat_w[0, 0, 3], lib.state(ids[:1], times[:1]).body_quat_w[0, 0, 0]
    )
    assert float(angle) == pytest.approx(0.25, abs=1e-6)  # slerp: 2.5 frames of 0.1 rad


def test_vectorized_state_equals_a_per_env_loop():
    lib = MotionLibrary([ramp_clip(), ramp_clip(T=31, fps=30.0, offset=50)])
    g = torch.Generator().manual_seed(0)
    ids, times = lib.sample(64, "uniform", g)
    batch = lib.state(ids, times)
    for i in range(64):
        one = lib.state(ids[i : i + 1], times[i : i + 1])
        assert torch.equal(one.joint_pos[0], batch.joint_pos[i]) and torch.equal(
            one.body_quat_w[0], batch.body_quat_w[i]
        )


def test_a_body_subset_equals_the_same_bodies_of_the_full_state(data_dir):
    from mimic_rl.motion import load_motion

    lib = MotionLibrary([load_motion(data_dir / "motions/humanoid28/humanoid_dance.npz")])
    g = torch.Generator().manual_seed(0)
    ids, times = lib.sample(32, "uniform", g)
    full = lib.future_states(ids, times, lib.frame_offsets(3))
    for bodies in ([7], [3, 0, 11], []):  # []: the joints alone
        part = lib.future_states(ids, times, lib.frame_offsets(3), bodies)
        assert torch.equal(part.joint_pos, full.joint_pos) and torch.equal(part.joint_vel, full.joint_vel)
        for name in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
            assert torch.equal(getattr(part, name), getattr(full, name)[:, :, bodies]), name


def test_future_frames_are_states_at_offsets():
    lib = MotionLibrary([ramp_clip(T=101, fps=50.0)])
    ids, times = torch.tensor([0, 0]), torch.tensor([0.1, 1.9])
    offsets = lib.frame_offsets(4, stride=2)
    assert offsets.tolist() == pytest.approx([0.0, 0.04, 0.08, 0.12])
    future = lib.future_states(ids, times, offsets)
    assert future.joint_pos.shape == (2, 4, 2) and future.body_pos_w.shape == (2, 4, 2, 3)
    assert future.joint_pos[0, :, 0].tolist() == pytest.approx([5, 7, 9, 11])
    assert future.joint_pos[1, :, 0].tolist() == pytest.approx([95, 97, 99, 100])  # clamped at the end


def test_state_and_future_equals_state_and_future_states(data_dir):
    """One frame lookup for the current frame and the K future ones gives exactly what two lookups give, on real
    clips (clamped) and on wrapping ones."""
    from mimic_rl.motion import load_motion

    clips = [load_motion(data_dir / f"motions/humanoid28/{name}.npz") for name in ("humanoid_dance", "humanoid_run")]
    cases = [
        (MotionLibrary(clips), [3, 0, 11], [7]),
        (MotionLibrary([ramp_clip(), ramp_clip(T=7)], loop_mode="wrap"), None, [1]),
    ]
    for lib, bodies, future_bodies in cases:
        g = torch.Generator().manual_seed(1)
        ids, times = lib.sample(48, "uniform", g)
        times[:4] = torch.tensor([0.0, -0.5, 40.0, 0.1])  # before the start, past the end, exactly a frame
        offsets = lib.frame_offsets(5, stride=2)
        now, future = lib.state_and_future(ids, times, offsets, bodies, future_bodies)
        want_now, want_future = lib.state(ids, times, bodies), lib.future_states(ids, times, offsets, future_bodies)
        for name in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
            assert torch.equal(getattr(now, name), getattr(want_now, name)), name
            assert torch.equal(getattr(future, name), getattr(want_future, name)), name
        assert future.body_quat_w.shape == (48, 5, 1, 4) and now.joint_pos.shape == (48, lib.clips[0].num_joints)


def test_sampling_modes_and_weights():
    lib = MotionLibrary([ramp_clip(), ramp_clip(T=21)], weights=[1.0, 3.0])
    g = torch.Generator().manual_seed(0)
    ids, times = lib.sample(20000, "uniform", g)
    assert abs(float((ids == 1).float().mean()) - 0.75) < 0.02
    assert bool((times >= 0).all()) and bool((times <= lib.clip_duration[ids]).all())
    assert float(times[ids == 1].mean()) == pytest.approx(1.0, abs=0.05)  # uniform on [0, 2 s]
    _, start = lib.sample(10, "start", g)
    assert bool((start == 0).all())
    with pytest.raises(ValueError, match="sampling mode"):
        lib.sample(3, "random")


def test_adaptive_sampler_moves_probability_to_failing_bins():
    lib = MotionLibrary([ramp_clip(T=51), ramp_clip(T=51)], adaptive=AdaptiveSamplingConfig(ema_alpha=0.1))
    sampler = lib.adaptive
    p0 = sampler.probabilities().clone()
    assert sampler.entropy() == pytest.approx(1.0) and torch.allclose(p0[sampler.valid], p0[sampler.valid][0])
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        ids, times = lib.sample(256, "adaptive", g)
        failed = (ids == 1) & (times >= 3.0) & (times < 4.0)  # clip 1 keeps failing in bin 3
        lib.record_episode_ends(ids, times, failed, torch.full_like(times, 0.5))  # episodes of 0.5 s
    p = sampler.probabilities()
    clip, b, prob = sampler.top_bin()
    assert (clip, b) == (1, 3) and prob > 3 * float(p0[1, 3])  # from 0.1 (uniform over 10 bins)
    assert p[1, 2] > p0[1, 2] and p[1, 1] > p0[1, 1]  # the kernel also favours starting just before
    assert p[0].sum() < p0[0].sum() and sampler.entropy() < 0.7
    scalars = sampler.stats_scalars()
    assert {k: v for k, v in scalars.items() if "/clip" not in k} == {
        "sampler/entropy": sampler.entropy(),
        "sampler/top_bin_probability": prob,
        "sampler/top_bin_clip": 1.0,
        "sampler/top_bin_time_s": 3.0,
    }
    # per clip: the share of the starts, of the exposure, and failures per second of exposure, from the EMAs
    exposure, failures = sampler.exposure.sum(1), sampler.failures.sum(1)
    for c in range(2):
        assert scalars[f"sampler/start_share/clip{c}"] == pytest.approx(float(p[c].sum()), rel=1e-6)
        assert scalars[f"sampler/time_share/clip{c}"] == pytest.approx(float(exposure[c] / exposure.sum()), rel=1e-6)
        assert scalars[f"sampler/failure_rate/clip{c}"] == pytest.approx(float(failures[c] / exposure[c]), rel=1e-6)
    assert scalars["sampler/failure_rate/clip0"] == 0.0 and scalars["sampler/start_share/clip1"] > 0.5
    ids, times = lib.sample(4000, "adaptive", g)
    in_bin = ((ids == 1) & (times >= 3) & (times < 4)).float().mean()
    assert float(in_bin) == pytest.approx(float(p[1, 3]), abs=0.03)
    assert float(p.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("weighting", ["rate", "count"])
def test_known_failure_statistics_give_the_hand_computed_start_distribution_across_and_within_clips(weighting):
    """With ``clip_balance="weights"`` (the default, ``rate``, is in the next test).
    Clip 0 of 3 s (3 bins of 1 s), clip 1 of 1 s (1 bin), equal clip weights. The EMAs: clip 0 saw one failure
    in each bin, with 4, 2 and 1 s of exposure (the traffic of a clip's start is low: here it is high, so that the
    two weightings differ), clip 1 saw 0.5 failures in 0.25 s. Bin weights: rates [0.25, 0.5, 1] and [2], or counts
    [1, 1, 1] and [0.5]. Kernel [1, 0.8, 0.64] / 2.44 over the bin and the next two (clamped at the clip's last bin),
    then 0.1 of the base (each clip 0.5, shared over its bins) + 0.9 of the failure part."""
    cfg = AdaptiveSamplingConfig(weighting=weighting, clip_balance="weights")
    lib = MotionLibrary([ramp_clip(T=31), ramp_clip(T=11)], adaptive=cfg)
    sampler = lib.adaptive
    stats = torch.zeros_like(sampler.stats)
    stats[0, 0, :3], stats[1, 0, :3] = 1.0, torch.tensor([4.0, 2.0, 1.0])
    stats[0, 1, 0], stats[1, 1, 0] = 0.5, 0.25
    w0, w1 = ([0.25, 0.5, 1.0], 2.0) if weighting == "rate" else ([1.0, 1.0, 1.0], 0.5)
    k = [1.0 / 2.44, 0.8 / 2.44, 0.64 / 2.44]
    smoothed = [  # bin b: k0 w[b] + k1 w[min(b + 1, 2)] + k2 w[min(b + 2, 2)]
        [k[0] * w0[0] + k[1] * w0[1] + k[2] * w0[2], k[0] * w0[1] + (k[1] + k[2]) * w0[2], w0[2]],
        [w1],
    ]
    total = sum(smoothed[0]) + sum(smoothed[1])
    base = [[0.5 / 3] * 3, [0.5]]
    expected = [[0.1 * b + 0.9 * s / total for b, s in zip(bs, ss)] for bs, ss in zip(base, smoothed)]
    p = sampler.probabilities(stats)
    assert p[0].tolist() == pytest.approx(expected[0], abs=1e-6) and p[1, 0] == pytest.approx(expected[1][0], abs=1e-6)
    assert float(p[1, 1:].abs().sum()) == 0.0  # clip 1 has one bin: the rest of its row is never drawn
    # drawn starts follow it, across clips and within them (times uniform inside a bin)
    ids, times = sampler.sample_from(torch.rand(200_000, 2, generator=torch.Generator().manual_seed(1)), stats)
    assert float((ids == 1).float().mean()) == pytest.approx(expected[1][0], abs=0.005)
    for b in range(3):
        share = float(((ids == 0) & (times >= b) & (times < b + 1)).float().mean())
        assert share == pytest.approx(expected[0][b], abs=0.005)
    assert float(times[ids == 1].max()) <= 1.0


@pytest.mark.parametrize("weighting", ["count", "rate"])
def test_clip_balance_by_rate_shares_the_starts_by_each_clip_failure_rate(weighting):
    """The statistics of the test above with ``clip_balance="rate"``: clip 0 failed 3 times in 7 s (3/7 per second),
    clip 1 0.5 times in 0.25 s (2 per second), so the failure part gives clip 0 (3/7) / (3/7 + 2) = 3/17 and clip 1
    14/17 (with ``weights`` clip 0 took 3 / 3.5 of it by counts), spread over clip 0's bins as before."""
    cfg = AdaptiveSamplingConfig(weighting=weighting, clip_balance="rate")
    sampler = MotionLibrary([ramp_clip(T=31), ramp_clip(T=11)], adaptive=cfg).adaptive
    stats = torch.zeros_like(sampler.stats)
    stats[0, 0, :3], stats[1, 0, :3] = 1.0, torch.tensor([4.0, 2.0, 1.0])
    stats[0, 1, 0], stats[1, 1, 0] = 0.5, 0.25
    w0 = [0.25, 0.5, 1.0] if weighting == "rate" else [1.0, 1.0, 1.0]
    k = [1.0 / 2.44, 0.8 / 2.44, 0.64 / 2.44]
    smoothed = [k[0] * w0[0] + k[1] * w0[1] + k[2] * w0[2], k[0] * w0[1] + (k[1] + k[2]) * w0[2], w0[2]]
    spread = [x / sum(smoothed) for x in smoothed]
    expected0 = [0.1 * 0.5 / 3 + 0.9 * 3 / 17 * f for f in spread]
    p = sampler.probabilities(stats)
    assert p[0].tolist() == pytest.approx(expected0, abs=1e-6)
    assert float(p[1, 0]) == pytest.approx(0.1 * 0.5 + 0.9 * 14 / 17, abs=1e-6)
    ids, _ = sampler.sample_from(torch.rand(200_000, 2, generator=torch.Generator().manual_seed(1)), stats)
    assert float((ids == 1).float().mean()) == pytest.approx(0.1 * 0.5 + 0.9 * 14 / 17, abs=0.005)
    sampler.stats.copy_(stats)  # the sampler's own statistics (what the logs read) give the same
    assert torch.equal(sampler.probabilities(), p) and sampler.top_bin()[0] == 1
    # before any failure, the clip weights; with one clip, the same numbers as clip_balance="weights"
    assert sampler.probabilities(torch.zeros_like(stats)).sum(1).tolist() == pytest.approx([0.5, 0.5], abs=1e-6)
    one = MotionLibrary([ramp_clip(T=31)], adaptive=cfg).adaptive
    plain = MotionLibrary([ramp_clip(T=31)], adaptive=AdaptiveSamplingConfig(weighting=weighting)).adaptive
    assert torch.equal(one.probabilities(stats[:, :1, :3]), plain.probabilities(stats[:, :1, :3]))
    assert len(one.stats_scalars()) == 4  # no per-clip scalars with one clip


def test_saved_statistics_load_from_either_layout_and_other_clips_start_afresh():
    """``load_saved`` (both envs' resume): the current layout, the failure EMA alone of older checkpoints (zero
    exposure), and statistics of other clips (zeroed, reported)."""
    sampler = MotionLibrary([ramp_clip(T=31), ramp_clip(T=11)]).adaptive
    stats = torch.arange(2 * 2 * 3, dtype=torch.float32).view(2, 2, 3)
    assert sampler.load_saved({"adaptive_sampler": stats}) is None and torch.equal(sampler.stats, stats)
    assert sampler.load_saved({"adaptive_failures": stats[0]}) is None
    assert torch.equal(sampler.stats[0], stats[0]) and float(sampler.stats[1].abs().sum()) == 0.0
    assert sampler.load_saved({"adaptive_failures": torch.ones(5, 7)}) == Unrestored("layout", shape=(5, 7))
    assert float(sampler.stats.abs().sum()) == 0.0
    assert sampler.load_saved({}) == Unrestored("none")
    with pytest.warns(UserWarning, match=r"another layout \(shape \(5, 7\), this run has \(2, 2, 3\)"):
        sampler.restore({"adaptive_sampler": torch.ones(5, 7)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler.restore({"adaptive_sampler": stats})  # the current layout: silent
    assert torch.equal(sampler.stats, stats)


def _named(T: int, name: str):
    clip = ramp_clip(T=T)
    clip.metadata["source"] = f"/data/{name}.npz"
    return clip


def test_saved_statistics_follow_each_clip_by_name_when_clips_are_reordered_added_or_changed():
    """Breakage caught: statistics restored by position (a resume with the clips in another order gives each clip
    another's failures: a same-shaped layout used to load silently), a clip added to the run dropping every clip's
    statistics, a clip of the same name but another length taking the old rows. Saved: clips a (3 bins), b (1 bin),
    c (3 bins) with known rows; restored into (c, a, d) and into (b', a) where b' is b at 3 bins."""
    saver = MotionLibrary([_named(31, "a"), _named(11, "b"), _named(31, "c")]).adaptive
    assert saver.names == ["a", "b", "c"] and saver.num_bins.tolist() == [3, 1, 3]
    rows = torch.arange(2 * 3 * 3, dtype=torch.float32).view(2, 3, 3) * saver.valid
    saver.stats.copy_(rows)
    state = saver.state()
    assert state["adaptive_sampler_clips"] == ["a", "b", "c"] and state["adaptive_sampler_bins"].tolist() == [3, 1, 3]
    mixed = MotionLibrary([_named(31, "c"), _named(31, "a"), _named(21, "d")]).adaptive
    with pytest.warns(UserWarning, match=r"for clips d in the checkpoint .* the other clips' resumes"):
        mixed.restore(state)
    assert torch.equal(mixed.stats[:, 0], rows[:, 2]) and torch.equal(mixed.stats[:, 1], rows[:, 0])
    assert float(mixed.stats[:, 2].abs().sum()) == 0.0
    same_order = MotionLibrary([_named(31, "a"), _named(11, "b"), _named(31, "c")]).adaptive
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same_order.restore(state)
    assert torch.equal(same_order.stats, rows)
    longer_b = MotionLibrary([_named(31, "b"), _named(31, "a")]).adaptive  # b now 3 bins: not the saved b
    assert longer_b.load_saved(state) == Unrestored("clips", clips=("b",))
    assert float(longer_b.stats[:, 0].abs().sum()) == 0.0 and torch.equal(longer_b.stats[:, 1], rows[:, 0])


def test_exposure_is_the_time_each_ended_episode_spent_in_each_bin():
    """Three episodes of a 3 s clip (1 s bins) end: at 2.5 s after 2 s (covers [0.5, 2.5]: 0.5, 1, 0.5 s), at 0.8 s
    after 3 s (clipped at the clip's start: [0, 0.8]), and one that did not end (ignored); the first failed."""
    sampler = MotionLibrary([ramp_clip(T=31)], adaptive=AdaptiveSamplingConfig(ema_alpha=1.0)).adaptive
    ids, times = torch.tensor([0, 0, 0]), torch.tensor([2.5, 0.8, 1.5])
    failed, ended, spans = (
        torch.tensor([True, False, False]),
        torch.tensor([True, True, False]),
        torch.tensor([2, 3, 1.0]),
    )
    stats = sampler.after_episode_ends(torch.zeros_like(sampler.stats), ids, times, failed, ended, spans)
    assert stats[0, 0].tolist() == [0.0, 0.0, 1.0]  # the failure, at 2.5 s
    assert stats[1, 0].tolist() == pytest.approx([0.5 + 0.8, 1.0, 0.5])


def test_inverse_cdf_picks_by_cumulative_weight_and_never_a_zero_weight():
    weights = torch.tensor([0.2, 0.0, 0.3, 0.5, 0.0])  # cumulative 0.2, 0.2, 0.5, 1.0, 1.0
    u = torch.tensor([0.0, 0.19, 0.2, 0.49, 0.5, 0.9, 1.0 - 2**-24, 1.0])  # u = 1 cannot come from rand; still safe
    assert inverse_cdf(weights, u).tolist() == [0, 0, 2, 2, 3, 3, 3, 3]
    assert inverse_cdf(torch.tensor([0.0, 0.0, 2.0]), torch.tensor([0.0, 0.999])).tolist() == [2, 2]
    draws = inverse_cdf(weights, torch.rand(100_000, generator=torch.Generator().manual_seed(0)))
    freq = torch.bincount(draws, minlength=5).float() / draws.numel()
    torch.testing.assert_close(freq, weights, atol=5e-3, rtol=0)


def test_after_episode_ends_equals_record_then_update():
    lib = MotionLibrary([ramp_clip(T=51), ramp_clip(T=31)], adaptive=AdaptiveSamplingConfig(ema_alpha=0.1))
    sampler = lib.adaptive
    g = torch.Generator().manual_seed(3)
    stats = sampler.stats.clone()
    for _ in range(5):
        ids, times = lib.sample(64, "uniform", g)
        failed = torch.rand(64, generator=g) < 0.3
        spans = 3.0 * torch.rand(64, generator=g)
        stats = sampler.after_episode_ends(stats, ids, times, failed, torch.ones_like(failed), spans)
        lib.record_episode_ends(ids, times, failed, spans)
        torch.testing.assert_close(stats, sampler.stats, atol=1e-6, rtol=0)
    assert float(stats[0].sum()) > 0 and float(stats[1].sum()) > 0
    # sampling from given EMAs is sampling from the sampler that holds them
    u = torch.rand(1000, 2, generator=g)
    fresh = MotionLibrary([ramp_clip(T=51), ramp_clip(T=31)])
    for a, b in zip(fresh.sample_from(u, "adaptive", stats), lib.sample_from(u, "adaptive")):
        assert torch.equal(a, b)


def test_library_rejects_mismatched_clips_and_bad_weights():
    other = ramp_clip(J=3)
    with pytest.raises(MotionFormatError, match="joint_names"):
        MotionLibrary([ramp_clip(), other])
    with pytest.raises(ValueError, match="weights"):
        MotionLibrary([ramp_clip()], weights=[-1.0])
    with pytest.raises(ValueError, match="at least one clip"):
        MotionLibrary([])


def _starts_after_training_on(hazard: torch.Tensor, weighting: str, rounds: int = 150) -> torch.Tensor:
    """The start distribution over the 1-s bins of one clip after ``rounds`` batches of 256 simulated episodes: each
    starts where the sampler says, then fails with ``hazard[bin]`` per second (steps of 0.1 s) until it fails, 12 s
    pass, or the clip ends; every batch is recorded as the env records episode ends."""
    lib = MotionLibrary(
        [ramp_clip(T=10 * len(hazard) + 1)], adaptive=AdaptiveSamplingConfig(weighting=weighting, ema_alpha=0.01)
    )
    g, n, dt = torch.Generator().manual_seed(0), 256, 0.1
    duration = float(lib.clip_duration[0])
    for _ in range(rounds):
        ids, start = lib.sample(n, "adaptive", g)
        t, alive, failed = start.clone(), torch.ones(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
        for _ in range(120):
            die = alive & (torch.rand(n, generator=g) < hazard[(t / 1.0).long().clamp(max=len(hazard) - 1)] * dt)
            failed, alive = failed | die, alive & ~die
            t = torch.where(alive, (t + dt).clamp(max=duration), t)
            alive &= t < duration
        lib.record_episode_ends(ids, t, failed, t - start)
    return lib.adaptive.probabilities()[0]


def test_failure_rates_send_starts_to_a_hard_clip_start_that_failure_counts_starve():
    """A 15 s clip that every episode fails (1 per second), its first 2 s harder (1.5 per second): the long clip early
    in training. Episodes that reach a late bin come from every earlier start, those that reach the first bins only
    from starts there, so failure *counts* grow along the clip whatever the difficulty, and count weighting gives the
    hardest bins the fewest starts (below uniform: 1/15 = 0.067); failure *rates* give them the most. Measured (seed
    0): rate 0.090 / 0.077 for the first two bins against 0.063-0.065 elsewhere; count 0.037 / 0.047 against up to
    0.075 (seeds 1-3 within 0.006 of these; one seed is deterministic).
    """
    hazard = torch.tensor([1.5, 1.5] + [1.0] * 13)
    rate, count = _starts_after_training_on(hazard, "rate"), _starts_after_training_on(hazard, "count")
    uniform = 1.0 / 15
    assert float(rate[:2].min()) > 1.15 * float(rate[2:].max())  # the hard start draws the most starts
    assert float(count[:2].max()) < 0.8 * uniform < float(count[2:].max())  # the defect rate weighting fixes
