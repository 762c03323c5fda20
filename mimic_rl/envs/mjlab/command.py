"""The motion of mimic_rl's tracking task on mjlab: an mjlab command term that owns this package's ``MotionLibrary``.

It keeps each env's (clip, motion time), restarts episodes by reference-state initialization (``ReferenceStateInit``
of ``mimic_rl.envs.common``, as the embedded env: the library's sampler, adaptive by default, and the same noise),
adapts mjlab's body states to ``BodyState`` (world frame relative to the env's origin, wxyz, the tracked bodies by
name, joints in the library's order) and evaluates the tracking MDP once per policy step with
``mimic_rl.tasks.tracking.step_evaluation`` (which the embedded env calls too). The task's reward, termination and
observation terms read that result.

When the MDP is evaluated. mjlab computes terminations and rewards before its single ``forward()`` of the step, when
body poses are one physics substep old but joint positions are current. The command first recomputes the body
kinematics (MuJoCo Warp's ``kinematics``, ``com_pos``, ``com_vel``: no collision, no solver), so that the MDP sees
the whole state at the end of the policy step, with the reference at that same instant. (The embedded env instead
reads MuJoCo sensors, one physics step before the end of the step, with the reference at that earlier instant.)

mjlab is optional: without it this module still imports, and its classes cannot be built.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from mimic_rl.errors import ConfigError
from mimic_rl.motion import BodyState, MotionClip, MotionLibrary, RobotKinematics, expand_motion_paths, load_motion
from mimic_rl.rotations import quat_apply
from mimic_rl.tasks.tracking import (
    InitNoise,
    ResetSettings,
    TerminationConfig,
    TrackingLayout,
    TrackingRewardConfig,
    clip_ends,
    observation_groups,
    step_evaluation,
)

try:
    from mjlab.managers.command_manager import CommandTerm, CommandTermCfg
except ImportError:  # mjlab is optional
    CommandTerm = CommandTermCfg = object  # type: ignore[assignment,misc]

__all__ = ["G1_END_EFFECTORS", "MimicMotionCommand", "MimicMotionCommandCfg", "load_clips", "robot_kinematics"]

G1_END_EFFECTORS = ("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link")
"""The embedded env's G1 end effectors (``g1_config``): the ankles' and wrists' last links."""


def robot_kinematics(entity_cfg: Any) -> RobotKinematics:
    """The kinematics of an mjlab entity's own MJCF (its ``spec_fn``), for reading CSV and name-less npz motions."""
    return _kinematics(entity_cfg.spec_fn)


@functools.lru_cache(maxsize=4)
def _kinematics(spec_fn: Any) -> RobotKinematics:
    return RobotKinematics(spec_fn().compile())  # compiling the G1 with its meshes takes most of a second


def load_clips(motions: list[str], csv_fps: float | None, kinematics: RobotKinematics) -> list[MotionClip]:
    """Every clip of ``motions`` (files, folders, globs; any format this package reads) for the robot of
    ``kinematics``; a bad file is a ``MotionFormatError`` that names it."""
    return [load_motion(p, robot=kinematics, csv_fps=csv_fps) for p in expand_motion_paths(list(motions))]


@dataclass(kw_only=True)
class MimicMotionCommandCfg(CommandTermCfg):
    """The motion term of ``MimicRL-Tracking-*`` (defaults: the embedded env's ``TrackingEnvConfig`` and G1)."""

    entity_name: str = "robot"
    motions: list[str] = field(default_factory=list)
    csv_fps: float | None = None
    anchor_body: str = "torso_link"
    end_effectors: tuple[str, ...] = G1_END_EFFECTORS
    tracked_bodies: tuple[str, ...] | None = None
    """None: every body of the robot (as the embedded env's G1)."""
    num_future_frames: int = 5
    future_stride: int = 1
    sampling_mode: str = "adaptive"
    clip_start_probability: float = 0.0
    init_noise: InitNoise = field(default_factory=InitNoise)
    reward: TrackingRewardConfig = field(default_factory=TrackingRewardConfig)
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    resampling_time_range: tuple[float, float] = (1.0e9, 1.0e9)
    """Never resampled by time: an episode restarts at its end only."""

    def build(self, env: Any) -> MimicMotionCommand:
        """The command term of ``env``."""
        return MimicMotionCommand(self, env)


class MimicMotionCommand(CommandTerm):
    """Clip, motion time and reference of every env; the MDP of each step (see the module docstring)."""

    def __init__(self, cfg: MimicMotionCommandCfg, env: Any) -> None:
        super().__init__(cfg, env)
        self.robot = env.scene[cfg.entity_name]
        if not cfg.motions:
            raise ConfigError("--motion: expected motion files for the MimicRL tracking task, found none")
        clips = load_clips(cfg.motions, cfg.csv_fps, robot_kinematics(env.cfg.scene.entities[cfg.entity_name]))
        dev = self.device
        self.library = MotionLibrary(clips, device=dev)
        self.library.check_sampling_mode(cfg.sampling_mode)
        self._layout_from_names()
        n = self.num_envs
        self.clip_ids = torch.zeros(n, dtype=torch.long, device=dev)
        self.motion_time = torch.zeros(n, device=dev)
        self.reference_mask = torch.ones(n, dtype=torch.bool, device=dev)
        """Every env has a reference, always (the contract's ``reference_mask``)."""
        self._future_offsets = torch.arange(cfg.num_future_frames, device=dev) * (cfg.future_stride * env.step_dt)
        self._gen = torch.Generator(device=dev).manual_seed(int(env.cfg.seed or 0))
        self._evaluated_at = -1
        self._failures_counted_at = -1
        self._result: dict[str, Any] | None = None
        self._obs: dict[str, torch.Tensor] | None = None
        self.eval_clip: int | torch.Tensor | None = None
        """When set, every restart is at this clip's first frame, or env ``i``'s at clip ``eval_clip[i]``'s (a tensor
        ``[N]``; evaluation from each clip's start)."""

    # ------------------------------------------------------------------ layout
    def _layout_from_names(self) -> None:
        """Bodies and joints by name: mjlab's entity order against the library's."""
        cfg, robot, lib = self.cfg, self.robot, self.library
        names, lib_bodies = list(robot.body_names), lib.body_names
        tracked = list(cfg.tracked_bodies or names)
        missing = [b for b in tracked if b not in lib_bodies or b not in names]
        if missing or cfg.anchor_body not in tracked:
            raise ConfigError(
                f"--motion: expected motions of mjlab's {cfg.entity_name} (bodies {tracked[:4]}...), found motions "
                f"without its bodies {(missing or [cfg.anchor_body])[:4]}; pass motions of this robot"
            )
        joints = list(robot.joint_names)
        if sorted(lib.joint_names) != sorted(joints):
            raise ConfigError(
                f"--motion: expected the {len(joints)} joints of mjlab's {cfg.entity_name}, found motions with "
                f"{len(lib.joint_names)} (missing {[j for j in joints if j not in lib.joint_names][:4]}); pass "
                "motions of this robot"
            )
        dev = self.device
        self.tracked = tracked
        self._body_idx = torch.tensor([names.index(b) for b in tracked], device=dev)
        self._joint_idx = torch.tensor([joints.index(j) for j in lib.joint_names], device=dev)
        self._ref_tracked = [lib_bodies.index(b) for b in tracked]
        self._ref_anchor_only = [lib_bodies.index(cfg.anchor_body)]
        data = robot.data
        limits = data.joint_pos_limits[0, self._joint_idx]  # hard limits, the library's joint order
        self.layout = TrackingLayout(
            anchor=tracked.index(cfg.anchor_body),
            root=tracked.index(names[0]) if names[0] in tracked else tracked.index(cfg.anchor_body),
            end_effectors=torch.tensor([tracked.index(b) for b in cfg.end_effectors], dtype=torch.long, device=dev),
            default_joint_pos=data.default_joint_pos[:, self._joint_idx],
            joint_lower=limits[:, 0],
            joint_upper=limits[:, 1],
        )
        self._init = self._reference_state_init(lib_bodies.index(names[0]), (limits[:, 0], limits[:, 1]))

    def _reference_state_init(self, root: int, limits: tuple[torch.Tensor, torch.Tensor]) -> Any:
        """The shared ``ReferenceStateInit`` (the embedded env's too) on mjlab's model (its free joint first)."""
        from mimic_rl.envs.common.reference_state import ReferenceStateInit

        ix = self.robot.indexing
        if ix.free_joint_q_adr.tolist() != list(range(7)) or ix.free_joint_v_adr.tolist() != list(range(6)):
            raise ConfigError(f"mjlab task: expected {self.cfg.entity_name}'s free joint first in the scene's state")
        cfg = self.cfg
        settings = ResetSettings(cfg.sampling_mode, cfg.clip_start_probability, cfg.init_noise)  # pushes: mjlab's
        self._q_cols = ix.joint_q_adr.to(self.device, torch.long)  # the scene's qpos columns of mjlab's joints
        self._v_cols = ix.joint_v_adr.to(self.device, torch.long)
        q_adr = ix.joint_q_adr[self._joint_idx.to(ix.joint_q_adr.device)].tolist()
        v_adr = ix.joint_v_adr[self._joint_idx.to(ix.joint_v_adr.device)].tolist()
        model, step_dt = self._env.sim.mj_model, self._env.step_dt
        return ReferenceStateInit(settings, self.library, model, root, q_adr, v_adr, limits, step_dt)

    # ------------------------------------------------------------------ states
    def refresh_body_states(self) -> None:
        """Recompute body poses and velocities from the current joint state (kinematics only, no collision or
        solver), so that they describe the same instant as the joint state."""
        import mujoco_warp as mjwarp
        import warp as wp

        sim = self._env.sim
        with wp.ScopedDevice(sim.wp_device):
            mjwarp.kinematics(sim.wp_model, sim.wp_data)
            mjwarp.com_pos(sim.wp_model, sim.wp_data)
            mjwarp.com_vel(sim.wp_model, sim.wp_data)

    def robot_state(self) -> BodyState:
        """The tracked bodies' and the joints' states of every env: positions relative to each env's origin, world
        orientation (wxyz), world velocities of the body frames, joints in the library's order."""
        data = self.robot.data
        pose = data.body_link_pose_w[:, self._body_idx]
        vel = data.body_link_vel_w[:, self._body_idx]
        return BodyState(
            joint_pos=data.joint_pos[:, self._joint_idx],
            joint_vel=data.joint_vel[:, self._joint_idx],
            body_pos_w=pose[..., 0:3] - self._env.scene.env_origins.unsqueeze(1),
            body_quat_w=pose[..., 3:7],
            body_lin_vel_w=vel[..., 0:3],
            body_ang_vel_w=vel[..., 3:6],
        )

    def reference(self, clip_ids: torch.Tensor, times: torch.Tensor) -> tuple[BodyState, BodyState]:
        """Future frames ``[N, K]`` of the anchor alone (observations) and the current frame of the tracked bodies
        (rewards, terminations, metrics)."""
        future = self.library.future_states(clip_ids, times, self._future_offsets, self._ref_anchor_only)
        return future, self.library.state(clip_ids, times, self._ref_tracked)

    # ------------------------------------------------------------------ the MDP
    def evaluate(
        self,
        clip_ids: torch.Tensor,
        times: torch.Tensor,
        actions: torch.Tensor,
        last_actions: torch.Tensor,
        episode_length: torch.Tensor,
    ) -> dict[str, Any]:
        """``step_evaluation`` of the current state against the reference at ``times`` (body kinematics
        refreshed first); ``episode_length`` counts the steps of each env's episode (its limit truncates)."""
        self.refresh_body_states()
        future, ref = self.reference(clip_ids, times)
        env = self._env
        truncated = (episode_length >= env.max_episode_length) | clip_ends(self.library, clip_ids, times, env.step_dt)
        scale = env.step_dt if env.cfg.scale_rewards_by_dt else 1.0
        cfg = self.cfg
        return step_evaluation(
            cfg.reward, cfg.termination, self.robot_state(), ref, future, self.layout, actions, last_actions,
            truncated, scale,
        )  # fmt: skip

    def step_result(self) -> dict[str, Any]:
        """This policy step's MDP (computed once per step, by whichever term asks first): the motion time advances
        by one step, then ``evaluate`` with mjlab's actions and episode lengths."""
        env = self._env
        if self._result is None or self._evaluated_at != env.common_step_counter:
            self._evaluated_at = env.common_step_counter
            self.motion_time += env.step_dt
            actions = env.action_manager
            self._result = self.evaluate(
                self.clip_ids, self.motion_time, actions.action, actions.prev_action, env.episode_length_buf
            )
        return self._result

    def observations(self) -> dict[str, torch.Tensor]:
        """The observation groups of the current state (computed when the state changed: after a reset or a step)."""
        if self._obs is None:
            self._obs = self._observe()
        return self._obs

    def _observe(self) -> dict[str, torch.Tensor]:
        future, _ = self.reference(self.clip_ids, self.motion_time)
        last_actions = self._env.action_manager.action
        return observation_groups(self.robot_state(), future, self.layout, last_actions)

    @property
    def command(self) -> torch.Tensor:
        """The reference observation ``[N, K, 2 J + 9]`` (mjlab's ``generated_commands``)."""
        return self.observations()["reference"]

    # ------------------------------------------------------------------ mjlab's hooks
    def _update_metrics(self) -> None:
        """No per-term metrics: the MDP's are in the env's ``extras["log"]``."""

    def _update_command(self, env_ids: torch.Tensor | None) -> None:
        """The state changed (after a step or a reset, after mjlab's ``forward()``): observe it anew."""
        del env_ids  # every env's observations are recomputed, from the same state for those not reset
        self._obs = self._observe()

    def _resample_command(self, env_ids: torch.Tensor) -> None:
        """Restart ``env_ids``: fold this step's failures into the adaptive sampler, draw (clip, time) and write the
        noisy reference state (the embedded env's ``ReferenceStateInit``), or the evaluation clip's first frame."""
        lib, env = self.library, self._env
        if self._failures_counted_at != env.common_step_counter:  # once per step, not again on a manual reset
            self._failures_counted_at = env.common_step_counter
            ending = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device).index_fill_(0, env_ids, True)
            failed = ending & env.termination_manager.terminated
            spans = env.episode_length_buf.to(self.motion_time.dtype) * env.step_dt  # not yet zeroed by the reset
            adaptive = lib.adaptive
            adaptive.stats.copy_(
                adaptive.after_episode_ends(adaptive.stats, self.clip_ids, self.motion_time, failed, ending, spans)
            )
        draws = self._init.draws(int(env_ids.numel()), self._gen)
        if self.eval_clip is None:
            fresh = self._init.candidates(lib.adaptive.stats, draws)
            clip_ids, times, rows = fresh["clip_ids"], fresh["times"], fresh["rows"]
        else:
            if isinstance(self.eval_clip, torch.Tensor):
                clip_ids = self.eval_clip.to(self.device)[env_ids]
            else:
                clip_ids = torch.full_like(draws[:, 0], self.eval_clip, dtype=torch.long)
            fresh = self._init.clip_starts(clip_ids, draws)
            clip_ids, times, rows = fresh["clip_ids"], fresh["times"], fresh["rows"]
        self.clip_ids[env_ids] = clip_ids
        self.motion_time[env_ids] = times
        self._write_state(env_ids, rows)

    def _write_state(self, env_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Write physics rows (MuJoCo ``qpos`` then ``qvel``, root angular velocity local) through mjlab's entity."""
        nq = self._env.sim.mj_model.nq
        qpos, qvel = rows[:, :nq].float(), rows[:, nq:].float()
        quat = qpos[:, 3:7]
        root = torch.cat(
            (qpos[:, 0:3] + self._env.scene.env_origins[env_ids], quat, qvel[:, 0:3], quat_apply(quat, qvel[:, 3:6])),
            dim=-1,
        )
        self.robot.write_root_state_to_sim(root, env_ids=env_ids)
        self.robot.write_joint_state_to_sim(qpos[:, self._q_cols], qvel[:, self._v_cols], env_ids=env_ids)
        self.robot.reset(env_ids=env_ids)
