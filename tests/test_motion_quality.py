"""Motion-quality metrics (issue 34): the per-clip sums against hand-computed values on hand-built trajectories, and
the embedded env's sensors against hand-placed MuJoCo states."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from mimic_rl.envs.mujoco import DomainRandomization, InitNoise, MujocoTrackingEnv, TrackingEnvConfig
from mimic_rl.envs.mujoco.quality_sensors import QualitySensors
from mimic_rl.envs.mujoco.robots import build_model, humanoid28_config
from mimic_rl.motion import RobotKinematics, SyntheticMotionConfig, synthetic_clip
from mimic_rl.tasks.tracking.from_start import FromStartEvaluation, summarize
from mimic_rl.tasks.tracking.quality import MotionQuality, QualitySample, joint_jerk, mechanical_power

DT = 0.02


def test_jerk_of_a_cubic_and_the_power_of_known_torques():
    t = torch.tensor([0.10, 0.12, 0.14], dtype=torch.float64)
    c = torch.tensor([1.0, -2.0], dtype=torch.float64)
    qd = 3 * c * t[:, None] ** 2  # q = c t^3: jerk 6 c exactly, also by finite differences of the velocity
    torch.testing.assert_close(joint_jerk(qd[2], qd[1], qd[0], DT), 6 * c)
    power = mechanical_power(torch.tensor([3.0, -4.0]), torch.tensor([2.0, 0.5]))
    assert float(power) == pytest.approx(3 * 2 + 4 * 0.5)


def _sample(contact, slip, pen, torque, qd) -> QualitySample:
    def t(x, dtype=torch.float64):
        return torch.tensor(x, dtype=dtype)

    return QualitySample(t(contact, torch.bool), t(slip), t(pen), t(torque), t(qd))


def test_motion_quality_of_hand_built_trajectories_counts_only_alive_steps_and_feet_in_contact():
    """Two envs, two feet, two joints, 6 steps. Env 0 lives throughout: its left foot slides at 0.25 m/s on the floor,
    its right foot moves at 9 m/s in the air; its joints follow q = c t^3 (jerk 6 c); torques (3, -4) N m; it
    penetrates the floor 1 mm more each step. Env 1 dies after 2 steps: both feet slide at 0.5 m/s in contact, random
    velocities (no jerk sample: it never has two earlier steps), torques (10, 10), penetration 50 mm; after it dies
    its values are wild and must not count."""
    c = np.array([1.0, 2.0])
    steps, rng = 6, np.random.default_rng(0)
    quality = MotionQuality(num_clips=1, num_envs=2, step_dt=DT)
    length = torch.zeros(1, 2)
    power = []  # Σ_j |τ_j q̇_j| of each alive (env, step) pair, by hand
    for k in range(steps):
        t = 0.1 + k * DT
        qd0, qd1 = 3 * c * t**2, rng.normal(size=2)
        alive = torch.tensor([[True, k < 2]])
        dead = k >= 2
        sample = _sample(
            contact=[[True, False], [True, True]],
            slip=[[0.25, 9.0], [100.0 if dead else 0.5] * 2],
            pen=[0.001 * k, 1.0 if dead else 0.05],
            torque=[[3.0, -4.0], [1e3 if dead else 10.0] * 2],
            qd=[qd0.tolist(), qd1.tolist()],
        )
        quality.record(sample, alive, length)
        length += alive.float()
        power += [abs(3.0 * qd0[0]) + abs(-4.0 * qd0[1])] + ([] if dead else [10 * abs(qd1[0]) + 10 * abs(qd1[1])])
    r = quality.result()
    assert r["foot_slide_mm_s"] == pytest.approx(1000 * (0.25 * steps + 0.5 * 2 * 2) / (steps + 4))
    assert r["joint_jerk"] == pytest.approx(math.sqrt(((6 * c) ** 2).mean()), rel=1e-6)
    assert r["torque_rms_nm"] == pytest.approx(math.sqrt((steps * (9 + 16) + 2 * 200) / (2 * (steps + 2))))
    assert len(power) == steps + 2 and r["power_w"] == pytest.approx(sum(power) / len(power))
    assert r["penetration_mm"] == pytest.approx(1000 * (sum(0.001 * k for k in range(steps)) + 2 * 0.05) / (steps + 2))
    assert r["penetration_max_mm"] == pytest.approx(50.0)


def test_mechanical_power_is_the_mean_over_alive_steps():
    quality = MotionQuality(num_clips=1, num_envs=2, step_dt=DT)
    length = torch.zeros(1, 2)
    rows = [([[2.0, 1.0], [5.0, 5.0]], [[1.0, -3.0], [1.0, 1.0]], [[True, True]]), ([[2.0, 1.0], [7.0, 7.0]],
            [[2.0, 2.0], [9.0, 9.0]], [[True, False]])]  # fmt: skip
    for torque, qd, alive in rows:
        alive = torch.tensor(alive)
        quality.record(_sample([[False], [False]], [[0.0], [0.0]], [0.0, 0.0], torque, qd), alive, length)
        length += alive.float()
    # alive (env, step) pairs: (0,0) 2*1 + 1*3 = 5; (1,0) 5 + 5 = 10; (0,1) 4 + 2 = 6; (1,1) dead
    assert quality.result()["power_w"] == pytest.approx((5 + 10 + 6) / 3)
    assert quality.result()["foot_slide_mm_s"] is None  # no foot ever touched the floor


def test_the_evaluation_reports_quality_per_clip_and_none_without_samples():
    evaluation = FromStartEvaluation(num_envs=1, body_names=["a"], step_dt=DT, num_clips=2)
    metrics = {k: torch.zeros(2) for k in ("global_mpjpe_mm", "root_mpjpe_mm", "joint_pos_error",
                                          "joint_vel_rms_error", "ee_error_mm")}  # fmt: skip
    metrics["body_error_mm"] = torch.zeros(2, 1)
    done = torch.tensor([False, False])
    sample = _sample([[True], [True]], [[0.1], [0.3]], [0.0, 0.002], [[1.0], [2.0]], [[0.0], [0.0]])
    evaluation.record(metrics, done, done, quality=sample)
    clips = [evaluation.result(n, 1.0, 50, clip=i) for i, n in enumerate("ab")]
    assert [c["foot_slide_mm_s"] for c in clips] == pytest.approx([100.0, 300.0])
    assert [c["penetration_max_mm"] for c in clips] == pytest.approx([0.0, 2.0])
    assert summarize(clips)["torque_rms_nm"] == pytest.approx(1.5)
    bare = FromStartEvaluation(num_envs=1, body_names=["a"], step_dt=DT)
    bare.record({k: v[:1] for k, v in metrics.items()}, done[:1], done[:1])
    entry = bare.result("a", 1.0, 50)
    assert entry["foot_slide_mm_s"] is None and summarize([entry])["joint_jerk"] is None


def _standing(model: mujoco.MjModel, data: mujoco.MjData, foot_z: float) -> None:
    """All joints at 0, upright: humanoid28's foot boxes are flat, their soles at their bodies' origins (box centre
    0.0275 above the origin, half height 0.0275). Place the root so that the soles are at height ``foot_z``."""
    mujoco.mj_resetData(model, data)
    data.qpos[2] = 1.5
    mujoco.mj_kinematics(model, data)
    data.qpos[2] += foot_z - data.xpos[model.body("right_foot").id, 2]


def test_humanoid28_quality_sensors_read_hand_placed_states():
    robot = humanoid28_config()
    model, _, _ = build_model(robot, quality=True)
    data = mujoco.MjData(model)
    actuators = [model.actuator(a).name for a in range(model.nu)]
    sensors = QualitySensors(model, robot.feet, actuators)

    def sample() -> QualitySample:
        row = torch.tensor(data.sensordata, dtype=torch.float64)[None]
        return sensors.sample(row, torch.zeros(1, model.nu, dtype=torch.float64))

    _standing(model, data, foot_z=-0.01)  # soles 10 mm into the floor, sliding at (0.3, 0.4) m/s
    data.qvel[:3] = [0.3, 0.4, 0.0]
    j = 5  # one joint's PD target 0.1 rad ahead: torque kp * 0.1 (kv * 0 velocity), within its force limit
    data.ctrl[:] = 0.0
    data.ctrl[j] = 0.1
    mujoco.mj_forward(model, data)
    s = sample()
    assert s.foot_contact.tolist() == [[True, True]]
    torch.testing.assert_close(s.foot_slip, torch.full((1, 2), 0.5, dtype=torch.float64), atol=1e-9, rtol=0)
    assert float(s.penetration[0]) == pytest.approx(0.010, abs=1e-6)
    expected = min(model.actuator_gainprm[j, 0] * 0.1, model.actuator_forcerange[j, 1])
    assert float(s.torque[0, j]) == pytest.approx(expected, rel=1e-6)
    assert float(s.torque[0].abs().sum()) == pytest.approx(expected, rel=1e-6)

    _standing(model, data, foot_z=0.05)  # in the air
    mujoco.mj_forward(model, data)
    s = sample()
    assert s.foot_contact.tolist() == [[False, False]] and float(s.penetration[0]) == 0.0


def test_quality_sensors_change_no_physics_and_the_env_hands_out_samples():
    kin = RobotKinematics(humanoid28_config().mjcf)
    clip = synthetic_clip(kin, SyntheticMotionConfig(duration=1.0, seed=0))
    noisy = {"init_noise": InitNoise(), "randomization": DomainRandomization()}  # the defaults: noise, pushes
    envs = [
        MujocoTrackingEnv(TrackingEnvConfig(num_envs=4, quality_metrics=q, seed=3, **noisy), clips=[clip])
        for q in (False, True)
    ]
    gen = torch.Generator().manual_seed(0)
    for _ in range(12):
        actions = 0.3 * torch.randn(4, envs[0].num_actions, generator=gen)
        (obs0, rew0, _, ex0), (obs1, rew1, _, ex1) = (env.step(actions) for env in envs)
        torch.testing.assert_close(rew0, rew1, rtol=0, atol=0)
        torch.testing.assert_close(obs0["policy"], obs1["policy"], rtol=0, atol=0)
        assert "quality" not in ex0 and ex1["quality"].torque.shape == (4, envs[0].num_actions)
    np.testing.assert_array_equal(envs[0].physics.state, envs[1].physics.state)
    for env in envs:
        env.close()
