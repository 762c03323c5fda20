"""Reference-state initialization on a MuJoCo model: where each env restarts, as pure functions of fixed shapes.

Shared by the backends whose robot is a MuJoCo model (the embedded env and mjlab's tracking command). Everything here
is computed from uniform numbers drawn once per step for every env (``draws``), so that the embedded env's compiled
step can include it: the library's sampler (by inverse CDF, adaptive included), the noisy reference state
as MuJoCo physics rows, the push timer, and the episode bookkeeping after the step's episode ends.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import torch

from mimic_rl.motion import MotionLibrary
from mimic_rl.rotations import quat_apply_inverse, quat_from_axis_angle, quat_mul
from mimic_rl.tasks.tracking import ResetSettings

__all__ = ["ReferenceStateInit"]


class ReferenceStateInit:
    """Noisy reference-state initialization for a robot model whose root is a free joint."""

    def __init__(
        self,
        cfg: ResetSettings,
        library: MotionLibrary,
        model: mujoco.MjModel,
        root_body: int,
        qpos_adr: Sequence[int],
        qvel_adr: Sequence[int],
        joint_limits: tuple[torch.Tensor, torch.Tensor],
        step_dt: float,
    ) -> None:
        """``root_body`` indexes the library's bodies; ``qpos_adr``/``qvel_adr`` are the actuated joints' addresses
        in the library's joint order; ``joint_limits`` (lower, upper) clamp the noisy joint positions; ``step_dt`` is
        the policy step (seconds of motion per step of an episode)."""
        self.cfg = cfg
        self.step_dt = float(step_dt)
        self.library = library
        dev = library.device
        self.num_joints = len(qpos_adr)
        self.width = 3 + 12 + 2 * self.num_joints + 1
        """Uniform numbers per env and step: 2 for the sampler, 1 for the push timer, 12 + 2 J for the noise, 1 for the
        choice of the clip's first frame."""
        self._root = [int(root_body)]
        self._qpos_cols = torch.tensor([*range(7), *np.asarray(qpos_adr).tolist()], device=dev)
        self._qvel_cols = torch.tensor([*range(6), *np.asarray(qvel_adr).tolist()], device=dev)
        self._qpos0 = torch.tensor(model.qpos0, dtype=torch.float64, device=dev)
        self._nv = int(model.nv)
        self.lower, self.upper = joint_limits

    def draws(self, num_envs: int, generator: torch.Generator) -> torch.Tensor:
        """Uniform numbers in [0, 1) for ``num_envs`` reset candidates, ``[num_envs, width]``, drawn on the generator's
        device and moved to the library's (a CPU generator gives the same numbers whatever device the env runs on)."""
        draws = torch.rand(num_envs, self.width, device=generator.device, generator=generator)
        return draws.to(self.library.device, non_blocking=True)

    def candidates(self, stats: torch.Tensor, draws: torch.Tensor) -> dict[str, torch.Tensor]:
        """Where each env restarts if it resets now (a pure function of ``draws``): a (clip, time) from the library's
        sampler (``stats``: the adaptive sampler's EMAs) or, with ``clip_start_probability``, the clip's first frame;
        its noisy physics row and a push timer."""
        clip_ids, times = self.library.sample_from(draws[:, :2], self.cfg.sampling_mode, stats)
        times = torch.where(draws[:, -1] < self.cfg.clip_start_probability, 0.0, times)
        return self._restarts(clip_ids, times, draws)

    def clip_starts(self, clip_ids: torch.Tensor, draws: torch.Tensor) -> dict[str, torch.Tensor]:
        """``candidates`` at the first frame of the given clips (``[n]``; an evaluation from each clip's start)."""
        return self._restarts(clip_ids.to(draws.device), torch.zeros_like(draws[:, 0]), draws)

    def _restarts(self, clip_ids: torch.Tensor, times: torch.Tensor, draws: torch.Tensor) -> dict[str, torch.Tensor]:
        low, high = self.cfg.push_interval_s
        rows = self.initial_states(clip_ids, times, 2.0 * draws[:, 3:-1] - 1.0)
        return {"clip_ids": clip_ids, "times": times, "rows": rows, "push_timer": low + (high - low) * draws[:, 2]}

    def initial_states(self, clip_ids: torch.Tensor, times: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Noisy reference states at (``clip_ids``, ``times``) as physics rows ``[n, nq + nv]`` (float64): the root's
        position, quaternion, linear (world) and angular (local) velocity, the actuated joints, ``qpos0`` and zero
        velocity elsewhere. ``noise`` is uniform in [-1, 1], ``[n, 12 + 2 J]`` (a pure function)."""
        ref = self.library.state(clip_ids, times, self._root)
        c, j = self.cfg.init_noise, self.num_joints
        n_pos, n_rot, n_q, n_lin, n_ang, n_qd = noise.split([3, 3, j, 3, 3, j], dim=-1)
        root_pos = ref.body_pos_w[:, 0] + c.root_pos * n_pos
        root_quat = quat_mul(quat_from_axis_angle(c.root_rot * n_rot), ref.body_quat_w[:, 0])
        joint_pos = torch.clamp(ref.joint_pos + c.joint_pos * n_q, self.lower, self.upper)
        lin = ref.body_lin_vel_w[:, 0] + c.velocity * n_lin
        ang_local = quat_apply_inverse(root_quat, ref.body_ang_vel_w[:, 0] + c.velocity * n_ang)
        joint_vel = ref.joint_vel + c.velocity * n_qd
        n = clip_ids.shape[0]
        qpos = self._qpos0.expand(n, -1).index_copy(
            1, self._qpos_cols, torch.cat((root_pos, root_quat, joint_pos), dim=-1).double()
        )
        qvel = torch.zeros(n, self._nv, dtype=torch.float64, device=self._qpos0.device).index_copy(
            1, self._qvel_cols, torch.cat((lin, ang_local, joint_vel), dim=-1).double()
        )
        return torch.cat((qpos, qvel), dim=-1)

    def episode_ends(
        self,
        dones: torch.Tensor,
        terminated: torch.Tensor,
        clip_ids: torch.Tensor,
        obs_time: torch.Tensor,
        motion_time: torch.Tensor,
        episode_length: torch.Tensor,
        push_timer: torch.Tensor,
        stats: torch.Tensor,
        draws: torch.Tensor,
        env_ids: torch.Tensor | None = None,
    ) -> dict:
        """What ending the ``dones`` episodes changes (a pure function): the adaptive sampler's EMAs after this step's
        episode ends, where the envs restart (``candidates``) as physics rows, and the episode bookkeeping (``next``:
        the env's tensors of those names, restarted where done).

        Without ``env_ids``, ``rows`` holds every env's candidate (fixed shapes, for a compiled step); with
        ``env_ids`` (the indices where ``dones``), only those envs' rows, in that order: the same values, less work.
        """
        # the adaptive sampler learns where episodes failed and what they covered (as record_episode_ends does)
        spans = episode_length.to(obs_time.dtype) * self.step_dt
        updated = self.library.adaptive.after_episode_ends(stats, clip_ids, obs_time, terminated, dones, spans)
        stats = torch.where(dones.any(), updated, stats)
        if env_ids is None:
            fresh = self.candidates(stats, draws)

            def restarted(new: torch.Tensor | int, old: torch.Tensor) -> torch.Tensor:
                return torch.where(dones, new, old)
        else:
            fresh = self.candidates(stats, draws[env_ids])

            def restarted(new: torch.Tensor | int, old: torch.Tensor) -> torch.Tensor:
                return old.index_put((env_ids,), torch.as_tensor(new, dtype=old.dtype, device=old.device))

        return {
            "sampler_stats": stats,
            "rows": fresh["rows"],
            "next": {
                "clip_ids": restarted(fresh["clip_ids"], clip_ids),
                "motion_time": restarted(fresh["times"], motion_time),
                "obs_time": restarted(fresh["times"], obs_time),
                "episode_length_buf": restarted(0, episode_length),
                "_push_timer": restarted(fresh["push_timer"], push_timer),
            },
        }
