"""A manager-based simulator's task (mjlab, Isaac Lab) behind its rsl_rl wrapper, as this package's ``VecEnv``.

``ManagerTaskVecEnv`` keeps the simulator's TensorDict of observations and adds what this package's contract asks
for: ``dones`` as bool and, on this package's tracking tasks (whose command is a ``TrackingCommand``), the
``reference_mask`` group, ``extras["final_observations"]`` (the pre-reset observations), ``extras["log"]`` under the
embedded env's keys, ``extras["tracking"]`` (per-env metrics, for the evaluation) and ``extras["termination_terms"]``,
and the adaptive sampler's statistics in checkpoints. A backend subclasses it for what only its simulator has.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from mimic_rl.envs.common.tracking_command import TrackingCommand

__all__ = ["ManagerTaskVecEnv"]


class ManagerTaskVecEnv:
    """The rsl_rl wrapper ``wrapped`` of a manager-based env (``num_envs``, ``num_actions``, ``max_episode_length``,
    ``get_observations``, ``reset``, ``step``, ``unwrapped``) with this package's conventions (module docstring);
    ``cfg`` is the backend's env config."""

    def __init__(self, wrapped: Any, cfg: Any) -> None:
        self.wrapped = wrapped
        self.cfg = cfg
        self.num_envs = int(wrapped.num_envs)
        self.num_actions = int(wrapped.num_actions)
        self.max_episode_length = int(wrapped.max_episode_length)
        self.device = torch.device(str(wrapped.device))
        self.step_dt = float(self.unwrapped.step_dt)
        manager = self.unwrapped.command_manager
        term = manager.get_term("motion") if "motion" in getattr(manager, "active_terms", ()) else None
        self.mimic_command = term if isinstance(term, TrackingCommand) else None
        """This package's motion command (``MimicRL-Tracking-*``), else None."""
        self.motion_command = None if self.mimic_command is not None else term
        """The simulator's own motion command (its tracking tasks), else None."""

    @property
    def unwrapped(self) -> Any:
        """The simulator's manager-based env."""
        return self.wrapped.unwrapped

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """``[N]`` steps taken in each env's current episode."""
        return self.wrapped.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.wrapped.episode_length_buf = value

    def _groups(self, obs: Any) -> Any:
        """The package's groups: the reference mask on this package's tasks (the critic reads the actor's
        reference: one group, stored once)."""
        if self.mimic_command is not None:
            obs["reference_mask"] = self.mimic_command.reference_mask
        return obs

    def get_observations(self) -> Any:
        """The current observation TensorDict."""
        return self._groups(self.wrapped.get_observations())

    def reset(self) -> Any:
        """Reset every env; returns the observations."""
        return self._groups(self.wrapped.reset()[0])

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        """One env step: ``(obs, rewards [N], dones [N] bool, extras)`` with ``extras["time_outs"]``; on this
        package's tasks the extras are the embedded env's (module docstring)."""
        obs, rewards, dones, extras = self.wrapped.step(actions)
        dones = dones.to(torch.bool)
        obs = self._groups(obs)
        if self.mimic_command is not None:
            self._mimic_extras(obs, dones, extras)
        return obs, rewards, dones, extras

    def _mimic_extras(self, obs: TensorDict, dones: torch.Tensor, extras: dict) -> None:
        """The step's MDP result (computed before the simulator's resets) as the embedded env's extras."""
        result = self.mimic_command.step_result()
        final = {}
        for name, value in obs.items():
            pre = result["obs"].get(name)
            if name.endswith("_mask") or pre is None:
                final[name] = value
                continue
            done = dones.reshape(-1, *([1] * (value.dim() - 1)))
            final[name] = torch.where(done, pre, value)
        extras["final_observations"] = TensorDict(final, batch_size=[self.num_envs], device=self.device)
        extras["log"] = dict(result["log"])
        extras["tracking"] = {"terminated": result["terminated"], "body_error_mm": result["body_error_mm"]}
        extras["tracking"].update(result["values"])
        extras["termination_terms"] = result["termination_terms"]

    def play_clips_from_start(self, policy: Any, envs_per_clip: int) -> list[dict[str, Any]]:
        """This package's task: every clip of its library from its first frame at once (env ``i`` restarts at clip
        ``i // envs_per_clip``), until each env's first episode ends; one entry per clip (``play_clips_from_start``)."""
        from mimic_rl.tasks.tracking.from_start import clip_of_env, play_clips_from_start

        command = self.mimic_command
        clips = command.library.clips
        command.eval_clip = clip_of_env(len(clips), envs_per_clip, self.device)
        self.reset()
        names = command.library.clip_names
        return play_clips_from_start(self, policy, command.tracked, names, [clip.duration for clip in clips])

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint keeps of the env: on this package's tasks the adaptive sampler's statistics (the physics
        is not saved: a resumed run starts fresh episodes); nothing on the simulator's own tasks."""
        if self.mimic_command is None:
            return {}
        return self.mimic_command.library.adaptive.state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``: the sampler's statistics clip by clip, by name (``AdaptiveSampler.load_saved``);
        a clip the checkpoint lacks starts afresh, with a warning."""
        if self.mimic_command is None or not {"adaptive_sampler", "adaptive_failures"} & state.keys():
            return
        self.mimic_command.library.adaptive.restore(state)

    def close(self) -> None:
        """Close the simulator's env."""
        self.wrapped.close()
