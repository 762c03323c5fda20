"""tools/amp_separability.py: its classifier against known separable and inseparable sets, the feature subsets it
names, its motion statistics against hand-computed values, and a run on a tiny checkpoint."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

spec = importlib.util.spec_from_file_location("sep", Path(__file__).parents[1] / "tools/amp_separability.py")
sep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sep)

J, K = 3, 2
F = 2 * J + 13 + 3 * K


def _pairs(n: int, gen: torch.Generator, shift: dict[str, float] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    prev, cur = torch.randn(n, F, generator=gen), torch.randn(n, F, generator=gen)
    for name, value in (shift or {}).items():
        cols = sep.feature_subsets(J)[name]
        prev[:, cols] += value
        cur[:, cols] += value
    return prev, cur


def test_only_the_shifted_subset_separates():
    gen = torch.Generator().manual_seed(0)
    policy = _pairs(3000, gen, {"joint positions": 2.0})
    expert = _pairs(3000, gen)
    acc = sep.separability(policy, expert, J, dt=0.02)
    assert acc["joint positions"] > 0.95 and acc["all"] > 0.9
    for name in ("joint velocities", "anchor (height, velocities, tilt)", "key bodies"):
        assert abs(acc[name] - 0.5) < 0.05, name  # the same distribution on both sides: chance
    assert sep.feature_subsets(J)["key bodies"].start == 2 * J + 13


def test_motion_statistics_hand_values():
    dt, n = 0.02, 4
    q = torch.zeros(n, J)
    v0, v1 = torch.full((n, J), 1.0), torch.full((n, J), 1.5)  # 25 rad/s^2 between the two states
    prev = torch.cat((q, v0, torch.zeros(n, F - 2 * J)), -1)
    cur = torch.cat((q + 1.25 * dt, v1, torch.zeros(n, F - 2 * J)), -1)  # moved by the mean velocity x dt
    s = sep.motion_statistics(prev, cur, J, dt)
    assert s["rms_joint_velocity"] == pytest.approx(1.25)
    assert s["rms_joint_acceleration"] == pytest.approx(25.0)
    assert s["rms_velocity_minus_difference"] == pytest.approx(0.0, abs=1e-4)
    cur[:, :J] = q + 1.0 * dt  # the positions moved less than the velocities say: a 0.25 rad/s gap
    assert sep.motion_statistics(prev, cur, J, dt)["rms_velocity_minus_difference"] == pytest.approx(0.25, rel=1e-4)


def test_the_tool_runs_on_a_checkpoint(tmp_path, data_dir):
    pytest.importorskip("mujoco")
    from mimic_rl.config import load_config
    from mimic_rl.runners import OnPolicyRunner

    cfg = load_config("tracking_ppo")
    cfg.runner.num_steps_per_env, cfg.runner.logger, cfg.runner.eval_interval = 8, "none", 0
    cfg.env.num_envs = 4
    cfg.env.motions = [str(data_dir / "motions/humanoid28/humanoid_walk.npz")]
    cfg.actor.update(hidden_dims=[32])
    cfg.critic.update(hidden_dims=[32])
    runner = OnPolicyRunner(cfg, log_dir=tmp_path)
    runner.learn(1)
    runner.close()
    out = tmp_path / "sep.json"
    assert sep.main(["--checkpoint", str(tmp_path / "model_1.pt"), "--num-envs", "4", "--steps", "30", "--output",
                     str(out)]) == 0  # fmt: skip
    report = json.loads(out.read_text())
    assert 0 < report["pairs"] <= 4 * 30
    assert set(report["held_out_accuracy"]) == {*sep.feature_subsets(28), "joint positions + finite difference"}
    assert set(report["control_held_out_accuracy"]) == set(report["held_out_accuracy"])
    assert all(0.0 <= a <= 1.0 for a in report["held_out_accuracy"].values())
    assert report["clip"]["rms_joint_velocity"] > 0.5  # the walk's joints move
