"""Side by side on an mjlab tracking task: ``mimic-rl train`` against mjlab's own rsl_rl runner, for the same wall time.

Both train mjlab's registered task (default ``Mjlab-Tracking-Flat-Unitree-G1``, the BeyondMimic G1 port) on the same
motion, number of envs and device, with the task's own PPO settings and network ([512, 256, 128] actor and critic,
ELU, observation normalization, 24 steps per env, 5 epochs x 4 mini-batches): mjlab's runner as its train script
builds it (``ManagerBasedRlEnv``, ``RslRlVecEnvWrapper``, the task's runner class and ``rl_cfg``), this package's
``OnPolicyRunner`` with the same settings. Each side gets a fresh env (its build and the first iteration's warm-up
are timed apart) and trains for ``--seconds`` of wall time, in chunks of ``--chunk`` iterations. After each chunk the
tool records the env steps, the time, and the training episodes' tracking: mjlab's MPKPE (global MPJPE) and
root-relative MPKPE of every step (mm), and the mean length of the episodes that ended. It prints the env steps per
second of both and their ratio (issue 15's target: mimic_rl / mjlab >= 0.9), and writes both curves (JSON lines)
and a plot of them over wall time to ``--output``.

    python tools/compare_mjlab.py --device cuda --num-envs 4096 --seconds 240 \\
        --motion $MIMIC_RL_DATA/motions/g1/B_HandsUp.npz --output runs/compare_mjlab

Needs mjlab (``pip install -e ".[mjlab]"``). On a 2-core CPU it runs (a few envs, a few seconds) but says nothing
about speed: mjlab steps ~60 env steps/s there.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from mimic_rl.config import load_config
from mimic_rl.envs.mjlab import MjlabEnvConfig
from mimic_rl.envs.mjlab.env import MjlabVecEnv, mjlab_env_config
from mimic_rl.runners import OnPolicyRunner


class Recorder:
    """An rsl_rl ``VecEnv`` (mjlab's wrapper) that accumulates, on the device, each step's tracking errors of its
    motion command and the lengths of the episodes that end; ``pop()`` reads them back once per chunk."""

    def __init__(self, env: Any) -> None:
        object.__setattr__(self, "env", env)
        object.__setattr__(self, "_sums", torch.zeros(5, dtype=torch.float64, device=env.device))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.env, name, value)  # e.g. episode_length_buf, which rsl_rl randomizes at the start

    def step(self, actions: torch.Tensor) -> Any:
        """The wrapped env's step, with the step's errors and episode ends accumulated."""
        from mjlab.tasks.tracking.mdp import metrics

        lengths = self.env.episode_length_buf.clone() + 1
        out = self.env.step(actions)
        command = self.env.unwrapped.command_manager.get_term("motion")
        dones = out[2].to(torch.bool)
        step = torch.stack(
            (
                1000 * metrics.compute_mpkpe(command).mean(),
                1000 * metrics.compute_root_relative_mpkpe(command).mean(),
                torch.ones((), device=dones.device),
                (lengths * dones).sum(),
                dones.sum(),
            )
        )
        self._sums.add_(step.double())
        return out

    def pop(self) -> dict[str, float]:
        """Means since the last call: global and root-relative MPJPE (mm), episode length (steps)."""
        global_mm, root_mm, steps, length_sum, ended = self._sums.tolist()
        self._sums.zero_()
        return {
            "global_mpjpe_mm": global_mm / max(1.0, steps),
            "root_mpjpe_mm": root_mm / max(1.0, steps),
            "episode_length": length_sum / ended if ended else float("nan"),
        }


def build_env(args: argparse.Namespace) -> tuple[Any, Any]:
    """(the task's ``ManagerBasedRlEnv`` config, a fresh ``Recorder`` over mjlab's ``RslRlVecEnvWrapper``)."""
    from mjlab.envs import ManagerBasedRlEnv
    from mjlab.rl import RslRlVecEnvWrapper

    cfg = MjlabEnvConfig(task=args.task, num_envs=args.num_envs, motions=[args.motion], seed=args.seed)
    cfg.device = args.device
    env_cfg = mjlab_env_config(cfg)
    return cfg, Recorder(RslRlVecEnvWrapper(ManagerBasedRlEnv(cfg=env_cfg, device=args.device)))


def train_mjlab(args: argparse.Namespace) -> list[dict[str, float]]:
    """mjlab's own runner, as its train script builds it."""
    from mjlab.rl import MjlabOnPolicyRunner
    from mjlab.tasks.registry import load_rl_cfg, load_runner_cls

    _, env = build_env(args)
    agent = load_rl_cfg(args.task)
    runner_cls = load_runner_cls(args.task) or MjlabOnPolicyRunner
    runner = runner_cls(env, asdict(agent), None, args.device)
    return _chunks(args, env, lambda first: runner.learn(args.chunk, init_at_random_ep_len=first))


def train_mimic_rl(args: argparse.Namespace) -> list[dict[str, float]]:
    """This package's runner with mjlab's PPO settings and network on the same env."""
    cfg = load_config("tracking_ppo")
    env_cfg, env = build_env(args)
    cfg.env = env_cfg
    cfg.runner.device, cfg.runner.logger, cfg.runner.seed = args.device, "none", args.seed
    cfg.runner.eval_interval, cfg.runner.save_interval = 0, 10**9
    for model in (cfg.actor, cfg.critic):
        model.update(hidden_dims=[512, 256, 128], activation="elu", obs_normalization=True)
        model.pop("reference_encoder", None)  # mjlab's task has no reference group
    runner = OnPolicyRunner(cfg, log_dir=None, env=MjlabVecEnv(env, copy.deepcopy(env_cfg)))
    runner.env.episode_length_buf = torch.randint_like(runner.env.episode_length_buf, runner.env.max_episode_length)
    return _chunks(args, env, lambda first: runner.learn(args.chunk))


def _chunks(args: argparse.Namespace, env: Recorder, learn: Any) -> list[dict[str, float]]:
    """Warm up one chunk (timed apart), then train chunk after chunk until ``args.seconds`` have passed."""
    steps_per_chunk = args.chunk * 24 * env.num_envs
    start = time.perf_counter()
    learn(True)
    warm_up = time.perf_counter() - start
    env.pop()
    rows, trained, steps = [], 0.0, 0
    while trained < args.seconds:
        tic = time.perf_counter()
        learn(False)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        trained += time.perf_counter() - tic
        steps += steps_per_chunk
        rows.append({"time_s": trained, "env_steps": steps, "warm_up_s": warm_up, **env.pop()})
        print(
            f"  {trained:7.1f} s  {steps / 1e6:7.2f} M steps  {steps / trained:9.0f} steps/s  global MPJPE "
            f"{rows[-1]['global_mpjpe_mm']:6.1f} mm  episode length {rows[-1]['episode_length']:6.1f}",
            flush=True,
        )
    env.close()
    return rows


def plot(curves: dict[str, list[dict[str, float]]], path: Path) -> None:
    """Global MPJPE and episode length over wall time, both runners."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, rows in curves.items():
        t = [r["time_s"] for r in rows]
        axes[0].plot(t, [r["global_mpjpe_mm"] for r in rows], label=name)
        axes[1].plot(t, [r["episode_length"] for r in rows], label=name)
    axes[0].set(xlabel="training time (s)", ylabel="global MPJPE (mm), training episodes")
    axes[1].set(xlabel="training time (s)", ylabel="episode length (steps)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Mjlab-Tracking-Flat-Unitree-G1")
    parser.add_argument("--motion", required=True, help="mjlab motion npz (e.g. motions/g1/B_HandsUp.npz)")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seconds", type=float, default=240.0, help="training wall time of each side")
    parser.add_argument("--chunk", type=int, default=10, help="iterations between two records")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default="runs/compare_mjlab")
    args = parser.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    curves = {}
    for name, train in (("mjlab rsl_rl", train_mjlab), ("mimic_rl", train_mimic_rl)):
        print(f"{name}: {args.task}, {args.num_envs} envs on {args.device}, {args.seconds:.0f} s", flush=True)
        torch.manual_seed(args.seed)
        curves[name] = train(args)
        with (out / f"{name.split()[0]}.jsonl").open("w") as f:
            f.writelines(json.dumps(row) + "\n" for row in curves[name])
    rate = {name: rows[-1]["env_steps"] / rows[-1]["time_s"] for name, rows in curves.items()}
    for name, value in rate.items():
        print(f"{name:14s} {value:10.0f} env steps/s (after a warm-up of {curves[name][0]['warm_up_s']:.1f} s)")
    print(f"ratio mimic_rl / mjlab: {rate['mimic_rl'] / rate['mjlab rsl_rl']:.3f}  (target >= 0.9)")
    plot(curves, out / "curves.png")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
