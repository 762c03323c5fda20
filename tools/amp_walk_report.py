"""What a style-only walking checkpoint (``configs/amp_walk.yaml``) does: its walking evaluation (falls in 20 s
episodes, speed against the command, motion quality; ``mimic-rl eval``'s numbers) and its own discriminator's score
of the policy's state pairs against the clip's.

    python tools/amp_walk_report.py --checkpoint runs/amp_walk/model_4880.pt [--num-envs 64] [--output report.json]

Discriminator score: the mean logit ``D`` and the LSGAN style reward ``max(0, 1 - (D - 1)^2 / 4)`` of the policy's
consecutive-state pairs (every env, the whole episode, pairs across a reset left out) and of as many expert pairs of
the clip, and the share of policy pairs the discriminator takes for the expert's (``D > 0``; LSGAN's targets are +1
for the expert, -1 for the policy). A policy that moves like the clip gets scores near the expert's.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mimic_rl.algorithms.amp import AMP
from mimic_rl.commands import load_policy
from mimic_rl.envs.mujoco.amp_walk import MujocoAmpWalkEnv, evaluate_amp_walk
from mimic_rl.envs.mujoco.physics import DomainRandomization
from mimic_rl.runners.evaluation import ActorPolicy


def discriminator_score(checkpoint: str, num_envs: int, seed: int = 0) -> dict[str, float]:
    """The discriminator of ``checkpoint`` on its policy's pairs (one episode of ``num_envs`` envs) and on as many
    expert pairs (see the module docstring)."""
    cfg, actor, state = load_policy(checkpoint)
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs, env_cfg.seed = num_envs, seed
    env_cfg.randomization = DomainRandomization(enabled=False)
    env = MujocoAmpWalkEnv(env_cfg)
    torch.manual_seed(seed)
    try:
        obs = env.get_observations()
        amp = AMP(**dict(cfg.algorithm["amp_cfg"], num_features=int(obs["amp"].shape[-1])))
        amp.load_state_dict(state)
        amp.discriminator.eval()
        policy = ActorPolicy(actor, cfg.obs_groups)
        logits, alive = [], torch.ones(num_envs, dtype=torch.bool)
        with torch.inference_mode():
            for _ in range(env.max_episode_length):
                prev = obs["amp"]
                obs, _, dones, _ = env.step(policy(obs))
                d = amp.discriminator(amp.discriminator.normalize(prev, obs["amp"])).reshape(-1)
                logits.append(d[alive & ~dones])  # a pair across a reset is not a transition
                alive &= ~dones
                if not bool(alive.any()):
                    break
            policy_d = torch.cat(logits)
            expert_prev, expert_cur = env.amp_expert_sampler(max(1, int(policy_d.numel())))
            expert_d = amp.discriminator(amp.discriminator.normalize(expert_prev, expert_cur)).reshape(-1)
    finally:
        env.close()

    def reward(d: torch.Tensor) -> float:
        return float(torch.clamp(1.0 - 0.25 * (d - 1.0).square(), min=0.0).mean())

    return {
        "policy_pairs": int(policy_d.numel()),
        "policy_logit": float(policy_d.mean()),
        "expert_logit": float(expert_d.mean()),
        "policy_style_reward": reward(policy_d),
        "expert_style_reward": reward(expert_d),
        "policy_taken_for_expert": float((policy_d > 0).float().mean()),
        "expert_taken_for_expert": float((expert_d > 0).float().mean()),
    }


def main(argv: list[str] | None = None) -> int:
    """Print and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument(
        "--output", default=None, help="JSON file (default: amp_walk_report.json beside the checkpoint)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cfg, actor, _ = load_policy(args.checkpoint)
    walking = evaluate_amp_walk(ActorPolicy(actor, cfg.obs_groups), cfg, num_envs=args.num_envs)["summary"]
    score = discriminator_score(args.checkpoint, args.num_envs)
    report = {"checkpoint": str(Path(args.checkpoint).resolve()), "walking": walking, "discriminator": score}
    out = Path(args.output) if args.output else Path(args.checkpoint).with_name("amp_walk_report.json")
    out.write_text(json.dumps(report, indent=2))
    print(
        f"walking ({args.num_envs} envs, {cfg.env.episode_length_s:.0f} s episodes): "
        f"no fall {walking['no_fall_rate']:.2f}, "
        f"speed along the command {walking['speed_along_command_m_s']:.2f} m/s for {walking['command_speed_m_s']:.2f} "
        f"(ratio {walking['speed_ratio']:.2f}; {100 * walking['within_20_percent']:.0f}% of the envs within 20%)"
    )
    print(
        f"discriminator: logit policy {score['policy_logit']:.2f} vs expert {score['expert_logit']:.2f}; style reward "
        f"policy {score['policy_style_reward']:.3f} vs expert {score['expert_style_reward']:.3f}; taken for the "
        f"expert: {100 * score['policy_taken_for_expert']:.0f}% of policy pairs, "
        f"{100 * score['expert_taken_for_expert']:.0f}% of expert pairs"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
