"""How many CPU threads a run uses: torch's intra-op pool (the learner, the env's tensor code) and the embedded env's
MuJoCo pool, sized so that a run does not oversubscribe the CPUs it shares with other jobs.

``--threads N`` (``runner.threads``) wins; else ``OMP_NUM_THREADS`` when it is set; else ``default_threads()``. One
number serves both pools: they take turns within a step (physics, then tensors), never run at once.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch

__all__ = ["ThreadPlan", "apply_threads", "available_cpus", "default_threads", "resolve_threads"]


@dataclass(frozen=True)
class ThreadPlan:
    """The threads of a run and where the number came from (``--threads``, ``OMP_NUM_THREADS`` or ``default``)."""

    threads: int
    source: str

    def describe(self) -> str:
        """``2 threads (--threads)``, for the run's first line."""
        return f"{self.threads} thread{'s' if self.threads != 1 else ''} ({self.source})"


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def default_threads(cpus: int | None = None) -> int:
    """Threads when nothing asks for a number: the CPUs this process may run on.

    Every CPU, and no more: torch's pool and the MuJoCo pool take turns, so together they never oversubscribe the
    machine. Sharing it stays graceful because waiting threads sleep instead of spinning (``mimic_rl`` sets
    ``OMP_WAIT_POLICY=PASSIVE`` unless it is set): beside another 2-thread job on 2 cores, the default run keeps 0.57
    of its speed alone, where spinning threads kept 0.18 (``tools/bench_contention.py``, ``docs/benchmarks.md``).
    """
    return available_cpus() if cpus is None else max(1, cpus)


def resolve_threads(requested: int | None, environ: Mapping[str, str] | None = None) -> ThreadPlan:
    """The plan for ``requested`` (``--threads``; None: not given): that number, else ``OMP_NUM_THREADS``, else the
    default. A malformed ``OMP_NUM_THREADS`` is ignored (torch ignores it too)."""
    environ = os.environ if environ is None else environ
    if requested is not None:
        return ThreadPlan(int(requested), "--threads")
    omp = environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) >= 1:
        return ThreadPlan(int(omp), "OMP_NUM_THREADS")
    return ThreadPlan(default_threads(), "default")


def apply_threads(plan: ThreadPlan) -> ThreadPlan:
    """Size torch's intra-op pool to ``plan`` (the embedded env sizes its MuJoCo pool from it); returns ``plan``."""
    if torch.get_num_threads() != plan.threads:
        torch.set_num_threads(plan.threads)
    return plan
