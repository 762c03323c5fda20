"""Tiny pure-torch environments for tests: fast, vectorized, deterministic, on cpu or cuda.

``PointMassTrackingEnv``: N point masses in D dims track a per-env sinusoidal reference trajectory. The policy
observation alone does not say where the reference is, so a policy must read the ``reference`` group; a small MLP
PPO learns it in seconds. The AMP helpers (``amp_obs_extractor``, ``amp_reference_extractor``,
``PointMassTrackingEnv.sample_expert_pairs``) expose velocities as the AMP state features.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import TensorDict

__all__ = ["PointMassTrackingEnv", "amp_obs_extractor", "amp_reference_extractor"]

REWARD_SCALE = 0.05  # reward = exp(-|pos - ref_pos|^2 / REWARD_SCALE)
INIT_NOISE_STD = 0.05
AMPLITUDE_RANGE = (0.2, 0.5)
OMEGA_RANGE = (0.5, 2.0)  # rad/s
CENTRE_RANGE = (-1.0, 1.0)


class PointMassTrackingEnv:
    """N first-order point masses in D dims that track a per-env reference ``c + A * sin(w * t * dt + phi)``.

    Dynamics: the action ``[N, D]`` is clipped to ``[-1, 1]`` and is a velocity command, ``vel = action_scale *
    clip(action)``, ``pos += vel * dt``. Reward ``exp(-|pos - ref_pos|^2 / 0.05)`` after the step; termination when
    ``|pos - ref_pos| > termination_distance``; truncation when ``episode_length_buf >= max_episode_length``.

    At every reset an env draws a new trajectory (centre in [-1, 1], amplitude in [0.2, 0.5], angular frequency in
    [0.5, 2] rad/s, phase in [0, 2 pi), a start time in [0, max_episode_length)), starts at ``ref_pos(start)`` plus
    noise (std 0.05) with zero velocity, and has its reference visible with probability ``reference_fraction``.

    The ``proprio`` group is a position sensor alone (``pos - c``, no velocity): a policy that reads it must infer
    velocities from its history. With ``action_gain_range``, each episode draws a hidden actuator gain g
    (``vel = action_scale * g * clip(action)``), shown only in the privileged ``critic`` group (its last column):
    a policy without it must infer g from its history.

    Masked envs (``reference_mask`` False): their reference observation rows are zeros, and their hidden target is
    to *stay at the start point*: the trajectory becomes the constant start position (centre = start position,
    amplitude 0, reference velocity 0). Reward, termination, ``tracking_error`` and the ``pos - c`` part of the
    policy observation all use that target, so the task stays well defined and learnable (act zero).

    ``extras["time_outs"]`` is ``truncated & ~terminated``: a step that is both ends in a real terminal state and
    must not bootstrap. Randomness comes only from the env's own generators (one for rollouts, one for
    ``sample_expert_pairs``, so sampling expert data never changes the rollouts); same seed, same rollouts.
    """

    def __init__(
        self,
        *,
        num_envs: int = 64,
        dim: int = 2,
        num_future_frames: int = 3,
        frame_stride: int = 1,
        dt: float = 0.05,
        max_episode_length: int = 100,
        reference_fraction: float = 1.0,
        action_scale: float = 1.0,
        action_gain_range: tuple[float, float] | None = None,
        termination_distance: float = 1.0,
        randomize_initial_episode_length: bool = False,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        for name, value in (
            ("num_envs", num_envs),
            ("dim", dim),
            ("num_future_frames", num_future_frames),
            ("frame_stride", frame_stride),
            ("max_episode_length", max_episode_length),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        for name, value in (("dt", dt), ("action_scale", action_scale), ("termination_distance", termination_distance)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if action_gain_range is not None and not 0.0 < action_gain_range[0] <= action_gain_range[1]:
            raise ValueError(f"action_gain_range must be (low, high) with 0 < low <= high, got {action_gain_range!r}")
        if not 0.0 <= reference_fraction <= 1.0:
            raise ValueError(f"reference_fraction must be in [0, 1], got {reference_fraction!r}")
        self.cfg: dict[str, Any] = {
            "num_envs": num_envs,
            "dim": dim,
            "num_future_frames": num_future_frames,
            "frame_stride": frame_stride,
            "dt": dt,
            "max_episode_length": max_episode_length,
            "reference_fraction": reference_fraction,
            "action_scale": action_scale,
            "action_gain_range": action_gain_range,
            "termination_distance": termination_distance,
            "randomize_initial_episode_length": randomize_initial_episode_length,
            "seed": seed,
        }
        self.num_envs = num_envs
        self.num_actions = dim
        self.dim = dim
        self.num_future_frames = num_future_frames
        self.frame_stride = frame_stride
        self.dt = float(dt)
        self.max_episode_length = max_episode_length
        self.reference_fraction = float(reference_fraction)
        self.action_scale = float(action_scale)
        self.action_gain_range = action_gain_range
        self.termination_distance = float(termination_distance)
        self.device = torch.device(device)
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._expert_generator = torch.Generator(device=self.device).manual_seed(seed + 7919)
        self._frame_offsets = torch.arange(num_future_frames, device=self.device) * frame_stride

        n, d, f32 = num_envs, dim, torch.float32
        self.pos = torch.zeros(n, d, dtype=f32, device=self.device)
        self.vel = torch.zeros(n, d, dtype=f32, device=self.device)
        self.centre = torch.zeros(n, d, dtype=f32, device=self.device)
        self.amplitude = torch.zeros(n, d, dtype=f32, device=self.device)
        self.omega = torch.zeros(n, d, dtype=f32, device=self.device)
        self.phase = torch.zeros(n, d, dtype=f32, device=self.device)
        self.start_time = torch.zeros(n, dtype=torch.long, device=self.device)
        self.reference_mask = torch.zeros(n, dtype=torch.bool, device=self.device)
        self.action_gain = torch.ones(n, 1, dtype=f32, device=self.device)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=self.device)
        self._reset(torch.ones(n, dtype=torch.bool, device=self.device))
        if randomize_initial_episode_length:
            lengths = self._randint(0, max_episode_length, (n,))
            self.episode_length_buf = lengths
            self.start_time = self.start_time - lengths  # keeps the reference time where the start state was drawn

    # ------------------------------------------------------------------ public API
    def get_observations(self) -> TensorDict:
        """Return the current observation groups (batch size ``[N]``)."""
        return self._compute_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Apply velocity commands ``[N, D]``; return ``(obs, rewards [N] f32, dones [N] bool, extras)``, see VecEnv."""
        if actions.shape != (self.num_envs, self.dim):
            raise ValueError(f"actions: expected shape {(self.num_envs, self.dim)}, got {tuple(actions.shape)}")
        actions = actions.to(device=self.device, dtype=torch.float32)
        self.vel = self.action_scale * self.action_gain * actions.clamp(-1.0, 1.0)
        self.pos = self.pos + self.vel * self.dt
        self.episode_length_buf = self.episode_length_buf + 1

        error = self.tracking_error()
        rewards = torch.exp(-error.square() / REWARD_SCALE)
        terminated = error > self.termination_distance
        truncated = self.episode_length_buf >= self.max_episode_length
        dones = terminated | truncated
        final_observations = self._compute_observations()
        self._reset(dones)
        extras = {
            "time_outs": truncated & ~terminated,
            "final_observations": final_observations,
            "log": {
                "tracking_error": error.mean(),
                "reward": rewards.mean(),
                "termination_rate": terminated.float().mean(),
            },
        }
        return self._compute_observations(), rewards, dones, extras

    def tracking_error(self) -> torch.Tensor:
        """``[N]`` distance between each point mass and its (possibly hidden) reference at the current time."""
        ref_pos, _ = self._reference(self.start_time + self.episode_length_buf)
        return (self.pos - ref_pos).norm(dim=-1)

    def sample_expert_pairs(self, num: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert AMP pairs ``(s_prev, s)``, each ``[num, D]``: reference velocities at steps t-1 and t.

        Trajectories are drawn from the same distribution as the env's references, with a generator of their own.
        """
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise ValueError(f"num must be an int >= 1, got {num!r}")
        gen, shape = self._expert_generator, (num, self.dim)
        amplitude = self._uniform(*AMPLITUDE_RANGE, shape, gen)
        omega = self._uniform(*OMEGA_RANGE, shape, gen)
        phase = self._uniform(0.0, 2.0 * math.pi, shape, gen)
        t = self._randint(1, 2 * self.max_episode_length, (num, 1), gen).float()
        s_prev = amplitude * omega * torch.cos(omega * (t - 1.0) * self.dt + phase)
        s = amplitude * omega * torch.cos(omega * t * self.dt + phase)
        return s_prev, s

    def observation_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-env shape of each observation group."""
        d, k = self.dim, self.num_future_frames
        return {
            "policy": (2 * d,),
            "reference": (k, 2 * d),
            "reference_mask": (),
            "critic": (2 * d + 1 + (self.action_gain_range is not None),),
            "proprio": (d,),
            "critic_reference": (k, 2 * d),
            "critic_reference_mask": (),
            "amp": (d,),
        }

    # ------------------------------------------------------------------ internals
    def _uniform(
        self, low: float, high: float, shape: tuple[int, ...], gen: torch.Generator | None = None
    ) -> torch.Tensor:
        u = torch.rand(shape, generator=self._generator if gen is None else gen, device=self.device)
        return low + (high - low) * u

    def _randint(self, low: int, high: int, shape: tuple[int, ...], gen: torch.Generator | None = None) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self._generator if gen is None else gen, device=self.device)

    def _reference(self, time: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference position and velocity at integer steps ``time`` (``[N]`` or ``[N, K]``) -> ``[..., D]`` each."""
        extra = time.dim() - 1
        view = (self.num_envs,) + (1,) * extra + (self.dim,)
        centre, amplitude = self.centre.view(view), self.amplitude.view(view)
        omega, phase = self.omega.view(view), self.phase.view(view)
        angle = omega * (time.unsqueeze(-1).float() * self.dt) + phase
        return centre + amplitude * torch.sin(angle), amplitude * omega * torch.cos(angle)

    def _reset(self, env_mask: torch.Tensor) -> None:
        """Reset the envs where ``env_mask`` ([N] bool) is set, without a host sync (draws for all, selects)."""
        shape = (self.num_envs, self.dim)
        centre = self._uniform(*CENTRE_RANGE, shape)
        amplitude = self._uniform(*AMPLITUDE_RANGE, shape)
        omega = self._uniform(*OMEGA_RANGE, shape)
        phase = self._uniform(0.0, 2.0 * math.pi, shape)
        start = self._randint(0, self.max_episode_length, (self.num_envs,))
        noise = INIT_NOISE_STD * torch.randn(shape, generator=self._generator, device=self.device)
        visible = torch.rand(self.num_envs, generator=self._generator, device=self.device) < self.reference_fraction
        angle = omega * (start.unsqueeze(-1).float() * self.dt) + phase
        pos = centre + amplitude * torch.sin(angle) + noise
        hidden = (~visible).unsqueeze(-1)
        centre = torch.where(hidden, pos, centre)  # masked envs: the target is to stay at the start point
        amplitude = torch.where(hidden, torch.zeros_like(amplitude), amplitude)

        rows = env_mask.unsqueeze(-1)
        if self.action_gain_range is not None:  # drawn only then, so other configurations keep their random streams
            gain = self._uniform(*self.action_gain_range, (self.num_envs, 1))
            self.action_gain = torch.where(rows, gain, self.action_gain)
        self.pos = torch.where(rows, pos, self.pos)
        self.vel = torch.where(rows, torch.zeros_like(self.vel), self.vel)
        self.centre = torch.where(rows, centre, self.centre)
        self.amplitude = torch.where(rows, amplitude, self.amplitude)
        self.omega = torch.where(rows, omega, self.omega)
        self.phase = torch.where(rows, phase, self.phase)
        self.start_time = torch.where(env_mask, start, self.start_time)
        self.reference_mask = torch.where(env_mask, visible, self.reference_mask)
        self.episode_length_buf = torch.where(
            env_mask, torch.zeros_like(self.episode_length_buf), self.episode_length_buf
        )

    def _compute_observations(self) -> TensorDict:
        times = (self.start_time + self.episode_length_buf).unsqueeze(-1) + self._frame_offsets  # [N, K]
        ref_pos, ref_vel = self._reference(times)
        reference = torch.cat((ref_pos - self.pos.unsqueeze(1), ref_vel), dim=-1)
        reference = torch.where(self.reference_mask.view(-1, 1, 1), reference, torch.zeros_like(reference))
        policy = torch.cat((self.vel, self.pos - self.centre), dim=-1)
        progress = (self.episode_length_buf.float() / self.max_episode_length).unsqueeze(-1)
        privileged = [self.action_gain] if self.action_gain_range is not None else []
        return TensorDict(
            {
                "policy": policy,
                "reference": reference,
                "reference_mask": self.reference_mask.clone(),
                "critic": torch.cat((policy, progress, *privileged), dim=-1),
                "proprio": self.pos - self.centre,
                "critic_reference": reference.clone(),
                "critic_reference_mask": self.reference_mask.clone(),
                "amp": self.vel.clone(),
            },
            batch_size=[self.num_envs],
            device=self.device,
        )


def amp_obs_extractor(obs: TensorDict) -> torch.Tensor:
    """AMP state features of policy observations: ``obs["amp"]`` (the velocity), for any batch shape."""
    return obs["amp"]


def amp_reference_extractor(pair: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """AMP features of reference observations: ``(reference [M, K, 2D], mask [M])`` -> ``(ref_vel(t) [M, D], mask)``.

    The current-time reference velocity, the same layout as ``amp_obs_extractor``; rows with a False mask are zeros.
    """
    reference, mask = pair
    d = reference.shape[-1] // 2
    return reference[..., 0, d:], mask
