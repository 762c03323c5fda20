"""Benchmark MotionLibrary sampling: 4096 envs x 5 future frames, vectorized against a per-env Python loop.

Both paths compute the same interpolated states (joint positions and velocities, body positions, rotations and
velocities) for the same (clip, time) pairs; the loop calls the library once per env, which is what a naive
implementation costs. Clips: the three humanoid28 clips of $MIMIC_RL_DATA (or ../shared/data).

    python tools/bench_motion.py [--envs 4096] [--frames 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from mimic_rl.motion import MotionLibrary, load_motion


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=4096)
    parser.add_argument("--frames", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--loop-envs", type=int, default=512, help="envs timed in the loop (scaled to --envs)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    data = Path(os.environ.get("MIMIC_RL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    clips = [load_motion(data / f"motions/humanoid28/humanoid_{n}.npz") for n in ("walk", "run", "dance")]
    lib = MotionLibrary(clips, device=args.device)
    offsets = lib.frame_offsets(args.frames)
    g = torch.Generator(device=args.device).manual_seed(0)

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def vectorized() -> float:
        ids, times = lib.sample(args.envs, "uniform", g)
        sync()
        t0 = time.perf_counter()
        lib.future_states(ids, times, offsets)
        sync()
        return time.perf_counter() - t0

    def loop() -> float:
        ids, times = lib.sample(args.loop_envs, "uniform", g)
        sync()
        t0 = time.perf_counter()
        for i in range(args.loop_envs):
            lib.future_states(ids[i : i + 1], times[i : i + 1], offsets)
        sync()
        return (time.perf_counter() - t0) * args.envs / args.loop_envs

    vectorized(), loop()  # warm-up
    vec = statistics.median(vectorized() for _ in range(args.repeats))
    per_env = statistics.median(loop() for _ in range(3))
    # the two paths agree
    ids, times = lib.sample(8, "uniform", g)
    batch = lib.future_states(ids, times, offsets)
    for i in range(8):
        one = lib.future_states(ids[i : i + 1], times[i : i + 1], offsets)
        assert torch.equal(one.body_pos_w[0], batch.body_pos_w[i])
    print(
        f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}, "
        f"{lib.num_clips} clips, {lib.body_pos_w.shape[0]} frames"
    )
    print(f"{args.envs} envs x {args.frames} future frames")
    print(f"  vectorized MotionLibrary.future_states: {1e3 * vec:9.2f} ms")
    print(f"  per-env loop (timed on {args.loop_envs} envs, scaled): {1e3 * per_env:9.1f} ms")
    print(f"  speed-up: {per_env / vec:.0f}x")


if __name__ == "__main__":
    main()
