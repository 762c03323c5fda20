"""Plain MLP building blocks shared by actors, critics, discriminators and RND networks."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["MLP", "activation"]

_ACTIVATIONS = {
    "elu": nn.ELU,
    "relu": nn.ReLU,
    "selu": nn.SELU,
    "lrelu": nn.LeakyReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "swish": nn.SiLU,
    "softplus": nn.Softplus,
    "identity": nn.Identity,
}


def activation(name: str) -> nn.Module:
    """Return a fresh activation module by name (``elu``, ``relu``, ``tanh``, ...)."""
    try:
        return _ACTIVATIONS[name.lower()]()
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(_ACTIVATIONS)}") from None


class MLP(nn.Sequential):
    """Linear layers with activations in between; the last layer is linear.

    Layers are numbered like rsl_rl's MLP (``0`` Linear, ``1`` activation, ``2`` Linear, ...), so state dicts of the
    two line up.
    """

    def __init__(self, input_dim: int, output_dim: int, hidden_dims: Sequence[int], act: str = "elu") -> None:
        layers: list[nn.Module] = []
        dims = [int(input_dim), *[int(h) for h in hidden_dims]]
        for d_in, d_out in itertools.pairwise(dims):
            layers += [nn.Linear(d_in, d_out), activation(act)]
        layers.append(nn.Linear(dims[-1], int(output_dim)))
        super().__init__(*layers)
        self.input_dim = int(input_dim)
        self.output_dim = int(output_dim)

    @property
    def last(self) -> nn.Linear:
        """The output layer."""
        return self[-1]  # type: ignore[return-value]

    def init_output(self, gain: float) -> None:
        """Scale the output layer's initial weights (small gains for policy means) and zero its bias."""
        with torch.no_grad():
            self.last.weight.mul_(gain)
            self.last.bias.zero_()
