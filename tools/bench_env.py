"""Benchmark the embedded MuJoCo tracking env against raw MuJoCo physics on the same states, in the same run.

For each robot and env count, the env runs ``--steps`` policy steps (observations, rewards, terminations, metrics,
resets) with a reference feed-forward action (the reference's joint positions as PD targets), recording every
physics state it starts a step from. The raw baselines replay exactly those states and controls through
``mujoco.rollout`` (same substeps, the same 2 threads, no observations), block by block, so that env and baselines
see the same machine load. Ratio = env policy steps/s divided by raw policy steps/s. Two raw baselines: the env's own
``MjModel`` (with the sensors the env reads body states from) and the robot's MJCF without those sensors.

    python tools/bench_env.py [--envs 64 256] [--steps 100] [--robots humanoid28 g1] [--compile off|on|both]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

# isort: off
import mimic_rl  # noqa: F401  (before torch: its sleeping OpenMP wait policy, as the mimic-rl command has it)
import mujoco
import numpy as np
import torch
from mujoco import rollout
# isort: on

from mimic_rl.envs.mujoco import MujocoTrackingEnv, TrackingEnvConfig, build_model


def data_dir() -> Path:
    return Path(os.environ.get("MIMIC_RL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def make_env(
    robot: str, num_envs: int, threads: int, compile: bool = False, torch_threads: int | None = None
) -> MujocoTrackingEnv:
    d = data_dir()
    if robot == "humanoid28":
        cfg = TrackingEnvConfig(num_envs=num_envs, motions=[str(d / "motions/humanoid28/humanoid_walk.npz")])
    else:
        cfg = TrackingEnvConfig(
            num_envs=num_envs,
            robot="g1",
            robot_mjcf=str(d / "robots/unitree_g1/g1.xml"),
            motions=[str(d / "motions/g1/B_HandsUp.csv")],
            csv_fps=60.0,
        )
    cfg.num_threads = threads
    cfg.compile = compile
    cfg.torch_threads = torch_threads
    return MujocoTrackingEnv(cfg)


def bench(
    robot: str,
    num_envs: int,
    steps: int,
    threads: int,
    compile: bool,
    torch_threads: int | None = None,
    block: int = 10,
    inference: bool = True,
) -> dict[str, float]:
    """Env steps/s and raw physics steps/s, measured in alternating blocks of ``block`` policy steps.

    Each block of env steps is replayed at once by the raw baselines, so that both see the same machine load (this
    2-core box's speed drifts by tens of percent over minutes). With ``inference`` the env steps under
    ``torch.inference_mode``, as the runner's collection and evaluation step it; without, autograd's bookkeeping
    (version counters, view tracking) is paid on every tensor operation."""
    env = make_env(robot, num_envs, threads, compile, torch_threads)
    j = env.num_actions
    dec = env.cfg.decimation

    def act(obs):
        return (obs["reference"][:, 0, :j] - env.default_joint_pos) / env.action_scale

    def replayer(model: mujoco.MjModel):
        datas = [mujoco.MjData(model) for _ in range(threads)]
        out = np.empty((num_envs, dec, env.physics.nstate))
        sens = np.empty((num_envs, dec, model.nsensordata))
        models = [model] * num_envs
        pool = rollout.Rollout(nthread=threads)

        def run(states, controls) -> float:
            t = time.perf_counter()
            for s, c in zip(states, controls):
                ctrl = np.ascontiguousarray(np.broadcast_to(c[:, None], (num_envs, dec, model.nu)))
                pool.rollout(models, datas, s, ctrl, nstep=dec, state=out, sensordata=sens, skip_checks=True)
            return time.perf_counter() - t

        return run, pool

    bare, _, _ = build_model(env.robot, sensors=False)  # the same physics without the env's sensors
    (raw_same, pool_same), (raw_bare, pool_bare) = replayer(env.model), replayer(bare)
    with torch.inference_mode(inference):  # off: an ordinary grad-mode step
        obs = env.get_observations()
        for _ in range(10):  # warm-up (and the one-off compile)
            obs, *_ = env.step(act(obs))
        totals = {"env": 0.0, "raw_same": 0.0, "raw_bare": 0.0}
        done = 0
        while done < steps:
            states, controls = [], []
            for _ in range(min(block, steps - done)):
                a = act(obs)
                states.append(env.physics.state.copy())
                controls.append((env.default_joint_pos + env.action_scale * a).double().numpy())
                t = time.perf_counter()
                obs, *_ = env.step(a)
                totals["env"] += time.perf_counter() - t
            totals["raw_same"] += raw_same(states, controls)
            totals["raw_bare"] += raw_bare(states, controls)
            done += len(states)
    pool_same.close()
    pool_bare.close()
    env.close()
    return {k: num_envs * steps / v for k, v in totals.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", nargs="+", default=["humanoid28", "g1"])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, help="TrackingEnvConfig.torch_threads (default: the env's)")
    parser.add_argument(
        "--grad-mode",
        choices=["inference", "grad"],
        default="inference",
        help="step the env under torch.inference_mode, as training and evaluation do, or with autograd's bookkeeping",
    )
    parser.add_argument(
        "--compile",
        choices=["off", "on", "both"],
        default="both",
        help="TrackingEnvConfig.compile (the fused MDP step)",
    )
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, mujoco {mujoco.__version__}, {args.threads} physics threads, "
        f"{args.steps} policy steps of 4 physics steps, env stepped in {args.grad_mode} mode"
    )
    print(
        f"{'robot':12s}{'envs':>6s}{'compile':>8s}{'env steps/s':>14s}{'raw (same model)':>18s}{'ratio':>8s}"
        f"{'raw (no sensors)':>18s}{'ratio':>8s}"
    )
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    for robot in args.robots:
        for n in args.envs:
            for compile in modes:
                inference = args.grad_mode == "inference"
                r = bench(robot, n, args.steps, args.threads, compile, args.torch_threads, inference=inference)
                print(
                    f"{robot:12s}{n:6d}{'on' if compile else 'off':>8s}{r['env']:14.0f}"
                    f"{r['raw_same']:18.0f}{r['env'] / r['raw_same']:8.2f}"
                    f"{r['raw_bare']:18.0f}{r['env'] / r['raw_bare']:8.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
