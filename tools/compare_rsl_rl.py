"""Side by side: a tracking task trained by mimic_rl and by rsl_rl's OnPolicyRunner on the same env and env-step
budget, both judged by evaluation from each clip's first frame.

rsl_rl trains the same env (the config's MuJoCo tracking env) through a thin wrapper that flattens the reference
groups (rsl_rl's MLPModel takes 1-D groups): its actor sees ``policy + reference`` and its critic ``critic +
reference`` (rsl_rl's obs_groups mapping), with the config's PPO settings, hidden sizes, activation, initial
std and observation normalization. Every ``--eval-every`` env steps both policies are evaluated the same way
(``mimic_rl.runners.evaluation``: the deterministic policy, every clip from its first frame, no randomization). The
script prints the env steps each needs to reach the target (success and global MPJPE) and their ratio, writes both
curves as JSON lines and plots them.

    python tools/compare_rsl_rl.py --motion $MIMIC_RL_DATA/motions/humanoid28/humanoid_walk.npz --num-envs 256 \\
        --steps 10e6 --eval-every 0.5e6 --output docs/img/walk_vs_rsl_rl.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from mimic_rl.commands import resolve_motion
from mimic_rl.config import load_config
from mimic_rl.envs.mujoco import MujocoTrackingEnv
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.runners.evaluation import evaluate_policy


def _flat(obs: TensorDict) -> TensorDict:
    """The groups rsl_rl's MLPs read, 1-D: policy, reference, critic."""
    groups = {k: obs[k].flatten(1) for k in ("policy", "reference", "critic")}
    return TensorDict(groups, batch_size=obs.batch_size)


class FlatReferenceEnv:
    """The tracking env as rsl_rl sees it: 1-D observation groups, ``time_outs`` and ``log`` extras."""

    def __init__(self, env: MujocoTrackingEnv) -> None:
        self.env = env
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.max_episode_length, self.device, self.cfg = env.max_episode_length, env.device, {}

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf = value

    def get_observations(self) -> TensorDict:
        return _flat(self.env.get_observations())

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        obs, rewards, dones, extras = self.env.step(actions)
        return _flat(obs), rewards, dones, {"time_outs": extras["time_outs"], "log": extras["log"]}


class RslRlPolicy:
    """rsl_rl's inference policy as a policy of this package's observation TensorDict (for ``evaluate_policy``)."""

    def __init__(self, runner: Any) -> None:
        self.policy = runner.get_inference_policy()

    def __call__(self, obs: TensorDict) -> torch.Tensor:
        return self.policy(_flat(obs))

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Feed-forward: nothing to reset."""


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
    std = float(cfg.actor.get("init_noise_std", 1.0))
    actor = {**model, "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": std}}
    return {
        "num_steps_per_env": cfg.runner.num_steps_per_env,
        "save_interval": 10**9,
        "algorithm": alg,
        "obs_groups": {"actor": ["policy", "reference"], "critic": ["critic", "reference"]},
        "actor": actor,
        "critic": dict(model),
        "logger": "tensorboard",
        "check_for_nan": True,
    }


def _row(label: str, steps: int, start: float, cfg: Any, policy: Any, eval_envs: int) -> dict[str, Any]:
    summary = evaluate_policy(policy, cfg, num_envs=eval_envs)["summary"]
    row = {"library": label, "env_steps": steps, "wall_s": time.time() - start, **summary}
    print(
        f"{label:8s} {steps / 1e6:6.2f} M steps ({row['wall_s'] / 60:5.1f} min): "
        f"success {summary['success_rate']:.2f}, global MPJPE {summary['global_mpjpe_mm']:6.1f} mm, "
        f"root-relative {summary['root_mpjpe_mm']:5.1f} mm",
        flush=True,
    )
    return row


def train(
    library: str,
    cfg: Any,
    steps: float,
    every: float,
    eval_envs: int,
    log_dir: Path | None,
    target: Any = None,
    log: Path | None = None,
) -> list[dict]:
    """Train ``library`` (``mimic_rl`` or ``rsl_rl``) for ``steps`` env steps; rows of evaluations from the start.

    ``target``, when given, is a predicate on an evaluation row that ends training early once it holds; ``log``, a
    JSON-lines file each row is appended to as soon as it is measured."""
    per_iteration = cfg.env.num_envs * cfg.runner.num_steps_per_env
    chunk = max(1, round(every / per_iteration))
    torch.manual_seed(cfg.runner.seed)
    if library == "mimic_rl":
        runner = OnPolicyRunner(cfg, log_dir=log_dir)
        learn = runner.learn
        policy = runner.alg.get_policy
    else:
        from rsl_rl.runners import OnPolicyRunner as RslRlRunner

        runner = RslRlRunner(FlatReferenceEnv(MujocoTrackingEnv(cfg.env)), rsl_rl_config(cfg), None, cfg.runner.device)
        learn = runner.learn  # rsl_rl continues from where it stopped (its current_learning_iteration)

        def policy() -> RslRlPolicy:
            return RslRlPolicy(runner)

    start, done, rows = time.time(), 0, []
    while done * per_iteration < steps:
        learn(chunk)
        done += chunk
        rows.append(_row(library, done * per_iteration, start, cfg, policy(), eval_envs))
        if log is not None:
            with log.open("a") as f:
                f.write(json.dumps(rows[-1]) + "\n")
        if target is not None and target(rows[-1]):
            break
        if library == "mimic_rl":
            runner.alg.train_mode()
    return rows


def reached(row: dict, success: float, mpjpe: float) -> bool:
    """Whether an evaluation row meets the target: ``success`` or more and a global MPJPE below ``mpjpe``."""
    return row["success_rate"] >= success and row["global_mpjpe_mm"] < mpjpe


def steps_to_target(rows: list[dict], success: float, mpjpe: float) -> float | None:
    """The env steps of the first evaluation that reached ``success`` and a global MPJPE below ``mpjpe``."""
    hit = [r["env_steps"] for r in rows if reached(r, success, mpjpe)]
    return hit[0] if hit else None


def plot(rows: dict[str, list[dict]], output: Path, success: float, mpjpe: float) -> None:
    """Success and global MPJPE from the clip's start against env steps, both libraries."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, curve in rows.items():
        x = [r["env_steps"] / 1e6 for r in curve]
        axes[0].plot(x, [r["success_rate"] for r in curve], marker="o", label=label)
        axes[1].plot(x, [r["global_mpjpe_mm"] for r in curve], marker="o", label=label)
    axes[0].axhline(success, color="grey", ls="--", lw=0.8)
    axes[1].axhline(mpjpe, color="grey", ls="--", lw=0.8)
    axes[0].set_ylim(-0.03, 1.03)
    axes[0].set_ylabel("success from the clip's start")
    axes[1].set_ylabel("global MPJPE from the clip's start (mm)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("env steps (millions)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="tracking_ppo", help="a config in configs/ or a YAML path")
    parser.add_argument("--motion", nargs="+", help="motions (default: the config's)")
    parser.add_argument("--robot", choices=["humanoid28", "g1"])
    parser.add_argument("--robot-mjcf")
    parser.add_argument("--csv-fps", type=float)
    parser.add_argument("--num-envs", type=int)
    parser.add_argument("--steps", type=float, default=10e6, help="env steps per library")
    parser.add_argument("--eval-every", type=float, default=0.5e6, help="env steps between evaluations")
    parser.add_argument("--eval-envs", type=int, default=16)
    parser.add_argument("--target-success", type=float, default=0.9)
    parser.add_argument("--target-mpjpe", type=float, default=150.0, help="global MPJPE (mm)")
    parser.add_argument(
        "--only", choices=["mimic_rl", "rsl_rl"], help="train one library (curves of the other from --log)"
    )
    parser.add_argument("--log", type=Path, help="JSON lines of earlier rows to merge (the other library's)")
    parser.add_argument("--log-dir", type=Path, help="mimic_rl's run folder (checkpoints, metrics)")
    parser.add_argument("--output", type=Path, default=Path("docs/img/vs_rsl_rl.png"))
    parser.add_argument("--stop-at-target", action="store_true", help="stop each library once it reaches the target")
    args = parser.parse_args()
    cfg = load_config(args.task)
    cfg.runner.time_budget_s, cfg.runner.eval_interval = None, 0
    for key, value in {"motions": args.motion, "robot": args.robot, "robot_mjcf": args.robot_mjcf}.items():
        if value is not None:
            setattr(cfg.env, key, value)
    if args.csv_fps is not None:
        cfg.env.csv_fps = args.csv_fps
    if args.num_envs is not None:
        cfg.env.num_envs = args.num_envs
    cfg.env.motions = [resolve_motion(m) for m in cfg.env.motions]
    rows: dict[str, list[dict]] = {}
    if args.log is not None:
        for line in args.log.read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(row["library"], []).append(row)
    for library in [args.only] if args.only else ["mimic_rl", "rsl_rl"]:
        stop = (lambda row: reached(row, args.target_success, args.target_mpjpe)) if args.stop_at_target else None
        rows.pop(library, None)  # this run's curve replaces any earlier one of the same library
        log = args.output.with_suffix(".jsonl")
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(json.dumps(r) + "\n" for curve in rows.values() for r in curve))  # earlier rows
        rows[library] = train(library, cfg, args.steps, args.eval_every, args.eval_envs, args.log_dir, stop, log)
    plot(rows, args.output, args.target_success, args.target_mpjpe)
    hits = {k: steps_to_target(v, args.target_success, args.target_mpjpe) for k, v in rows.items()}
    target = f"success >= {args.target_success} and global MPJPE < {args.target_mpjpe:g} mm"
    for library, hit in hits.items():
        print(f"{library}: env steps to {target}: {'not reached' if hit is None else f'{hit / 1e6:.2f} M'}")
    if hits.get("mimic_rl") and hits.get("rsl_rl"):
        print(f"ratio mimic_rl / rsl_rl = {hits['mimic_rl'] / hits['rsl_rl']:.2f}")
    elif hits.get("mimic_rl") and "rsl_rl" in rows:
        budget = rows["rsl_rl"][-1]["env_steps"]
        ratio = hits["mimic_rl"] / budget
        print(f"rsl_rl did not reach it in {budget / 1e6:.2f} M: ratio mimic_rl / rsl_rl < {ratio:.2f}")
    print(f"wrote {args.output} and {args.output.with_suffix('.jsonl')}")


if __name__ == "__main__":
    main()
