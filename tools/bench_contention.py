"""Default training alone and beside a competing job, side by side in one run: env steps/s and their ratio.

Each arm runs ``mimic-rl train`` (the quick start's config unless ``--task``; a fixed number of iterations, no
evaluation) as a subprocess and reads the median env steps/s of the iterations after the warm-up from its
``metrics.jsonl``: first alone, then beside a competing job started just before it and stopped after it. The
competitor is what another user's training looks like on a shared machine: a torch process with 2 intra-op threads
training an MLP on random batches (``--competitor-threads``). Arms alternate (alone, beside, alone, beside, ...) for
``--repeats`` rounds so that slow drifts of the machine hit both. Prints each arm's env steps/s and the ratio
beside / alone (a fair share on 2 cores is 0.5), and the competitor's own iterations/s in each round.

    python tools/bench_contention.py [--iterations 12] [--num-envs 256] [--repeats 2] [--train-args "--threads 1"]
                                     [--train-env OMP_WAIT_POLICY=PASSIVE]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mimic_rl.run_dirs import read_jsonl

COMPETITOR = """
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ELU(), torch.nn.Linear(512, 512), torch.nn.ELU(),
                          torch.nn.Linear(512, 64))
opt = torch.optim.Adam(net.parameters(), 1e-3)
x, y = torch.randn(4096, 256), torch.randn(4096, 64)
count, start = 0, time.time()
while True:
    loss = (net(x) - y).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
    count += 1
    if count % 20 == 0:
        print(f"{count / (time.time() - start):.3f}", flush=True)
"""


def train(args: argparse.Namespace, work: Path, name: str) -> float:
    """Median env steps/s of one ``mimic-rl train`` run after its warm-up iterations."""
    log_dir = work / name
    argv = [sys.executable, "-m", "mimic_rl.cli", "train", "--task", args.task, "--iterations", str(args.iterations)]
    argv += ["--num-envs", str(args.num_envs), "--logger", "none", "--no-eval", "--log-dir", str(log_dir)]
    argv += shlex.split(args.train_args)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS" or args.keep_omp}
    env.update(dict(item.split("=", 1) for item in args.train_env))
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, timeout=args.timeout)
    rows = read_jsonl(log_dir / "metrics.jsonl")
    return statistics.median(r["perf/steps_per_s"] for r in rows[args.warmup :])


def beside(args: argparse.Namespace, work: Path, name: str) -> tuple[float, float]:
    """Env steps/s of a run beside the competitor, and the competitor's iterations/s meanwhile."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    competitor = subprocess.Popen(
        [sys.executable, "-c", COMPETITOR, str(args.competitor_threads)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        time.sleep(3.0)  # the competitor is up and running before training starts
        rate = train(args, work, name)
    finally:
        competitor.terminate()
        out, _ = competitor.communicate(timeout=30)
    rates = [float(v) for v in out.split()]
    return rate, rates[-1] if rates else float("nan")


def main() -> None:
    """Alternate alone / beside arms and print env steps/s and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="tracking_ppo")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2, help="iterations left out of the median")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--competitor-threads", type=int, default=2)
    parser.add_argument("--train-args", default="", help="more options of mimic-rl train, e.g. '--threads 1'")
    parser.add_argument("--keep-omp", action="store_true", help="pass this shell's OMP_NUM_THREADS to training")
    parser.add_argument("--train-env", nargs="*", default=[], metavar="KEY=VALUE", help="environment of training only")
    parser.add_argument("--timeout", type=float, default=1800.0)
    args = parser.parse_args()
    print(f"{' '.join(args.train_env)} mimic-rl train --task {args.task} --num-envs {args.num_envs} --iterations "
          f"{args.iterations} {args.train_args}; competitor: {args.competitor_threads}-thread torch MLP training; "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    alone, contended = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for r in range(args.repeats):
            alone.append(train(args, work, f"alone{r}"))
            rate, competitor = beside(args, work, f"beside{r}")
            contended.append(rate)
            print(f"round {r}: alone {alone[-1]:.0f} env steps/s, beside {rate:.0f} env steps/s "
                  f"(ratio {rate / alone[-1]:.3f}); competitor {competitor:.2f} it/s")  # fmt: skip
    a, b = statistics.median(alone), statistics.median(contended)
    print(f"median: alone {a:.0f}, beside {b:.0f} env steps/s; beside / alone {b / a:.3f} (fair share 0.5)")


if __name__ == "__main__":
    main()
