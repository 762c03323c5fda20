"""Split a time-major rollout into trajectories or truncated-BPTT sequences, and pad them for recurrent updates.

Everything works on index tables, never on per-env Python loops: a sequence is ``(env, start, length,
loss_offset)`` in rollout coordinates, and a mini-batch is an index tensor ``[L, B]`` into the flattened ``[T * N]``
rollout (flat index ``t * N + n``) plus a validity mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch

__all__ = [
    "SequenceMode",
    "SequenceTable",
    "build_sequences",
    "pad_indices",
    "split_and_pad_trajectories",
    "trajectory_starts",
    "unpad_trajectories",
]


class SequenceMode(str, Enum):
    """How trajectories are cut into sequences for truncated BPTT.

    - ``TRAJECTORY``: one sequence per trajectory inside the rollout (no truncation).
    - ``CHUNKED``: consecutive, non-overlapping windows of ``max_seq_len`` steps; every step is in exactly one.
    - ``FIFTY_PERCENT_OVERLAPPING``: windows of ``max_seq_len`` that start every ``max_seq_len // 2`` steps. The
      first half of every window after a trajectory's first is burn-in (context only): the loss mask covers each
      step exactly once, and each step after the first window sees at least half a window of context.
    - ``MAXIMUM``: one window per step that ends at that step with the maximum history available (up to
      ``max_seq_len`` steps back to the trajectory start); the loss mask covers only its last step.
    """

    TRAJECTORY = "trajectory"
    CHUNKED = "chunked"
    FIFTY_PERCENT_OVERLAPPING = "fifty_percent_overlapping"
    MAXIMUM = "maximum"


@dataclass
class SequenceTable:
    """Sequences of a rollout: each is ``length`` steps of env ``env`` from step ``start``.

    ``loss_offset`` is the first step (relative to ``start``) that the loss should count; steps before it are
    context. All tensors are ``[S]`` int64.
    """

    env: torch.Tensor
    start: torch.Tensor
    length: torch.Tensor
    loss_offset: torch.Tensor
    max_len: int

    def __len__(self) -> int:
        return int(self.env.shape[0])


def trajectory_starts(dones: torch.Tensor) -> torch.Tensor:
    """Bool ``[T, N]``: step t of env n begins a trajectory (t = 0, or the env was done at t - 1)."""
    dones = dones.reshape(dones.shape[0], dones.shape[1]).to(torch.bool)
    first = torch.zeros_like(dones)
    first[0] = True
    first[1:] = dones[:-1]
    return first


def _trajectories(dones: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Trajectories in env-major order: ``(env, start, length)``."""
    num_steps = dones.shape[0]
    first = trajectory_starts(dones).transpose(0, 1)  # [N, T], env-major order
    env, start = first.nonzero(as_tuple=True)
    # The next trajectory of the same env starts where this one ends; the last one ends at the rollout end.
    next_start = torch.full_like(start, num_steps)
    same_env = env[1:] == env[:-1]
    next_start[:-1] = torch.where(same_env, start[1:], next_start[:-1])
    return env, start, next_start - start


def _windows(length: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Repeat-interleave helper: for per-trajectory counts, the owning trajectory and the window's rank within it."""
    owner = torch.repeat_interleave(torch.arange(length.shape[0], device=length.device), count)
    first_of_owner = torch.cumsum(count, 0) - count
    rank = torch.arange(owner.shape[0], device=length.device) - first_of_owner[owner]
    return owner, rank


def build_sequences(
    dones: torch.Tensor, mode: SequenceMode | str = SequenceMode.TRAJECTORY, max_seq_len: int | None = None
) -> SequenceTable:
    """Cut the rollout described by ``dones`` (``[T, N]`` or ``[T, N, 1]``) into sequences (see ``SequenceMode``)."""
    mode = SequenceMode(mode)
    num_steps = dones.shape[0]
    env, start, length = _trajectories(dones)
    if mode is SequenceMode.TRAJECTORY:
        return SequenceTable(env, start, length, torch.zeros_like(start), num_steps)
    if max_seq_len is None or int(max_seq_len) < 1:
        raise ValueError(f"sequence mode {mode.value!r} needs max_seq_len >= 1, got {max_seq_len!r}")
    window = int(min(max_seq_len, num_steps))
    if mode is SequenceMode.CHUNKED:
        count = (length + window - 1) // window
        owner, rank = _windows(length, count)
        offset = rank * window
        seq_len = torch.clamp(length[owner] - offset, max=window)
        loss_offset = torch.zeros_like(offset)
    elif mode is SequenceMode.FIFTY_PERCENT_OVERLAPPING:
        stride = max(1, window // 2)
        extra = torch.clamp(length - window, min=0)
        count = 1 + (extra + stride - 1) // stride
        owner, rank = _windows(length, count)
        offset = rank * stride
        seq_len = torch.clamp(length[owner] - offset, max=window)
        loss_offset = torch.where(rank > 0, torch.full_like(rank, window - stride), torch.zeros_like(rank))
    else:  # MAXIMUM
        owner, rank = _windows(length, length)
        offset = torch.clamp(rank - window + 1, min=0)
        seq_len = rank - offset + 1
        loss_offset = seq_len - 1
    return SequenceTable(env[owner], start[owner] + offset, seq_len, loss_offset, window)


def pad_indices(
    table: SequenceTable, select: torch.Tensor, num_envs: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Index tensor ``[L, B]`` into the flat rollout for sequences ``select``, with the validity and loss masks.

    Padded positions point at flat index 0 and are False in both masks; ``L`` is ``table.max_len`` so that no
    device sync is needed per mini-batch.
    """
    env, start, length, loss_offset = (x[select] for x in (table.env, table.start, table.length, table.loss_offset))
    steps = torch.arange(table.max_len, device=env.device).unsqueeze(1)  # [L, 1]
    valid = steps < length.unsqueeze(0)
    index = torch.where(valid, (start.unsqueeze(0) + steps) * num_envs + env.unsqueeze(0), 0)
    loss_mask = valid & (steps >= loss_offset.unsqueeze(0))
    return index, valid, loss_mask


def split_and_pad_trajectories(tensor: torch.Tensor, dones: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``[T, N, ...]`` at episode ends into trajectories padded with zeros to ``[T, num_traj, ...]``.

    Trajectories are in env-major order (all of env 0, then env 1, ...), as in rsl_rl. Returns the padded tensor
    and the ``[T, num_traj]`` bool mask of valid steps.
    """
    num_steps, num_envs = tensor.shape[0], tensor.shape[1]
    table = build_sequences(dones, SequenceMode.TRAJECTORY)
    index, valid, _ = pad_indices(table, torch.arange(len(table), device=tensor.device), num_envs)
    flat = tensor.reshape(num_steps * num_envs, *tensor.shape[2:])
    padded = flat.index_select(0, index.reshape(-1)).reshape(num_steps, len(table), *tensor.shape[2:])
    padded = padded * valid.reshape(*valid.shape, *([1] * (tensor.dim() - 2))).to(padded.dtype)
    return padded, valid


def unpad_trajectories(padded: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Inverse of ``split_and_pad_trajectories`` for outputs: ``[T, num_traj, ...]`` back to ``[T, N, ...]``."""
    num_steps = masks.shape[0]
    flat = padded.transpose(0, 1)[masks.transpose(0, 1)]  # valid steps in env-major, time order
    return flat.reshape(-1, num_steps, *padded.shape[2:]).transpose(0, 1)
