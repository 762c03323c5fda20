"""Recurrent hidden states of a rollout, kept per step so that any sequence can start from its stored state."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["HiddenStateStore"]

HiddenState = torch.Tensor | tuple[torch.Tensor, ...] | None


class _Component:
    """The hidden states of one network (actor or critic): GRU (one tensor) or LSTM (h, c)."""

    def __init__(self, state: torch.Tensor | tuple[torch.Tensor, ...], num_steps: int, device: torch.device) -> None:
        self.is_tuple = isinstance(state, tuple | list)
        parts = tuple(state) if self.is_tuple else (state,)
        # Stored env-major per step: [T, N, layers, H], so that a flat index t * N + n selects one env's state.
        self.buffers = [
            torch.zeros(num_steps, p.shape[1], p.shape[0], *p.shape[2:], dtype=p.dtype, device=device) for p in parts
        ]

    def save(self, step: int, state: torch.Tensor | tuple[torch.Tensor, ...]) -> None:
        parts = tuple(state) if self.is_tuple else (state,)
        if len(parts) != len(self.buffers):
            raise ValueError(f"hidden state has {len(parts)} tensors, the first step had {len(self.buffers)}")
        for buf, p in zip(self.buffers, parts):
            expected = (buf.shape[2], buf.shape[1], *buf.shape[3:])
            if tuple(p.shape) != expected:
                raise ValueError(
                    f"Transition.hidden_states: expected shape {expected} [layers, N, H], got {tuple(p.shape)}"
                )
            buf[step].copy_(p.transpose(0, 1))

    def pack(self, parts: list[torch.Tensor]) -> HiddenState:
        return tuple(parts) if self.is_tuple else parts[0]

    def at_step(self, step: int) -> HiddenState:
        return self.pack([buf[step].transpose(0, 1) for buf in self.buffers])

    def gather(self, flat_index: torch.Tensor) -> HiddenState:
        out = []
        for buf in self.buffers:
            flat = buf.view(-1, *buf.shape[2:])
            out.append(flat.index_select(0, flat_index).transpose(0, 1).contiguous())
        return self.pack(out)

    def seed_layout(self) -> list[torch.Tensor]:
        """Views in the seed's layout ``[T, layers, N, H]``."""
        return [buf.transpose(1, 2) for buf in self.buffers]


class HiddenStateStore:
    """Keeps ``(actor, critic)`` hidden states for every step; allocated lazily from the first non-empty state."""

    def __init__(self, num_steps: int, device: torch.device) -> None:
        self.num_steps = num_steps
        self.device = device
        self.components: list[_Component | None] = [None, None]

    def save(self, step: int, hidden_states: Any) -> None:
        """Store the hidden states that were the input to step ``step`` (None or (None, None) stores nothing)."""
        if hidden_states is None:
            return
        if not isinstance(hidden_states, tuple | list) or len(hidden_states) != 2:
            raise ValueError("Transition.hidden_states must be (actor_state, critic_state), each None, h, or (h, c)")
        for i, state in enumerate(hidden_states):
            if state is None:
                continue
            if self.components[i] is None:
                self.components[i] = _Component(state, self.num_steps, self.device)
            self.components[i].save(step, state)

    def at_step(self, step: int) -> tuple[HiddenState, HiddenState]:
        """``(actor, critic)`` states of step ``step`` in the ``[layers, N, H]`` layout."""
        return tuple(c.at_step(step) if c is not None else None for c in self.components)  # type: ignore[return-value]

    def gather(self, flat_index: torch.Tensor, num_envs: int) -> tuple[HiddenState, HiddenState]:
        """``(actor, critic)`` states at flat rollout indices ``t * N + n``, each ``[layers, B, H]``."""
        del num_envs  # the flat index already encodes the env
        return tuple(c.gather(flat_index) if c is not None else None for c in self.components)  # type: ignore[return-value]
