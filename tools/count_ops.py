"""Count the ATen operations of one PPO update and of one storage pass: what bounds them on a GPU, measured on any CPU.

On a GPU, an update of small networks (and a mini-batch pass over a rollout that fits in its memory many times) is
bounded by the number of kernels launched and the Python around them, not by arithmetic. This script counts the ATen
operations that launch kernels (views, reshapes and host scalars are left out) per mini-batch, with the optimizers
as they run on CUDA (rsl_rl's Adam takes the ``foreach`` path there, this package's the ``fused`` kernel), for the
same variants as ``tools/bench_ppo.py``, and prints the ratios the GPU benchmark targets. The counts do not depend on
the machine or its load; they are a proxy, not a GPU measurement.

    python tools/count_ops.py
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

import torch
from bench_ppo import build_ours, build_rsl, fill_ours, fill_rsl, make_data
from bench_storage import make_rollout, run_floor, run_policy_rollout, run_rsl_rl
from torch.utils._python_dispatch import TorchDispatchMode

NOT_KERNELS = {
    "view", "_unsafe_view", "slice", "split_with_sizes", "split", "select", "t", "transpose", "expand", "unsqueeze",
    "squeeze", "as_strided", "detach", "alias", "reshape", "permute", "narrow", "unbind", "_reshape_alias",
    "lift_fresh", "empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "_local_scalar_dense",
    "_record_function_enter_new", "_record_function_exit", "flatten", "clone_if_needed",
}  # fmt: skip
"""Operations that only make views or read host scalars (no kernel on a GPU)."""


class OpCounter(TorchDispatchMode):
    """Counts the ATen operations dispatched inside the ``with`` block."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def kernels(self) -> int:
        """Operations that launch a kernel on a GPU."""
        return sum(n for name, n in self.counts.items() if name not in NOT_KERNELS)


def as_on_cuda(optimizer: torch.optim.Optimizer, fused: bool) -> torch.optim.Optimizer:
    """The same optimizer with the implementation it would have on CUDA (``fused``, or ``foreach``)."""
    flag = {"fused": True, "foreach": None} if fused else {"foreach": True, "fused": None}
    groups = [{**group, **flag} for group in optimizer.param_groups]
    return type(optimizer)(groups)


def update_kernels(variant: str, args: argparse.Namespace, data: list) -> float:
    """Kernels per mini-batch of one ``update()`` of a variant (after a warm-up update)."""
    if variant == "rsl_rl":
        alg = build_rsl(args.envs, args.steps, "cpu", args)
        alg.optimizer = as_on_cuda(alg.optimizer, fused=False)
        fill, update = (lambda: fill_rsl(alg, data)), alg.update
    else:
        name, interval = variant.split("@") if "@" in variant else (variant, "1")
        alg = build_ours(name, args.envs, args.steps, "cpu", args)
        fused = args.adam == "fused"
        alg.optimizer = as_on_cuda(alg.optimizer, fused=fused)
        if alg.amp is not None:
            alg.amp.optimizer = as_on_cuda(alg.amp.optimizer, fused=fused)
            alg.amp.update_interval = int(interval)
        fill, update = (lambda: fill_ours(alg, data, name)), alg.update
    fill()
    update()
    fill()
    with OpCounter() as counter:
        update()
    return counter.kernels / (args.epochs * args.mini_batches)


def storage_kernels(args: argparse.Namespace) -> dict[str, float]:
    """Kernels per mini-batch of one storage pass (add, returns and the batches, per mini-batch of the pass)."""
    rollout = make_rollout(args.envs, args.steps, "cpu")
    common = (rollout, args.envs, args.steps, args.epochs, args.mini_batches, "cpu")
    out = {}
    for name, fn in (
        ("PolicyRollout", lambda: run_policy_rollout(*common)),
        ("rsl_rl", lambda: run_rsl_rl(*common)),
        ("floor", lambda: run_floor(args.envs, args.steps, 543, args.epochs, args.mini_batches, "cpu")),
    ):
        fn()
        with OpCounter() as counter:
            fn()
        out[name] = counter.kernels / (args.epochs * args.mini_batches)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--mini-batches", type=int, default=4)
    parser.add_argument(
        "--adam", choices=["fused", "foreach"], default="fused", help="this package's Adam on CUDA (fused since 0.2)"
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    data = make_data(args.envs, args.steps, "cpu")
    print(f"kernels (ATen operations that launch one) per mini-batch, {args.epochs} epochs x {args.mini_batches}")
    counts = {v: update_kernels(v, args, data) for v in ("rsl_rl", "same", "encoder", "amp", "amp@2")}
    labels = {
        "rsl_rl": "rsl_rl PPO (Adam foreach)",
        "same": f"mimic_rl, same network (Adam {args.adam})",
        "encoder": "mimic_rl, reference encoder",
        "amp": "mimic_rl, + AMP",
        "amp@2": "mimic_rl, + AMP, update_interval 2",
    }
    for key, label in labels.items():
        print(f"  update: {label:40s}{counts[key]:8.1f}")
    print(f"ratio same network / rsl_rl: {counts['same'] / counts['rsl_rl']:.3f}  (target <= 1.0)")
    print(f"ratio AMP on / off:          {counts['amp'] / counts['encoder']:.3f}  (target <= 1.25)")
    print(f"ratio AMP on / off, interval 2: {counts['amp@2'] / counts['encoder']:.3f}")
    storage = storage_kernels(args)
    for key, value in storage.items():
        print(f"  storage iteration: {key:31s}{value:8.1f}")


if __name__ == "__main__":
    main()
