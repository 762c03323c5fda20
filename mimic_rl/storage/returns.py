"""Return and advantage estimators as pure functions over time-major ``[T, N, 1]`` tensors.

Episode ends follow the package contract: ``dones`` marks terminated *or* truncated steps and ``time_outs`` marks
truncation. On a truncated step the return bootstraps from ``bootstrap_values`` (V of the real next state, which an
auto-resetting env reports in ``extras["final_observations"]``); on a terminated step it is cut.
"""

from __future__ import annotations

import torch

__all__ = ["compute_gae", "compute_monte_carlo", "normalize_advantages"]


def _next_state_terms(
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    time_outs: torch.Tensor | None,
    bootstrap_values: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return (value of the next state, whether it counts, whether the trace continues), each ``[T, N, 1]``."""
    last_values = last_values.reshape(values.shape[1:]).to(values.dtype)
    next_values = torch.cat((values[1:], last_values.unsqueeze(0)), dim=0)
    dones = dones.to(torch.bool)
    continues = ~dones
    bootstraps = continues
    if time_outs is not None:
        truncated = dones & time_outs.to(torch.bool)
        if bootstrap_values is None:
            raise ValueError("time_outs were given without bootstrap_values; pass V(s_{t+1}) of the real next state")
        next_values = torch.where(truncated, bootstrap_values.to(values.dtype), next_values)
        bootstraps = continues | truncated
    return next_values, bootstraps.to(values.dtype), continues.to(values.dtype)


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    lam: float,
    time_outs: torch.Tensor | None = None,
    bootstrap_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimation with correct truncation.

    delta_t = r_t + gamma * V_next_t - V(s_t), where V_next_t is V(s_{t+1}) inside an episode, ``bootstrap_values``
    on a time-out and 0 on a termination; A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}.
    Returns ``(returns, advantages)`` with ``returns = advantages + values``.
    """
    next_values, bootstraps, continues = _next_state_terms(values, dones, last_values, time_outs, bootstrap_values)
    deltas = torch.addcmul(rewards - values, bootstraps, next_values, value=gamma)
    coef = continues * (gamma * lam)
    advantages = torch.empty_like(values)
    running = torch.zeros_like(values[0])
    for t in range(values.shape[0] - 1, -1, -1):
        running = torch.addcmul(deltas[t], coef[t], running, out=advantages[t])
    return advantages + values, advantages


def compute_monte_carlo(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_values: torch.Tensor,
    gamma: float,
    time_outs: torch.Tensor | None = None,
    bootstrap_values: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Discounted Monte Carlo returns G_t = r_t + gamma * (G_{t+1} or the bootstrap), advantages G_t - V(s_t).

    The rollout's end bootstraps from ``last_values`` and a time-out from ``bootstrap_values``; pass zeros to get
    pure Monte Carlo returns. Returns ``(returns, advantages)``.
    """
    _, bootstraps, continues = _next_state_terms(values, dones, last_values, time_outs, bootstrap_values)
    truncated_value = torch.zeros_like(values)
    if time_outs is not None:
        truncated = dones.to(torch.bool) & time_outs.to(torch.bool)
        truncated_value = torch.where(truncated, bootstrap_values.to(values.dtype), truncated_value)
    returns = torch.empty_like(values)
    running = last_values.reshape(values.shape[1:]).to(values.dtype)
    for t in range(values.shape[0] - 1, -1, -1):
        future = continues[t] * running + (bootstraps[t] - continues[t]) * truncated_value[t]
        running = torch.add(rewards[t], future, alpha=gamma, out=returns[t])
    return returns, returns - values


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Return ``(A - mean) / (std + eps)`` with the unbiased std, as rsl_rl does."""
    return (advantages - advantages.mean()) / (advantages.std() + eps)
