"""Side by side: the default tracking task trained by mimic_rl and by rsl_rl's OnPolicyRunner, same wall-clock budget.

rsl_rl trains the same env (the default config's MuJoCo tracking env) through a thin wrapper that flattens the
reference groups (rsl_rl's MLPModel takes 1-D groups): its actor sees ``policy + reference`` and its critic ``critic +
critic_reference`` (rsl_rl's obs_groups mapping). Hyperparameters are matched: PPO settings, hidden sizes,
activation, initial std and observation normalization. mimic_rl's curve comes from an existing run folder (its
``metrics.jsonl``) or is trained here. Both record the root-relative MPJPE of every iteration with wall-clock time
and env steps; the script plots both against time and samples in one PNG and prints the ratio of times to reach the
same MPJPE.

    python tools/compare_rsl_rl.py --ours runs/bench_default_20min --budget 1200 --output docs/img/vs_rsl_rl.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from mimic_rl.cli import resolve_motion
from mimic_rl.config import load_config
from mimic_rl.envs.mujoco import MujocoTrackingEnv
from mimic_rl.plotting import read_metrics

METRIC = "metrics/root_mpjpe_mm"


class FlatReferenceEnv:
    """The tracking env as rsl_rl sees it: 1-D observation groups; records MPJPE per rsl_rl iteration."""

    def __init__(self, env: MujocoTrackingEnv, steps_per_iteration: int) -> None:
        self.env = env
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.max_episode_length, self.device, self.cfg = env.max_episode_length, env.device, {}
        self.steps_per_iteration = steps_per_iteration
        self.rows: list[dict[str, float]] = []
        self._sum, self._count, self._steps = 0.0, 0, 0
        self._start = time.time()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    def _flat(self, obs: TensorDict) -> TensorDict:
        groups = {
            "policy": obs["policy"],
            "reference": obs["reference"].flatten(1),
            "critic": obs["critic"],
            "critic_reference": obs["critic_reference"].flatten(1),
        }
        return TensorDict(groups, batch_size=[self.num_envs])

    def get_observations(self) -> TensorDict:
        return self._flat(self.env.get_observations())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, rewards, dones, extras = self.env.step(actions)
        self._sum += float(extras["log"][METRIC])
        self._count += 1
        self._steps += self.num_envs
        if self._count == self.steps_per_iteration:
            self.rows.append(
                {
                    "iteration": len(self.rows) + 1,
                    METRIC: self._sum / self._count,
                    "perf/wall_time": time.time() - self._start,
                    "perf/total_steps": self._steps,
                }
            )
            self._sum, self._count = 0.0, 0
        return self._flat(obs), rewards, dones, {"time_outs": extras["time_outs"], "log": extras["log"]}


def rsl_rl_config(cfg: Any) -> dict[str, Any]:
    """rsl_rl's train_cfg with the same PPO settings and networks as mimic_rl's config."""
    alg = {
        "class_name": "PPO",
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "clip_param": 0.2,
        "gamma": 0.99,
        "lam": 0.95,
        "value_loss_coef": 1.0,
        "entropy_coef": 0.01,
        "learning_rate": 1e-3,
        "max_grad_norm": 1.0,
        "use_clipped_value_loss": True,
        "schedule": "adaptive",
        "desired_kl": 0.01,
    }
    alg.update({k: v for k, v in cfg.algorithm.items() if k in alg})
    model = {
        "class_name": "MLPModel",
        "hidden_dims": list(cfg.actor.get("hidden_dims", [256, 256, 256])),
        "activation": cfg.actor.get("activation", "elu"),
        "obs_normalization": True,
    }
    actor = {
        **model,
        "distribution_cfg": {
            "class_name": "GaussianDistribution",
            "init_std": float(cfg.actor.get("init_noise_std", 1.0)),
        },
    }
    return {
        "num_steps_per_env": cfg.runner.num_steps_per_env,
        "save_interval": 10**9,
        "algorithm": alg,
        "obs_groups": {"actor": ["policy", "reference"], "critic": ["critic", "critic_reference"]},
        "actor": actor,
        "critic": dict(model),
        "logger": "tensorboard",
        "check_for_nan": True,
    }


def train_rsl_rl(budget_s: float, log: Path, config: str) -> list[dict[str, float]]:
    """Train rsl_rl on the default env for ``budget_s`` seconds; returns its per-iteration rows."""
    from rsl_rl.runners import OnPolicyRunner

    cfg = load_config(config)
    cfg.env.motions = [resolve_motion(m) for m in cfg.env.motions]
    torch.manual_seed(cfg.runner.seed)
    env = FlatReferenceEnv(MujocoTrackingEnv(cfg.env), cfg.runner.num_steps_per_env)
    runner = OnPolicyRunner(env, rsl_rl_config(cfg), log_dir=None, device=cfg.runner.device)
    start = time.time()
    while time.time() - start < budget_s:
        runner.learn(1)
        if env.rows and len(env.rows) % 50 == 0:
            print(f"rsl_rl it {len(env.rows)}: {env.rows[-1][METRIC]:.1f} mm after {time.time() - start:.0f} s")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join(json.dumps(r) for r in env.rows) + "\n")
    return env.rows


def smooth(values: np.ndarray, window: int = 20) -> np.ndarray:
    """Trailing moving average."""
    out = np.empty_like(values)
    for i in range(len(values)):
        out[i] = values[max(0, i - window + 1) : i + 1].mean()
    return out


def time_to(rows: list[dict[str, float]], threshold: float, key: str = "perf/wall_time") -> float | None:
    """The x (time or samples) from which on the smoothed MPJPE stays at or below ``threshold``.

    "Stays" matters: right after reference-state initialization the error is small, so the very first iterations
    are below any threshold before the policy has learned anything.
    """
    y = smooth(np.array([r[METRIC] for r in rows]))
    above = np.nonzero(y > threshold)[0]
    if len(above) == 0:
        return rows[0][key]
    last = int(above[-1]) + 1
    return None if last >= len(rows) else rows[last][key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ours", type=Path, required=True, help="a mimic_rl run folder (metrics.jsonl)")
    parser.add_argument("--rsl-log", type=Path, help="reuse an rsl_rl log written by an earlier run of this script")
    parser.add_argument("--budget", type=float, default=1200.0)
    parser.add_argument("--config", default="tracking_ppo")
    parser.add_argument("--output", type=Path, default=Path("docs/img/vs_rsl_rl.png"))
    args = parser.parse_args()
    ours = read_metrics(args.ours)
    if args.rsl_log is not None:
        theirs = [json.loads(line) for line in args.rsl_log.read_text().splitlines() if line.strip()]
    else:
        theirs = train_rsl_rl(args.budget, args.output.with_suffix(".rsl_rl.jsonl"), args.config)
    final_ours = smooth(np.array([r[METRIC] for r in ours]))[-1]
    final_theirs = smooth(np.array([r[METRIC] for r in theirs]))[-1]
    threshold = max(final_ours, final_theirs)  # an MPJPE both reached
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, rows in (("mimic_rl MMPPO", ours), ("rsl_rl PPO", theirs)):
        y = smooth(np.array([r[METRIC] for r in rows]))
        axes[0].plot([r["perf/wall_time"] / 60 for r in rows], y, label=label)
        axes[1].plot([r["perf/total_steps"] / 1e6 for r in rows], y, label=label)
    for ax, xlabel in zip(axes, ("wall-clock time (min)", "env steps (millions)")):
        ax.axhline(threshold, color="grey", ls="--", lw=0.8)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("root-relative MPJPE (mm, moving average)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=110)
    t_ours, t_theirs = time_to(ours, threshold), time_to(theirs, threshold)
    s_ours, s_theirs = time_to(ours, threshold, "perf/total_steps"), time_to(theirs, threshold, "perf/total_steps")
    print(f"final root-relative MPJPE: mimic_rl {final_ours:.1f} mm, rsl_rl {final_theirs:.1f} mm")
    print(
        f"time to {threshold:.1f} mm: mimic_rl {t_ours} s, rsl_rl {t_theirs} s"
        + (f"  -> ratio rsl_rl / mimic_rl = {t_theirs / t_ours:.2f}" if t_ours and t_theirs else "")
    )
    print(f"samples to {threshold:.1f} mm: mimic_rl {s_ours}, rsl_rl {s_theirs}")
    print("threshold (mm) | mimic_rl time (s) | rsl_rl time (s) | ratio rsl_rl / mimic_rl")
    for level in (80.0, 70.0, 60.0, 55.0, 50.0):
        a, b = time_to(ours, level), time_to(theirs, level)
        ratio = f"{b / a:.2f}" if a and b else "-"
        print(f"{level:14.0f} | {a if a is None else round(a):>17} | {b if b is None else round(b):>15} | {ratio}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
