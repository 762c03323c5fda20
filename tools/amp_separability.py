"""How separable are a tracking checkpoint's state pairs from its clip's, and by which AMP features?

    python tools/amp_separability.py --checkpoint runs/walk/model_600.pt [--num-envs 64] [--steps 400]

Rolls the checkpoint's deterministic policy out from exact reference-state starts at uniformly random frames (no
initial-state noise, no domain randomization), collects its consecutive-state pairs (pairs across a reset left out)
in the layout of ``mimic_rl.tasks.tracking.amp_features`` (``env.amp_features: body``), draws as many expert pairs of
the clip (``amp_expert_sampler``), and trains a fresh classifier (one hidden layer of 64, 400 Adam steps) on 70 % of
them per feature subset: joint positions, joint velocities, the anchor (height, velocities, tilt), the key bodies,
everything, and the joint positions with the pair's finite-difference velocity. Prints the held-out accuracy of each
(0.5: the subset cannot tell the policy from the clip; 1.0: it always can), the same for a control (the clip itself
at the policy's steps, i.e. the reference it tracked, against the clip at uniform times: what the times alone give
away), the policy's and the clip's RMS joint acceleration, and how far each one's joint velocities are from its
pair's finite difference.

An AMP discriminator that reaches ~1.0 on every subset gives a style reward that the policy cannot raise by moving
like the clip in one respect: it is saturated by construction, whatever its R1 weight or learning rate.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mimic_rl.commands import load_policy
from mimic_rl.envs.mujoco import DomainRandomization, InitNoise, MujocoTrackingEnv
from mimic_rl.runners.evaluation import ActorPolicy


def feature_subsets(num_joints: int) -> dict[str, slice]:
    """Column ranges of ``amp_features``'s layout (``2 J + 13 + 3 K``) by what they describe."""
    j = num_joints
    return {
        "joint positions": slice(0, j),
        "joint velocities": slice(j, 2 * j),
        "anchor (height, velocities, tilt)": slice(2 * j, 2 * j + 13),
        "key bodies": slice(2 * j + 13, None),
        "all": slice(0, None),
    }


def held_out_accuracy(policy: torch.Tensor, expert: torch.Tensor, seed: int = 0, steps: int = 400) -> float:
    """Held-out accuracy of a fresh one-hidden-layer classifier of ``policy`` rows ``[M, D]`` against ``expert`` rows
    ``[M', D]`` (features standardized over both, 70 % to train, 30 % to test)."""
    x = torch.cat((policy, expert)).float()
    y = torch.cat((torch.zeros(len(policy)), torch.ones(len(expert))))
    x = (x - x.mean(0)) / (x.std(0) + 1e-6)
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(x), generator=gen)
    n_train = int(0.7 * len(x))
    train, test = perm[:n_train], perm[n_train:]
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    with torch.enable_grad():
        for _ in range(steps):
            rows = train[torch.randint(0, n_train, (min(2048, n_train),), generator=gen)]
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(x[rows]).squeeze(-1), y[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        return float(((net(x[test]).squeeze(-1) > 0).float() == y[test]).float().mean())


def separability(
    policy: tuple[torch.Tensor, torch.Tensor], expert: tuple[torch.Tensor, torch.Tensor], num_joints: int, dt: float
) -> dict[str, float]:
    """Held-out accuracy per feature subset of policy pairs ``(prev, cur)`` against expert pairs (rows of
    ``amp_features``), plus ``joint positions + finite difference`` (the pair's positions and ``(q' - q) / dt``)."""
    out = {}
    for name, cols in feature_subsets(num_joints).items():
        out[name] = held_out_accuracy(
            torch.cat((policy[0][:, cols], policy[1][:, cols]), -1),
            torch.cat((expert[0][:, cols], expert[1][:, cols]), -1),
        )
    j = num_joints

    def with_difference(prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
        return torch.cat((prev[:, :j], cur[:, :j], (cur[:, :j] - prev[:, :j]) / dt), -1)

    out["joint positions + finite difference"] = held_out_accuracy(with_difference(*policy), with_difference(*expert))
    return out


def motion_statistics(prev: torch.Tensor, cur: torch.Tensor, num_joints: int, dt: float) -> dict[str, float]:
    """RMS joint velocity, RMS joint acceleration ``(v' - v) / dt`` and the RMS gap between the pair's mean joint
    velocity and its finite difference ``(q' - q) / dt`` (rad/s, rad/s²)."""
    j = num_joints
    vel = 0.5 * (prev[:, j : 2 * j] + cur[:, j : 2 * j])
    diff = (cur[:, :j] - prev[:, :j]) / dt
    return {
        "rms_joint_velocity": float(vel.square().mean().sqrt()),
        "rms_joint_acceleration": float(((cur[:, j : 2 * j] - prev[:, j : 2 * j]) / dt).square().mean().sqrt()),
        "rms_velocity_minus_difference": float((vel - diff).square().mean().sqrt()),
    }


def rollout_pairs(checkpoint: str, num_envs: int, steps: int, seed: int = 0) -> tuple[dict, int, float]:
    """``{"policy", "reference", "expert"}`` pairs ``(prev, cur)`` in the ``body`` layout: the policy's, its
    reference's at the same steps, and as many expert pairs of the sampler (uniform times); the joint count and the
    policy step (see the module docstring)."""
    cfg, actor, _ = load_policy(checkpoint)
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs, env_cfg.seed, env_cfg.compile = num_envs, seed, False
    env_cfg.amp_features, env_cfg.sampling_mode = "body", "uniform"
    env_cfg.randomization = DomainRandomization(enabled=False)
    env_cfg.init_noise = InitNoise(joint_pos=0.0, root_pos=0.0, root_rot=0.0, velocity=0.0)
    env = MujocoTrackingEnv(env_cfg)
    torch.manual_seed(seed)
    try:
        policy = ActorPolicy(actor, cfg.obs_groups)
        obs, rows = env.get_observations(), {"prev": [], "cur": [], "ref_prev": [], "ref_cur": []}
        with torch.inference_mode():
            for _ in range(steps):
                before, ref_before = obs["amp"].clone(), env.amp_clip_features(env.clip_ids, env.obs_time)
                obs, _, dones, _ = env.step(policy(obs))
                keep = ~dones  # a pair across a reset is not a transition
                rows["prev"].append(before[keep])
                rows["cur"].append(obs["amp"][keep])
                rows["ref_prev"].append(ref_before[keep])
                rows["ref_cur"].append(env.amp_clip_features(env.clip_ids, env.obs_time)[keep])
            cat = {k: torch.cat(v) for k, v in rows.items()}
            expert = env.amp_expert_sampler(int(cat["prev"].shape[0]))
        pairs = {"policy": (cat["prev"], cat["cur"]), "reference": (cat["ref_prev"], cat["ref_cur"]), "expert": expert}
        return pairs, env.num_actions, env.step_dt
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    """Print and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=400, help="policy steps per env")
    parser.add_argument("--output", default=None, help="JSON file (default: amp_separability.json beside it)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    pairs, joints, dt = rollout_pairs(args.checkpoint, args.num_envs, args.steps)
    policy, expert = pairs["policy"], pairs["expert"]
    report = {
        "checkpoint": str(Path(args.checkpoint).resolve()),
        "pairs": int(policy[0].shape[0]),
        "held_out_accuracy": separability(policy, expert, joints, dt),
        "control_held_out_accuracy": separability(pairs["reference"], expert, joints, dt),
        "policy": motion_statistics(*policy, joints, dt),
        "clip": motion_statistics(*expert, joints, dt),
    }
    out = Path(args.output) if args.output else Path(args.checkpoint).with_name("amp_separability.json")
    out.write_text(json.dumps(report, indent=2))
    print(f"{report['pairs']} policy pairs against as many of the clip; held-out accuracy of a fresh classifier:")
    print(f"  {'features':38s} policy  control (the clip at the policy's steps)")
    for name, acc in report["held_out_accuracy"].items():
        print(f"  {name:38s} {acc:.3f}   {report['control_held_out_accuracy'][name]:.3f}")
    for who in ("policy", "clip"):
        s = report[who]
        print(
            f"{who}: RMS joint velocity {s['rms_joint_velocity']:.2f} rad/s, acceleration "
            f"{s['rms_joint_acceleration']:.1f} rad/s^2, velocity minus the pair's difference "
            f"{s['rms_velocity_minus_difference']:.2f} rad/s"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
