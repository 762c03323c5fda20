"""Failure-based adaptive sampling of motion start times (BeyondMimic's scheme, over several clips; by count or rate).

Each clip is cut into time bins. Two EMAs per bin follow training: the episodes that failed there, and the time
(seconds of motion) that episodes spent there, their *exposure*, counted when each episode ends over the span it
covered. With ``weighting="count"`` (BeyondMimic's, the default) a bin's weight is its failure count; with
``"rate"`` its failure rate, failures per second spent in it. Counts follow the traffic as much as the difficulty: a
clip's first seconds are only reached by episodes that start there, so their failures stay few even when every
episode from the clip's start fails, and the later bins of a long clip, which every surviving episode passes, draw
the starts (docs/ablations.md, long clips: measured, and why counts stay the default). The weights are smoothed by
a kernel that also weighs the bins just *before* a failure (so that episodes start a little ahead of the hard part)
and mixed with a uniform distribution over all bins. Everything is on the library's device and vectorized; the only
host syncs are in ``entropy()`` / ``top_bin()`` / ``stats_scalars()``, which are for logging.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import torch

from mimic_rl.utils import Range

__all__ = ["AdaptiveSampler", "AdaptiveSamplingConfig", "Unrestored", "inverse_cdf"]


@dataclass(frozen=True)
class AdaptiveSamplingConfig:
    """Settings of the adaptive start-time sampler (``sampling_mode: adaptive``)."""

    bin_duration: Annotated[float, Range(0, low_exclusive=True)] = 1.0
    """Seconds of motion per bin."""
    ema_alpha: Annotated[float, Range(0, 1, low_exclusive=True)] = 0.001
    """Weight of each update (one per env step in which episodes end) in the EMAs."""
    uniform_ratio: Annotated[float, Range(0, 1)] = 0.1
    """Share of starts drawn uniformly over all bins (each clip's bins share its weight)."""
    kernel_size: Annotated[int, Range(1)] = 3
    kernel_decay: Annotated[float, Range(0, low_exclusive=True)] = 0.8
    weighting: Literal["rate", "count"] = "count"
    """``count``: failures alone (BeyondMimic's; the default); ``rate``: failures per second of exposure in a bin, which
    does not starve a clip's first seconds (docs/ablations.md, long clips)."""
    clip_balance: Literal["weights", "rate"] = "rate"
    """How the failure part is shared between clips. ``rate`` (the default): each clip's share in proportion to its
    failure rate (failures per second of exposure over the whole clip, times its clip weight), spread over its bins by
    ``weighting``; ``weights`` (before issue 30): one distribution over every bin of every clip, in which a long clip,
    with more bins and more traffic, collects the failures and the starts. The same with one clip
    (docs/ablations.md, many clips)."""


@dataclass(frozen=True)
class Unrestored:
    """What ``AdaptiveSampler.load_saved`` did not restore (those statistics start afresh at zero): ``"none"``, no
    statistics in the checkpoint; ``"layout"``, statistics of another ``shape`` saved without clip names (other
    motions); ``"clips"``, none saved under these ``clips``' names and bin counts (the others were restored)."""

    reason: Literal["none", "layout", "clips"]
    shape: tuple[int, ...] = ()
    clips: tuple[str, ...] = ()


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
    """Probability over (clip, time bin) that follows where episodes fail (see the module docstring).

    Its state ``stats`` ``[2, C, Bmax]`` holds the failure EMA (row 0) and the exposure EMA in seconds (row 1); the
    pure functions (``after_episode_ends``, ``probabilities(stats)``, ``sample_from(u, stats)``) take a state as an
    argument, so that a compiled env step can carry it.
    """

    def __init__(
        self,
        durations: torch.Tensor,
        clip_weights: torch.Tensor,
        cfg: AdaptiveSamplingConfig | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        cfg = cfg or AdaptiveSamplingConfig()
        if names is not None and len(names) != len(durations):
            raise ValueError(f"adaptive sampling: {len(names)} clip names for {len(durations)} clips")
        self.names = None if names is None else [str(n) for n in names]
        """The clips' names (saved with the statistics, which a resume restores by name); None: by layout only."""
        if cfg.bin_duration <= 0 or not 0 < cfg.ema_alpha <= 1 or not 0 <= cfg.uniform_ratio <= 1:
            raise ValueError("adaptive sampling needs bin_duration > 0, 0 < ema_alpha <= 1 and 0 <= uniform_ratio <= 1")
        if cfg.kernel_size < 1 or cfg.weighting not in ("rate", "count") or cfg.clip_balance not in ("weights", "rate"):
            raise ValueError(
                "adaptive sampling needs kernel_size >= 1, weighting rate or count and clip_balance weights or rate; "
                f"got {cfg}"
            )
        device = durations.device
        self.cfg = cfg
        self.durations = durations.to(torch.float32)
        self.bin_duration = float(cfg.bin_duration)
        self.ema_alpha = float(cfg.ema_alpha)
        self.uniform_ratio = float(cfg.uniform_ratio)
        self.num_bins = torch.clamp(torch.ceil(self.durations / self.bin_duration), min=1).long()  # [C]
        self.max_bins = int(self.num_bins.max())
        bins = torch.arange(self.max_bins, device=device)
        self.valid = bins.unsqueeze(0) < self.num_bins.unsqueeze(1)  # [C, Bmax]
        self._edges = bins.to(torch.float32) * self.bin_duration  # [Bmax] bin starts
        weights = clip_weights.to(torch.float32) / clip_weights.sum()
        base = self.valid.float() * (weights / self.num_bins.float()).unsqueeze(1)
        self.base = base / base.sum()
        self.clip_weights = weights
        self.stats = torch.zeros(2, *self.base.shape, device=device)  # EMAs of failures and exposure (s) per bin
        self._pending = torch.zeros_like(self.stats)
        k = torch.arange(cfg.kernel_size, device=device, dtype=torch.float32)
        kernel = cfg.kernel_decay**k
        self.kernel = kernel / kernel.sum()
        # bin b takes kernel_k * weight of bin min(b + k, last bin of its clip)
        last = (self.num_bins - 1).unsqueeze(1)
        self._kernel_index = torch.minimum(bins.view(1, -1, 1) + k.long().view(1, 1, -1), last.unsqueeze(-1))

    @property
    def failures(self) -> torch.Tensor:
        """The failure EMA ``[C, Bmax]`` (a view of ``stats``)."""
        return self.stats[0]

    @property
    def exposure(self) -> torch.Tensor:
        """The exposure EMA ``[C, Bmax]``, seconds of motion that episodes spent in each bin (a view of ``stats``)."""
        return self.stats[1]

    def bin_of(self, clip_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """Flat bin index ``clip * max_bins + bin`` of motion times."""
        b = torch.floor(times / self.bin_duration).long()
        b = torch.minimum(b.clamp(min=0), self.num_bins[clip_ids] - 1)
        return clip_ids * self.max_bins + b

    def record(self, clip_ids: torch.Tensor, times: torch.Tensor, failed: torch.Tensor, spans: torch.Tensor) -> None:
        """Count episodes that ended at motion ``times`` after ``spans`` seconds of motion, the ``failed`` ones as
        failures at their end."""
        self._pending += self._counts(clip_ids, times, failed, torch.ones_like(failed, dtype=torch.bool), spans)

    def state(self) -> dict[str, Any]:
        """What an env's checkpoint keeps of the sampler: the EMAs (``adaptive_sampler``) and, when the clips are
        named, their names and bin counts (``adaptive_sampler_clips``, ``adaptive_sampler_bins``), by which
        ``load_saved`` finds each clip's statistics again."""
        out: dict[str, Any] = {"adaptive_sampler": self.stats.clone()}
        if self.names is not None:
            out["adaptive_sampler_clips"] = list(self.names)
            out["adaptive_sampler_bins"] = self.num_bins.cpu().clone()
        return out

    def saved_for_same_clips(self, state: Mapping[str, Any]) -> bool | None:
        """Whether ``state`` (``state()``) was saved for these clips: the same names and bin counts in the same order;
        None when it or this sampler holds no names (a checkpoint from before names were saved)."""
        names = state.get("adaptive_sampler_clips")
        if names is None or self.names is None:
            return None
        bins = state.get("adaptive_sampler_bins")
        return [str(n) for n in names] == self.names and (bins is None or bins.tolist() == self.num_bins.tolist())

    def load_saved(self, state: Mapping[str, Any]) -> Unrestored | None:
        """Restore the EMAs an env saved in ``state``: ``adaptive_sampler`` ``[2, C, B]``, or from before exposure was
        counted the failure EMA alone, ``adaptive_failures`` ``[C, B]``, restored with zero exposure (failure counts
        then resume exactly). Saved with clip names (``state()``) and with names here, each clip takes the statistics
        saved under its name and bin count, wherever it was in the saved order (clips reordered, added or removed);
        the others start at zero. Returns None when every clip is restored, else what was not (``Unrestored``)."""
        saved, old = state.get("adaptive_sampler"), state.get("adaptive_failures")
        names = state.get("adaptive_sampler_clips")
        if saved is not None and names is not None and self.names is not None:
            return self._load_by_name(saved, [str(n) for n in names], state.get("adaptive_sampler_bins"))
        if saved is None and old is not None:
            same = tuple(old.shape) == tuple(self.stats.shape[1:])
            saved = torch.stack((old, torch.zeros_like(old))) if same else old
        if saved is None or tuple(saved.shape) != tuple(self.stats.shape):
            self.stats.zero_()
            return Unrestored("none") if saved is None else Unrestored("layout", shape=tuple(saved.shape))
        self.stats.copy_(saved.to(self.stats.device))
        return None

    def _load_by_name(self, saved: torch.Tensor, names: list[str], bins: torch.Tensor | None) -> Unrestored | None:
        """``load_saved`` of statistics saved with clip names (and bin counts): row by row, by name."""
        self.stats.zero_()
        if saved.dim() != 3 or saved.shape[0] != 2 or saved.shape[1] != len(names):
            return Unrestored("layout", shape=tuple(saved.shape))
        counts = [saved.shape[2]] * len(names) if bins is None else [int(b) for b in bins]
        taken: set[int] = set()
        missing = []
        for i, name in enumerate(self.names or []):
            n = int(self.num_bins[i])
            j = next((k for k, m in enumerate(names) if m == name and k not in taken and counts[k] == n), None)
            if j is None:
                missing.append(name)
                continue
            taken.add(j)
            self.stats[:, i, :n] = saved[:, j, :n].to(self.stats)
        return Unrestored("clips", clips=tuple(missing)) if missing else None

    def restore(self, state: Mapping[str, Any]) -> None:
        """``load_saved``, with a warning when ``state`` holds no statistics, those of another layout (other clips), or
        none for some of this run's clips: their sampling then starts afresh."""
        lost = self.load_saved(state)
        if lost is None:
            return
        if lost.reason == "clips":
            message = (
                f"env state: no adaptive sampling statistics for clips {', '.join(lost.clips)} in the checkpoint (new "
                "clips, renamed, or of another length); their sampling starts afresh, the other clips' resumes"
            )
        else:
            found = "none" if lost.reason == "none" else f"shape {lost.shape}"
            message = (
                f"env state: adaptive sampling statistics of another layout ({found}, this run has "
                f"{tuple(self.stats.shape)}: other motions); its sampling starts afresh"
            )
        warnings.warn(message, UserWarning, stacklevel=3)

    def update(self) -> None:
        """Fold the episodes recorded since the last call into the EMAs."""
        self.stats.copy_(self.folded(self.stats, self._pending))
        self._pending.zero_()

    def folded(self, stats: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """The EMAs ``stats`` ``[2, C, Bmax]`` after one update with ``counts`` (a pure function)."""
        return stats * (1.0 - self.ema_alpha) + self.ema_alpha * counts

    def after_episode_ends(
        self,
        stats: torch.Tensor,
        clip_ids: torch.Tensor,
        times: torch.Tensor,
        failed: torch.Tensor,
        ended: torch.Tensor,
        spans: torch.Tensor,
    ) -> torch.Tensor:
        """``stats`` after ``record(...)`` and ``update()`` of one batch of episode ends, without changing the sampler
        (a pure function of fixed shapes, for compiled env steps)."""
        return self.folded(stats, self._counts(clip_ids, times, failed, ended, spans))

    def _counts(
        self,
        clip_ids: torch.Tensor,
        times: torch.Tensor,
        failed: torch.Tensor,
        ended: torch.Tensor,
        spans: torch.Tensor,
    ) -> torch.Tensor:
        """Failures and exposure per bin ``[2, C, Bmax]`` of one batch of rows, those where ``ended`` counted: an
        episode that ended at ``t`` after ``span`` seconds covered ``[max(0, t - span), t]`` of its clip (a wrapped
        clip's earlier loops are not counted)."""
        dtype = self.stats.dtype
        failed = (failed & ended).to(dtype)
        fails = torch.zeros_like(self.base).view(-1).index_add(0, self.bin_of(clip_ids, times), failed)
        end = times.clamp(min=0.0).unsqueeze(-1)
        begin = (times - spans).clamp(min=0.0).unsqueeze(-1)
        overlap = torch.minimum(end, self._edges + self.bin_duration) - torch.maximum(begin, self._edges)
        overlap = overlap.clamp(min=0.0) * ended.to(dtype).unsqueeze(-1) * self.valid[clip_ids]  # [n, Bmax]
        exposure = torch.zeros_like(self.base).index_add(0, clip_ids, overlap)
        return torch.stack((fails.view_as(self.base), exposure))

    def weights(self, stats: torch.Tensor | None = None) -> torch.Tensor:
        """Each bin's failure weight ``[C, Bmax]``: the failure rate (failures per second of exposure; 0 where
        nothing was seen) or the failure count (``cfg.weighting``)."""
        stats = self.stats if stats is None else stats
        if self.cfg.weighting == "count":
            return stats[0]
        return stats[0] / stats[1].clamp(min=1e-6) * (stats[1] > 1e-6)

    def probabilities(self, stats: torch.Tensor | None = None) -> torch.Tensor:
        """Sampling probability ``[C, Bmax]`` (zero on bins past a clip's end), from ``stats`` (default: the sampler's
        own EMAs)."""
        stats = self.stats if stats is None else stats
        w = self.weights(stats)
        gathered = torch.gather(w.unsqueeze(1).expand(-1, self.max_bins, -1), 2, self._kernel_index)
        smoothed = (gathered * self.kernel).sum(-1) * self.valid * self.clip_weights.unsqueeze(1)  # [C, Bmax]
        if self.cfg.clip_balance == "rate" and self.base.shape[0] > 1:
            failure_part = self._balanced(smoothed, stats)
        else:
            total = smoothed.sum()
            failure_part = torch.where(total > 0, smoothed / total.clamp(min=1e-12), self.base)
        return self.uniform_ratio * self.base + (1.0 - self.uniform_ratio) * failure_part

    def _balanced(self, smoothed: torch.Tensor, stats: torch.Tensor) -> torch.Tensor:
        """The failure part with ``clip_balance="rate"``: clip ``c`` gets ``w_c r_c / sum(w r)`` (``r_c``: its failures
        per second of exposure; the clip weights where no clip failed), spread over its bins as ``smoothed`` (its base
        where it has no failure)."""
        within = smoothed.sum(1, keepdim=True)  # [C, 1]
        spread = torch.where(within > 0, smoothed / within.clamp(min=1e-12), self.base / self.base.sum(1, keepdim=True))
        exposure = stats[1].sum(1)
        rate = stats[0].sum(1) / exposure.clamp(min=1e-6) * (exposure > 1e-6)  # [C]
        share = rate * self.clip_weights
        total = share.sum()
        clip_share = torch.where(total > 0, share / total.clamp(min=1e-12), self.clip_weights)
        return clip_share.unsqueeze(1) * spread

    def sample_from(self, u: torch.Tensor, stats: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(clip ids, times) from uniform numbers ``u`` ``[n, 2]`` in [0, 1): column 0 picks a bin by inverse CDF
        (probabilities from ``stats``, default the sampler's own), column 1 the time inside it (pure)."""
        flat = inverse_cdf(self.probabilities(stats).reshape(-1), u[:, 0])
        clip_ids = flat // self.max_bins
        b = flat % self.max_bins
        times = torch.minimum((b.float() + u[:, 1]) * self.bin_duration, self.durations[clip_ids])
        return clip_ids, times

    def entropy(self) -> float:
        """Entropy of the sampling distribution divided by its maximum (1.0 = uniform over bins)."""
        p = self.probabilities()[self.valid]
        h = -(p * torch.log(p.clamp(min=1e-12))).sum()
        return float(h / math.log(max(2, p.numel())))

    def stats_scalars(self) -> dict[str, float]:
        """``sampler/*`` scalars for the logs: the normalized entropy (1.0 = uniform over bins), the probability of the
        most likely bin, and that bin's clip and start time (s): where training starts its episodes. With several
        clips, per clip ``c`` (in the order of the motions) also its share of the starts (``start_share/clip<c>``), of
        the seconds of motion that ended episodes spent in it (``time_share/clip<c>``, the exposure EMA) and its
        failures per second of exposure (``failure_rate/clip<c>``)."""
        clip, b, prob = self.top_bin()
        scalars = {
            "sampler/entropy": self.entropy(),
            "sampler/top_bin_probability": prob,
            "sampler/top_bin_clip": float(clip),
            "sampler/top_bin_time_s": b * self.bin_duration,
        }
        if self.base.shape[0] > 1:
            exposure, failures = self.stats[1].sum(1), self.stats[0].sum(1)
            columns = torch.stack(
                (
                    self.probabilities().sum(1),
                    exposure / exposure.sum().clamp(min=1e-12),
                    failures / exposure.clamp(min=1e-6) * (exposure > 1e-6),
                )
            ).tolist()
            for name, values in zip(("start_share", "time_share", "failure_rate"), columns, strict=True):
                scalars.update({f"sampler/{name}/clip{c}": v for c, v in enumerate(values)})
        return scalars

    def top_bin(self) -> tuple[int, int, float]:
        """(clip id, bin index, probability) of the most likely bin."""
        p = self.probabilities()
        flat = int(p.reshape(-1).argmax())
        return flat // self.max_bins, flat % self.max_bins, float(p.reshape(-1)[flat])
