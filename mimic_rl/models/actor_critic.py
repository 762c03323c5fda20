"""Reference-aware actor and critic: an observation stream plus a reference stream with its ``[N]`` bool mask.

Input layout: ``obs`` ``[..., obs_dim]``, ``reference`` ``[..., *ref_shape]``, ``reference_mask`` ``[...]``. With a
recurrent core (``rnn_type``), 2-D inputs step the collection-time state and 3-D ``[L, B, ...]`` inputs run padded
sequences from the given ``hidden_state``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mimic_rl.models.distributions import GaussianHead
from mimic_rl.models.mlp import MLP
from mimic_rl.models.normalization import EmpiricalNormalizer
from mimic_rl.models.recurrent import HiddenState, Memory
from mimic_rl.models.reference_encoder import build_reference_encoder

__all__ = ["Actor", "Critic", "ReferenceModel"]


class ReferenceModel(nn.Module):
    """Normalizers, a reference encoder, an optional GRU/LSTM core and an MLP trunk."""

    def __init__(
        self,
        obs_dim: int,
        output_dim: int,
        ref_shape: Sequence[int] | None = None,
        hidden_dims: Sequence[int] = (256, 256, 256),
        activation: str = "elu",
        obs_normalization: bool = True,
        reference_encoder: dict[str, Any] | None = None,
        rnn_type: str | None = None,
        rnn_hidden_dim: int = 256,
        rnn_num_layers: int = 1,
    ) -> None:
        super().__init__()
        self.obs_dim = int(obs_dim)
        self.ref_shape = tuple(int(s) for s in ref_shape) if ref_shape else None
        self.obs_normalizer = EmpiricalNormalizer(self.obs_dim) if obs_normalization else None
        self.ref_normalizer = EmpiricalNormalizer(self.ref_shape) if obs_normalization and self.ref_shape else None
        self.encoder = build_reference_encoder(self.ref_shape, reference_encoder) if self.ref_shape else None
        in_dim = self.obs_dim + (self.encoder.output_dim if self.encoder is not None else 0)
        self.memory = Memory(in_dim, rnn_type, rnn_hidden_dim, rnn_num_layers) if rnn_type else None
        self.mlp = MLP(self.memory.hidden_dim if self.memory else in_dim, output_dim, hidden_dims, activation)

    @property
    def is_recurrent(self) -> bool:
        """Whether the model has a GRU/LSTM core."""
        return self.memory is not None

    def latent(
        self, obs: torch.Tensor, reference: torch.Tensor | None = None, reference_mask: torch.Tensor | None = None
    ):
        """Normalized observations concatenated with the encoded reference (zeros and mask 0 where absent)."""
        if obs.shape[-1] != self.obs_dim:
            raise ValueError(
                f"{type(self).__name__}: expected observations [..., {self.obs_dim}], got {tuple(obs.shape)}"
            )
        x = self.obs_normalizer(obs) if self.obs_normalizer is not None else obs
        if self.encoder is None:
            return x
        lead = obs.shape[:-1]
        if reference is None:  # an env without any reference stream: every row is "no reference"
            reference = obs.new_zeros(*lead, *self.ref_shape)
            reference_mask = torch.zeros(lead, dtype=torch.bool, device=obs.device)
        elif reference_mask is None:
            reference_mask = torch.ones(lead, dtype=torch.bool, device=obs.device)
        reference = reference.reshape(*lead, *self.ref_shape)
        if self.ref_normalizer is not None:
            reference = self.ref_normalizer(reference)
        return torch.cat((x, self.encoder(reference, reference_mask)), dim=-1)

    def trunk(
        self,
        obs: torch.Tensor,
        reference: torch.Tensor | None = None,
        reference_mask: torch.Tensor | None = None,
        hidden_state: HiddenState = None,
    ) -> torch.Tensor:
        """Raw MLP output."""
        x = self.latent(obs, reference, reference_mask)
        if self.memory is not None:
            x = self.memory(x, hidden_state)
        return self.mlp(x)

    def step(
        self,
        obs: torch.Tensor,
        reference: torch.Tensor | None = None,
        reference_mask: torch.Tensor | None = None,
        hidden_state: HiddenState = None,
    ) -> tuple[torch.Tensor, HiddenState]:
        """One step of ``[B, ...]`` inputs from an explicit recurrent state: (raw MLP output, new state).

        Without a recurrent core this is ``trunk`` and the state stays None."""
        x = self.latent(obs, reference, reference_mask)
        if self.memory is not None:
            x, hidden_state = self.memory.step(x, hidden_state)
        return self.mlp(x), hidden_state

    @torch.no_grad()
    def update_normalization(
        self, obs: torch.Tensor, reference: torch.Tensor | None = None, reference_mask: torch.Tensor | None = None
    ) -> None:
        """Merge raw observations (and the rows of ``reference`` that have a reference) into the normalizers."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(obs)
        if self.ref_normalizer is not None and reference is not None:
            reference = reference.reshape(-1, *self.ref_shape)
            self.ref_normalizer.update(reference, None if reference_mask is None else reference_mask.reshape(-1))

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the recurrent state of done envs (no-op without a recurrent core)."""
        if self.memory is not None:
            self.memory.reset(dones)

    def get_hidden_state(self) -> HiddenState:
        """Collection-time recurrent state (None without a recurrent core)."""
        return self.memory.get_hidden_state() if self.memory is not None else None


class Actor(ReferenceModel):
    """Gaussian policy: the trunk outputs the action mean, the head holds a learned std."""

    def __init__(
        self,
        obs_dim: int,
        num_actions: int,
        ref_shape: Sequence[int] | None = None,
        init_noise_std: float = 1.0,
        noise_std_type: str = "scalar",
        min_std: float = 1e-3,
        max_std: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(obs_dim, num_actions, ref_shape, **kwargs)
        self.num_actions = int(num_actions)
        self.config = {
            "obs_dim": int(obs_dim),
            "num_actions": int(num_actions),
            "ref_shape": None if ref_shape is None else [int(s) for s in ref_shape],
            "init_noise_std": init_noise_std,
            "noise_std_type": noise_std_type,
            "min_std": min_std,
            "max_std": max_std,
            **kwargs,
        }
        """Constructor arguments, saved in checkpoints so that the actor can be rebuilt (teacher, export)."""
        self.head = GaussianHead(num_actions, init_noise_std, noise_std_type, min_std, max_std)
        self.mlp.init_output(0.01)

    def distribution(
        self,
        obs: torch.Tensor,
        reference: torch.Tensor | None = None,
        reference_mask: torch.Tensor | None = None,
        hidden_state: HiddenState = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Action mean and std, both ``[..., num_actions]``."""
        mean = self.trunk(obs, reference, reference_mask, hidden_state)
        return mean, self.head.std().expand_as(mean)

    def forward(
        self, obs: torch.Tensor, reference: torch.Tensor | None = None, reference_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Deterministic action (the mean), the deployable policy."""
        return self.trunk(obs, reference, reference_mask)


class Critic(ReferenceModel):
    """Value function ``[..., 1]``."""

    def __init__(self, obs_dim: int, ref_shape: Sequence[int] | None = None, **kwargs: Any) -> None:
        super().__init__(obs_dim, 1, ref_shape, **kwargs)
        self.config = {"obs_dim": int(obs_dim), "ref_shape": None if ref_shape is None else list(ref_shape), **kwargs}

    def peek(
        self,
        obs: torch.Tensor,
        reference: torch.Tensor | None = None,
        reference_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Value of a state one step after the current one, without advancing a recurrent core's state."""
        return self.step(obs, reference, reference_mask, self.get_hidden_state())[0]

    def forward(
        self,
        obs: torch.Tensor,
        reference: torch.Tensor | None = None,
        reference_mask: torch.Tensor | None = None,
        hidden_state: HiddenState = None,
    ) -> torch.Tensor:
        """State value ``[..., 1]``."""
        return self.trunk(obs, reference, reference_mask, hidden_state)
