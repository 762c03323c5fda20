"""Benchmark RolloutStorageMM against rsl_rl's RolloutStorage (+ its PPO.compute_returns) on the same data.

Times one PPO iteration's storage work: adding T transitions, computing returns and advantages, and one full
mini-batch pass (epochs x mini-batches). Both storages hold the same fields: policy and reference observations,
actions, rewards, dones, values, log-probs, mean and std (this project additionally stores the reference mask,
time-outs and bootstrap values). The mini-batch pass is also compared with a plain ``torch.index_select`` of the same
bytes, the memory-bandwidth floor. ``PolicyRollout`` (what MMPPO stores into: the env's groups under their names, one
dict per step, dict mini-batches) and the generic core underneath, ``RolloutBuffer``, are timed on the same fields,
the latter filled step by step (``add_step``) and in place (``start_rollout()`` views, then ``add()``).

    python tools/bench_storage.py                 # the seed's shapes (4096 x 24) and a 1024-env case
    python tools/bench_storage.py --repeats 9 --device cuda
"""

from __future__ import annotations

import argparse
import statistics
import time
import types

import torch
from tensordict import TensorDict

from mimic_rl.storage import (
    FieldSpec,
    PolicyRollout,
    RolloutBuffer,
    RolloutStorageMM,
    compute_gae,
    normalize_advantages,
)

OBS, REF, ACT = 48, 26, 19


def make_rollout(num_envs: int, steps: int, device: str) -> list[dict[str, torch.Tensor]]:
    """Pre-generated per-step data, so that only storage work is timed."""
    g = torch.Generator(device="cpu").manual_seed(0)
    out = []
    for _ in range(steps):
        step = {
            "obs": torch.randn(num_envs, OBS, generator=g),
            "ref": torch.randn(num_envs, REF, generator=g),
            "ref_mask": torch.rand(num_envs, generator=g) > 0.1,
            "actions": torch.randn(num_envs, ACT, generator=g),
            "rewards": torch.randn(num_envs, generator=g),
            "dones": torch.rand(num_envs, generator=g) < 0.02,
            "values": torch.randn(num_envs, 1, generator=g),
            "log_prob": torch.randn(num_envs, generator=g),
            "mu": torch.randn(num_envs, ACT, generator=g),
            "sigma": torch.rand(num_envs, ACT, generator=g) + 0.1,
        }
        step["time_outs"] = step["dones"] & (torch.rand(num_envs, generator=g) < 0.5)
        step["bootstrap"] = torch.randn(num_envs, 1, generator=g)
        out.append({k: v.to(device) for k, v in step.items()})
    return out


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_ours(rollout, num_envs, steps, epochs, mini_batches, device, amp=False):
    """One iteration of this project's storage; returns (add, returns, pass) seconds."""
    amp_cfg = {"amp_obs_extractor": lambda o: o[:, :12], "amp_ref_obs_extractor": lambda p: (p[0][:, :12], p[1])}
    st = RolloutStorageMM(
        "rl",
        num_envs,
        steps,
        (OBS,),
        (REF,),
        (None,),
        (None,),
        (ACT,),
        amp_cfg=amp_cfg if amp else None,
        device=device,
    )
    last_values = rollout[-1]["values"]
    sync(device)
    t0 = time.perf_counter()
    for s in rollout:
        tr = st.Transition()
        tr.observations, tr.reference_observations, tr.reference_observations_mask = s["obs"], s["ref"], s["ref_mask"]
        tr.actions, tr.rewards, tr.dones, tr.time_outs = s["actions"], s["rewards"], s["dones"], s["time_outs"]
        tr.values, tr.actions_log_prob, tr.action_mean, tr.action_sigma = (
            s["values"],
            s["log_prob"],
            s["mu"],
            s["sigma"],
        )
        tr.bootstrap_values = s["bootstrap"]
        st.add_transitions(tr)
    sync(device)
    t1 = time.perf_counter()
    st.compute_returns(last_values, 0.99, 0.95)
    sync(device)
    t2 = time.perf_counter()
    for _batch in st.mini_batch_generator(mini_batches, epochs):
        pass
    sync(device)
    t3 = time.perf_counter()
    store = st.core.buffer.store
    width = max(store.columns_end(k) for k in st.core.batch_keys) * 4 + store.width("flag")  # bytes gathered per sample
    return (t1 - t0, t2 - t1, t3 - t2), width


def run_policy_rollout(rollout, num_envs, steps, epochs, mini_batches, device):
    """One iteration of ``PolicyRollout``, as MMPPO drives it; returns (add, returns, pass) seconds."""
    first = rollout[0]
    groups = {"policy": first["obs"], "reference": first["ref"], "reference_mask": first["ref_mask"]}
    st = PolicyRollout("rl", num_envs, steps, groups, (ACT,), device=device)
    last_values = rollout[-1]["values"]
    sync(device)
    t0 = time.perf_counter()
    for s in rollout:
        step = {
            "obs": {"policy": s["obs"], "reference": s["ref"], "reference_mask": s["ref_mask"]},
            "actions": s["actions"],
            "values": s["values"],
            "actions_log_prob": s["log_prob"],
            "action_mean": s["mu"],
            "action_std": s["sigma"],
            "rewards": s["rewards"],
            "dones": s["dones"],
            "time_outs": s["time_outs"],
            "bootstrap_values": s["bootstrap"],
        }
        st.add_step(step)
    sync(device)
    t1 = time.perf_counter()
    st.compute_returns(last_values, 0.99, 0.95, normalize_advantage=True)
    sync(device)
    t2 = time.perf_counter()
    for _batch in st.mini_batches(mini_batches, epochs, reuse=True):  # as MMPPO's update reads them
        pass
    sync(device)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2)


def buffer_spec() -> dict:
    """The fields of ``run_ours``'s storage, in its column order."""
    scalar, flag = FieldSpec((1,), scalar=True), FieldSpec((1,), torch.bool, scalar=True, lenient=True)
    computed = FieldSpec((1,), scalar=True, computed=True)
    return {
        "obs": (OBS,),
        "ref": (REF,),
        "ref_mask": FieldSpec((), torch.bool),
        "actions": (ACT,),
        "values": scalar,
        "returns": computed,
        "advantages": computed,
        "log_prob": scalar,
        "mu": (ACT,),
        "sigma": (ACT,),
        "rewards": scalar,
        "bootstrap": scalar,
        "dones": flag,
        "time_outs": flag,
    }


def run_buffer(rollout, num_envs, steps, epochs, mini_batches, device, in_place=False):
    """One iteration of the core RolloutBuffer on the same fields; returns (add, returns, pass) seconds."""
    buf = RolloutBuffer(steps, num_envs, buffer_spec(), device)
    keys = [k for k in buffer_spec() if k not in ("rewards", "bootstrap", "dones", "time_outs")]
    last_values = rollout[-1]["values"]
    sync(device)
    t0 = time.perf_counter()
    if in_place:
        view = buf.start_rollout()
        for t, s in enumerate(rollout):
            for key, value in s.items():
                view[key][t].copy_(value.view(view[key][t].shape))
        buf.add()
    else:
        buf.clear()
        for s in rollout:
            buf.add_step(s)
    sync(device)
    t1 = time.perf_counter()
    td = buf.get()
    returns, advantages = compute_gae(
        td["rewards"].contiguous(),
        td["values"].contiguous(),
        td["dones"],
        last_values,
        0.99,
        0.95,
        td["time_outs"],
        td["bootstrap"].contiguous(),
    )
    td["returns"].copy_(returns)
    td["advantages"].copy_(normalize_advantages(advantages))
    sync(device)
    t2 = time.perf_counter()
    for _batch in buf.mini_batches(mini_batches, epochs, keys=keys):
        pass
    sync(device)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2)


def run_rsl_rl(rollout, num_envs, steps, epochs, mini_batches, device):
    """One iteration of rsl_rl's RolloutStorage and PPO.compute_returns; returns (add, returns, pass) seconds."""
    from rsl_rl.algorithms.ppo import PPO
    from rsl_rl.storage import RolloutStorage

    example = TensorDict({"policy": rollout[0]["obs"], "reference": rollout[0]["ref"]}, batch_size=[num_envs])
    st = RolloutStorage("rl", num_envs, steps, example, [ACT], device=device)
    last_values = rollout[-1]["values"]

    class Critic:
        def get_hidden_state(self):
            return None

        def reset(self, hidden_state=None):
            return None

        def __call__(self, obs):
            return last_values

    ppo = types.SimpleNamespace(
        storage=st, critic=Critic(), gamma=0.99, lam=0.95, normalize_advantage_per_mini_batch=False
    )
    sync(device)
    t0 = time.perf_counter()
    for s in rollout:
        tr = RolloutStorage.Transition()
        tr.observations = TensorDict({"policy": s["obs"], "reference": s["ref"]}, batch_size=[num_envs])
        tr.actions, tr.rewards, tr.dones = s["actions"], s["rewards"], s["dones"]
        tr.values, tr.actions_log_prob, tr.distribution_params = s["values"], s["log_prob"], (s["mu"], s["sigma"])
        st.add_transition(tr)
    sync(device)
    t1 = time.perf_counter()
    PPO.compute_returns(ppo, example)
    sync(device)
    t2 = time.perf_counter()
    for _ in st.mini_batch_generator(mini_batches, epochs):
        pass
    sync(device)
    t3 = time.perf_counter()
    return (t1 - t0, t2 - t1, t3 - t2)


def run_floor(num_envs, steps, width_bytes, epochs, mini_batches, device):
    """index_select of the same bytes per sample with fresh permutations: the memory-bandwidth floor."""
    n = num_envs * steps
    data = torch.randn(n, (width_bytes + 3) // 4, device=device)
    sync(device)
    t0 = time.perf_counter()
    batch = None
    for _ in range(epochs):
        for index in torch.tensor_split(torch.randperm(n, device=device), mini_batches):
            batch = data.index_select(0, index)  # kept alive until the next one, like a consumer's batch
    del batch
    sync(device)
    return time.perf_counter() - t0


def median(samples):
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[4096, 1024])
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--mini-batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, device {args.device}, threads {torch.get_num_threads()}")
    print(f"shapes: obs {OBS}, ref {REF}, actions {ACT}; {args.epochs} epochs x {args.mini_batches} mini-batches")
    for num_envs in args.envs:
        rollout = make_rollout(num_envs, args.steps, args.device)
        common = (rollout, num_envs, args.steps, args.epochs, args.mini_batches, args.device)
        ours, theirs, amp, floor, core, core_in_place, policy = [], [], [], [], [], [], []
        run_ours(*common), run_rsl_rl(*common), run_buffer(*common), run_policy_rollout(*common)  # warm-up
        for _ in range(args.repeats):  # interleaved so that drift hits all alike
            times, width = run_ours(*common)
            ours.append(times)
            theirs.append(run_rsl_rl(*common))
            amp.append(run_ours(*common, amp=True)[0])
            core.append(run_buffer(*common))
            core_in_place.append(run_buffer(*common, in_place=True))
            policy.append(run_policy_rollout(*common))
            floor.append(run_floor(num_envs, args.steps, width, args.epochs, args.mini_batches, args.device))
        o = [median([t[i] for t in ours]) for i in range(3)]
        r = [median([t[i] for t in theirs]) for i in range(3)]
        a = [median([t[i] for t in amp]) for i in range(3)]
        c = [median([t[i] for t in core]) for i in range(3)]
        ci = [median([t[i] for t in core_in_place]) for i in range(3)]
        p = [median([t[i] for t in policy]) for i in range(3)]
        f = median(floor)
        print(f"\n{num_envs} envs x {args.steps} steps (median of {args.repeats}, ms)")
        print(f"{'':28s}{'add':>9s}{'returns':>9s}{'pass':>9s}{'total':>9s}")
        for name, row in (
            ("mimic_rl RolloutStorageMM", o),
            ("rsl_rl RolloutStorage+PPO", r),
            ("mimic_rl with AMP pairs", a),
            ("PolicyRollout (MMPPO's)", p),
            ("RolloutBuffer add_step", c),
            ("RolloutBuffer in place", ci),
        ):
            print(f"{name:28s}" + "".join(f"{1e3 * x:9.2f}" for x in (*row, sum(row))))
        print(f"{'index_select floor (pass)':28s}{'':27s}{1e3 * f:9.2f}")
        print(f"ratio total mimic_rl / rsl_rl: {sum(o) / sum(r):.3f}  (target <= 0.8)")
        print(f"ratio pass  floor / mimic_rl:  {f / o[2]:.3f}  (target >= 0.5; {width} bytes per sample)")
        print(f"ratio total PolicyRollout / rsl_rl: {sum(p) / sum(r):.3f}  (MMPPO's storage; target <= 0.8)")
        print(f"ratio pass  floor / PolicyRollout:  {f / p[2]:.3f}  (target >= 0.5)")


if __name__ == "__main__":
    main()
