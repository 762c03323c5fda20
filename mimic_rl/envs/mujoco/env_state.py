"""The embedded env's state for checkpoints: what determines its future, as plain tensors and numbers (so that a
checkpoint loads with ``weights_only=True``), and its restoration into an env built with the same config."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

__all__ = ["ENV_TENSORS", "env_state_dict", "load_env_state"]

ENV_TENSORS = ("episode_length_buf", "clip_ids", "motion_time", "obs_time", "actions", "last_actions", "_push_timer")
"""The env's per-env bookkeeping tensors, saved and restored by name."""


def env_state_dict(env: Any) -> dict[str, Any]:
    """A ``MujocoTrackingEnv``'s physics states, episode bookkeeping, random streams, the sampler's statistics and
    current observations."""
    channels = env._channels
    return {
        "physics_state": torch.from_numpy(env.physics.state.copy()),
        "sensordata": torch.from_numpy(env.physics.sensordata.copy()),
        "variant_of_env": torch.from_numpy(env.physics.variant_of_env.copy()),
        "physics_rng": env.physics.rng.bit_generator.state,
        "generator": env._gen.get_state(),
        **env.library.adaptive.state(),
        "obs": {k: v.clone() for k, v in env._obs.items()},
        **{k: getattr(env, k).clone() for k in ENV_TENSORS},
        **({} if channels is None else {"sensor_channels": channels.state_dict(env._action_delay)}),
    }


def _same_clips(env: Any, state: dict[str, Any]) -> bool:
    """Whether the saved env ran this env's clips (``AdaptiveSampler.saved_for_same_clips``); for a checkpoint from
    before clip names were saved, unless one of its envs ran a clip this env does not have."""
    same = env.library.adaptive.saved_for_same_clips(state)
    return int(state["clip_ids"].max()) < env.library.num_clips if same is None else same


def load_env_state(env: Any, state: dict[str, Any]) -> None:
    """Restore ``env_state_dict``'s ``state`` into ``env``, a ``MujocoTrackingEnv`` built with the same config (typed
    ``Any``: this module is imported by the env's). Built with other clips (a resume with other motions), only the
    random streams and the sampler's statistics (by clip name) are restored, with a warning: the saved episodes, on
    clips this env does not have or in another order, start afresh."""
    physics = env.physics
    physics_state = state["physics_state"].cpu().numpy()
    if physics_state.shape != physics.state.shape:
        raise ValueError(f"env state is for {physics_state.shape[0]} envs, this env has {env.num_envs}")
    physics.rng.bit_generator.state = state["physics_rng"]
    generator = state["generator"].cpu()
    if generator.numel() == env._gen.get_state().numel():
        env._gen.set_state(generator)
    else:  # a CUDA generator's state, saved before the env drew on the CPU: the stream restarts from the seed
        message = "the checkpoint's env random stream is a CUDA generator's; restarting it from the seed"
        warnings.warn(message, stacklevel=3)
    env.library.adaptive.restore(state)
    if not _same_clips(env, state):
        saved = state.get("adaptive_sampler_clips")
        ran = f" ({', '.join(saved)})" if saved is not None else ""
        message = f"env state: the checkpoint's env ran other clips{ran}; its episodes start afresh on this run's clips"
        warnings.warn(message, stacklevel=3)
        return
    physics.state[:] = physics_state
    physics.sensordata[:] = state["sensordata"].cpu().numpy()
    env._sync_sensors()
    physics.variant_of_env[:] = state["variant_of_env"].cpu().numpy()
    physics.assign_variants(np.arange(0), physics.variant_of_env)
    for k in ENV_TENSORS:
        getattr(env, k).copy_(state[k])
    if env._channels is not None and "sensor_channels" in state:
        env._channels.load_state_dict(state["sensor_channels"], env._action_delay)
    if "obs" in state:
        env._obs = env._tensordict({k: v.to(env.device).clone() for k, v in state["obs"].items()})
