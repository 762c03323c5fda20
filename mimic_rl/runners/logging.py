"""Training logs: a JSON-lines file (always), TensorBoard or wandb, and a console progress line.

TensorBoard and wandb also get rsl_rl's tags (``RSL_RL_TAGS``, and the older spellings of rsl_rl 2, still in many
dashboards, ``RSL_RL_2_TAGS``) beside ours, so that an rsl_rl user's dashboards work; ``metrics.jsonl`` keeps our names
only.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from mimic_rl.run_dirs import eval_lines

__all__ = [
    "RSL_RL_2_TAGS",
    "RSL_RL_TAGS",
    "RunLogger",
    "append_eval_history",
    "evaluated_iterations",
    "format_duration",
    "with_rsl_rl_tags",
]

RSL_RL_TAGS: dict[str, str] = {
    # ours -> the tag rsl_rl 5's OnPolicyRunner / DistillationRunner writes (rsl_rl.utils.logger.Logger.log)
    "loss/value": "Loss/value",
    "loss/surrogate": "Loss/surrogate",
    "loss/entropy": "Loss/entropy",
    "loss/learning_rate": "Loss/learning_rate",
    "loss/rnd": "Loss/rnd",
    "loss/mirror": "Loss/symmetry",
    "loss/behavior": "Loss/behavior",
    "policy/mean_std": "Policy/mean_std",
    "perf/steps_per_s": "Perf/total_fps",
    "perf/collection_time": "Perf/collection_time",
    "perf/learning_time": "Perf/learning_time",
    # rsl_rl: the mean over its last 100 finished episodes; ours: over the episodes that ended in this iteration
    "episode/reward": "Train/mean_reward",
    "episode/length": "Train/mean_episode_length",
}
"""The tags an rsl_rl user's TensorBoard / wandb dashboards read, keyed by the name of the same number here."""

RSL_RL_2_TAGS: dict[str, str] = {
    # ours -> the tag where rsl_rl 2's runner spelled it otherwise (Isaac Lab's and many published dashboards)
    "loss/value": "Loss/value_function",
    "policy/mean_std": "Policy/mean_noise_std",
    "perf/collection_time": "Perf/collection time",
}


def with_rsl_rl_tags(scalars: dict[str, float]) -> dict[str, float]:
    """``scalars`` plus a copy of each value that rsl_rl logs too, under rsl_rl's tags (5's, then 2's spelling)."""
    out = dict(scalars)
    for table in (RSL_RL_TAGS, RSL_RL_2_TAGS):
        out.update({table[k]: v for k, v in scalars.items() if k in table})
    return out


def format_duration(seconds: float) -> str:
    """``1h02m03s`` / ``2m03s`` / ``3s``."""
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class RunLogger:
    """Writes scalars per iteration to ``metrics.jsonl`` and to TensorBoard / wandb; prints one line per iteration."""

    def __init__(
        self,
        log_dir: str | Path,
        backend: str = "tensorboard",
        project: str | None = None,
        config: dict[str, Any] | None = None,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self.log_dir = Path(log_dir)
        self.writer = None
        self.wandb = None
        if not enabled:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(self.log_dir / "metrics.jsonl", "a")  # noqa: SIM115 (kept open for the run)
        if backend == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(log_dir=str(self.log_dir))
            except ImportError:
                print("warning: tensorboard is not installed; logging to metrics.jsonl only")
        elif backend == "wandb":
            try:
                import wandb

                self.wandb = wandb.init(project=project or "mimic_rl", dir=str(self.log_dir), config=config)
            except ImportError:
                print("warning: wandb is not installed (pip install wandb); logging to metrics.jsonl only")
        elif backend != "none":
            raise ValueError(f"logger must be 'tensorboard', 'wandb' or 'none', got {backend!r}")

    def log(self, iteration: int, scalars: dict[str, float]) -> None:
        """Record one iteration's scalars."""
        if not self.enabled:
            return
        clean = {k: float(v) for k, v in scalars.items() if v is not None and math.isfinite(float(v))}
        self._jsonl.write(json.dumps({"iteration": iteration, "time": time.time(), **clean}) + "\n")
        self._jsonl.flush()
        tagged = with_rsl_rl_tags(clean)
        if self.writer is not None:
            for key, value in tagged.items():
                self.writer.add_scalar(key, value, iteration)
        if self.wandb is not None:
            self.wandb.log(tagged, step=iteration)

    def print_line(self, iteration: int, total: int, scalars: dict[str, float], eta_s: float) -> None:
        """One console line: iteration, steps/s, episode reward, length and success (ended without a termination),
        global and root-relative MPJPE (the walking task: speed against the command, falls, style reward), learning
        rate, ETA."""
        if not self.enabled:
            return

        def get(key: str, fmt: str) -> str:
            value = scalars.get(key)
            return format(value, fmt) if value is not None and math.isfinite(value) else "-"

        if "metrics/speed_along_command" in scalars:  # the walking task (mimic_rl.tasks.amp_walk)
            task = (
                f"speed {get('metrics/speed_along_command', '4.2f')} of {get('metrics/command_speed', '4.2f')} m/s  "
                f"falls {get('termination/fall', '.1e')}/step  style {get('amp_style_reward', '5.3f')}"
            )
        else:
            task = (
                f"global MPJPE {get('metrics/global_mpjpe_mm', '5.1f')} mm  "
                f"root-rel MPJPE {get('metrics/root_mpjpe_mm', '5.1f')} mm"
            )
        print(
            f"it {iteration:5d}/{total}  {get('perf/steps_per_s', '6.0f')} steps/s  "
            f"reward {get('episode/reward', '7.3f')}  ep len {get('episode/length', '5.1f')}  "
            f"success {get('episode/success_rate', '4.2f')}  {task}  lr {get('loss/learning_rate', '.1e')}  "
            f"ETA {format_duration(eta_s)}",
            flush=True,
        )

    def close(self) -> None:
        """Flush and close the writers."""
        if not self.enabled:
            return
        self._jsonl.close()
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()


EVAL_HISTORY_DROPS = ("over_time", "per_body_mpjpe_mm")
"""Per-clip entries that ``evals.jsonl`` leaves out (long series; ``eval.json`` at the end of a run keeps them)."""


def append_eval_history(path: Path, iteration: int, total_steps: int, evaluation: dict[str, Any]) -> None:
    """Append one line to ``path`` (a run's ``evals.jsonl``): the iteration, env steps, and each clip's evaluation
    from its first frame (success, MPJPE, termination times and causes; no series), so that a run shows per clip how
    tracking progressed."""
    clips = [{k: v for k, v in clip.items() if k not in EVAL_HISTORY_DROPS} for clip in evaluation["clips"]]
    line = {"iteration": iteration, "total_steps": total_steps, "summary": evaluation["summary"], "clips": clips}
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")


def evaluated_iterations(path: Path) -> set[int]:
    """The iterations ``path`` (a run's ``evals.jsonl``) holds an evaluation of; empty when it does not exist. A line
    cut short by a killed process is not an evaluation."""
    return {row["iteration"] for row in eval_lines(path)}
