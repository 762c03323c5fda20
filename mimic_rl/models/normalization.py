"""Empirical observation normalization, updated explicitly (once per iteration) and never inside ``forward``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["EmpiricalNormalizer", "nonfinite_rows"]


def nonfinite_rows(*modules: nn.Module) -> torch.Tensor:
    """Rows with NaN or inf that the normalizers inside ``modules`` have left out so far (a float64 tensor)."""
    counts = [m.nonfinite_rows for module in modules for m in module.modules() if isinstance(m, EmpiricalNormalizer)]
    return torch.stack(counts).sum() if counts else torch.zeros((), dtype=torch.float64)


class EmpiricalNormalizer(nn.Module):
    """Running mean and variance of a stream, ``forward(x) = (x - mean) / (std + eps)``.

    ``update`` merges a batch (optionally only the rows where ``mask`` is True) with Chan's parallel formula and,
    when ``torch.distributed`` is initialized, with the batches of every rank, so all ranks hold identical statistics.
    Rows with a NaN or inf are left out and counted in ``nonfinite_rows`` (not saved in checkpoints), so the statistics
    stay finite whatever a rollout holds. It never syncs the host: masked counts are tensors.
    """

    def __init__(self, shape: int | Sequence[int], eps: float = 1e-2, until: int | None = None) -> None:
        super().__init__()
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        self.shape = shape
        self.eps = eps
        self.until = until
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("nonfinite_rows", torch.zeros((), dtype=torch.float64), persistent=False)

    @property
    def std(self) -> torch.Tensor:
        """Running standard deviation."""
        return self.var.sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize ``x`` (``[..., *shape]``) with the current statistics."""
        return (x - self.mean) / self._denominator()

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Undo ``forward``."""
        return y * self._denominator() + self.mean

    def _denominator(self) -> torch.Tensor:
        """``std + eps``, kept between calls while ``var`` is the same tensor, unmodified (its version counter), so
        that a forward is two operations instead of four (a GPU step or update is bounded by its launches). Traced or
        compiled code, and an inference-mode ``var``, compute it in place as before."""
        var = self.var
        if torch.jit.is_tracing() or torch.compiler.is_compiling() or var.is_inference():
            return var.sqrt() + self.eps
        key = (var, var._version, self.eps)
        cached = self.__dict__.get("_cached_denominator")
        if cached is None or cached[0] is not var or cached[1:3] != key[1:]:
            with torch.inference_mode(False), torch.no_grad():
                cached = (*key, var.sqrt() + self.eps)
            self.__dict__["_cached_denominator"] = cached
        return cached[3]

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Merge the statistics of ``x`` (``[..., *shape]``); rows where ``mask`` is False, and rows with a NaN or inf
        (counted in ``nonfinite_rows``), are ignored."""
        if self.until is not None and float(self.count) >= self.until:
            return
        x = x.reshape(-1, *self.shape).to(self.mean.dtype)
        w = torch.ones(x.shape[0], device=x.device, dtype=x.dtype) if mask is None else mask.reshape(-1).to(x.dtype)
        finite = torch.isfinite(x).reshape(x.shape[0], -1).all(-1)
        self.nonfinite_rows += ((~finite) & (w > 0)).sum()
        w = torch.where(finite, w, 0.0).reshape(-1, *([1] * len(self.shape)))
        x = torch.where(w > 0, x, 0.0)  # a left-out row must not reach the sums (NaN * 0 is NaN)
        count = w.sum(0).reshape(()).to(torch.float64)
        total = (x * w).sum(0)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            packed = torch.cat([count.reshape(1).to(x.dtype), total.reshape(-1)])
            torch.distributed.all_reduce(packed)
            count, total = packed[0].to(torch.float64), packed[1:].reshape(self.shape)
        batch_mean = total / count.clamp(min=1).to(x.dtype)
        m2 = (w * (x - batch_mean).square()).sum(0)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(m2)
        batch_var = m2 / count.clamp(min=1).to(x.dtype)

        new_count = self.count + count
        rate = (count / new_count.clamp(min=1)).to(x.dtype)
        delta = batch_mean - self.mean
        new_mean = self.mean + rate * delta
        new_var = self.var + rate * (batch_var - self.var + delta * (batch_mean - new_mean))
        has_data = count > 0
        self.mean.copy_(torch.where(has_data, new_mean, self.mean))
        self.var.copy_(torch.where(has_data, new_var, self.var))
        self.count.copy_(new_count)
