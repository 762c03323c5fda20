"""Tracking metrics per env (the caller averages) and a device-side running accumulator.

Positions are in metres in, millimetres out for the MPJPE family; joint errors are in rad and rad/s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from mimic_rl.tasks.tracking.state import BodyState

__all__ = [
    "TrackingMetrics",
    "end_effector_error",
    "joint_position_error",
    "joint_velocity_rms_error",
    "mpjpe",
    "root_relative_mpjpe",
    "tracking_metrics",
]


def mpjpe(ref_body_pos_w: torch.Tensor, body_pos_w: torch.Tensor) -> torch.Tensor:
    """Global mean per-joint (body) position error in millimetres; ``[N, B, 3]`` -> ``[N]``."""
    return (ref_body_pos_w - body_pos_w).norm(dim=-1).mean(-1) * 1000.0


def root_relative_mpjpe(ref_body_pos_w: torch.Tensor, body_pos_w: torch.Tensor, root: int) -> torch.Tensor:
    """MPJPE in millimetres after subtracting each skeleton's own ``root`` body position; ``[N, B, 3]`` -> ``[N]``."""
    ref = ref_body_pos_w - ref_body_pos_w[..., root : root + 1, :]
    pos = body_pos_w - body_pos_w[..., root : root + 1, :]
    return mpjpe(ref, pos)


def joint_position_error(ref_q: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Mean absolute joint position error in rad; ``[N, J]`` -> ``[N]``."""
    return (ref_q - q).abs().mean(-1)


def joint_velocity_rms_error(ref_qd: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
    """Root-mean-square joint velocity error over joints in rad/s; ``[N, J]`` -> ``[N]``."""
    return (ref_qd - qd).square().mean(-1).sqrt()


def end_effector_error(ref_ee_pos_w: torch.Tensor, ee_pos_w: torch.Tensor) -> torch.Tensor:
    """Mean Euclidean end-effector position error in millimetres; ``[N, E, 3]`` -> ``[N]``."""
    return mpjpe(ref_ee_pos_w, ee_pos_w)


def tracking_metrics(
    robot: BodyState, ref: BodyState, root: int, ee_indices: Sequence[int] | torch.Tensor
) -> dict[str, torch.Tensor]:
    """All per-env metrics of this module, ``{name: [N]}``, for bodies listed alike in ``robot`` and ``ref``.

    Keys: ``global_mpjpe_mm`` (world frame), ``root_mpjpe_mm`` (root-relative), ``joint_pos_error``,
    ``joint_vel_rms_error`` and, with end effectors, ``ee_error_mm``.
    """
    out = {
        "global_mpjpe_mm": mpjpe(ref.body_pos_w, robot.body_pos_w),
        "root_mpjpe_mm": root_relative_mpjpe(ref.body_pos_w, robot.body_pos_w, root),
        "joint_pos_error": joint_position_error(ref.joint_pos, robot.joint_pos),
        "joint_vel_rms_error": joint_velocity_rms_error(ref.joint_vel, robot.joint_vel),
    }
    if len(ee_indices) > 0:
        out["ee_error_mm"] = end_effector_error(
            ref.body_pos_w[..., ee_indices, :], robot.body_pos_w[..., ee_indices, :]
        )
    return out


class TrackingMetrics:
    """Running means of per-env metrics and the episode success rate, accumulated on the device without syncs.

    ``update`` adds masked per-env values, ``add_sums`` precomputed per-key sums (one tensor op either way; sums and
    counts are float64 tensors per key set); ``episode_end`` counts ended episodes and successes (an episode succeeds
    when it ends by time-out, i.e. the clip ran out, and not by a termination); ``summary`` reads everything back in
    one host transfer.
    """

    def __init__(self, device: torch.device | str | None = None) -> None:
        """Create an empty accumulator; the device defaults to that of the first tensors passed in."""
        self.device = torch.device(device) if device is not None else None
        self.reset()

    def reset(self) -> None:
        """Forget all sums, counts and episodes."""
        self._groups: dict[tuple[str, ...], tuple[torch.Tensor, torch.Tensor]] = {}
        self._episodes: torch.Tensor | None = None
        """(episodes, successes), float64."""

    def _zero(self, like: torch.Tensor, *shape: int) -> torch.Tensor:
        if self.device is None:
            self.device = like.device
        return torch.zeros(shape, dtype=torch.float64, device=self.device)

    def add_sums(self, keys: Sequence[str], sums: torch.Tensor, counts: torch.Tensor | float) -> None:
        """Accumulate ``sums`` ``[K]`` of the metrics ``keys`` over ``counts`` envs (a number, or ``[K]``)."""
        keys = tuple(keys)
        if keys not in self._groups:
            self._groups[keys] = (self._zero(sums, len(keys)), self._zero(sums, len(keys)))
        total, count = self._groups[keys]
        total += sums
        count += counts

    def update(self, values: Mapping[str, torch.Tensor], mask: torch.Tensor | None = None) -> None:
        """Accumulate per-env values ``{name: [N]}``; only envs where ``mask`` (bool ``[N]``) is true count."""
        if not values:
            return
        stacked = torch.stack([v.detach() for v in values.values()]).to(torch.float64)  # [K, N]
        if mask is None:
            self.add_sums(values.keys(), stacked.sum(-1), float(stacked.shape[-1]))
        else:
            self.add_sums(values.keys(), torch.where(mask, stacked, 0.0).sum(-1), mask.sum())

    def episode_end(self, terminated: torch.Tensor, timed_out: torch.Tensor) -> None:
        """Count the episodes that end now (bool ``[N]`` each); success = timed out and not terminated."""
        ended = (terminated | timed_out).sum()
        self.add_episodes(torch.stack((ended, (timed_out & ~terminated).sum())).to(torch.float64))

    def add_episodes(self, counts: torch.Tensor) -> None:
        """Add ``counts`` ``[2]``: (episodes ended, successes among them), e.g. computed inside a compiled step."""
        if self._episodes is None:
            self._episodes = self._zero(counts, 2)
        self._episodes += counts

    def summary(self) -> dict[str, float]:
        """Means per key, ``success_rate`` and ``episodes`` (one host sync); NaN where nothing was counted."""
        if self.device is None:  # nothing was ever added
            return {"success_rate": math.nan, "episodes": 0.0}
        parts = [t for pair in self._groups.values() for t in pair]
        parts += [
            self._episodes if self._episodes is not None else torch.zeros(2, dtype=torch.float64, device=self.device)
        ]
        host = torch.cat(parts).cpu().tolist()
        sums: dict[str, float] = {}
        counts: dict[str, float] = {}
        i = 0
        for keys in self._groups:
            k = len(keys)
            for j, key in enumerate(keys):
                sums[key] = sums.get(key, 0.0) + host[i + j]
                counts[key] = counts.get(key, 0.0) + host[i + k + j]
            i += 2 * k
        out = {key: sums[key] / counts[key] if counts[key] > 0 else math.nan for key in sums}
        episodes, successes = host[i], host[i + 1]
        out["success_rate"] = successes / episodes if episodes > 0 else math.nan
        out["episodes"] = episodes
        return out
