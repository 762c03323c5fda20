"""Encoders for the reference group (K future frames), robust to envs that have no reference.

Both encoders return ``cat(latent * mask, mask)``: where an env has no reference the latent is exactly zero and the
mask is an input feature, so envs with and without a reference share one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from mimic_rl.models.mlp import MLP

__all__ = ["MLPReferenceEncoder", "TransformerReferenceEncoder", "build_reference_encoder"]


class MLPReferenceEncoder(nn.Module):
    """An MLP over the flattened reference (all future frames)."""

    def __init__(
        self,
        ref_shape: Sequence[int],
        latent_dim: int = 64,
        hidden_dims: Sequence[int] = (128,),
        activation: str = "elu",
    ) -> None:
        super().__init__()
        self.ref_shape = tuple(int(s) for s in ref_shape)
        flat = 1
        for s in self.ref_shape:
            flat *= s
        self.net = MLP(flat, latent_dim, hidden_dims, activation)
        self.output_dim = int(latent_dim) + 1

    def forward(self, reference: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``reference`` ``[..., *ref_shape]``, ``mask`` ``[...]`` bool -> ``[..., latent_dim + 1]``."""
        lead = reference.shape[: reference.dim() - len(self.ref_shape)]
        m = mask.reshape(*lead, 1).to(reference.dtype)
        latent = self.net(reference.reshape(*lead, -1))
        return torch.cat((latent * m, m), dim=-1)


class TransformerReferenceEncoder(nn.Module):
    """Self-attention over frame tokens plus a summary token; frames of envs without a reference are excluded
    through the key padding mask (the summary token is never masked, so no row is all-masked)."""

    def __init__(
        self,
        ref_shape: Sequence[int],
        latent_dim: int = 64,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        dim_feedforward: int = 128,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if len(ref_shape) != 2:
            raise ValueError(f"the transformer encoder needs a reference shaped (frames, features), got {ref_shape}")
        self.ref_shape = (int(ref_shape[0]), int(ref_shape[1]))
        self.embed = nn.Linear(self.ref_shape[1], d_model)
        self.position = nn.Parameter(torch.zeros(self.ref_shape[0], d_model))
        self.summary = nn.Parameter(torch.zeros(1, 1, d_model))
        layer = nn.TransformerEncoderLayer(d_model, num_heads, dim_feedforward, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.out = nn.Linear(d_model, latent_dim)
        nn.init.normal_(self.position, std=0.02)
        self.output_dim = int(latent_dim) + 1

    def forward(self, reference: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``reference`` ``[..., K, D]`` (or ``[..., K * D]``), ``mask`` ``[...]`` bool -> ``[..., latent_dim + 1]``."""
        k, d = self.ref_shape
        lead = mask.shape
        tokens = self.embed(reference.reshape(-1, k, d)) + self.position
        tokens = torch.cat((self.summary.expand(tokens.shape[0], 1, -1), tokens), dim=1)
        m = mask.reshape(-1)
        padding = torch.cat((torch.zeros_like(m).unsqueeze(1), (~m).unsqueeze(1).expand(-1, k)), dim=1)
        encoded = self.encoder(tokens, src_key_padding_mask=padding)
        mf = m.unsqueeze(1).to(reference.dtype)
        latent = self.out(encoded[:, 0]) * mf
        return torch.cat((latent, mf), dim=-1).reshape(*lead, -1)


def build_reference_encoder(ref_shape: Sequence[int], cfg: dict[str, Any] | None = None) -> nn.Module:
    """Build an encoder from ``{"type": "mlp" | "transformer", ...its keyword arguments}`` (default: MLP)."""
    cfg = dict(cfg or {})
    kind = cfg.pop("type", "mlp")
    classes = {"mlp": MLPReferenceEncoder, "transformer": TransformerReferenceEncoder}
    if kind not in classes:
        raise ValueError(f"reference_encoder type must be one of {sorted(classes)}, got {kind!r}")
    try:
        return classes[kind](ref_shape, **cfg)
    except TypeError as exc:
        raise TypeError(f"reference_encoder ({kind}): {exc}") from exc
