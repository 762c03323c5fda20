"""Env steps per second of this package's G1 tracking task on Isaac Lab 3.0 (Newton, MuJoCo Warp; kit-less) against
the embedded MuJoCo env on the same robot, clip and env count, in the same run.

Both hold the G1's home pose (zero actions: Isaac Lab's task offsets its targets from the default pose, the embedded
env is set to do the same), so both see the same falls and resets. Blocks of ``--block`` policy steps alternate
between the two, so that both see the same machine load. Runs in the virtual environment of
``tools/install_isaaclab.py`` (``docs/isaaclab.md``). Isaac Lab's Newton is built for GPUs; on a CPU it is reported,
not judged.

    python tools/bench_isaaclab.py [--envs 16 64] [--steps 100] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from mimic_rl.envs.isaaclab.config import IsaacLabEnvConfig
from mimic_rl.envs.isaaclab.env import make_isaaclab_env
from mimic_rl.envs.mujoco import DomainRandomization, MujocoTrackingEnv, TrackingEnvConfig


def data_dir() -> Path:
    return Path(os.environ.get("MIMIC_RL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def make_envs(num_envs: int, device: str) -> tuple[MujocoTrackingEnv, object]:
    """The embedded env and Isaac Lab's ``MimicRL-Tracking-G1`` on ``B_HandsUp`` with ``num_envs`` envs each."""
    d = data_dir()
    mjcf, clip = str(d / "robots/unitree_g1/g1.xml"), str(d / "motions/g1/B_HandsUp.csv")
    embedded = MujocoTrackingEnv(
        TrackingEnvConfig(
            robot="g1",
            robot_mjcf=mjcf,
            motions=[clip],
            csv_fps=60.0,
            num_envs=num_envs,
            action_offset="default",
            randomization=DomainRandomization(enabled=False),
            device=device,
        )
    )
    cfg = IsaacLabEnvConfig(
        task="MimicRL-Tracking-G1", num_envs=num_envs, motions=[clip], csv_fps=60.0, robot_mjcf=mjcf, device=device
    )
    return embedded, make_isaaclab_env(cfg)


def bench(num_envs: int, steps: int, block: int, device: str) -> dict[str, float]:
    """Env steps/s of both envs, alternating in blocks."""
    embedded, isaac = make_envs(num_envs, device)
    elapsed = {"embedded": 0.0, "isaaclab": 0.0}
    envs = {"embedded": embedded, "isaaclab": isaac}
    with torch.inference_mode():
        for env in envs.values():  # warm-up: kernels, caches
            for _ in range(block):
                env.step(torch.zeros(env.num_envs, env.num_actions, device=device))
        for _ in range(steps // block):
            for name, env in envs.items():
                actions = torch.zeros(env.num_envs, env.num_actions, device=device)
                start = time.perf_counter()
                for _ in range(block):
                    env.step(actions)
                elapsed[name] += time.perf_counter() - start
    for env in envs.values():
        env.close()
    done = (steps // block) * block * num_envs
    return {name: done / seconds for name, seconds in elapsed.items()}


def main() -> None:
    """Print a table row per env count."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--steps", type=int, default=100, help="policy steps per env and backend")
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(f"torch threads {torch.get_num_threads()}, device {args.device}")
    print("| envs | embedded env steps/s | Isaac Lab env steps/s | Isaac Lab / embedded |")
    print("|---:|---:|---:|---:|")
    for n in args.envs:
        rate = bench(n, args.steps, args.block, args.device)
        ratio = rate["isaaclab"] / rate["embedded"]
        print(f"| {n} | {rate['embedded']:,.0f} | {rate['isaaclab']:,.0f} | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
