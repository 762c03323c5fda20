"""PPO loss terms as pure functions over (optionally masked) per-sample tensors."""

from __future__ import annotations

import torch

__all__ = ["adapt_learning_rate", "clipped_surrogate", "masked_mean", "value_loss"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``x`` over entries where ``mask`` is True; plain mean without a mask."""
    if mask is None:
        return x.mean()
    w = mask.to(x.dtype)
    return (x * w).sum() / w.sum().clamp(min=1.0)


def clipped_surrogate(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    clip_param: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """PPO's clipped surrogate loss ``mean(max(-A r, -A clip(r, 1 - eps, 1 + eps)))``, all inputs ``[...]``."""
    ratio = torch.exp(log_prob - old_log_prob)
    surrogate = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_param, 1.0 + clip_param)
    return masked_mean(torch.max(surrogate, clipped), mask)


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    clip_param: float,
    use_clipped: bool,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Squared value error; with clipping, rsl_rl's ``max((V - R)^2, (V_old + clip(V - V_old) - R)^2)``."""
    if not use_clipped:
        return masked_mean((returns - values).square(), mask)
    clipped = old_values + (values - old_values).clamp(-clip_param, clip_param)
    return masked_mean(torch.max((values - returns).square(), (clipped - returns).square()), mask)


def adapt_learning_rate(learning_rate: float, kl: float, desired_kl: float) -> float:
    """rsl_rl's adaptive schedule: /1.5 above 2x the desired KL (floor 1e-5), x1.5 below half (cap 1e-2)."""
    if kl > desired_kl * 2.0:
        return max(1e-5, learning_rate / 1.5)
    if 0.0 < kl < desired_kl / 2.0:
        return min(1e-2, learning_rate * 1.5)
    return learning_rate
