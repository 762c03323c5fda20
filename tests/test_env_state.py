"""The embedded env's state in checkpoints (``mimic_rl.envs.mujoco.env_state``): what a resume restores when the
checkpoint is older than the sampler's exposure EMA or its clip names, and when the resumed run has other clips."""

from __future__ import annotations

import pytest
import torch

from mimic_rl.envs.mujoco import MujocoTrackingEnv, TrackingEnvConfig


def _env(data_dir, **kwargs):
    cfg = TrackingEnvConfig(num_envs=8, motions=[str(data_dir / "motions/humanoid28/humanoid_walk.npz")], **kwargs)
    return MujocoTrackingEnv(cfg)


def test_an_env_state_from_before_exposure_was_counted_keeps_its_failure_counts(data_dir):
    """Checkpoints written before exposure was counted keep the failure EMA alone (``adaptive_failures``, ``[C, B]``):
    it comes back as the failure row with zero exposure (so that failure-count sampling resumes exactly); statistics
    of another layout restart the sampler and say so."""
    env = _env(data_dir, seed=2)
    env.step(torch.zeros(8, env.num_actions))
    state = env.state_dict()
    assert state["adaptive_sampler_clips"] == env.library.clip_names == ["humanoid_walk"]  # restored by name
    assert state["adaptive_sampler_bins"].tolist() == env.library.adaptive.num_bins.tolist()
    new = state.pop("adaptive_sampler")
    state["adaptive_failures"] = new[0] + 1.0
    env.library.adaptive.stats.fill_(3.0)
    env.load_state_dict(state)
    torch.testing.assert_close(env.library.adaptive.failures, new[0] + 1.0, atol=0, rtol=0)
    assert float(env.library.adaptive.exposure.abs().sum()) == 0.0
    state["adaptive_failures"] = torch.ones(5, 7)  # other clips
    with pytest.warns(UserWarning, match="another layout"):
        env.load_state_dict(state)
    assert float(env.library.adaptive.stats.abs().sum()) == 0.0


def test_an_env_state_of_other_clips_keeps_each_clips_statistics_and_restarts_the_episodes(data_dir):
    """A resume with other motions (``--resume`` with another ``--motion`` list). Breakage caught: a clip dropped from
    the run made the restored envs index a clip that is gone (IndexError at the first step), reordered clips left
    each env mid-episode on another clip, and the sampler's statistics went to clips by position. Saved from (walk,
    dance); loaded into (dance, walk) and into (walk): each clip's row follows its name, the episodes restart."""
    m = data_dir / "motions/humanoid28"
    walk, dance = str(m / "humanoid_walk.npz"), str(m / "humanoid_dance.npz")
    saver = MujocoTrackingEnv(TrackingEnvConfig(num_envs=8, motions=[walk, dance]))
    for _ in range(20):
        saver.step(torch.zeros(8, saver.num_actions))
    saver.library.adaptive.stats.uniform_(0.5, 1.0)  # known, non-zero rows (clip 0: walk, clip 1: dance)
    state = saver.state_dict()
    rows = saver.library.adaptive.stats.clone()
    for motions, order in (([dance, walk], [1, 0]), ([walk], [0])):
        env = MujocoTrackingEnv(TrackingEnvConfig(num_envs=8, motions=motions))
        fresh_time = env.motion_time.clone()
        with pytest.warns(UserWarning, match=r"ran other clips \(humanoid_walk, humanoid_dance\); its episodes start"):
            env.load_state_dict(state)
        assert torch.equal(env.motion_time, fresh_time)  # not the saved episodes
        for i, j in enumerate(order):
            n = int(env.library.adaptive.num_bins[i])
            torch.testing.assert_close(env.library.adaptive.stats[:, i, :n], rows[:, j, :n], atol=0, rtol=0)
        env.step(torch.zeros(8, env.num_actions))
        assert int(env.clip_ids.max()) < len(motions)
    old = {k: v for k, v in state.items() if k not in ("adaptive_sampler_clips", "adaptive_sampler_bins")}
    assert int(old["clip_ids"].max()) == 1  # a checkpoint from before names: an env on the dance, which is gone
    env = MujocoTrackingEnv(TrackingEnvConfig(num_envs=8, motions=[walk]))
    with pytest.warns(UserWarning, match=r"ran other clips; its episodes start afresh"):
        env.load_state_dict(old)
    env.step(torch.zeros(8, env.num_actions))
