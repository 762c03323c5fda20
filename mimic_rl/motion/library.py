"""MotionLibrary: many clips concatenated on one device, sampled and interpolated for N envs at once.

Times are in seconds from each clip's start. A clip spans ``[0, duration]`` with ``duration = (T - 1) / fps``; in
``clamp`` mode times outside are clamped (the last frame is held), in ``wrap`` mode they wrap around (the last frame
is taken to equal the first). States between frames are interpolated: lerp for positions and velocities, slerp for
rotations; at a frame time the frame is returned exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch

from mimic_rl.motion.adaptive import AdaptiveSampler, AdaptiveSamplingConfig, inverse_cdf
from mimic_rl.motion.clip import LOOP_MODES, MotionClip, MotionFormatError
from mimic_rl.motion.state import BodyState
from mimic_rl.rotations import quat_slerp

__all__ = ["SAMPLING_MODES", "MotionLibrary"]

SAMPLING_MODES = ("start", "uniform", "adaptive")


def _check_clips(clips: Sequence[MotionClip], loop_mode: str | None) -> None:
    """Clips a library can hold together: at least one, each valid, all with the first one's joints and bodies."""
    if not clips:
        raise ValueError("MotionLibrary needs at least one clip")
    first = clips[0]
    for clip in clips:
        clip.validate()
        where = clip.metadata.get("source", "<memory>")
        if clip.joint_names != first.joint_names:
            raise MotionFormatError(
                f"{where}: joint_names: expected {first.joint_names} (as the first clip), found {clip.joint_names}"
            )
        if clip.body_names != first.body_names:
            raise MotionFormatError(
                f"{where}: body_names: expected {first.body_names} (as the first clip), found {clip.body_names}"
            )
    if loop_mode is not None and loop_mode not in LOOP_MODES:
        raise ValueError(f"loop_mode must be one of {LOOP_MODES}, got {loop_mode!r}")


class MotionLibrary:
    """Clips with identical joint and body names, concatenated; vectorized sampling and interpolation."""

    def __init__(
        self,
        clips: Sequence[MotionClip],
        device: str | torch.device = "cpu",
        weights: Sequence[float] | None = None,
        loop_mode: str | None = None,
        adaptive: AdaptiveSamplingConfig | None = None,
    ) -> None:
        _check_clips(clips, loop_mode)
        self.device = torch.device(device)
        self.clips = list(clips)
        self.joint_names = list(clips[0].joint_names)
        self.body_names = list(clips[0].body_names)
        self._build_frame_table()
        self._build_clip_tables(loop_mode)
        w = torch.ones(len(clips)) if weights is None else torch.as_tensor(weights, dtype=torch.float32)
        if w.shape != (len(clips),) or not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or float(w.sum()) <= 0:
            raise ValueError(f"weights: expected {len(clips)} non-negative numbers with a positive sum, got {weights}")
        self.clip_weights = w.to(self.device)
        self.clip_names = [Path(str(clip.metadata.get("source", "clip"))).stem for clip in self.clips]
        """Each clip's name: its source file's stem (per-clip evaluations and the sampler's saved statistics)."""
        self.adaptive = AdaptiveSampler(self.clip_duration, self.clip_weights, adaptive, self.clip_names)

    def _build_frame_table(self) -> None:
        """Every frame of every clip as one row of all its fields side by side (interpolation: one gather per end
        point), with ``[F, ...]`` views per field, e.g. ``library.body_pos_w``."""
        first = self.clips[0]
        j, b = first.num_joints, first.num_bodies
        self._shapes = {
            "joint_pos": (j,),
            "joint_vel": (j,),
            "body_pos_w": (b, 3),
            "body_quat_w": (b, 4),
            "body_lin_vel_w": (b, 3),
            "body_ang_vel_w": (b, 3),
        }
        widths = {name: math.prod(shape) for name, shape in self._shapes.items()}
        parts = [torch.cat([torch.from_numpy(getattr(c, name)) for c in self.clips]) for name in widths]
        self._frames = torch.cat([p.reshape(-1, w) for p, w in zip(parts, widths.values())], dim=1).to(self.device)
        self._columns: dict[str, slice] = {}
        start = 0
        for name, w in widths.items():
            self._columns[name] = slice(start, start + w)
            start += w
        self._subsets: dict[tuple[int, ...], tuple[torch.Tensor, dict[str, slice], dict[str, tuple]]] = {}
        for name in widths:
            setattr(self, name, self._frames[:, self._columns[name]].view(-1, *self._shapes[name]))

    def _build_clip_tables(self, loop_mode: str | None) -> None:
        """Per clip: frame count, first row, fps, duration, whether it wraps, and ``_frame_index``'s one-row table."""
        dev = self.device
        frames = torch.tensor([c.num_frames for c in self.clips], dtype=torch.long)
        self.clip_frames = frames.to(dev)
        self.clip_start = (torch.cumsum(frames, 0) - frames).to(dev)
        self.clip_fps = torch.tensor([c.fps for c in self.clips], dtype=torch.float64, device=dev)
        self.clip_duration = ((frames.to(torch.float64).to(dev) - 1) / self.clip_fps).to(torch.float32)
        modes = [loop_mode or c.loop_mode for c in self.clips]
        self.clip_wrap = torch.tensor([m == "wrap" for m in modes], dtype=torch.bool, device=dev)
        # what _frame_index reads of a clip, in one float64 row (one gather per call, not six): duration, the
        # remainder's period, fps, whether it wraps, the last frame and the first row in the frame table
        self._index_table = torch.stack(
            (
                self.clip_duration.to(torch.float64),
                self.clip_duration.to(torch.float64).clamp(min=1e-9),
                self.clip_fps,
                self.clip_wrap.to(torch.float64),
                (self.clip_frames - 1).to(torch.float64),
                self.clip_start.to(torch.float64),
            ),
            dim=-1,
        )
        self._any_wrap = bool(self.clip_wrap.any())

    @property
    def num_clips(self) -> int:
        """Number of clips."""
        return len(self.clips)

    # ------------------------------------------------------------------ sampling
    def sample(
        self, num: int, mode: str = "uniform", generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``num`` (clip ids, times in seconds), each ``[num]``; mode ``start`` (t = 0), ``uniform`` or ``adaptive``."""
        self.check_sampling_mode(mode)
        return self.sample_from(torch.rand(num, 2, device=self.device, generator=generator), mode)

    def check_sampling_mode(self, mode: str) -> None:
        """Raise ``ValueError`` unless ``mode`` is one of ``SAMPLING_MODES``."""
        if mode not in SAMPLING_MODES:
            raise ValueError(f"sampling mode must be one of {SAMPLING_MODES}, got {mode!r}")

    def sample_from(
        self, u: torch.Tensor, mode: str, stats: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(clip ids, times) from uniform numbers ``u`` ``[n, 2]`` in [0, 1), as ``sample`` draws them (a pure
        function of fixed shapes); in ``adaptive`` mode from the sampler's EMAs ``stats`` (default: its own)."""
        if mode == "adaptive":
            return self.adaptive.sample_from(u, stats)
        clip_ids = inverse_cdf(self.clip_weights, u[:, 0])
        if mode == "start":
            return clip_ids, torch.zeros_like(u[:, 1])
        return clip_ids, u[:, 1] * self.clip_duration[clip_ids]

    def record_episode_ends(
        self, clip_ids: torch.Tensor, times: torch.Tensor, failed: torch.Tensor, spans: torch.Tensor
    ) -> None:
        """Feed the adaptive sampler episodes that ended at motion ``times`` after ``spans`` seconds of motion (the
        ``failed`` ones by a termination), then update its EMAs."""
        self.adaptive.record(clip_ids, times, failed, spans)
        self.adaptive.update()

    # ------------------------------------------------------------------ interpolation
    def _frame_index(
        self, clip_ids: torch.Tensor, times: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Frame-table rows of the frames on either side of each (clip, time), and the weight of the second."""
        eps = torch.finfo(times.dtype).eps if times.is_floating_point() else 0.0
        duration, period, fps, wrap, last, start = self._index_table.index_select(0, clip_ids).unbind(-1)
        t = times.to(torch.float64)
        clamped = t.clamp(min=0.0).minimum(duration)
        t = torch.where(wrap > 0, torch.remainder(t, period), clamped) if self._any_wrap else clamped
        x = t * fps
        nearest = torch.round(x)
        # a frame time given in float32 is a few ulps off the frame: snap it, so that frames come back exactly
        tolerance = (t.abs().clamp(min=1.0) * fps).mul(4.0 * eps).clamp(min=1e-9)
        x = torch.where((x - nearest).abs() <= tolerance, nearest, x)
        f0 = torch.floor(x).minimum(last)  # frame numbers are exact in float64
        alpha = (x - f0).to(torch.float32)
        f1 = (f0 + 1.0).minimum(last)
        return (start + f0).long(), (start + f1).long(), alpha

    def _table(self, bodies: Sequence[int] | None) -> tuple[torch.Tensor, dict[str, slice], dict[str, tuple]]:
        """The packed frame table (and its column layout) restricted to ``bodies``; built once per subset."""
        if bodies is None:
            return self._frames, self._columns, self._shapes
        key = tuple(int(b) for b in bodies)
        if key not in self._subsets:
            j, nb = self._shapes["joint_pos"][0], len(key)
            cols: list[int] = list(range(self._columns["joint_pos"].start, self._columns["joint_vel"].stop))
            columns = {"joint_pos": slice(0, j), "joint_vel": slice(j, 2 * j)}
            shapes = {"joint_pos": (j,), "joint_vel": (j,)}
            for name in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
                width = self._shapes[name][1]
                start = self._columns[name].start
                columns[name] = slice(len(cols), len(cols) + nb * width)
                shapes[name] = (nb, width)
                cols += [start + b * width + c for b in key for c in range(width)]
            frames = self._frames[:, torch.tensor(cols, device=self.device)].contiguous()
            self._subsets[key] = (frames, columns, shapes)
        return self._subsets[key]

    def state(self, clip_ids: torch.Tensor, times: torch.Tensor, bodies: Sequence[int] | None = None) -> BodyState:
        """Interpolated reference state of each (clip, time) pair, leading shape that of ``clip_ids``; with
        ``bodies`` (indices into ``body_names``), only those bodies, in that order (less work; ``()``: joints only)."""
        f0, f1, a = self._frame_index(clip_ids.reshape(-1), times.reshape(-1))
        return self._interpolate(self._table(bodies), f0, f1, a, tuple(clip_ids.shape))

    def _interpolate(
        self,
        table: tuple[torch.Tensor, dict[str, slice], dict[str, tuple]],
        f0: torch.Tensor,
        f1: torch.Tensor,
        a: torch.Tensor,
        lead: tuple[int, ...],
    ) -> BodyState:
        """The rows of ``table`` between frame rows ``f0`` and ``f1`` at weight ``a`` (``[M]`` each), as a state of
        leading shape ``lead``: fields interpolated linearly, orientations by slerp, exact at frame times."""
        frames, columns, shapes = table
        x0, x1 = frames.index_select(0, f0), frames.index_select(0, f1)
        w = a.unsqueeze(-1)
        rows = x0 + w * (x1 - x0)  # lerp; exactly the frame at a frame time (w = 0: x0 + 0 for finite rows)
        quat = columns["body_quat_w"]
        nb = shapes["body_quat_w"][0]
        if nb > 0:  # bodies=() asks for the joints alone
            q0, q1 = x0[:, quat].view(-1, nb, 4), x1[:, quat].view(-1, nb, 4)
            slerped = quat_slerp(q0, q1, a.unsqueeze(-1).expand(-1, nb))
            rows[:, quat] = torch.where((w == 0).unsqueeze(-1), q0, slerped).reshape(-1, 4 * nb)
        fields = {name: rows[:, cols].reshape(*lead, *shapes[name]) for name, cols in columns.items()}
        return BodyState(**fields)

    def future_states(
        self, clip_ids: torch.Tensor, times: torch.Tensor, offsets: torch.Tensor, bodies: Sequence[int] | None = None
    ) -> BodyState:
        """States at ``times + offsets`` for K offsets (seconds), leading shape ``[N, K]`` (``bodies`` as in
        ``state``)."""
        ids, at = self._future_times(clip_ids, times, offsets)
        return self.state(ids, at, bodies)

    def _future_times(
        self, clip_ids: torch.Tensor, times: torch.Tensor, offsets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(clip ids, times + offsets)``, both ``[N, K]``, for K offsets (seconds)."""
        offsets = torch.as_tensor(offsets, dtype=torch.float32, device=self.device).reshape(1, -1)
        n, k = clip_ids.shape[0], offsets.shape[1]
        return clip_ids.reshape(-1, 1).expand(n, k), times.reshape(-1, 1) + offsets

    def state_and_future(
        self,
        clip_ids: torch.Tensor,
        times: torch.Tensor,
        offsets: torch.Tensor,
        bodies: Sequence[int] | None = None,
        future_bodies: Sequence[int] | None = None,
    ) -> tuple[BodyState, BodyState]:
        """``state(clip_ids, times, bodies)`` ``[N]`` and ``future_states(clip_ids, times, offsets, future_bodies)``
        ``[N, K]`` (the same values), with one frame lookup for both."""
        future_ids, future_at = self._future_times(clip_ids, times, offsets)
        n, k = future_ids.shape
        ids = torch.cat((clip_ids.reshape(-1, 1), future_ids), dim=1).reshape(-1)
        at = torch.cat((times.reshape(-1, 1), future_at), dim=1).reshape(-1)
        f0, f1, a = (x.view(n, k + 1) for x in self._frame_index(ids, at))
        now = self._interpolate(self._table(bodies), f0[:, 0], f1[:, 0], a[:, 0], (n,))
        future = self._interpolate(
            self._table(future_bodies), f0[:, 1:].reshape(-1), f1[:, 1:].reshape(-1), a[:, 1:].reshape(-1), (n, k)
        )
        return now, future

    def frame_offsets(self, num_frames: int, stride: int = 1, fps: float | None = None) -> torch.Tensor:
        """Offsets (seconds) of ``num_frames`` future frames, ``stride`` frames apart at ``fps`` (default: clip 0's)."""
        fps = float(self.clip_fps[0]) if fps is None else fps
        return torch.arange(num_frames, device=self.device, dtype=torch.float32) * (stride / fps)
