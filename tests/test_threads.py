"""The threads of a run: --threads wins, then OMP_NUM_THREADS, then the CPUs the process may use; torch's pool and the
embedded env's MuJoCo pool take that number, and waiting OpenMP threads sleep."""

from __future__ import annotations

import os
import subprocess
import sys

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
