"""The vectorized-environment protocol every backend implements (compatible with rsl_rl's ``VecEnv``)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from tensordict import TensorDict

__all__ = ["VecEnv"]


@runtime_checkable
class VecEnv(Protocol):
    """A batch of ``num_envs`` synchronized environments that auto-reset, in the shape of rsl_rl's ``VecEnv``.

    Attributes:
        num_envs: number of environments N.
        num_actions: size A of one env's action.
        max_episode_length: number of steps after which an episode is truncated.
        episode_length_buf: ``[N]`` long, steps taken in each env's current episode (0 right after a reset).
        device: where every tensor the env returns lives.
        cfg: the env's configuration (a dict or a config object).

    Observations are a ``TensorDict`` with batch size ``[N]`` whose keys are observation groups (``policy``,
    ``critic``, ``reference``, ``reference_mask``, optionally ``critic_reference`` and ``critic_reference_mask`` (a
    reference only the critic reads; without them the critic reads ``reference``), ``amp``, ``rnd_state``,
    ``teacher``); a ``*_mask`` group is ``[N]`` bool.

    ``step(actions)`` with ``actions`` ``[N, A]`` returns ``(obs, rewards, dones, extras)``:

    - ``obs``: the observations after the step; envs that ended at this step are already reset, so their rows are
      the first observations of the next episode.
    - ``rewards``: ``[N]`` float32.
    - ``dones``: ``[N]`` bool, ``terminated | truncated``.
    - ``extras["time_outs"]``: ``[N]`` bool, truncation by the episode limit (the return must bootstrap there).
    - ``extras["final_observations"]``: a ``TensorDict`` with batch size ``[N]`` and all groups of ``obs``, holding
      the pre-reset observations of envs that reset at this step (the real next state ``s_{t+1}``); rows of envs
      that did not reset equal the returned ``obs``.
    - ``extras["log"]``: ``dict[str, float | 0-d tensor]`` of per-step means for logging.
    """

    num_envs: int
    num_actions: int
    max_episode_length: int
    episode_length_buf: torch.Tensor
    device: torch.device
    cfg: Any

    def get_observations(self) -> TensorDict:
        """Return the current observations (batch size ``[N]``) without stepping."""
        ...

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply ``actions`` ``[N, A]``; return ``(obs, rewards [N] float32, dones [N] bool, extras)``."""
        ...
