"""Benchmark the embedded MuJoCo tracking env against raw MuJoCo physics on the same states, in the same run.

For each robot and env count, the env runs ``--steps`` policy steps (observations, rewards, terminations, metrics,
resets) with a reference feed-forward action (the reference's joint positions as PD targets), recording every
physics state it starts a step from. The raw baseline then replays exactly those states and controls through
``mujoco.rollout`` (same model, same substeps, the same 2 threads, no observations). Ratio = env policy steps/s
divided by raw policy steps/s. Two raw baselines are timed: the env's own ``MjModel`` (which includes the sensors the
env reads body states from) and the robot's MJCF without those sensors.

    python tools/bench_env.py [--envs 64 256] [--steps 100] [--robots humanoid28 g1]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import mujoco
import numpy as np
import torch
from mujoco import rollout

from mimic_rl.envs.mujoco import MujocoTrackingEnv, TrackingEnvConfig, build_model


def data_dir() -> Path:
    return Path(os.environ.get("MIMIC_RL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def make_env(robot: str, num_envs: int, threads: int) -> MujocoTrackingEnv:
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
    return MujocoTrackingEnv(cfg)


def bench(robot: str, num_envs: int, steps: int, threads: int) -> dict[str, float]:
    env = make_env(robot, num_envs, threads)
    j = env.num_actions

    def act(obs):
        return (obs["reference"][:, 0, :j] - env.default_joint_pos) / env.action_scale

    obs = env.get_observations()
    for _ in range(10):
        obs, *_ = env.step(act(obs))
    states, controls = [], []
    t0 = time.perf_counter()
    for _ in range(steps):
        a = act(obs)
        states.append(env.physics.state.copy())
        controls.append((env.default_joint_pos + env.action_scale * a).double().numpy())
        obs, *_ = env.step(a)
    env_time = time.perf_counter() - t0
    dec = env.cfg.decimation

    def replay(model: mujoco.MjModel) -> float:
        datas = [mujoco.MjData(model) for _ in range(threads)]
        out = np.empty((num_envs, dec, states[0].shape[1]))
        sens = np.empty((num_envs, dec, model.nsensordata))
        models = [model] * num_envs
        with rollout.Rollout(nthread=threads) as pool:
            ctrl = np.ascontiguousarray(np.broadcast_to(controls[0][:, None], (num_envs, dec, model.nu)))
            pool.rollout(models, datas, states[0], ctrl, nstep=dec, state=out, sensordata=sens, skip_checks=True)
            t = time.perf_counter()
            for s, c in zip(states, controls):
                ctrl = np.ascontiguousarray(np.broadcast_to(c[:, None], (num_envs, dec, model.nu)))
                pool.rollout(models, datas, s, ctrl, nstep=dec, state=out, sensordata=sens, skip_checks=True)
            return time.perf_counter() - t

    raw_same = replay(env.model)
    bare, _, _ = build_model(env.robot, sensors=False)  # the same physics without the env's sensors
    raw_bare = replay(bare)
    env.close()
    rate = num_envs * steps
    return {"env": rate / env_time, "raw_same": rate / raw_same, "raw_bare": rate / raw_bare}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robots", nargs="+", default=["humanoid28", "g1"])
    parser.add_argument("--envs", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, mujoco {mujoco.__version__}, {args.threads} physics threads, "
        f"{args.steps} policy steps of 4 physics steps"
    )
    print(
        f"{'robot':12s}{'envs':>6s}{'env steps/s':>14s}{'raw (same model)':>18s}{'ratio':>8s}"
        f"{'raw (no sensors)':>18s}{'ratio':>8s}"
    )
    for robot in args.robots:
        for n in args.envs:
            r = bench(robot, n, args.steps, args.threads)
            print(
                f"{robot:12s}{n:6d}{r['env']:14.0f}{r['raw_same']:18.0f}{r['env'] / r['raw_same']:8.2f}"
                f"{r['raw_bare']:18.0f}{r['env'] / r['raw_bare']:8.2f}"
            )


if __name__ == "__main__":
    main()
