"""Shared builders for storage tests."""

from __future__ import annotations

import torch

from mimic_rl.storage import RolloutStorageMM


def fill_storage(
    storage: RolloutStorageMM,
    done_prob: float = 0.1,
    timeout_prob: float = 0.5,
    seed: int = 0,
    with_bootstrap: bool = True,
    obs_fn=None,
) -> dict[str, torch.Tensor]:
    """Fill ``storage`` with a random rollout; returns the raw tensors that were written, stacked ``[T, N, ...]``."""
    g = torch.Generator().manual_seed(seed)
    T, N = storage.num_transitions_per_env, storage.num_envs
    obs_dim = storage.observations.shape[-1]
    act_dim = storage.actions.shape[-1]
    rec: dict[str, list[torch.Tensor]] = {}
    for t in range(T):
        tr = storage.Transition()
        tr.observations = obs_fn(t) if obs_fn else torch.randn(N, obs_dim, generator=g)
        if storage.reference_observations is not None:
            tr.reference_observations = torch.randn(N, *storage.reference_observations.shape[2:], generator=g)
            tr.reference_observations_mask = torch.rand(N, generator=g) > 0.3
        if storage.privileged_observations is not None:
            tr.critic_observations = torch.randn(N, *storage.privileged_observations.shape[2:], generator=g)
        if storage.privileged_reference_observations is not None:
            shape = storage.privileged_reference_observations.shape[2:]
            tr.critic_reference_observations = torch.randn(N, *shape, generator=g)
            tr.critic_reference_observations_mask = torch.rand(N, generator=g) > 0.3
        tr.actions = torch.randn(N, act_dim, generator=g)
        if storage.dagger_actions is not None:
            tr.dagger_actions = torch.randn(N, act_dim, generator=g)
        if storage.privileged_actions is not None:
            tr.privileged_actions = torch.randn(N, act_dim, generator=g)
        if storage.rnd_state is not None:
            tr.rnd_state = torch.randn(N, *storage.rnd_state.shape[2:], generator=g)
        tr.rewards = torch.randn(N, generator=g)
        dones = torch.rand(N, generator=g) < done_prob
        tr.dones = dones
        tr.time_outs = dones & (torch.rand(N, generator=g) < timeout_prob)
        if storage.training_type == "rl":
            tr.values = torch.randn(N, 1, generator=g)
            tr.actions_log_prob = torch.randn(N, generator=g)
            tr.action_mean = torch.randn(N, act_dim, generator=g)
            tr.action_sigma = torch.rand(N, act_dim, generator=g) + 0.1
            if with_bootstrap:
                tr.bootstrap_values = torch.randn(N, 1, generator=g)
        storage.add_transitions(tr)
        for key, value in vars(tr).items():
            if isinstance(value, torch.Tensor):
                rec.setdefault(key, []).append(value.clone())
    return {k: torch.stack(v) for k, v in rec.items()}


def make_storage(training_type: str = "rl", T: int = 6, N: int = 5, **kwargs) -> RolloutStorageMM:
    """A storage with obs 4, reference 3, critic 6, critic reference 2 and actions 2 unless overridden."""
    args = {
        "obs_shape": (4,),
        "ref_obs_shape": (3,),
        "privileged_obs_shape": (6,),
        "privileged_ref_obs_shape": (2,),
        "actions_shape": (2,),
    }
    args.update(kwargs)
    return RolloutStorageMM(training_type, N, T, **args)


def rollout(alg, env, obs, steps: int):
    """Collect ``steps`` steps with ``alg`` under inference mode and compute returns; returns (obs, logs)."""
    logs = []
    with torch.inference_mode():
        for _ in range(steps):
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(actions)
            alg.process_env_step(obs, rewards, dones, extras)
            logs.append(extras["log"])
        alg.compute_returns(obs)
    return obs, logs


def toy_cfg(**algorithm) -> dict:
    """A small MMPPO config for the point-mass toy."""
    return {
        "algorithm": {"learning_rate": 1e-3, "entropy_coef": 0.0, **algorithm},
        "actor": {"hidden_dims": [64, 64], "init_noise_std": 0.5},
        "critic": {"hidden_dims": [64, 64]},
        "num_steps_per_env": 24,
    }


def straight_and_resumed(make, tmp_path, total: int, first: int):
    """Runners from ``make(log_dir)``: one trained ``total`` iterations straight through, and one loaded from the
    checkpoint another wrote after ``first`` iterations and trained the rest; returns (straight, resumed)."""
    straight = make(tmp_path / "a")
    straight.learn(total)
    interrupted = make(tmp_path / "b")
    interrupted.learn(first)
    interrupted.close()
    resumed = make(tmp_path / "c")
    resumed.load(tmp_path / "b" / f"model_{first}.pt")
    resumed.learn(total - first)
    return straight, resumed
