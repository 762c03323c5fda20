"""Following the root, learned in seconds and judged from the clip's first frame (issue 16).

The walk's failure was a tracker that keeps the pose but lets the root fall behind: the per-body terms are relative to
the robot's anchor, so lagging costs only the global anchor term, and training statistics looked fine because episodes
start anywhere in the clip. A humanoid needs millions of env steps to learn balance before that shows, so the test uses
a robot with no balance to learn: a wheeled cart (``assets/wheeled_cart.xml``) on a stop-and-go clip whose starts are
faster than the wheels' grip. Wheels that follow their reference angles slip at each start, and the chassis falls
further behind with every cycle; catching up means turning the wheels ahead of the reference, which the joint and
body-orientation terms charge for. The defaults learn to keep up (the anchor-position termination makes the
difference, docs/ablations.md); the old settings keep the wheels on the reference and lose the root, while their
training success reads 1.00.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from mimic_rl.config import load_config
from mimic_rl.envs.mujoco import InitNoise, MujocoTrackingEnv
from mimic_rl.envs.mujoco.robots import ActuatorGroup, RobotConfig
from mimic_rl.motion import MotionClip, RobotKinematics, clip_from_root_and_joints, save_motion
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.runners.evaluation import evaluate_policy

CART = Path(__file__).parent / "assets" / "wheeled_cart.xml"
WHEEL_RADIUS = 0.1


def cart_robot() -> RobotConfig:
    """The cart with soft wheel servos (kp 20, kd 1) on a floor of friction 0.3 (grip for ~1.5 m/s^2)."""
    return RobotConfig(
        name="wheeled_cart",
        mjcf=str(CART),
        anchor_body="chassis",
        end_effectors=("left_wheel", "right_wheel"),
        actuators=(ActuatorGroup(r".*_wheel_joint", kp=20.0, kd=1.0, effort=10.0),),
        action_scale=3.0,
        floor_friction=0.3,
    )


def stop_and_go_clip(cycles: int = 6, start: float = 3.0, speed: float = 0.6, stop: float = 1.2) -> MotionClip:
    """Straight ahead along x, ``cycles`` times: accelerate at ``start`` m/s^2 to ``speed``, cruise 0.2 s, brake at
    ``stop`` m/s^2, rest 0.2 s (the last rest left out); wheels at ``x / r`` (rolling). 50 fps, ~6.6 s."""
    knots_t, knots_v, t = [0.0], [0.0], 0.0
    for cycle in range(cycles):
        for duration, v in ((speed / start, speed), (0.2, speed), (speed / stop, 0.0), (0.2, 0.0)):
            if cycle == cycles - 1 and duration == 0.2 and v == 0.0:
                break
            t += duration
            knots_t.append(t)
            knots_v.append(v)
    fps = 50.0
    times = np.arange(int(t * fps) + 1) / fps
    v = np.interp(times, knots_t, knots_v)
    x = np.concatenate(([0.0], np.cumsum(0.5 * (v[1:] + v[:-1]) / fps)))
    n = len(times)
    root_pos = np.stack((x, np.zeros(n), np.full(n, WHEEL_RADIUS)), axis=-1)
    root_quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    wheels = np.stack((x, x), axis=-1) / WHEEL_RADIUS
    kin = RobotKinematics(str(CART))
    return clip_from_root_and_joints(kin, root_pos, root_quat, wheels, fps, {"source": "stop_and_go"})


def _cfg(motion: Path, old: bool):
    cfg = load_config("tracking_ppo")  # the defaults, with 64 envs, the env on one thread
    cfg.runner.logger, cfg.runner.eval_interval, cfg.runner.seed = "none", 0, 0
    # The learner's threads: the runner sizes torch's pool from runner.threads (unset: the CPUs), over any
    # torch.set_num_threads before it, so every sweep in the docstrings ran the learner on 2 threads (the 2-CPU box);
    # pinned, so that a machine with more CPUs trains the same run.
    cfg.runner.threads = 2
    cfg.env.num_envs, cfg.env.num_threads, cfg.env.torch_threads = 64, 1, 1
    cfg.env.motions = [str(motion)]
    if old:  # before issue 16: no anchor-position termination or first-frame starts, init_noise_std 0.3 on full scale
        cfg.env.termination = dataclasses.replace(cfg.env.termination, anchor_position=None)
        cfg.env.clip_start_probability = 0.0
        cfg.env.action_scale_factor = 1.0
        cfg.actor["init_noise_std"] = 0.3
    return cfg


def _lag_at_end_mm(result: dict) -> float:
    """The bodies' mean distance to the reference at the clip's last step (every body lags as the chassis does)."""
    return result["over_time"]["global_mpjpe_mm"][-1]


def test_with_zero_actions_the_cart_falls_behind_its_reference(tmp_path):
    """The task needs learning: wheels that follow their reference angles leave the chassis > 0.25 m behind."""
    cfg = _cfg(save_motion(stop_and_go_clip(), tmp_path / "stop_and_go.npz"), old=True)
    env = MujocoTrackingEnv(dataclasses.replace(cfg.env, num_envs=2, sampling_mode="start"), robot=cart_robot())
    ref_x, x = [], []
    for _ in range(int(env.library.clips[0].duration / env.step_dt) - 1):  # the last step resets
        env.step(torch.zeros(2, env.num_actions))
        ref = env.library.state(env.clip_ids, env.motion_time, [0])
        ref_x.append(float(ref.body_pos_w[0, 0, 0]))
        x.append(float(env.robot_state().body_pos_w[0, env.anchor, 0]))
    lag = np.array(ref_x) - np.array(x)
    assert ref_x[-1] > 1.95  # the clip travels 1.98 m
    third = len(lag) // 3
    assert lag[-1] > 0.25 and lag[-third:].mean() > lag[:third].mean() + 0.1  # it grows cycle by cycle


def test_continuous_joints_keep_their_angle_at_reset_and_cost_no_limit_penalty(tmp_path):
    """A wheel's joint has no limits (MuJoCo's range [0, 0] of an unlimited joint is not a range): before, resets
    clamped its angle to 0 and the joint-limit term charged 10 per radian of it."""
    cfg = _cfg(save_motion(stop_and_go_clip(), tmp_path / "stop_and_go.npz"), old=False)
    quiet = InitNoise(joint_pos=0.0, root_pos=0.0, root_rot=0.0, velocity=0.0)
    env_cfg = dataclasses.replace(cfg.env, num_envs=8, sampling_mode="uniform", init_noise=quiet)
    env = MujocoTrackingEnv(env_cfg, robot=cart_robot())
    assert torch.isinf(env.joint_lower).all() and torch.isinf(env.joint_upper).all()
    ref = env.library.state(env.clip_ids, env.motion_time, [0])
    assert ref.joint_pos.abs().max() > 5.0  # mid-clip wheel angles, far from 0
    torch.testing.assert_close(env.robot_state().joint_pos, ref.joint_pos, atol=1e-4, rtol=0.0)
    _, _, _, extras = env.step(torch.zeros(8, env.num_actions))
    assert float(extras["log"]["reward/joint_limit"]) == 0.0


def _follows_the_root(result: dict) -> bool:
    """The criterion: global MPJPE under 160 mm over the clip, and under 270 mm behind at its end (the sweep in the
    test's docstring: the defaults at most 126 mm and 212 mm where they first follow, the old settings at least 179 mm
    and 328 mm at 120-240 iterations, at either desired KL)."""
    return result["global_mpjpe_mm"] < 160 and _lag_at_end_mm(result) < 270


EVALUATIONS = (120, 160, 200)  # iterations of 64 envs: 0.18, 0.25, 0.31 M env steps


@pytest.mark.parametrize("old", [False, True], ids=["defaults", "old_settings"])
def test_the_tracker_learns_to_follow_a_slipping_root_in_seconds(old, tmp_path):
    """Seed 0, evaluated from the first frame after 120 iterations (~120 s alone on 2 CPUs, ~155 s in the suite); the
    defaults, which learn this unevenly, get two more chances, at 160 and 200 iterations, and stop at the first
    evaluation that follows.

    Both arms are measured the same way: without the anchor-position termination, so that a cart that falls behind is
    measured to the clip's end, not cut. Seeds tried (global MPJPE / mm behind at the end; docs/ablations.md, "The KL
    target on a G1 clip"), MuJoCo 3.17.0, at the default ``desired_kl: 0.02``: the defaults, seeds 0-3, follow at the
    first of the three evaluations but seed 3, which follows at 160 (73 / 69) after 167 / 378 at 120; where they first
    follow, at most 113 / 135 mm (seed 0 at 120, own success 0.62); seed 3 fails again at 200 (139 / 273). The old
    settings, seeds 0-2 at 120: none follow (187-229 / 356-419), training success 1.00.
    At ``desired_kl: 0.01`` (the default until issue 30): the defaults, seeds 0-3, followed at every evaluation of
    120, 160, 200 and 240 iterations (at most 117 / 181 mm, own success at least 0.75; seed 0 at 120: 67 / 125), and
    before ``clip_start_probability: 0.2`` seed 4 of 0-6 failed at 120 and 200; the old settings, seeds 0-4, followed
    at none of 120 (218-250 / 387-471) or 160 (179-251 / 328-461).
    Deterministic at these thread counts (``_cfg``) for a given MuJoCo: these are MuJoCo 3.x numbers (3.17.0 passes),
    and on MuJoCo 4.0.0 the defaults of before (``clip_start_probability: 0``) on seed 0 followed at none of the three
    evaluations (the package asks for MuJoCo below 4).
    """
    clip = stop_and_go_clip()
    cfg = _cfg(save_motion(clip, tmp_path / "stop_and_go.npz"), old)
    measured = copy.deepcopy(cfg)
    measured.env.termination = dataclasses.replace(cfg.env.termination, anchor_position=None)
    threads = torch.get_num_threads()  # the runner resizes torch's pool to runner.threads: restored after
    summaries, trained = [], 0
    try:
        runner = OnPolicyRunner(cfg, log_dir=None, env=MujocoTrackingEnv(cfg.env, robot=cart_robot(), clips=[clip]))
        for iterations in EVALUATIONS[:1] if old else EVALUATIONS:
            logs, trained = runner.learn(iterations - trained), iterations
            result = evaluate_policy(runner.alg.actor, measured, num_envs=8, robot=cart_robot())["clips"][0]
            own = evaluate_policy(runner.alg.actor, cfg, num_envs=8, robot=cart_robot())["clips"][0]
            summaries.append(
                {
                    "iterations": iterations,
                    "training success": logs["episode/success_rate"],
                    "eval success (own terminations)": own["success_rate"],
                    "global MPJPE mm": result["global_mpjpe_mm"],
                    "behind at the end mm": _lag_at_end_mm(result),
                    "follows": _follows_the_root(result) and own["success_rate"] >= 0.5,
                }
            )
            if summaries[-1]["follows"]:
                break
    finally:
        torch.set_num_threads(threads)
    if old:  # training looks fine, and the cart ends far behind: the failure this test exists for
        assert summaries[-1]["training success"] > 0.9 and not summaries[-1]["follows"], summaries
    else:  # measured: at 120 iterations, success 0.62 with its own terminations, 113 mm, 135 mm behind at the end
        assert summaries[-1]["follows"], summaries
