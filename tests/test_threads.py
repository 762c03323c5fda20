"""The threads of a run: --threads wins, then OMP_NUM_THREADS, then the CPUs the process may use; torch's pool and the
embedded env's MuJoCo pool take that number, and waiting OpenMP threads sleep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

from mimic_rl.config import load_config
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.runners.threads import ThreadPlan, default_threads, resolve_threads


def test_the_thread_number_comes_from_the_flag_then_omp_num_threads_then_the_cpus():
    """Breakage caught: OMP_NUM_THREADS ignored, --threads not winning over it, a default of more threads than the
    CPUs this process may use."""
    assert resolve_threads(3, {"OMP_NUM_THREADS": "1"}) == ThreadPlan(3, "--threads")
    assert resolve_threads(None, {"OMP_NUM_THREADS": "2"}) == ThreadPlan(2, "OMP_NUM_THREADS")
    assert resolve_threads(None, {"OMP_NUM_THREADS": " 4 "}) == ThreadPlan(4, "OMP_NUM_THREADS")
    for bad in ("", "0", "two", "-1"):  # what torch ignores too
        assert resolve_threads(None, {"OMP_NUM_THREADS": bad}).source == "default"
    assert [default_threads(n) for n in (0, 1, 2, 16)] == [1, 1, 2, 16]
    assert default_threads() == len(os.sched_getaffinity(0))
    assert ThreadPlan(1, "default").describe() == "1 thread (default)"


def _runner(threads, num_threads=None):
    cfg = load_config("tracking_ppo")
    cfg.runner.logger, cfg.runner.threads = "none", threads
    cfg.env.num_envs, cfg.env.num_threads = 4, num_threads
    return OnPolicyRunner(cfg, None)


def test_a_run_sizes_torch_and_the_physics_pool_from_its_plan():
    """Breakage caught: the plan not applied to torch, or the MuJoCo pool not following it (or overriding an explicit
    env.num_threads)."""
    outer = torch.get_num_threads()
    try:
        runner = _runner(2)
        assert runner.threads == ThreadPlan(2, "--threads")
        assert torch.get_num_threads() == 2 and runner.env.physics.num_threads == 2
        runner = _runner(1)
        assert torch.get_num_threads() == 1 and runner.env.physics.num_threads == 1
        assert _runner(1, num_threads=3).env.physics.num_threads == 3  # an explicit env setting stays
    finally:
        torch.set_num_threads(outer)


def test_importing_mimic_rl_first_lets_openmp_threads_sleep_unless_the_user_chose():
    """Breakage caught: the package no longer setting a sleeping wait policy (runs slow down 5x beside another job),
    or overriding a user's own choice. Checked in fresh interpreters: the policy only counts before torch loads."""

    def policy(env_value: str | None, first: str) -> str:
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if env_value is not None:
            env["OMP_WAIT_POLICY"] = env_value
        code = f"import os, {first}, mimic_rl; print(os.environ.get('OMP_WAIT_POLICY', 'unset'))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        return out.stdout.strip()

    assert policy(None, "sys") == "PASSIVE"
    assert policy("ACTIVE", "sys") == "ACTIVE"
    assert policy(None, "torch") == "unset"  # too late to matter: left alone


def test_the_env_step_runs_its_tensor_code_on_one_thread_unless_configured():
    """Breakage caught: the step's small tensor ops spread over the run's threads again (slower alone, and 2-3x slower
    beside a busy core, docs/benchmarks.md), an explicit env.torch_threads ignored, or the caller's setting not restored
    after the step."""
    from mimic_rl.envs.mujoco import MujocoTrackingEnv, TrackingEnvConfig

    clip = str(Path(__file__).parents[1] / "motions" / "humanoid28_squat_reach.npz")  # the shipped default motion
    outer = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        for setting, expected in ((None, 1), (2, 2)):
            cfg = TrackingEnvConfig(num_envs=200, motions=[clip], num_threads=1, torch_threads=setting)
            env = MujocoTrackingEnv(cfg)
            seen = []
            evaluate = env._evaluate_fn
            env._evaluate_fn = lambda *a, _f=evaluate, _s=seen: (_s.append(torch.get_num_threads()), _f(*a))[1]
            env.step(torch.zeros(env.num_envs, env.num_actions))
            env.close()
            assert seen == [expected]  # more than the 128 envs up to which the old default used one thread
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(outer)
