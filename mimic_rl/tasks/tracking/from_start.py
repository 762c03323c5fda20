"""Clips played from their first frame by N envs until each env's first episode ends: the evaluation's bookkeeping.

Every backend's evaluation feeds it the per-env metrics of each step; it keeps the averages over the steps each env
was alive, success (an episode that ended without a termination, or reached the end of the clip), the errors over the
clip's time with the number of envs still alive, the times at which episodes terminated and which termination terms
ended them (a diagnosis of where and why a policy fails). ``record`` stays on the device (no host sync); ``result``
reads everything back once.

Several clips are played at once: the envs are split into ``num_clips`` equal, consecutive groups (env ``i`` plays
clip ``i // envs_per_clip``), so that an evaluation of many clips costs the steps of its longest clip, not of all of
them one after the other (a GPU evaluates 24 clips in the time of one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from mimic_rl.tasks.tracking.quality import QUALITY_METRICS, MotionQuality, QualitySample

__all__ = [
    "EVAL_METRICS",
    "FromStartEvaluation",
    "clip_of_env",
    "eval_scalars",
    "failure_summary",
    "play_clips_from_start",
    "play_from_start",
    "summarize",
]

EVAL_METRICS = ("global_mpjpe_mm", "root_mpjpe_mm", "joint_pos_error", "joint_vel_rms_error", "ee_error_mm")
"""Per-env metrics averaged over each env's alive steps (``body_error_mm`` ``[N, B]`` is needed too)."""
SERIES = ("global_mpjpe_mm", "root_mpjpe_mm")
"""Metrics recorded over the clip's time (the mean over the envs still alive)."""


def clip_of_env(num_clips: int, envs_per_clip: int, device: Any = "cpu") -> torch.Tensor:
    """The clip each env plays in an evaluation of ``num_clips`` clips: ``[num_clips * envs_per_clip]``, env ``i``
    plays clip ``i // envs_per_clip``."""
    return torch.arange(num_clips, device=device).repeat_interleave(envs_per_clip)


class FromStartEvaluation:
    """Accumulates the evaluation of ``num_clips`` clips played by ``num_envs`` envs each (see the module docstring);
    ``record`` each step, then ``result`` per clip."""

    def __init__(
        self, num_envs: int, body_names: Sequence[str], step_dt: float, device: Any = "cpu", num_clips: int = 1
    ) -> None:
        self.n, self.c, self.body_names, self.step_dt = int(num_envs), int(num_clips), list(body_names), float(step_dt)
        shape = (self.c, self.n)
        self.alive = torch.ones(shape, dtype=torch.bool, device=device)
        self.success = torch.zeros(shape, dtype=torch.bool, device=device)
        self.length = torch.zeros(shape, device=device)
        self.sums = {k: torch.zeros(shape, dtype=torch.float64, device=device) for k in EVAL_METRICS}
        self.body_sum = torch.zeros(self.c, len(self.body_names), dtype=torch.float64, device=device)
        self.body_count = torch.zeros(self.c, dtype=torch.float64, device=device)
        self._series: list[torch.Tensor] = []
        """Per step ``[C, 4]``: (envs alive, their mean global MPJPE, their mean root-relative MPJPE, terminations)."""
        self.causes: dict[str, torch.Tensor] = {}
        """Per termination term ``[C]``: how many first episodes it ended (several terms may end the same episode)."""
        self.quality: MotionQuality | None = None
        """The motion-quality sums, from the first step that brings a ``QualitySample``."""

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
        quality: QualitySample | None = None,
    ) -> None:
        """One step: ``metrics`` (``{name: [C * N]}`` and ``body_error_mm`` ``[C * N, B]``), ``dones`` and
        ``terminated`` (``[C * N]`` bool: the episode ended at this step, by a termination), and optionally the
        termination ``terms`` (``{name: bool [C * N]}``, which terms fired) and the step's motion ``quality``."""
        shape = (self.c, self.n)
        alive = self.alive
        if quality is not None:
            if self.quality is None:
                self.quality = MotionQuality(self.c, self.n, self.step_dt, alive.device)
            self.quality.record(quality, alive, self.length)
        count = alive.sum(-1).double()
        for k in EVAL_METRICS:
            self.sums[k] += torch.where(alive, metrics[k].reshape(shape).double(), 0.0)
        body = metrics["body_error_mm"].reshape(*shape, -1).double()
        self.body_sum += torch.where(alive.unsqueeze(-1), body, 0.0).sum(1)
        self.body_count += count
        means = [
            torch.where(alive, metrics[k].reshape(shape).double(), 0.0).sum(-1) / count.clamp(min=1) for k in SERIES
        ]
        self.length += alive.float()
        dones, terminated = dones.reshape(shape), terminated.reshape(shape)
        ended = alive & dones
        self.success |= ended & ~terminated
        for term, fired in (terms or {}).items():
            hits = (ended & terminated & fired.reshape(shape).bool()).sum(-1)
            self.causes[term] = self.causes[term] + hits if term in self.causes else hits
        self._series.append(torch.stack((count, *means, (ended & terminated).sum(-1).double()), dim=-1))
        self.alive = alive & ~dones

    def result(
        self, name: str, duration_s: float, clip_steps: int, end_is_success: bool = False, clip: int = 0
    ) -> dict[str, Any]:
        """The JSON-ready entry of clip ``clip``; with ``end_is_success``, envs still alive (the loop stopped at the
        clip's end) count as successes. Its errors over time end with its last env's first episode."""
        success = self.success[clip] | self.alive[clip] if end_is_success else self.success[clip]
        length = self.length[clip]
        steps = length.clamp(min=1).double()
        entry: dict[str, Any] = {"name": name, "duration_s": duration_s, "num_envs": self.n, "clip_steps": clip_steps}
        entry.update({k: float((self.sums[k][clip] / steps).mean()) for k in EVAL_METRICS})
        quality = self.quality.result(clip) if self.quality is not None else dict.fromkeys(QUALITY_METRICS)
        entry.update(quality)
        entry["success_rate"] = float(success.float().mean())
        entry["episode_length"] = float(length.mean())
        entry["episode_length_fraction"] = float(length.mean()) / max(1, clip_steps)
        series = torch.stack(self._series)[:, clip].tolist() if self._series else []
        while series and series[-1][0] == 0:  # steps after every env of this clip had ended (other clips went on)
            series.pop()
        times = [(i + 1) * self.step_dt for i in range(len(series))]
        entry["failure_times_s"] = [t for t, row in zip(times, series) for _ in range(round(row[3]))]
        entry["failure_causes"] = {term: int(count[clip]) for term, count in self.causes.items()}
        per_body = self.body_sum[clip] / self.body_count[clip].clamp(min=1)
        entry["per_body_mpjpe_mm"] = {b: float(v) for b, v in zip(self.body_names, per_body)}
        entry["over_time"] = {
            "time_s": times,
            "global_mpjpe_mm": [row[1] for row in series],
            "root_mpjpe_mm": [row[2] for row in series],
            "alive": [round(row[0]) for row in series],
        }
        return entry


def play_clips_from_start(
    env: Any, policy: Any, body_names: Sequence[str], names: Sequence[str], durations_s: Sequence[float]
) -> list[dict[str, Any]]:
    """Play ``len(names)`` clips at once in ``env`` (an rsl_rl VecEnv whose env ``i`` starts at the first frame of
    clip ``i // (num_envs / clips)``, see ``clip_of_env``, and whose ``extras["tracking"]`` holds the per-env metrics)
    until each env's first episode ends; ``policy`` is a callable of the observations with ``reset(dones)``. Returns
    one entry per clip (``FromStartEvaluation.result``)."""
    num_clips = len(names)
    if env.num_envs % num_clips:
        raise ValueError(f"{env.num_envs} envs do not split evenly into {num_clips} clips")
    clip_steps = [max(1, int(d / env.step_dt)) for d in durations_s]
    evaluation = FromStartEvaluation(env.num_envs // num_clips, body_names, env.step_dt, env.device, num_clips)
    obs = env.get_observations()
    policy.reset()  # a recurrent policy starts from a zero state
    for _ in range(max(clip_steps) + 5):
        obs, _, dones, extras = env.step(policy(obs))
        policy.reset(dones)
        tracking = extras["tracking"]
        terms, quality = extras.get("termination_terms"), extras.get("quality")
        evaluation.record(tracking, dones, tracking["terminated"], terms, quality)
        if not evaluation.any_alive:
            break
    return [
        evaluation.result(name, duration, steps, clip=c)
        for c, (name, duration, steps) in enumerate(zip(names, durations_s, clip_steps))
    ]


def play_from_start(env: Any, policy: Any, body_names: Sequence[str], name: str, duration_s: float) -> dict[str, Any]:
    """Play one clip in every env of ``env`` from its first frame (``play_clips_from_start`` with one clip)."""
    return play_clips_from_start(env, policy, body_names, [name], [duration_s])[0]


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """The mean over clips of each clip entry's metrics, success rate and episode length fraction; of each motion
    quality metric, the mean over the clips that measured it (``None`` if none did)."""
    keys = (*EVAL_METRICS, "success_rate", "episode_length_fraction")
    out: dict[str, float | None] = {k: sum(r[k] for r in results) / len(results) for k in keys}
    for k in QUALITY_METRICS:
        values = [r[k] for r in results if r.get(k) is not None]
        out[k] = sum(values) / len(values) if values else None
    return out


def eval_scalars(evaluation: Mapping[str, Any]) -> dict[str, float]:
    """``eval/*`` scalars of an evaluation (``{"clips": [...], "summary": {...}}``): the mean success, global and
    root-relative MPJPE and episode length fraction over clips and, with several clips, each clip's under
    ``eval/<clip name>/`` (a repeated name gets ``#<index>``) and the lowest clip's success as
    ``eval/worst_clip_success_rate``."""
    keys = ("success_rate", "global_mpjpe_mm", "root_mpjpe_mm", "episode_length_fraction")
    scalars = {f"eval/{k}": float(evaluation["summary"][k]) for k in keys}
    clips = evaluation["clips"]
    if len(clips) > 1:
        scalars["eval/worst_clip_success_rate"] = min(float(clip["success_rate"]) for clip in clips)
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
