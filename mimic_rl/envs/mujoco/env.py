"""The embedded MuJoCo tracking env: N robots tracking reference motions, vectorized, on any CPU.

Observation groups (the package contract): ``policy`` (joint positions relative to the default pose, joint velocities,
the anchor's linear and angular velocity in its own frame, its projected gravity, the last action), ``reference``
(K future reference frames from the tracking MDP core) with ``reference_mask``, ``critic`` (the policy group plus
every tracked body's pose in the anchor frame; the critic reads the same ``reference``: one group, stored once), and
``amp`` (joint positions and velocities, the layout of the reference's first two blocks). Rewards, terminations and
metrics come from ``mimic_rl.tasks.tracking``; this module only adapts MuJoCo's body states to it.

Body states are MuJoCo sensor readings, which describe the state one physics step before the end of the policy
step (a 5 ms sensor latency at the default timestep); the reference is evaluated at that same instant.

Devices: the physics runs on the CPU (``mujoco.rollout``), the rest on ``cfg.device``. Per step, the PD targets cross
to the host once and the sensor readings to the device once (``_sensors``), plus the rows of the envs that reset.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from mimic_rl.envs.common.reference_state import ReferenceStateInit
from mimic_rl.envs.common.sensor_model import ActionDelay, SensorChannels
from mimic_rl.envs.mujoco.amp_expert import AmpExpert
from mimic_rl.envs.mujoco.config import InitNoise, TrackingEnvConfig
from mimic_rl.envs.mujoco.env_state import env_state_dict, load_env_state
from mimic_rl.envs.mujoco.physics import BatchedPhysics
from mimic_rl.envs.mujoco.quality_sensors import QualitySensors
from mimic_rl.envs.mujoco.robots import RobotConfig, build_model, joint_tables, robot_config
from mimic_rl.errors import ConfigError, TrainingDiverged
from mimic_rl.motion import BodyState, MotionClip, MotionLibrary, expand_motion_paths
from mimic_rl.tasks.tracking import (
    TrackingLayout,
    TrackingMetrics,
    clip_ends,
    observation_groups,
    observation_terms,
    step_evaluation,
)
from mimic_rl.utils import compiled_or_eager

__all__ = ["InitNoise", "MujocoTrackingEnv", "TrackingEnvConfig", "amp_obs_extractor", "amp_reference_extractor"]


def amp_obs_extractor(obs: Any) -> torch.Tensor:
    """AMP features of the robot: the ``amp`` group (``env.amp_features``)."""
    return obs["amp"]


def amp_reference_extractor(pair: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """AMP features of the reference: joint positions and velocities of its current frame (``2 J`` of ``2 J + 9``)."""
    reference, mask = pair
    width = reference.shape[-1] - 9
    return reference[..., 0, :width], mask


class MujocoTrackingEnv(AmpExpert):
    """rsl_rl-compatible vectorized env (``num_envs``, ``num_actions``, ``max_episode_length``, ``step``, ...)."""

    def __init__(
        self, cfg: TrackingEnvConfig, robot: RobotConfig | None = None, clips: list[MotionClip] | None = None
    ) -> None:
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.robot = robot or robot_config(cfg.robot, cfg.robot_mjcf)
        if clips is None:
            clips = [self.robot.load_clip(p, cfg.csv_fps) for p in expand_motion_paths(cfg.motions)]
        self.library = MotionLibrary(clips, device=self.device, adaptive=cfg.adaptive_sampling)
        model, self.body_names, sensor_adr = build_model(self.robot, quality=cfg.quality_metrics)
        self.model = model
        self.num_envs = int(cfg.num_envs)
        self.num_actions = int(model.nu)
        self.sim_dt = float(model.opt.timestep)
        self.step_dt = self.sim_dt * cfg.decimation
        self.max_episode_length = max(1, round(cfg.episode_length_s / self.step_dt))
        threads = cfg.num_threads if cfg.num_threads is not None else torch.get_num_threads()
        self.physics = BatchedPhysics(model, self.num_envs, threads, cfg.randomization, cfg.seed)
        self._layout(sensor_adr)
        deploy = cfg.deploy
        channels = SensorChannels(deploy, model.nu, self.num_actions, self.num_envs, cfg.device, cfg.seed)
        self._channels = channels if deploy.enabled else None  # noise and latency of the deployable groups
        delay = deploy.action_delay_steps if deploy.enabled else 0
        self._action_delay = ActionDelay(delay, self.num_envs, self.num_actions, cfg.device)
        self._observation_table = observation_terms(deploy.enabled, cfg.amp_features)
        # on the CPU whatever the device: the physics is the CPU's, and the same seed then gives the same initial
        # states, pushes and evaluation on every device (a CUDA generator draws a different stream)
        self._gen = torch.Generator().manual_seed(cfg.seed)
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
        if cfg.reference_velocity_feedforward and cfg.action_offset != "reference":
            raise ConfigError(
                "env.reference_velocity_feedforward: needs action_offset: reference, found "
                f"{cfg.action_offset!r}; set env.action_offset=reference or turn the feed-forward off"
            )
        auto = 1 if self.device.type == "cpu" else None  # small ops: one thread is faster, and graceful when shared
        self._torch_threads = cfg.torch_threads if cfg.torch_threads is not None else auto
        self._future_offsets = torch.arange(cfg.num_future_frames, device=dev) * (cfg.future_stride * self.step_dt)
        self._all_valid = torch.ones(n, dtype=torch.bool, device=dev)
        self._sensor_tensor = torch.from_numpy(self.physics.sensordata)  # shares memory with the physics' readings
        self._sensors = torch.zeros(self._sensor_tensor.shape, dtype=torch.float32, device=dev)
        """The sensor readings on the env's device (float32): refreshed once per step, and for the rows that reset."""
        # Materialize intermediates read more than once instead of recomputing them in every consumer's loop: the
        # MDP reads each interpolated reference field several times (1.4x faster per step at 64 envs on a CPU).
        options = {"realize_reads_threshold": 1, "realize_opcount_threshold": 4}
        hint = "TrackingEnvConfig.compile: set it to false to silence this"
        # On a CPU, C++ wrappers around the kernels: far less Python per call (~0.1 ms per graph at 64 envs).
        options["cpp_wrapper"] = self.device.type == "cpu"
        self._evaluate_fn = compiled_or_eager(self._evaluate, cfg.compile, options, hint)
        self._observe_into_fn = compiled_or_eager(self._observe_into, cfg.compile, options, hint)
        self._bucket = min(self.num_envs, max(8, self.num_envs // 8))
        """Resets are observed in padded chunks of this many envs (fixed shapes, and far fewer rows than N)."""
        self.library.check_sampling_mode(cfg.sampling_mode)
        self._resets_in_graph = bool(cfg.compile)
        self._obs = self._reset_all()

    # ------------------------------------------------------------------ layout
    def _layout(self, sensor_adr: int) -> None:
        names = self.body_names
        lib_names = self.library.body_names
        tracked = list(self.robot.tracked_bodies or names)
        missing = [b for b in tracked if b not in lib_names]
        if missing:
            raise ConfigError(
                f"--motion: expected motions of robot {self.robot.name} (bodies {tracked[:4]}...), found motions "
                f"without its bodies {missing[:4]}; pass motions of this robot, or the robot of these motions (--robot)"
            )
        dev = self.device
        self.tracked = tracked
        self._body_idx = torch.tensor([names.index(b) for b in tracked], device=dev)
        self.anchor = tracked.index(self.robot.anchor_body)
        self._ref_anchor_only = [lib_names.index(self.robot.anchor_body)]
        self._ref_tracked = [lib_names.index(b) for b in tracked]
        self.root = tracked.index(names[0]) if names[0] in tracked else self.anchor
        if names[0] not in lib_names:
            raise ConfigError(
                f"--motion: expected motions with the state of robot {self.robot.name}'s root body {names[0]!r}, found "
                "none; pass motions of this robot, or the robot of these motions (--robot)"
            )
        self._ref_root = lib_names.index(names[0])
        self.end_effectors = torch.tensor([tracked.index(b) for b in self.robot.end_effectors], device=dev)
        m = self.model
        joint_ids = [int(m.actuator_trnid[a, 0]) for a in range(m.nu)]
        self.joint_names = [m.joint(j).name for j in joint_ids]
        if self.joint_names != self.library.joint_names:
            theirs, ours = self.library.joint_names, self.joint_names
            raise ConfigError(
                f"--motion: expected the {len(ours)} actuated joints of robot {self.robot.name}, found motions with "
                f"{len(theirs)} (missing {[n for n in ours if n not in theirs][:4]}); pass motions of this robot, or "
                "the robot of these motions (--robot, --robot-mjcf)"
            )
        self._qpos_adr = np.array([m.jnt_qposadr[j] for j in joint_ids])
        self._qvel_adr = np.array([m.jnt_dofadr[j] for j in joint_ids])
        limited = m.jnt_limited[joint_ids].astype(bool)  # an unlimited joint's jnt_range is [0, 0]: not its range
        lower = torch.tensor(np.where(limited, m.jnt_range[joint_ids, 0], -np.inf), dtype=torch.float32, device=dev)
        upper = torch.tensor(np.where(limited, m.jnt_range[joint_ids, 1], np.inf), dtype=torch.float32, device=dev)
        self.joint_lower, self.joint_upper = lower, upper
        ref_root = lib_names.index(names[0])
        self._init = ReferenceStateInit(
            self.cfg.reset_settings(),
            self.library,
            m,
            ref_root,
            self._qpos_adr,
            self._qvel_adr,
            (lower, upper),
            self.step_dt,
        )
        tables = joint_tables(m, self.robot, self.joint_names, self.cfg)
        self.default_joint_pos, self.action_scale, self._feedforward = (
            torch.tensor(t, dtype=torch.float32, device=dev) for t in tables
        )
        self.tracking_layout = TrackingLayout(
            self.anchor, self.root, self.end_effectors, self.default_joint_pos, self.joint_lower, self.joint_upper
        )
        b, j = len(names), m.nu
        self._sensor = {"body": slice(sensor_adr, sensor_adr + 13 * b)}
        self._sensor["joint_pos"] = slice(sensor_adr + 13 * b, sensor_adr + 13 * b + j)
        self._sensor["joint_vel"] = slice(sensor_adr + 13 * b + j, sensor_adr + 13 * b + 2 * j)
        actuators = [m.actuator(a).name for a in range(m.nu)]
        self._quality = QualitySensors(m, self.robot.feet, actuators) if self.cfg.quality_metrics else None

    # ------------------------------------------------------------------ state from sensors
    def _sync_sensors(self, env_ids: torch.Tensor | None = None) -> None:
        """Copy the physics' sensor readings (all envs, or ``env_ids``) to the device mirror ``_sensors``."""
        if env_ids is None:
            self._sensors.copy_(self._sensor_tensor)
            return
        rows = self._sensor_tensor[env_ids.cpu()]
        self._sensors.index_copy_(0, env_ids, rows.to(self.device, torch.float32))

    def _state_from_sensors(self, sensor: torch.Tensor) -> BodyState:
        """The tracked bodies' and the joints' states from sensor rows ``[N, nsensordata]`` on the env's device."""
        data = sensor.to(torch.float32)
        body = data[:, self._sensor["body"]].reshape(data.shape[0], -1, 13)[:, self._body_idx]
        return BodyState(
            joint_pos=data[:, self._sensor["joint_pos"]],
            joint_vel=data[:, self._sensor["joint_vel"]],
            body_pos_w=body[..., 0:3],
            body_quat_w=body[..., 3:7],
            body_lin_vel_w=body[..., 7:10],
            body_ang_vel_w=body[..., 10:13],
        )

    def reference_at(self, clip_ids: torch.Tensor, times: torch.Tensor) -> tuple[BodyState, BodyState]:
        """The reference as the env observes it at ``times`` ``[M]``: the future frames ``[M, K]`` of the anchor alone
        and the current frame of the tracked bodies (the export bakes a clip with it)."""
        return self._reference(clip_ids, times)

    def initial_state(self, env_index: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``(qpos, qvel)`` of one env's current physics state (copies)."""
        row = self.physics.state[env_index]
        return row[self.physics.qpos_slice].copy(), row[self.physics.qvel_slice].copy()

    def robot_state(self) -> BodyState:
        """The tracked bodies' and joints' current states (the latest sensor readings) of every env."""
        return self._state_from_sensors(self._sensors)

    def _reference(self, clip_ids: torch.Tensor, times: torch.Tensor) -> tuple[BodyState, BodyState]:
        """Future frames ``[M, K]`` of the anchor body alone (what observations need), and the current frame of the
        tracked bodies (what rewards, terminations and metrics need)."""
        now, future = self.library.state_and_future(
            clip_ids, times, self._future_offsets, self._ref_tracked, self._ref_anchor_only
        )
        return future, now

    # ------------------------------------------------------------------ observations
    def _observation_groups(self, robot: BodyState, future: BodyState, last_actions: torch.Tensor) -> dict:
        return observation_groups(
            robot, future, self.tracking_layout, last_actions, self.cfg.deploy.enabled, self.cfg.amp_features
        )

    def _observe(
        self, sensor: torch.Tensor, clip_ids: torch.Tensor, obs_time: torch.Tensor, last_actions: torch.Tensor
    ) -> dict:
        """Observation groups of every env from raw sensor readings (a pure function of its inputs)."""
        # the future anchor frames alone: the current frame of every tracked body is the rewards' (eagerly, a
        # second interpolation per reset step that nothing reads)
        future = self.library.future_states(clip_ids, obs_time, self._future_offsets, self._ref_anchor_only)
        return self._observation_groups(self._state_from_sensors(sensor), future, last_actions)

    def _observe_into(
        self,
        groups: dict[str, torch.Tensor],
        rows: torch.Tensor,
        sensor: torch.Tensor,
        clip_ids: torch.Tensor,
        obs_time: torch.Tensor,
        last_actions: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """``groups`` (every env's observations; not modified) with ``rows`` observed anew (a pure function; rows may
        repeat, since a repeated row gets the same values)."""
        fresh = self._observe(sensor[rows], clip_ids[rows], obs_time[rows], last_actions[rows])
        return {name: value.index_put((rows,), fresh[name]) for name, value in groups.items()}

    def _evaluate(
        self,
        sensor: torch.Tensor,
        clip_ids: torch.Tensor,
        obs_time: torch.Tensor,
        motion_time: torch.Tensor,
        episode_length: torch.Tensor,
        actions: torch.Tensor,
        last_actions: torch.Tensor,
        push_timer: torch.Tensor,
        sampler_stats: torch.Tensor,
        draws: torch.Tensor,
    ) -> dict:
        """Everything a policy step computes from the new physics state (a pure function): rewards, terminations,
        metrics, the pre-reset observations and, when compiled, ``ReferenceStateInit.episode_ends`` (``push_timer``,
        ``sampler_stats`` and ``draws`` are its inputs).

        Fixed shapes (all ``N`` envs), so that ``torch.compile`` fuses it into a few kernels.
        """
        robot = self._state_from_sensors(sensor)
        future, ref = self._reference(clip_ids, obs_time)
        truncated = (episode_length >= self.max_episode_length) | clip_ends(
            self.library, clip_ids, motion_time, self.step_dt
        )
        scale = self.step_dt if self.cfg.reward_scale_by_dt else 1.0
        out = step_evaluation(
            self.cfg.reward, self.cfg.termination, robot, ref, future, self.tracking_layout, actions, last_actions,
            truncated, scale, observation_table=self._observation_table,
        )  # fmt: skip
        out["reward"] = out["reward"] * scale
        terminated, time_outs, values = out["terminated"], out["time_outs"], out["values"]
        dones = terminated | time_outs
        out["metric_sums"] = torch.stack(list(values.values())).to(torch.float64).sum(-1)
        out["episode_counts"] = torch.stack((dones.sum(), (time_outs & ~terminated).sum())).to(torch.float64)
        out["dones"] = dones
        out["last_actions"] = torch.where(dones.unsqueeze(-1), 0.0, actions)  # a new episode has no last action
        if self._resets_in_graph:  # compiled: for every env, so that no reset step needs eager work (fixed shapes)
            out["resets"] = self._init.episode_ends(
                dones, terminated, clip_ids, obs_time, motion_time, episode_length, push_timer, sampler_stats, draws
            )
        return out

    def _tensordict(self, groups: dict) -> TensorDict:
        # The critic reads the actor's reference (``obs_groups`` defaults): one group, stored once.
        return TensorDict({**groups, "reference_mask": self._all_valid}, batch_size=[self.num_envs], device=self.device)

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
    def _restart(self, env_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Set the physics of ``env_ids`` to their ``rows`` (physics rows, one per env of ``env_ids``), with a new
        model variant, and evaluate their sensors."""
        ids = env_ids.cpu().numpy()
        rows = rows.cpu().numpy()
        if self.cfg.randomization.enabled:
            self.physics.assign_variants(ids)
        nq = self.model.nq
        self.physics.set_state(ids, rows[:, :nq], rows[:, nq:])
        self.physics.refresh_sensors(ids)
        self._sync_sensors(None if len(ids) == self.num_envs else env_ids)

    def _observe_reset(self, groups: dict[str, torch.Tensor], env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """``groups`` with the rows of ``env_ids`` observed anew: compiled, in chunks of the reset bucket size, each
        padded with copies of its first id (fixed shapes, whatever the number of resets); eagerly, in one call."""
        if not self._resets_in_graph:  # eager: one call of the rows themselves (no fixed shapes to keep)
            return self._observe_into_fn(
                groups, env_ids, self._sensors, self.clip_ids, self.obs_time, self.last_actions
            )
        b = self._bucket
        for start in range(0, int(env_ids.numel()), b):
            rows = env_ids[start : start + b]
            if rows.numel() < b:
                rows = torch.cat((rows, rows[:1].expand(b - rows.numel())))
            groups = self._observe_into_fn(groups, rows, self._sensors, self.clip_ids, self.obs_time, self.last_actions)
        return groups

    def _reset_all(self, clip_ids: torch.Tensor | None = None) -> TensorDict:
        draws = self._init.draws(self.num_envs, self._gen)
        if clip_ids is None:
            fresh = self._init.candidates(self.library.adaptive.stats, draws)
        else:
            fresh = self._init.clip_starts(clip_ids, draws)
        self.clip_ids.copy_(fresh["clip_ids"])
        self.motion_time.copy_(fresh["times"])
        self.obs_time.copy_(fresh["times"])
        self.episode_length_buf.zero_()
        self._push_timer.copy_(fresh["push_timer"])
        self._restart(torch.arange(self.num_envs, device=self.device), fresh["rows"])
        self.actions.zero_()
        self.last_actions.zero_()
        self._action_delay.restart()
        groups = self._observe(self._sensors, self.clip_ids, self.obs_time, self.last_actions)
        if self._channels is not None:
            groups = self._channels(groups, None)
        return self._tensordict(groups)

    def reset(self) -> tuple[TensorDict, dict]:
        """Reset every env; returns (observations, extras)."""
        self._obs = self._reset_all()
        return self._obs, {}

    def start_clips(self, clip_ids: torch.Tensor) -> TensorDict:
        """Restart every env at the first frame of its clip in ``clip_ids`` ``[N]`` (with the initial-state noise),
        for an evaluation of several clips at once; later episodes restart as configured. Returns the observations."""
        self._obs = self._reset_all(clip_ids)
        return self._obs

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
            raise TrainingDiverged(
                "env.step: actions: expected finite values, found NaN or inf; the policy diverged (lower "
                "algorithm.learning_rate, or resume from an earlier checkpoint)"
            )
        self.actions = actions.detach().to(self.device, torch.float32)
        targets = self._action_offset() + self.action_scale * self._action_delay(self.actions)
        self._push()
        self.physics.step(targets.cpu().double().numpy(), self.cfg.decimation)
        self._sync_sensors()
        self.episode_length_buf += 1
        self.motion_time += self.step_dt
        self.obs_time = self.motion_time - self.sim_dt  # sensor readings lag one physics step
        draws = self._init.draws(self.num_envs, self._gen)
        bookkeeping = (self.clip_ids, self.obs_time, self.motion_time, self.episode_length_buf)
        sampler = (self._push_timer, self.library.adaptive.stats, draws)
        out = self._evaluate_fn(self._sensors, *bookkeeping, self.actions, self.last_actions, *sampler)
        values, terminated, time_outs, dones = out["values"], out["terminated"], out["time_outs"], out["dones"]
        self.metrics.add_sums(values.keys(), out["metric_sums"], float(self.num_envs))
        obs = final = self._tensordict(out["obs"])
        extras = {
            "time_outs": time_outs,
            "log": out["log"],
            "tracking": {"terminated": terminated, "body_error_mm": out["body_error_mm"], **values},
            "termination_terms": out["termination_terms"],
            "final_observations": final,
        }
        if self._quality is not None:
            extras["quality"] = self._quality.sample(self._sensors, self._sensors[:, self._sensor["joint_vel"]])
        self.last_actions = out["last_actions"]
        reset_ids = dones.nonzero().squeeze(-1)
        if reset_ids.numel() > 0:
            self.metrics.add_episodes(out["episode_counts"])
            if "resets" in out:  # compiled: every env's restart, computed in the graph
                resets = out["resets"]
                rows = resets["rows"][reset_ids]
            else:  # eagerly, only on steps where some episode ends, and only for those envs
                resets = self._init.episode_ends(dones, terminated, *bookkeeping, *sampler, env_ids=reset_ids)
                rows = resets["rows"]
            self.library.adaptive.stats.copy_(resets["sampler_stats"])
            for name, value in resets["next"].items():
                getattr(self, name).copy_(value)
            self._restart(reset_ids, rows)
            self._action_delay.restart(reset_ids)
            obs = self._tensordict(self._observe_reset(out["obs"], reset_ids))
        if self._channels is not None:
            obs = self._tensordict(self._channels(dict(obs.items()), reset_ids))
        self._obs = obs
        return obs, out["reward"], dones, extras

    def _action_offset(self) -> torch.Tensor:
        if self.cfg.action_offset == "default":
            return self.default_joint_pos
        return self.reference_action_offset(self.clip_ids, self.motion_time + self.step_dt)

    def reference_action_offset(self, clip_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """The PD targets' offset under ``action_offset: reference`` at ``times`` (one policy step ahead of the
        action): the reference's joint positions, plus ``kv / kp`` times its joint velocities with
        ``reference_velocity_feedforward``."""
        ref = self.library.state(clip_ids, times, bodies=())
        if not self.cfg.reference_velocity_feedforward:
            return ref.joint_pos
        return ref.joint_pos + self._feedforward * ref.joint_vel

    def _push(self) -> None:
        dr = self.cfg.randomization
        if not dr.enabled or not dr.pushes or dr.push_velocity <= 0:
            return
        self._push_timer -= self.step_dt
        due = (self._push_timer <= 0).nonzero().squeeze(-1)
        if due.numel() == 0:
            return
        k = int(due.numel())
        v = self.cfg.randomization.push_velocity * (2.0 * torch.rand(k, 3, generator=self._gen) - 1)
        v[:, 2] = 0.0
        self.physics.add_root_velocity(due.cpu().numpy(), v.double().numpy())
        interval = self.cfg.randomization.push_interval_s
        delay = interval[0] + (interval[1] - interval[0]) * torch.rand(k, generator=self._gen)
        self._push_timer[due] = delay.to(self.device)

    def sampling_stats(self) -> dict[str, float]:
        """The adaptive sampler's ``sampler/*`` scalars (``AdaptiveSampler.stats``; {} in other sampling modes), read
        once per iteration by the runner."""
        return self.library.adaptive.stats_scalars() if self.cfg.sampling_mode == "adaptive" else {}

    def state_dict(self) -> dict[str, Any]:
        """Everything that determines the env's future: physics states, episode bookkeeping and random streams (plain
        tensors and numbers, so that a checkpoint loads with ``weights_only=True``)."""
        return env_state_dict(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` (the env must have been built with the same config)."""
        load_env_state(self, state)

    def close(self) -> None:
        """Release the physics thread pool."""
        self.physics.close()
