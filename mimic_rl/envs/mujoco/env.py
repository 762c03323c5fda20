"""The embedded MuJoCo tracking env: N robots tracking reference motions, vectorized, on any CPU.

Observation groups (the package contract): ``policy`` (joint positions relative to the default pose, joint velocities,
the anchor's linear and angular velocity in its own frame, its projected gravity, the last action), ``reference``
(K future reference frames from the tracking MDP core) with ``reference_mask``, ``critic`` (the policy group plus
every tracked body's pose in the anchor frame), ``critic_reference`` with its mask, and ``amp`` (joint positions and
velocities, the layout of the reference's first two blocks). Rewards, terminations and metrics come from
``mimic_rl.tasks.tracking``; this module only adapts MuJoCo's body states to it.

Body states are MuJoCo sensor readings, which describe the state one physics step before the end of the policy
step (a 5 ms sensor latency at the default timestep); the reference is evaluated at that same instant.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from mimic_rl.envs.mujoco.physics import BatchedPhysics, DomainRandomization
from mimic_rl.envs.mujoco.robots import RobotConfig, build_model, robot_config
from mimic_rl.motion import BodyState, MotionClip, MotionLibrary
from mimic_rl.rotations import quat_apply_inverse, quat_from_axis_angle, quat_mul
from mimic_rl.tasks.tracking import (
    TerminationConfig,
    TrackingMetrics,
    TrackingRewardConfig,
    body_pose_in_anchor_frame,
    projected_gravity,
    reference_observation,
    tracking_metrics,
    tracking_reward,
    tracking_terminations,
)

__all__ = ["InitNoise", "MujocoTrackingEnv", "TrackingEnvConfig", "amp_obs_extractor", "amp_reference_extractor"]


@dataclass(frozen=True)
class InitNoise:
    """Reference-state initialization noise (uniform +-)."""

    joint_pos: float = 0.05
    root_pos: float = 0.02
    root_rot: float = 0.05
    velocity: float = 0.1


@dataclass
class TrackingEnvConfig:
    """Settings of the tracking env; every field has a default."""

    num_envs: int = 64
    robot: str = "humanoid28"
    robot_mjcf: str | None = None
    motions: list[str] = field(default_factory=list)
    csv_fps: float | None = None
    decimation: int = 4
    episode_length_s: float = 10.0
    num_future_frames: int = 5
    future_stride: int = 1
    """Future reference frames are ``future_stride`` policy steps apart."""
    sampling_mode: str = "adaptive"
    init_noise: InitNoise = field(default_factory=InitNoise)
    reward: TrackingRewardConfig = field(default_factory=TrackingRewardConfig)
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    randomization: DomainRandomization = field(default_factory=DomainRandomization)
    action_offset: str = "default"
    """PD targets are ``offset + action_scale * action``: ``"default"`` offsets from the default pose; ``"reference"``
    from the reference's joint positions one policy step ahead (a residual policy: zero action tracks the reference
    open-loop, so learning starts from feed-forward tracking and only has to add balance)."""
    reward_scale_by_dt: bool = True
    num_threads: int = 2
    """Physics threads (MuJoCo's rollout pool)."""
    torch_threads: int | None = None
    """Torch threads inside ``step()``; None: 1 up to 128 envs on the CPU (small ops lose to OpenMP fork/join),
    else unchanged. The caller's setting is restored after each step."""
    seed: int = 0
    device: str = "cpu"


def amp_obs_extractor(obs: Any) -> torch.Tensor:
    """AMP features of the robot: the ``amp`` group (joint positions and velocities)."""
    return obs["amp"]


def amp_reference_extractor(pair: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """AMP features of the reference: joint positions and velocities of its current frame (``2 J`` of ``2 J + 9``)."""
    ref, mask = pair
    width = ref.shape[-1] - 9
    return ref[..., 0, :width], mask


def _expand_motions(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(q for q in path.iterdir() if q.suffix.lower() in (".npz", ".csv"))
            if not found:
                raise FileNotFoundError(f"motion folder {path} has no .npz or .csv files")
            out += found
        elif any(c in p for c in "*?["):
            out += [Path(q) for q in sorted(glob.glob(p))]
        else:
            out.append(path)
    if not out:
        raise ValueError("no motions given: set TrackingEnvConfig.motions to motion files or folders")
    return out


class MujocoTrackingEnv:
    """rsl_rl-compatible vectorized env (``num_envs``, ``num_actions``, ``max_episode_length``, ``step``, ...)."""

    def __init__(
        self, cfg: TrackingEnvConfig, robot: RobotConfig | None = None, clips: list[MotionClip] | None = None
    ) -> None:
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.robot = robot or robot_config(cfg.robot, cfg.robot_mjcf)
        if clips is None:
            clips = [self.robot.load_clip(p, cfg.csv_fps) for p in _expand_motions(cfg.motions)]
        self.library = MotionLibrary(clips, device=self.device)
        model, self.body_names, sensor_adr = build_model(self.robot)
        self.model = model
        self.num_envs = int(cfg.num_envs)
        self.num_actions = int(model.nu)
        self.sim_dt = float(model.opt.timestep)
        self.step_dt = self.sim_dt * cfg.decimation
        self.max_episode_length = max(1, round(cfg.episode_length_s / self.step_dt))
        self.physics = BatchedPhysics(model, self.num_envs, cfg.num_threads, cfg.randomization, cfg.seed)
        self._layout(sensor_adr)
        self._gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        n, dev = self.num_envs, self.device
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        self.clip_ids = torch.zeros(n, dtype=torch.long, device=dev)
        self.motion_time = torch.zeros(n, device=dev)
        self.obs_time = torch.zeros(n, device=dev)
        self.actions = torch.zeros(n, self.num_actions, device=dev)
        self.last_actions = torch.zeros_like(self.actions)
        self._push_timer = torch.zeros(n, device=dev)
        self.metrics = TrackingMetrics(device=dev)
        if cfg.action_offset not in ("default", "reference"):
            raise ValueError(f"action_offset must be 'default' or 'reference', got {cfg.action_offset!r}")
        auto = 1 if self.device.type == "cpu" and self.num_envs <= 128 else None
        self._torch_threads = cfg.torch_threads if cfg.torch_threads is not None else auto
        self._future_offsets = torch.arange(cfg.num_future_frames, device=dev) * (cfg.future_stride * self.step_dt)
        self._obs = self._reset_all()

    # ------------------------------------------------------------------ layout
    def _layout(self, sensor_adr: int) -> None:
        names = self.body_names
        lib_names = self.library.body_names
        tracked = list(self.robot.tracked_bodies or names)
        missing = [b for b in tracked if b not in lib_names]
        if missing:
            raise ValueError(f"robot {self.robot.name}: tracked bodies {missing} are not in the motions' bodies")
        dev = self.device
        self.tracked = tracked
        self._body_idx = torch.tensor([names.index(b) for b in tracked], device=dev)
        self._ref_body_idx = torch.tensor([lib_names.index(b) for b in tracked], device=dev)
        self.anchor = tracked.index(self.robot.anchor_body)
        self.root = tracked.index(names[0]) if names[0] in tracked else self.anchor
        if names[0] not in lib_names:
            raise ValueError(f"the motions have no state for the robot's root body {names[0]!r}")
        self._ref_root = lib_names.index(names[0])
        self.end_effectors = torch.tensor([tracked.index(b) for b in self.robot.end_effectors], device=dev)
        m = self.model
        joint_ids = [int(m.actuator_trnid[a, 0]) for a in range(m.nu)]
        self.joint_names = [m.joint(j).name for j in joint_ids]
        if self.joint_names != self.library.joint_names:
            raise ValueError(f"motions' joints {self.library.joint_names} differ from the actuated {self.joint_names}")
        self._qpos_adr = np.array([m.jnt_qposadr[j] for j in joint_ids])
        self._qvel_adr = np.array([m.jnt_dofadr[j] for j in joint_ids])
        lower = torch.tensor(m.jnt_range[joint_ids, 0], dtype=torch.float32, device=dev)
        upper = torch.tensor(m.jnt_range[joint_ids, 1], dtype=torch.float32, device=dev)
        self.joint_lower, self.joint_upper = lower, upper
        default = np.zeros(m.nu)
        for pattern, value in self.robot.default_joint_pos.items():
            for i, name in enumerate(self.joint_names):
                if re.fullmatch(pattern, name):
                    default[i] = value
        self.default_joint_pos = torch.tensor(default, dtype=torch.float32, device=dev)
        if self.robot.action_scale is None:
            scale = 0.25 * m.actuator_forcerange[:, 1] / m.actuator_gainprm[:, 0]
        else:
            scale = np.full(m.nu, float(self.robot.action_scale))
        self.action_scale = torch.tensor(scale, dtype=torch.float32, device=dev)
        b, j = len(names), m.nu
        self._sensor = {"body": slice(sensor_adr, sensor_adr + 13 * b)}
        self._sensor["joint_pos"] = slice(sensor_adr + 13 * b, sensor_adr + 13 * b + j)
        self._sensor["joint_vel"] = slice(sensor_adr + 13 * b + j, sensor_adr + 13 * b + 2 * j)

    # ------------------------------------------------------------------ state from sensors
    def _robot_state(self, rows: np.ndarray | slice = slice(None)) -> BodyState:
        data = torch.from_numpy(self.physics.sensordata[rows]).to(self.device, torch.float32)
        body = data[:, self._sensor["body"]].reshape(data.shape[0], -1, 13)[:, self._body_idx]
        return BodyState(
            joint_pos=data[:, self._sensor["joint_pos"]],
            joint_vel=data[:, self._sensor["joint_vel"]],
            body_pos_w=body[..., 0:3],
            body_quat_w=body[..., 3:7],
            body_lin_vel_w=body[..., 7:10],
            body_ang_vel_w=body[..., 10:13],
        )

    def _reference(self, clip_ids: torch.Tensor, times: torch.Tensor) -> tuple[BodyState, BodyState]:
        """Future frames ``[M, K]`` and the current frame as a BodyState of the tracked bodies."""
        future = self.library.future_states(clip_ids, times, self._future_offsets)
        return future, future.frame(0).select(self._ref_body_idx)

    # ------------------------------------------------------------------ observations
    def _observations(self, robot: BodyState, future: BodyState, last_actions: torch.Tensor) -> TensorDict:
        a = self.anchor
        anchor_pos, anchor_quat = robot.body_pos_w[:, a], robot.body_quat_w[:, a]
        lin = quat_apply_inverse(anchor_quat, robot.body_lin_vel_w[:, a])
        ang = quat_apply_inverse(anchor_quat, robot.body_ang_vel_w[:, a])
        policy = torch.cat(
            (
                robot.joint_pos - self.default_joint_pos,
                robot.joint_vel,
                lin,
                ang,
                projected_gravity(anchor_quat),
                last_actions,
            ),
            dim=-1,
        )
        ref_anchor = self._ref_body_idx[a]
        reference = reference_observation(
            future.joint_pos,
            future.joint_vel,
            future.body_pos_w[:, :, ref_anchor],
            future.body_quat_w[:, :, ref_anchor],
            anchor_pos,
            anchor_quat,
        )
        bodies = body_pose_in_anchor_frame(robot.body_pos_w, robot.body_quat_w, anchor_pos, anchor_quat)
        critic = torch.cat((policy, bodies.flatten(1), anchor_pos[:, 2:3]), dim=-1)
        mask = torch.ones(policy.shape[0], dtype=torch.bool, device=self.device)
        return TensorDict(
            {
                "policy": policy,
                "reference": reference,
                "reference_mask": mask,
                "critic": critic,
                "critic_reference": reference,
                "critic_reference_mask": mask,
                "amp": torch.cat((robot.joint_pos, robot.joint_vel), dim=-1),
            },
            batch_size=[policy.shape[0]],
            device=self.device,
        )

    def reference_qpos(self, env_index: int) -> np.ndarray:
        """The reference pose of one env at its current motion time as a MuJoCo ``qpos`` (for rendering)."""
        ids, times = self.clip_ids[env_index : env_index + 1], self.obs_time[env_index : env_index + 1]
        ref = self.library.state(ids, times)
        qpos = self.model.qpos0.copy()
        qpos[0:3] = ref.body_pos_w[0, self._ref_root].cpu().numpy()
        qpos[3:7] = ref.body_quat_w[0, self._ref_root].cpu().numpy()
        qpos[self._qpos_adr] = ref.joint_pos[0].cpu().numpy()
        return qpos

    def get_observations(self) -> TensorDict:
        """The current observations."""
        return self._obs

    # ------------------------------------------------------------------ resets
    def _rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, device=self.device, generator=self._gen) * 2.0 - 1.0

    def _reset_envs(self, env_ids: torch.Tensor, clip_ids: torch.Tensor, times: torch.Tensor, ref: BodyState) -> None:
        """Reference-state initialization of ``env_ids`` at (``clip_ids``, ``times``), whose state is ``ref``."""
        k = int(env_ids.numel())
        noise = self.cfg.init_noise
        root = self._ref_root
        root_pos = ref.body_pos_w[:, root] + noise.root_pos * self._rand(k, 3)
        tilt = quat_from_axis_angle(noise.root_rot * self._rand(k, 3))
        root_quat = quat_mul(tilt, ref.body_quat_w[:, root])
        joint_pos = torch.clamp(
            ref.joint_pos + noise.joint_pos * self._rand(k, self.num_actions), self.joint_lower, self.joint_upper
        )
        lin = ref.body_lin_vel_w[:, root] + noise.velocity * self._rand(k, 3)
        ang_local = quat_apply_inverse(root_quat, ref.body_ang_vel_w[:, root] + noise.velocity * self._rand(k, 3))
        joint_vel = ref.joint_vel + noise.velocity * self._rand(k, self.num_actions)
        m = self.model
        qpos = np.tile(m.qpos0, (k, 1))
        qvel = np.zeros((k, m.nv))
        qpos[:, 0:3], qpos[:, 3:7] = root_pos.cpu().numpy(), root_quat.cpu().numpy()
        qpos[:, self._qpos_adr] = joint_pos.cpu().numpy()
        qvel[:, 0:3], qvel[:, 3:6] = lin.cpu().numpy(), ang_local.cpu().numpy()
        qvel[:, self._qvel_adr] = joint_vel.cpu().numpy()
        ids = env_ids.cpu().numpy()
        if self.cfg.randomization.enabled:
            self.physics.assign_variants(ids)
        self.physics.set_state(ids, qpos, qvel)
        self.physics.refresh_sensors(ids)
        self.clip_ids[env_ids] = clip_ids
        self.motion_time[env_ids] = times
        self.obs_time[env_ids] = times
        self.episode_length_buf[env_ids] = 0
        interval = self.cfg.randomization.push_interval_s
        self._push_timer[env_ids] = interval[0] + (interval[1] - interval[0]) * torch.rand(
            k, device=self.device, generator=self._gen
        )

    def _reset_all(self) -> TensorDict:
        clip_ids, times = self.library.sample(self.num_envs, self.cfg.sampling_mode, self._gen)
        future, _ = self._reference(clip_ids, times)
        first = future.frame(0)
        self._reset_envs(torch.arange(self.num_envs, device=self.device), clip_ids, times, first)
        self.actions.zero_()
        self.last_actions.zero_()
        return self._observations(self._robot_state(), future, self.actions)

    def reset(self) -> tuple[TensorDict, dict]:
        """Reset every env; returns (observations, extras)."""
        self._obs = self._reset_all()
        return self._obs, {}

    # ------------------------------------------------------------------ step
    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Apply ``actions`` ``[N, A]`` for one policy step; returns (obs, rewards, dones, extras)."""
        threads = self._torch_threads
        if threads is None:
            return self._step(actions)
        outer = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return self._step(actions)
        finally:
            torch.set_num_threads(outer)

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        if actions.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"actions: expected shape {(self.num_envs, self.num_actions)}, got {tuple(actions.shape)}")
        if not bool(torch.isfinite(actions).all()):
            raise FloatingPointError("actions contain NaN or inf; the policy diverged")
        self.actions = actions.detach().to(self.device, torch.float32)
        targets = self._action_offset() + self.action_scale * self.actions
        self._push()
        self.physics.step(targets.cpu().double().numpy(), self.cfg.decimation)
        self.episode_length_buf += 1
        self.motion_time += self.step_dt
        self.obs_time = self.motion_time - self.sim_dt  # sensor readings lag one physics step
        n = self.num_envs
        robot = self._robot_state()
        future, ref = self._reference(self.clip_ids, self.obs_time)
        reward, terms = tracking_reward(
            self.cfg.reward,
            robot,
            ref,
            self.anchor,
            self.actions,
            self.last_actions,
            self.joint_lower,
            self.joint_upper,
        )
        if self.cfg.reward_scale_by_dt:
            reward = reward * self.step_dt
        terminated, term_terms = tracking_terminations(
            self.cfg.termination, robot, ref, self.anchor, self.end_effectors
        )
        clip_end = ~self.library.clip_wrap[self.clip_ids] & (
            self.motion_time + self.step_dt > self.library.clip_duration[self.clip_ids] + 1e-6
        )
        time_outs = ((self.episode_length_buf >= self.max_episode_length) | clip_end) & ~terminated
        dones = terminated | time_outs
        values = tracking_metrics(robot, ref, self.root, self.end_effectors)
        self.metrics.update(values)
        body_error_mm = 1000.0 * (robot.body_pos_w - ref.body_pos_w).norm(dim=-1)
        extras = {
            "time_outs": time_outs,
            "log": self._log(terms, term_terms, values, reward),
            "tracking": {"terminated": terminated, "body_error_mm": body_error_mm, **values},
        }
        reset_ids = dones.nonzero().squeeze(-1)
        k = int(reset_ids.numel())
        if k == 0:
            obs = self._observations(robot, future, self.actions)
            extras["final_observations"] = obs
        else:
            self.metrics.episode_end(terminated[reset_ids], time_outs[reset_ids])
            self.library.record_episode_ends(self.clip_ids[reset_ids], self.obs_time[reset_ids], terminated[reset_ids])
            new_clips, new_times = self.library.sample(k, self.cfg.sampling_mode, self._gen)
            fresh, _ = self._reference(new_clips, new_times)
            self._reset_envs(reset_ids, new_clips, new_times, fresh.frame(0))
            after = self._robot_state(reset_ids.cpu().numpy())
            # One pass: every env before the resets (rows < n), then the reset envs after them (rows >= n).
            both = self._observations(
                BodyState.cat([robot, after]),
                BodyState.cat([future, fresh]),
                torch.cat((self.actions, self.actions.new_zeros(k, self.num_actions))),
            )
            extras["final_observations"] = both[:n]
            obs = both[:n].clone()
            obs[reset_ids] = both[n:]
        self.last_actions = torch.where(dones.unsqueeze(-1), 0.0, self.actions)  # a new episode has no last action
        self._obs = obs
        return obs, reward, dones, extras

    def _action_offset(self) -> torch.Tensor:
        if self.cfg.action_offset == "default":
            return self.default_joint_pos
        ref = self.library.state(self.clip_ids, self.motion_time + self.step_dt)
        return ref.joint_pos

    def _push(self) -> None:
        if not self.cfg.randomization.enabled or self.cfg.randomization.push_velocity <= 0:
            return
        self._push_timer -= self.step_dt
        due = (self._push_timer <= 0).nonzero().squeeze(-1)
        if due.numel() == 0:
            return
        k = int(due.numel())
        v = self.cfg.randomization.push_velocity * self._rand(k, 3)
        v[:, 2] = 0.0
        self.physics.add_root_velocity(due.cpu().numpy(), v.cpu().double().numpy())
        interval = self.cfg.randomization.push_interval_s
        self._push_timer[due] = interval[0] + (interval[1] - interval[0]) * torch.rand(
            k, device=self.device, generator=self._gen
        )

    def _log(self, terms: dict, term_terms: dict, values: dict, reward: torch.Tensor) -> dict[str, torch.Tensor]:
        log = {f"reward/{k}": v.mean() for k, v in terms.items()}
        log.update({f"termination/{k}": v.float().mean() for k, v in term_terms.items()})
        log.update({f"metrics/{k}": v.mean() for k, v in values.items()})
        log["reward/total"] = reward.mean()
        return log

    def state_dict(self) -> dict[str, Any]:
        """Everything that determines the env's future: physics states, episode bookkeeping and random streams."""
        return {
            "physics_state": self.physics.state.copy(),
            "sensordata": self.physics.sensordata.copy(),
            "variant_of_env": self.physics.variant_of_env.copy(),
            "physics_rng": self.physics.rng.bit_generator.state,
            "generator": self._gen.get_state(),
            "adaptive_failures": self.library.adaptive.failures.clone(),
            "obs": self._obs.clone(),
            **{k: getattr(self, k).clone() for k in _ENV_TENSORS},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` (the env must have been built with the same config)."""
        if state["physics_state"].shape != self.physics.state.shape:
            raise ValueError(f"env state is for {state['physics_state'].shape[0]} envs, this env has {self.num_envs}")
        self.physics.state[:] = state["physics_state"]
        self.physics.sensordata[:] = state["sensordata"]
        self.physics.variant_of_env[:] = state["variant_of_env"]
        self.physics.assign_variants(np.arange(0), self.physics.variant_of_env)
        self.physics.rng.bit_generator.state = state["physics_rng"]
        self._gen.set_state(state["generator"])
        self.library.adaptive.failures.copy_(state["adaptive_failures"])
        for k in _ENV_TENSORS:
            getattr(self, k).copy_(state[k])
        self._obs = state["obs"].clone() if "obs" in state else self._obs

    def close(self) -> None:
        """Release the physics thread pool."""
        self.physics.close()


_ENV_TENSORS = ("episode_length_buf", "clip_ids", "motion_time", "obs_time", "actions", "last_actions", "_push_timer")
