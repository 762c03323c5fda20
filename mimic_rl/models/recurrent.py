"""GRU / LSTM memory that steps one env-batch at a time during collection and runs whole sequences in updates."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["HiddenState", "Memory", "zero_done"]

HiddenState = torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None


def zero_done(hidden: HiddenState, dones: torch.Tensor) -> HiddenState:
    """``hidden`` (``[layers, N, H]``, or an LSTM's pair) with the rows of done envs (bool ``[N]``) zeroed."""
    if hidden is None:
        return None
    first = hidden[0] if isinstance(hidden, tuple) else hidden
    keep = (~dones.reshape(-1).to(torch.bool)).to(first.dtype).reshape(1, -1, 1)
    if isinstance(hidden, tuple):
        return tuple(h * keep for h in hidden)  # type: ignore[return-value]
    return hidden * keep


class Memory(nn.Module):
    """A recurrent layer with an internal collection-time state.

    ``forward(x [N, F])`` steps once and keeps the state (collection); ``forward(x [L, B, F], hidden_state)`` runs a
    padded sequence batch from the given initial state (update) and leaves the internal state alone.
    """

    def __init__(self, input_dim: int, rnn_type: str = "gru", hidden_dim: int = 256, num_layers: int = 1) -> None:
        super().__init__()
        rnn_type = rnn_type.lower()
        if rnn_type not in ("gru", "lstm"):
            raise ValueError(f"rnn_type must be 'gru' or 'lstm', got {rnn_type!r}")
        cls = nn.GRU if rnn_type == "gru" else nn.LSTM
        self.rnn = cls(input_dim, hidden_dim, num_layers)
        self.rnn_type = rnn_type
        self.hidden_dim = int(hidden_dim)
        self.hidden: HiddenState = None

    def forward(self, x: torch.Tensor, hidden_state: HiddenState = None) -> torch.Tensor:
        """Step (``x`` 2-D) or run a sequence batch (``x`` 3-D, time-major)."""
        if x.dim() == 3:
            out, _ = self.rnn(x, hidden_state)
            return out
        out, self.hidden = self.step(x, self.hidden)
        return out

    def step(self, x: torch.Tensor, hidden_state: HiddenState = None) -> tuple[torch.Tensor, HiddenState]:
        """One step of ``x [B, F]`` from an explicit ``hidden_state`` (zeros if None); returns (output, new state).

        Leaves the internal collection-time state alone (truncated BPTT in updates)."""
        if hidden_state is None:
            hidden_state = self._zeros(x.shape[0], x)
        out, hidden_state = self.rnn(x.unsqueeze(0), hidden_state)
        return out.squeeze(0), hidden_state

    def _zeros(self, batch: int, like: torch.Tensor) -> HiddenState:
        h = torch.zeros(self.rnn.num_layers, batch, self.hidden_dim, device=like.device, dtype=like.dtype)
        return (h, h.clone()) if self.rnn_type == "lstm" else h

    def reset(self, dones: torch.Tensor | None = None) -> None:
        """Zero the collection-time state of envs that are done (all envs if ``dones`` is None)."""
        if self.hidden is None:
            return
        if dones is None:
            self.hidden = None
            return
        self.hidden = zero_done(self.hidden, dones)

    def get_hidden_state(self) -> HiddenState:
        """The current collection-time state (None before the first step)."""
        if self.hidden is None:
            return None
        if isinstance(self.hidden, tuple):
            return tuple(h.detach() for h in self.hidden)  # type: ignore[return-value]
        return self.hidden.detach()
