"""The style-only walking task (``configs/amp_walk.yaml``): its MDP core against hand-computed values, its env's
commands, rewards, falls and AMP features against independent computations, its expert pairs against the clip,
bitwise resume, and ``mimic-rl eval``'s walking summary."""

from __future__ import annotations

import math

import pytest
import torch

from mimic_rl.config import load_config
from mimic_rl.rotations import quat_from_axis_angle
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.tasks.amp_walk import (
    WalkCommandConfig,
    command_observation,
    command_velocity,
    fallen,
    heading_angle,
    sample_commands,
    velocity_reward,
)
from mimic_rl.tasks.tracking import amp_features

pytest.importorskip("mujoco")

from helpers import straight_and_resumed

from mimic_rl.envs.mujoco import DomainRandomization, InitNoise
from mimic_rl.envs.mujoco.amp_walk import AmpWalkEnvConfig, MujocoAmpWalkEnv, evaluate_amp_walk


def _yaw(angle: float) -> torch.Tensor:
    return quat_from_axis_angle(torch.tensor([[0.0, 0.0, angle]]))


def test_heading_and_command_observation_hand_cases():
    assert heading_angle(_yaw(0.7)).item() == pytest.approx(0.7, abs=1e-6)
    tilted = quat_from_axis_angle(torch.tensor([[0.0, 0.0, 2.0]]))  # yaw 2 rad, then a roll about the new x
    rolled = torch.tensor([[math.cos(0.15), math.sin(0.15), 0.0, 0.0]])
    from mimic_rl.rotations import quat_mul

    assert heading_angle(quat_mul(tilted, rolled)).item() == pytest.approx(2.0, abs=1e-6)
    # a robot facing +y (yaw pi/2) commanded to walk along +x: the command is 90 degrees to its right
    obs = command_observation(_yaw(math.pi / 2), torch.tensor([1.3]), torch.tensor([0.0]))
    torch.testing.assert_close(obs, torch.tensor([[1.3, 0.0, -1.0]]), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        command_velocity(torch.tensor([2.0]), torch.tensor([math.pi / 3])), torch.tensor([[1.0, math.sqrt(3.0)]])
    )


def test_velocity_reward_and_fall_hand_values():
    vel = torch.tensor([[1.0, 0.0, 5.0], [1.3, 0.4, 0.0]])  # the vertical velocity does not count
    target = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    r = velocity_reward(vel, target, std=0.5)
    torch.testing.assert_close(r, torch.tensor([1.0, math.exp(-(0.09 + 0.16) / 0.25)]))
    assert fallen(torch.tensor([[0.0, 0.0, 0.3], [5.0, 1.0, 0.9]]), 0.5).tolist() == [True, False]


def test_sampled_commands_cover_their_ranges_relative_to_the_start_heading():
    cfg = WalkCommandConfig(speed_range=(1.0, 2.0), heading_range=(-0.5, 0.25))
    start = torch.full((4000,), 3.0)  # near +pi: the heading wraps into (-pi, pi]
    speed, heading = sample_commands(cfg, start, torch.Generator().manual_seed(0))
    assert 1.0 <= speed.min() < 1.01 and 1.99 < speed.max() <= 2.0
    offset = torch.remainder(heading - start + math.pi, 2 * math.pi) - math.pi
    assert -0.5 <= offset.min() < -0.49 and 0.24 < offset.max() <= 0.25 + 1e-5
    assert heading.max() <= math.pi and heading.min() < -3.0  # wrapped
    with pytest.raises(ValueError, match="speed_range"):
        WalkCommandConfig(speed_range=(2.0, 1.0))


def _env_cfg(data_dir, **kw) -> AmpWalkEnvConfig:
    walk = str(data_dir / "motions/humanoid28/humanoid_walk.npz")
    return AmpWalkEnvConfig(num_envs=6, motions=[walk], randomization=DomainRandomization(enabled=False), **kw)


def _exact_start(cfg: AmpWalkEnvConfig) -> AmpWalkEnvConfig:
    cfg.init_noise = InitNoise(joint_pos=0.0, root_pos=0.0, root_rot=0.0, velocity=0.0)
    return cfg


def test_env_groups_commands_reward_and_amp_features_match_independent_computations(data_dir):
    env = MujocoAmpWalkEnv(_exact_start(_env_cfg(data_dir)))
    try:
        obs = env.get_observations()
        assert set(obs.keys()) == {"policy", "critic", "command", "amp"}
        robot = env.robot_state()
        # every episode starts at a frame of the clip (exact start: the robot is the reference there)
        ref = env.library.state(env.clip_ids, env.obs_time, bodies=env._ref_tracked)
        expert = amp_features(
            ref.joint_pos, ref.joint_vel, ref.body_pos_w, ref.body_quat_w, ref.body_lin_vel_w, ref.body_ang_vel_w,
            env.anchor, env.end_effectors,
        )  # fmt: skip
        torch.testing.assert_close(obs["amp"], expert, atol=5e-3, rtol=0)  # sensors vs the clip: mm, not a layout
        # the command relative to the heading at the start, in range
        start = heading_angle(robot.body_quat_w[:, env.anchor])
        offset = torch.remainder(env.command_heading - start + math.pi, 2 * math.pi) - math.pi
        assert (offset.abs() <= 0.785 + 1e-5).all() and ((env.command_speed >= 1.0) & (env.command_speed <= 2.0)).all()
        torch.testing.assert_close(
            obs["command"],
            command_observation(robot.body_quat_w[:, env.anchor], env.command_speed, env.command_heading),
        )
        _, reward, dones, extras = env.step(torch.zeros(env.num_envs, env.num_actions))
        robot = env.robot_state()
        v = robot.body_lin_vel_w[:, env.anchor, :2]
        target = torch.stack((torch.cos(env.command_heading), torch.sin(env.command_heading)), -1)
        target = target * env.command_speed[:, None]
        by_hand = torch.exp(-((v - target) ** 2).sum(-1) / 0.3**2) * env.step_dt
        torch.testing.assert_close(reward, by_hand, atol=1e-6, rtol=1e-5)
        along = (v * target).sum(-1) / env.command_speed
        torch.testing.assert_close(extras["tracking"]["speed_along_command"], along, atol=1e-5, rtol=1e-5)
        assert not dones.any()
    finally:
        env.close()


def test_a_robot_without_control_falls_and_its_episode_ends_there(data_dir):
    cfg = _env_cfg(data_dir)
    cfg.action_scale_factor = 1e-6  # PD targets at the zero pose: the robot collapses mid-stride
    env = MujocoAmpWalkEnv(cfg)
    try:
        assert env.fall_height == pytest.approx(0.6 * 0.81, abs=0.02)  # the walk's pelvis is ~0.81 m high
        ended = torch.zeros(env.num_envs, dtype=torch.bool)
        for _ in range(150):
            _, _, dones, extras = env.step(torch.zeros(env.num_envs, env.num_actions))
            heights = env.robot_state().body_pos_w[:, env.anchor, 2]  # after the resets of this step
            assert (heights[~dones] >= env.fall_height).all()  # every env that stayed is above the fall height
            assert torch.equal(extras["tracking"]["terminated"], dones)  # and those that ended fell (no time-out)
            ended |= dones
        assert ended.all() and not extras["time_outs"].any()
    finally:
        env.close()


def test_expert_pairs_are_consecutive_frames_of_the_clip(data_dir):
    env = MujocoAmpWalkEnv(_env_cfg(data_dir))
    try:
        torch.manual_seed(0)
        prev, cur = env.amp_expert_sampler(512)
        assert prev.shape == cur.shape == (512, env.get_observations()["amp"].shape[-1])
        j = env.num_actions
        # joint positions one policy step apart move by ~dt x the mean joint velocity (finite differences of a
        # 30 fps clip: first order, so only the bulk of the pairs is checked)
        step = cur[:, :j] - prev[:, :j]
        predicted = 0.5 * (cur[:, j : 2 * j] + prev[:, j : 2 * j]) * env.step_dt
        assert (step - predicted).abs().median() < 0.01 < step.abs().median()
        heights = torch.cat((prev[:, 2 * j], cur[:, 2 * j]))
        assert heights.min() > 0.7 and heights.max() < 0.9  # the clip's pelvis heights
    finally:
        env.close()


def _runner_cfg(data_dir):
    cfg = load_config("amp_walk")
    cfg.runner.num_steps_per_env, cfg.runner.logger = 8, "none"
    cfg.env.num_envs = 4
    cfg.env.motions = [str(data_dir / "motions/humanoid28/humanoid_walk.npz")]
    cfg.actor.update(hidden_dims=[32])
    cfg.critic.update(hidden_dims=[32])
    return cfg


def test_amp_walk_trains_and_resumes_bitwise_with_its_commands(tmp_path, data_dir):
    straight, resumed = straight_and_resumed(lambda d: OnPolicyRunner(_runner_cfg(data_dir), log_dir=d), tmp_path, 3, 1)
    a, b = straight.alg.actor.state_dict(), resumed.alg.actor.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(straight.env.command_heading, resumed.env.command_heading)
    assert (straight.env.physics.state == resumed.env.physics.state).all()
    assert straight.alg.amp is not None


def test_walking_evaluation_counts_falls_and_speeds(data_dir):
    cfg = _runner_cfg(data_dir)
    cfg.env.episode_length_s = 3.0

    class Limp:
        def __call__(self, obs):
            return torch.zeros(obs.batch_size[0], 28)

        def reset(self, dones=None):
            pass

    result = evaluate_amp_walk(Limp(), cfg, num_envs=8)
    entry = result["summary"]
    assert result["task"] == "amp_walk" and entry["no_fall_rate"] == 0.0  # a limp robot falls within 3 s
    assert 0.0 < entry["episode_length_fraction"] < 1.0
    assert 1.0 <= entry["command_speed_m_s"] <= 2.0 and entry["foot_slide_mm_s"] is not None


def test_the_report_scores_policy_and_expert_pairs_with_the_checkpoints_discriminator(tmp_path, data_dir):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("report", Path(__file__).parents[1] / "tools/amp_walk_report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    cfg = _runner_cfg(data_dir)
    cfg.env.episode_length_s = 2.0
    runner = OnPolicyRunner(cfg, log_dir=tmp_path)
    runner.learn(3)  # the discriminator separates the limp early policy from the clip within a few updates
    runner.close()
    score = report.discriminator_score(str(tmp_path / "model_3.pt"), num_envs=4)
    assert 0 < score["policy_pairs"] <= 4 * 100
    assert score["expert_logit"] > score["policy_logit"]
    assert score["expert_style_reward"] > score["policy_style_reward"]
    assert score["expert_taken_for_expert"] > score["policy_taken_for_expert"]
