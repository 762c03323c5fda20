"""Benchmark MMPPO.update() against rsl_rl's PPO.update() on the same data, in the same run.

Setup (issue 3): an MLP of [512, 256, 128], 1024 envs x 24 steps, 5 epochs x 4 mini-batches; observations 48 +
reference 26, actions 19. Three mimic_rl variants are timed:

- ``same network``: the reference is concatenated to the observation, exactly rsl_rl's network (74 -> 512 -> 256 ->
  128 -> 19, and the same critic); this is the ratio against rsl_rl.
- ``reference encoder``: the package default, a 26 -> 128 -> 64 MLP encoder for the reference plus the trunk.
- ``+ AMP``: the reference-encoder setup with an AMP discriminator ([256, 128] over 26-d feature pairs, R1 penalty,
  update every mini-batch); the AMP-on / AMP-off ratio.

    python tools/bench_ppo.py [--repeats 5] [--device cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tensordict import TensorDict

from mimic_rl.algorithms import MMPPO
from mimic_rl.models import Actor, Critic
from mimic_rl.storage import RolloutStorageMM

OBS, REF, ACT, HIDDEN = 48, 26, 19, [512, 256, 128]


def amp_policy_features(obs):
    """AMP policy features: the first 26 policy observations (same width as the reference)."""
    return obs["policy"][:, :REF]


def amp_reference_features(pair):
    """AMP expert features: the reference itself."""
    return pair[0], pair[1]


def make_data(num_envs: int, steps: int, device: str) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    data = []
    for _ in range(steps):
        step = {
            "obs": torch.randn(num_envs, OBS, generator=g),
            "ref": torch.randn(num_envs, REF, generator=g),
            "actions": torch.randn(num_envs, ACT, generator=g),
            "rewards": torch.randn(num_envs, generator=g),
            "dones": torch.rand(num_envs, generator=g) < 0.02,
        }
        data.append({k: v.to(device) for k, v in step.items()})
    return data


def build_ours(variant: str, num_envs: int, steps: int, device: str, args) -> MMPPO:
    torch.manual_seed(0)
    concat = variant == "same"
    obs_dim = OBS + REF if concat else OBS
    ref_shape = None if concat else (REF,)
    actor = Actor(obs_dim, ACT, ref_shape, hidden_dims=HIDDEN)
    critic = Critic(obs_dim, ref_shape, hidden_dims=HIDDEN)
    amp_cfg = None
    if variant == "amp":
        amp_cfg = {"amp_obs_extractor": amp_policy_features, "amp_ref_obs_extractor": amp_reference_features}
    storage = RolloutStorageMM(
        "rl",
        num_envs,
        steps,
        {"policy": (obs_dim,)},
        ref_shape or (None,),
        (None,),
        (None,),
        (ACT,),
        amp_cfg=amp_cfg,
        device=device,
    )
    if amp_cfg:
        amp_cfg = {**amp_cfg, "num_features": REF}
    return MMPPO(
        actor,
        critic,
        storage,
        num_learning_epochs=args.epochs,
        num_mini_batches=args.mini_batches,
        device=device,
        amp_cfg=amp_cfg,
    )


def fill_ours(alg: MMPPO, data, variant: str) -> None:
    st = alg.storage
    n = data[0]["obs"].shape[0]
    with torch.inference_mode():
        for s in data:
            obs = torch.cat((s["obs"], s["ref"]), -1) if variant == "same" else s["obs"]
            ref = None if variant == "same" else s["ref"]
            mask = None if ref is None else torch.ones(n, dtype=torch.bool, device=obs.device)
            mean, std = alg.actor.distribution(obs, ref, mask)
            tr = st.Transition()
            tr.observations = TensorDict({"policy": obs}, batch_size=[n])
            tr.reference_observations, tr.reference_observations_mask = ref, mask
            tr.actions, tr.rewards, tr.dones = s["actions"], s["rewards"], s["dones"]
            tr.values = alg.critic(obs, ref, mask)
            tr.action_mean, tr.action_sigma = mean, std
            tr.actions_log_prob = torch.distributions.Normal(mean, std).log_prob(s["actions"]).sum(-1)
            st.add_transitions(tr)
        last = TensorDict({"policy": obs}, batch_size=[n])
        if ref is not None:
            last["reference"], last["reference_mask"] = ref, mask
        alg.compute_returns(last)


def build_rsl(num_envs: int, steps: int, device: str, args):
    from rsl_rl.algorithms import PPO
    from rsl_rl.models import MLPModel
    from rsl_rl.storage import RolloutStorage

    torch.manual_seed(0)
    example = TensorDict({"policy": torch.zeros(num_envs, OBS), "reference": torch.zeros(num_envs, REF)}, [num_envs])
    groups = {"actor": ["policy", "reference"], "critic": ["policy", "reference"]}
    dist = {"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 1.0}
    actor = MLPModel(example, groups, "actor", ACT, HIDDEN, obs_normalization=True, distribution_cfg=dist)
    critic = MLPModel(example, groups, "critic", 1, HIDDEN, obs_normalization=True)
    storage = RolloutStorage("rl", num_envs, steps, example.to(device), [ACT], device=device)
    return PPO(
        actor, critic, storage, num_learning_epochs=args.epochs, num_mini_batches=args.mini_batches, device=device
    )


def fill_rsl(ppo, data) -> None:
    from rsl_rl.storage import RolloutStorage

    n = data[0]["obs"].shape[0]
    with torch.inference_mode():
        for s in data:
            obs = TensorDict({"policy": s["obs"], "reference": s["ref"]}, batch_size=[n])
            tr = RolloutStorage.Transition()
            tr.observations = obs
            ppo.actor(obs, stochastic_output=True)
            mean, std = ppo.actor.output_distribution_params
            tr.actions, tr.rewards, tr.dones = s["actions"], s["rewards"], s["dones"].float()
            tr.values = ppo.critic(obs)
            tr.actions_log_prob = ppo.actor.get_output_log_prob(s["actions"])
            tr.distribution_params = (mean, std)
            ppo.storage.add_transition(tr)
        ppo.compute_returns(obs)


def timed(fn, device: str) -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--mini-batches", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    dev = args.device
    print(
        f"torch {torch.__version__}, device {dev}, threads {torch.get_num_threads()}; MLP {HIDDEN}, "
        f"{args.envs} envs x {args.steps} steps, {args.epochs} epochs x {args.mini_batches} mini-batches"
    )
    data = make_data(args.envs, args.steps, dev)
    algs = {v: build_ours(v, args.envs, args.steps, dev, args) for v in ("same", "encoder", "amp")}
    rsl = build_rsl(args.envs, args.steps, dev, args)
    times: dict[str, list[float]] = {k: [] for k in (*algs, "rsl_rl")}
    for rep in range(args.repeats + 1):  # the first round warms up
        for name, alg in algs.items():
            fill_ours(alg, data, name)
            t = timed(alg.update, dev)
            if rep:
                times[name].append(t)
        fill_rsl(rsl, data)
        t = timed(rsl.update, dev)
        if rep:
            times["rsl_rl"].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    best = {k: min(v) for k, v in times.items()}
    labels = {
        "same": "mimic_rl, same network as rsl_rl",
        "encoder": "mimic_rl, reference encoder",
        "amp": "mimic_rl, reference encoder + AMP",
        "rsl_rl": "rsl_rl PPO",
    }
    print(f"\nupdate() time over {args.repeats} interleaved repeats (ms)      median      best")
    for k in ("rsl_rl", "same", "encoder", "amp"):
        print(f"  {labels[k]:40s}{1e3 * med[k]:12.1f}{1e3 * best[k]:10.1f}")
    for title, a, b, target in (
        ("mimic_rl / rsl_rl (same network, AMP off)", "same", "rsl_rl", "<= 1.0"),
        ("AMP on / AMP off (reference encoder)", "amp", "encoder", "<= 1.25"),
    ):
        print(f"ratio {title:42s} median {med[a] / med[b]:.3f}  best {best[a] / best[b]:.3f}  (target {target})")


if __name__ == "__main__":
    main()
