"""Failure-based adaptive sampling of motion start times (BeyondMimic's scheme, over several clips).

Each clip is cut into time bins. Episode failures are recorded at the motion time where they happened; an EMA of
failure counts per bin, smoothed by a kernel that also weighs the bins just *before* a failure (so that episodes
start a little ahead of the hard part), is mixed with a uniform distribution over all bins. Everything is on the
library's device and vectorized; the only host syncs are in ``entropy()`` / ``top_bin()``, which are for logging.
"""

from __future__ import annotations

import math

import torch

__all__ = ["AdaptiveSampler", "inverse_cdf"]


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Indices into ``weights`` (``[M]``, non-negative, positive sum) drawn by inverse CDF from ``u`` in [0, 1).

    Never returns an index of zero weight: the target ``u * total`` is kept strictly below the total, and the first
    cumulative sum above it belongs to a positive weight. A pure function of fixed shapes (for compiled code).
    """
    cdf = torch.cumsum(weights, 0)
    total = cdf[-1:]
    target = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, target, right=True)


class AdaptiveSampler:
    """Probability over (clip, time bin) that follows where episodes fail."""

    def __init__(
        self,
        durations: torch.Tensor,
        clip_weights: torch.Tensor,
        bin_duration: float = 1.0,
        ema_alpha: float = 0.001,
        uniform_ratio: float = 0.1,
        kernel_size: int = 3,
        kernel_decay: float = 0.8,
    ) -> None:
        if bin_duration <= 0 or not 0 < ema_alpha <= 1 or not 0 <= uniform_ratio <= 1 or kernel_size < 1:
            raise ValueError(
                "adaptive sampling needs bin_duration > 0, 0 < ema_alpha <= 1, 0 <= uniform_ratio <= 1 and "
                "kernel_size >= 1"
            )
        device = durations.device
        self.durations = durations.to(torch.float32)
        self.bin_duration = float(bin_duration)
        self.ema_alpha = float(ema_alpha)
        self.uniform_ratio = float(uniform_ratio)
        self.num_bins = torch.clamp(torch.ceil(self.durations / bin_duration), min=1).long()  # [C]
        self.max_bins = int(self.num_bins.max())
        bins = torch.arange(self.max_bins, device=device)
        self.valid = bins.unsqueeze(0) < self.num_bins.unsqueeze(1)  # [C, Bmax]
        weights = clip_weights.to(torch.float32) / clip_weights.sum()
        base = self.valid.float() * (weights / self.num_bins.float()).unsqueeze(1)
        self.base = base / base.sum()
        self.clip_weights = weights
        self.failures = torch.zeros_like(self.base)  # EMA of failure counts per bin
        self._pending = torch.zeros_like(self.base)
        k = torch.arange(kernel_size, device=device, dtype=torch.float32)
        kernel = kernel_decay**k
        self.kernel = kernel / kernel.sum()
        # bin b takes kernel_k * failures at bin min(b + k, last bin of its clip)
        last = (self.num_bins - 1).unsqueeze(1)
        self._kernel_index = torch.minimum(bins.view(1, -1, 1) + k.long().view(1, 1, -1), last.unsqueeze(-1))

    def bin_of(self, clip_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """Flat bin index ``clip * max_bins + bin`` of motion times."""
        b = torch.floor(times / self.bin_duration).long()
        b = torch.minimum(b.clamp(min=0), self.num_bins[clip_ids] - 1)
        return clip_ids * self.max_bins + b

    def record(self, clip_ids: torch.Tensor, times: torch.Tensor, failed: torch.Tensor) -> None:
        """Count failed episodes at their motion time (rows where ``failed`` is False are ignored)."""
        self._pending += self._counts(clip_ids, times, failed)

    def update(self) -> None:
        """Fold the failures recorded since the last call into the EMA."""
        self.failures.copy_(self.folded(self.failures, self._pending))
        self._pending.zero_()

    def folded(self, failures: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """The EMA ``failures`` ``[C, Bmax]`` after one update with failure ``counts`` (a pure function)."""
        return failures * (1.0 - self.ema_alpha) + self.ema_alpha * counts

    def after_failures(
        self, failures: torch.Tensor, clip_ids: torch.Tensor, times: torch.Tensor, failed: torch.Tensor
    ) -> torch.Tensor:
        """``failures`` after ``record(clip_ids, times, failed)`` and ``update()``, without changing the sampler (a
        pure function of fixed shapes, for compiled env steps)."""
        return self.folded(failures, self._counts(clip_ids, times, failed))

    def _counts(self, clip_ids: torch.Tensor, times: torch.Tensor, failed: torch.Tensor) -> torch.Tensor:
        """Failures per bin ``[C, Bmax]`` of one batch of episode ends."""
        counts = (
            torch.zeros_like(self.base).view(-1).index_add(0, self.bin_of(clip_ids, times), failed.to(self.base.dtype))
        )
        return counts.view_as(self.base)

    def probabilities(self, failures: torch.Tensor | None = None) -> torch.Tensor:
        """Sampling probability ``[C, Bmax]`` (zero on bins past a clip's end), from ``failures`` (default: the
        sampler's own EMA)."""
        failures = self.failures if failures is None else failures
        gathered = torch.gather(failures.unsqueeze(1).expand(-1, self.max_bins, -1), 2, self._kernel_index)
        smoothed = (gathered * self.kernel).sum(-1) * self.valid * self.clip_weights.unsqueeze(1)  # [C, Bmax]
        total = smoothed.sum()
        failure_part = torch.where(total > 0, smoothed / total.clamp(min=1e-12), self.base)
        return self.uniform_ratio * self.base + (1.0 - self.uniform_ratio) * failure_part

    def sample_from(self, u: torch.Tensor, failures: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(clip ids, times) from uniform numbers ``u`` ``[n, 2]`` in [0, 1): column 0 picks a bin by inverse CDF
        (probabilities from ``failures``, default the sampler's own), column 1 the time inside it (pure)."""
        flat = inverse_cdf(self.probabilities(failures).reshape(-1), u[:, 0])
        clip_ids = flat // self.max_bins
        b = flat % self.max_bins
        times = torch.minimum((b.float() + u[:, 1]) * self.bin_duration, self.durations[clip_ids])
        return clip_ids, times

    def entropy(self) -> float:
        """Entropy of the sampling distribution divided by its maximum (1.0 = uniform over bins)."""
        p = self.probabilities()[self.valid]
        h = -(p * torch.log(p.clamp(min=1e-12))).sum()
        return float(h / math.log(max(2, p.numel())))

    def stats(self) -> dict[str, float]:
        """``sampler/*`` scalars for the logs: the normalized entropy (1.0 = uniform over bins), the probability of the
        most likely bin, and that bin's clip and start time (s): where training starts its episodes."""
        clip, b, prob = self.top_bin()
        return {
            "sampler/entropy": self.entropy(),
            "sampler/top_bin_probability": prob,
            "sampler/top_bin_clip": float(clip),
            "sampler/top_bin_time_s": b * self.bin_duration,
        }

    def top_bin(self) -> tuple[int, int, float]:
        """(clip id, bin index, probability) of the most likely bin."""
        p = self.probabilities()
        flat = int(p.reshape(-1).argmax())
        return flat // self.max_bins, flat % self.max_bins, float(p.reshape(-1)[flat])
