"""The tracking env's AMP state with the body (``env.amp_features: body``): the ``amp`` group against
``amp_features`` of the clip computed independently, the joints-only default against the robot's joints, the expert
pairs the env draws, and a ``tracking_ppo_amp`` run whose discriminator takes its expert pairs from the env's clips
(``amp_pairs_from_env``) instead of the reference stream."""

from __future__ import annotations

import pytest
import torch

from mimic_rl.algorithms.amp import AMP, AmpConfig
from mimic_rl.config import load_config
from mimic_rl.errors import ConfigError
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.tasks.tracking import amp_features, observation_terms

pytest.importorskip("mujoco")

from mimic_rl.envs.mujoco import DomainRandomization, InitNoise, MujocoTrackingEnv, TrackingEnvConfig


def _env(data_dir, amp: str) -> MujocoTrackingEnv:
    cfg = TrackingEnvConfig(
        num_envs=6,
        motions=[str(data_dir / "motions/humanoid28/humanoid_walk.npz")],
        sampling_mode="uniform",
        init_noise=InitNoise(joint_pos=0.0, root_pos=0.0, root_rot=0.0, velocity=0.0),
        randomization=DomainRandomization(enabled=False),
        amp_features=amp,
    )
    return MujocoTrackingEnv(cfg)


def test_body_features_of_the_robot_at_an_exact_start_are_the_clips(data_dir):
    env = _env(data_dir, "body")
    try:
        amp = env.get_observations()["amp"]
        j, e = env.num_actions, len(env.end_effectors)
        assert amp.shape == (6, 2 * j + 13 + 3 * e)
        ref = env.library.state(env.clip_ids, env.obs_time, bodies=env._ref_tracked)
        expert = amp_features(
            ref.joint_pos, ref.joint_vel, ref.body_pos_w, ref.body_quat_w, ref.body_lin_vel_w, ref.body_ang_vel_w,
            env.anchor, env.end_effectors,
        )  # fmt: skip
        torch.testing.assert_close(amp, expert, atol=5e-3, rtol=0)  # sensors against the clip: mm, not a layout
        # the env's expert pairs are consecutive clip frames in the same layout
        torch.manual_seed(0)
        prev, cur = env.amp_expert_sampler(256)
        assert prev.shape == cur.shape == (256, amp.shape[-1])
        step = cur[:, :j] - prev[:, :j]
        predicted = 0.5 * (cur[:, j : 2 * j] + prev[:, j : 2 * j]) * env.step_dt
        assert (step - predicted).abs().median() < 0.01 < step.abs().median()
    finally:
        env.close()


def test_the_default_amp_group_is_the_robots_joints(data_dir):
    env = _env(data_dir, "joints")
    try:
        robot = env.robot_state()
        torch.testing.assert_close(env.get_observations()["amp"], torch.cat((robot.joint_pos, robot.joint_vel), -1))
    finally:
        env.close()
    with pytest.raises(ValueError, match="amp features must be one of"):
        observation_terms(amp="bodies")


def test_an_env_expert_sampler_is_required_when_asked_for():
    with pytest.raises(ConfigError, match="has no amp_expert_sampler"):
        AMP.prepare(AmpConfig(expert_sampler="env", num_features=4), None, object(), None)


def test_tracking_amp_with_body_features_draws_its_expert_pairs_from_the_clips(tmp_path, data_dir, monkeypatch):
    calls: list[int] = []
    original = MujocoTrackingEnv.amp_expert_sampler

    def counted(self, num):
        calls.append(num)
        return original(self, num)

    monkeypatch.setattr(MujocoTrackingEnv, "amp_expert_sampler", counted)
    cfg = load_config("tracking_ppo_amp")
    cfg.runner.num_steps_per_env, cfg.runner.logger, cfg.runner.eval_interval = 8, "none", 0
    cfg.env.num_envs = 4
    cfg.env.motions = [str(data_dir / "motions/humanoid28/humanoid_walk.npz")]
    cfg.env.amp_features = "body"  # the env's amp_pairs_from_env: AMP takes the env's sampler, not the reference
    cfg.actor.update(hidden_dims=[32])
    cfg.critic.update(hidden_dims=[32])
    runner = OnPolicyRunner(cfg, log_dir=tmp_path)
    try:
        out = runner.learn(2)
        amp = runner.alg.amp
        assert amp.cfg.num_features == 2 * 28 + 13 + 3 * len(runner.env.end_effectors)
        # one expert batch per discriminator step, as large as the policy pairs of the mini-batch (4 x 8 / 4)
        assert len(calls) == amp.num_steps > 0 and set(calls) == {8}
        assert 0.0 <= out["amp_style_reward"] <= 1.0
    finally:
        runner.close()
