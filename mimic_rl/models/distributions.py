"""Diagonal Gaussian action head with a state-independent, learned standard deviation."""

from __future__ import annotations

import math

import torch
from torch import nn

from mimic_rl.errors import TrainingDiverged

__all__ = ["GaussianHead", "gaussian_entropy", "gaussian_kl", "gaussian_log_prob"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Sum over action dims of log N(actions; mean, std), shape ``[...]``."""
    z = (actions - mean) / std
    return (-0.5 * z.square() - std.log() - _LOG_SQRT_2PI).sum(-1)


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Sum over action dims of the entropy of N(., std), shape ``[...]``."""
    return (std.log() + 0.5 + _LOG_SQRT_2PI).sum(-1)


def gaussian_kl(mu0: torch.Tensor, sigma0: torch.Tensor, mu1: torch.Tensor, sigma1: torch.Tensor) -> torch.Tensor:
    """KL(N(mu0, sigma0) || N(mu1, sigma1)) summed over action dims, shape ``[...]``."""
    return (torch.log(sigma1 / sigma0) + (sigma0.square() + (mu0 - mu1).square()) / (2.0 * sigma1.square()) - 0.5).sum(
        -1
    )


class GaussianHead(nn.Module):
    """Learned std, parameterized directly (``std_type="scalar"``) or as log std (``"log"``), bounded below.

    The bound is ``min_std`` (and ``max_std`` above, if given); the std stays differentiable inside the bounds.
    """

    def __init__(
        self,
        num_actions: int,
        init_std: float = 1.0,
        std_type: str = "scalar",
        min_std: float = 1e-3,
        max_std: float | None = None,
    ) -> None:
        super().__init__()
        if std_type not in ("scalar", "log"):
            raise ValueError(f"std_type must be 'scalar' or 'log', got {std_type!r}")
        if not init_std > 0 or not min_std > 0 or (max_std is not None and max_std <= min_std):
            raise ValueError(f"need init_std > 0 and 0 < min_std < max_std, got {init_std}, {min_std}, {max_std}")
        self.std_type = std_type
        self.min_std = float(min_std)
        self.max_std = None if max_std is None else float(max_std)
        init = torch.full((int(num_actions),), float(init_std))
        if std_type == "scalar":
            self.std_param = nn.Parameter(init)
        else:
            self.log_std_param = nn.Parameter(init.log())

    def std(self) -> torch.Tensor:
        """Current std, ``[num_actions]``."""
        raw = self.std_param if self.std_type == "scalar" else self.log_std_param.exp()
        return raw.clamp(min=self.min_std, max=self.max_std)

    def check(self) -> None:
        """Raise a clear error if the std parameter is NaN or inf (a diverged update)."""
        raw = self.std_param if self.std_type == "scalar" else self.log_std_param
        if not bool(torch.isfinite(raw).all()):
            raise TrainingDiverged(
                f"the policy's action std is not finite ({raw.detach().cpu().tolist()}); training diverged. Lower the "
                "learning rate or max_grad_norm, or check observations and rewards for NaN/inf"
            )
