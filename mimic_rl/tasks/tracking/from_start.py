"""One clip played from its first frame by N envs until each env's first episode ends: the evaluation's bookkeeping.

Every backend's evaluation feeds it the per-env metrics of each step; it keeps the averages over the steps each env
was alive, success (an episode that ended without a termination, or reached the end of the clip), the errors over the
clip's time with the number of envs still alive, the times at which episodes terminated and which termination terms
ended them (a diagnosis of where and why a policy fails). ``record`` stays on the device (no host sync); ``result``
reads everything back once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

__all__ = ["EVAL_METRICS", "FromStartEvaluation", "eval_scalars", "failure_summary", "play_from_start", "summarize"]

EVAL_METRICS = ("global_mpjpe_mm", "root_mpjpe_mm", "joint_pos_error", "joint_vel_rms_error", "ee_error_mm")
"""Per-env metrics averaged over each env's alive steps (``body_error_mm`` ``[N, B]`` is needed too)."""
SERIES = ("global_mpjpe_mm", "root_mpjpe_mm")
"""Metrics recorded over the clip's time (the mean over the envs still alive)."""


class FromStartEvaluation:
    """Accumulates the evaluation of one clip (see the module docstring); ``record`` each step, then ``result``."""

    def __init__(self, num_envs: int, body_names: Sequence[str], step_dt: float, device: Any = "cpu") -> None:
        self.n, self.body_names, self.step_dt = num_envs, list(body_names), float(step_dt)
        self.steps_done = 0
        self.alive = torch.ones(num_envs, dtype=torch.bool, device=device)
        self.success = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.length = torch.zeros(num_envs, device=device)
        self.sums = {k: torch.zeros(num_envs, dtype=torch.float64, device=device) for k in EVAL_METRICS}
        self.body_sum = torch.zeros(len(self.body_names), dtype=torch.float64, device=device)
        self.body_count = torch.zeros((), dtype=torch.float64, device=device)
        self._series: list[torch.Tensor] = []
        """Per step: (envs alive, their mean global MPJPE, their mean root-relative MPJPE, terminations)."""
        self.causes: dict[str, torch.Tensor] = {}
        """Per termination term: how many first episodes it ended (several terms may end the same episode)."""

    @property
    def any_alive(self) -> bool:
        """Whether some env is still in its first episode."""
        return bool(self.alive.any())

    def record(
        self,
        metrics: Mapping[str, torch.Tensor],
        dones: torch.Tensor,
        terminated: torch.Tensor,
        terms: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """One step: ``metrics`` (``{name: [N]}`` and ``body_error_mm`` ``[N, B]``), ``dones`` and ``terminated``
        (``[N]`` bool: the episode ended at this step, by a termination), and optionally the termination ``terms``
        (``{name: bool [N]}``, which terms fired)."""
        self.steps_done += 1
        alive = self.alive
        count = alive.sum().double()
        for k in EVAL_METRICS:
            self.sums[k] += torch.where(alive, metrics[k].double(), 0.0)
        self.body_sum += torch.where(alive.unsqueeze(-1), metrics["body_error_mm"].double(), 0.0).sum(0)
        self.body_count += count
        means = [torch.where(alive, metrics[k].double(), 0.0).sum() / count.clamp(min=1) for k in SERIES]
        self.length += alive.float()
        ended = alive & dones
        self.success |= ended & ~terminated
        for term, fired in (terms or {}).items():
            hits = (ended & terminated & fired.bool()).sum()
            self.causes[term] = self.causes[term] + hits if term in self.causes else hits
        self._series.append(torch.stack((count, *means, (ended & terminated).sum().double())))
        self.alive = alive & ~dones

    def result(self, name: str, duration_s: float, clip_steps: int, end_is_success: bool = False) -> dict[str, Any]:
        """The clip's JSON-ready entry; with ``end_is_success``, envs still alive (the loop stopped at the clip's
        end) count as successes."""
        success = self.success | self.alive if end_is_success else self.success
        steps = self.length.clamp(min=1).double()
        entry: dict[str, Any] = {"name": name, "duration_s": duration_s, "num_envs": self.n, "clip_steps": clip_steps}
        entry.update({k: float((self.sums[k] / steps).mean()) for k in EVAL_METRICS})
        entry["success_rate"] = float(success.float().mean())
        entry["episode_length"] = float(self.length.mean())
        entry["episode_length_fraction"] = float(self.length.mean()) / max(1, clip_steps)
        series = torch.stack(self._series).tolist() if self._series else []
        times = [(i + 1) * self.step_dt for i in range(len(series))]
        entry["failure_times_s"] = [t for t, row in zip(times, series) for _ in range(round(row[3]))]
        entry["failure_causes"] = {term: int(count) for term, count in self.causes.items()}
        per_body = self.body_sum / self.body_count.clamp(min=1)
        entry["per_body_mpjpe_mm"] = {b: float(v) for b, v in zip(self.body_names, per_body)}
        entry["over_time"] = {
            "time_s": times,
            "global_mpjpe_mm": [row[1] for row in series],
            "root_mpjpe_mm": [row[2] for row in series],
            "alive": [round(row[0]) for row in series],
        }
        return entry


def play_from_start(env: Any, policy: Any, body_names: Sequence[str], name: str, duration_s: float) -> dict[str, Any]:
    """Play one clip in every env of ``env`` (an rsl_rl VecEnv whose envs all start at the clip's first frame and
    whose ``extras["tracking"]`` holds the per-env metrics) until each env's first episode ends; ``policy`` is a
    callable of the observations with ``reset(dones)``. Returns the clip's entry (``FromStartEvaluation.result``)."""
    clip_steps = max(1, int(duration_s / env.step_dt))
    evaluation = FromStartEvaluation(env.num_envs, body_names, env.step_dt, env.device)
    obs = env.get_observations()
    policy.reset()  # a recurrent policy starts each clip from a zero state
    for _ in range(clip_steps + 5):
        obs, _, dones, extras = env.step(policy(obs))
        policy.reset(dones)
        tracking = extras["tracking"]
        evaluation.record(tracking, dones, tracking["terminated"], extras.get("termination_terms"))
        if not evaluation.any_alive:
            break
    return evaluation.result(name, duration_s, clip_steps)


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The mean over clips of each clip entry's metrics, success rate and episode length fraction."""
    keys = (*EVAL_METRICS, "success_rate", "episode_length_fraction")
    return {k: sum(r[k] for r in results) / len(results) for k in keys}


def eval_scalars(evaluation: Mapping[str, Any]) -> dict[str, float]:
    """``eval/*`` scalars of an evaluation (``{"clips": [...], "summary": {...}}``): the mean success, global and
    root-relative MPJPE and episode length fraction over clips and, with several clips, each clip's under
    ``eval/<clip name>/`` (a repeated name gets ``#<index>``)."""
    keys = ("success_rate", "global_mpjpe_mm", "root_mpjpe_mm", "episode_length_fraction")
    scalars = {f"eval/{k}": float(evaluation["summary"][k]) for k in keys}
    clips = evaluation["clips"]
    if len(clips) > 1:
        seen: set[str] = set()
        for i, clip in enumerate(clips):
            name = clip["name"] if clip["name"] not in seen else f"{clip['name']}#{i}"
            seen.add(name)
            scalars.update({f"eval/{name}/{k}": float(clip[k]) for k in keys})
    return scalars


def failure_summary(clips: Sequence[Mapping[str, Any]]) -> str:
    """Where and why episodes ended early, for a log line: with one clip the span of termination times and the
    terms that fired (most first), with several the number of clips that saw a termination; "" without any."""
    failed = [c for c in clips if c.get("failure_times_s")]
    if not failed:
        return ""
    if len(clips) > 1:
        return f", terminations in {len(failed)} of {len(clips)} clips"
    times = failed[0]["failure_times_s"]
    causes = sorted(((n, k) for k, n in (failed[0].get("failure_causes") or {}).items() if n), reverse=True)
    why = " (" + ", ".join(f"{k} {n}" for n, k in causes) + ")" if causes else ""
    return f", terminations at {min(times):.1f}-{max(times):.1f} s{why}"
