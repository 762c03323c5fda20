"""The AMP discriminator ``D(s_prev, s)``: an MLP over a normalized pair of feature vectors, one logit per pair."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from mimic_rl.models.mlp import MLP
from mimic_rl.models.normalization import EmpiricalNormalizer

__all__ = ["Discriminator"]


class Discriminator(nn.Module):
    """``D(s_prev, s)``: an MLP over the concatenated, normalized feature pair, one logit per pair."""

    def __init__(self, num_features: int, hidden_dims: Sequence[int] = (256, 128), activation: str = "relu") -> None:
        super().__init__()
        self.num_features = int(num_features)
        self.normalizer = EmpiricalNormalizer(num_features)
        self.net = MLP(2 * num_features, 1, hidden_dims, activation)
        self.relu = all(isinstance(layer, nn.ReLU) for layer in list(self.net)[1::2])
        """Every activation a ReLU: the R1 input gradient is written out (``logits_and_r1``)."""

    def normalize(self, prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
        """Normalized pair input ``[..., 2F]`` (both states in one normalization)."""
        return self.normalizer(torch.stack((prev, cur), dim=-2)).flatten(-2)

    def forward(self, pair_input: torch.Tensor) -> torch.Tensor:
        """Logit ``[...]`` for a normalized pair input."""
        return self.net(pair_input).squeeze(-1)

    def logits_and_r1(self, pair_input: torch.Tensor, first: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``[M]`` of normalized pair inputs ``[M, 2F]``, and for the rows from ``first`` on the squared norm of
        each logit's gradient with respect to its input (R1's per-row term), differentiable in the parameters.

        With ReLU activations the input gradient is written out (``W_1^T (m_1 * W_2^T (m_2 * w_3))`` with ``m_k`` the
        active units of the row), so one ordinary backward gives R1's parameter gradients; other activations take
        the input gradient from autograd with ``create_graph`` (a double backward).
        """
        if not self.relu:
            x = pair_input.detach().requires_grad_(True)
            logits = self(x)
            grad = torch.autograd.grad(logits[first:].sum(), x, create_graph=True)[0][first:]
            return logits, grad.square().sum(-1)
        linears = list(self.net)[::2]
        hidden, h = [], pair_input.detach()
        for layer in linears[:-1]:
            h = torch.relu(F.linear(h, layer.weight, layer.bias))
            hidden.append(h)
        last = self.net.last
        logits = F.linear(h, last.weight, last.bias).squeeze(-1)
        grad = last.weight.expand(pair_input.shape[0] - first, -1)  # d logit / d (last hidden layer)
        for layer, active in zip(reversed(linears[:-1]), reversed(hidden), strict=True):
            grad = ((active[first:] > 0) * grad) @ layer.weight
        return logits, grad.square().sum(-1)
