"""This package's motion command on a manager-based simulator (mjlab, Isaac Lab): the part that does not depend on it.

A simulator's task (``MimicRL-Tracking-*``) has one command term that owns this package's ``MotionLibrary``, keeps each
env's (clip, motion time), restarts episodes by reference-state initialization (``ReferenceStateInit``, as the
embedded env: the library's sampler, adaptive by default, and the same noise), adapts the simulator's body states to
``BodyState`` (world frame relative to the env's origin, wxyz, the tracked bodies by name, joints in the library's
order) and evaluates the tracking MDP once per policy step with ``mimic_rl.tasks.tracking.step_evaluation`` (which the
embedded env calls too). The task's reward, termination and observation terms read that result.

``TrackingCommand`` is that logic as a mixin: a backend's command term derives from it and from its simulator's
``CommandTerm``, and implements the hooks that touch the simulator (``_robot_names``, ``_robot_joint_limits``,
``_robot_default_joint_pos``, ``_read_robot``, ``_reference_state_model``, ``_write_rows``, ``refresh_body_states``,
``_reward_scale``). mjlab's and Isaac Lab's managers call the same term hooks (``_resample_command``,
``_update_command``, ``_update_metrics``, ``command``) with the same env attributes (``step_dt``,
``episode_length_buf``, ``max_episode_length``, ``common_step_counter``, ``action_manager``, ``termination_manager``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from mimic_rl.envs.common.robots import G1_END_EFFECTORS, G1_FEET
from mimic_rl.errors import ConfigError
from mimic_rl.motion import BodyState, MotionClip, MotionLibrary, RobotKinematics, expand_motion_paths, load_motion
from mimic_rl.motion.contacts import warn_about_feet
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

__all__ = [
    "COMMAND",
    "G1_END_EFFECTORS",
    "TrackingCommand",
    "TrackingCommandSettings",
    "load_clips",
    "observation_group",
    "tracking_reward",
    "tracking_terminated",
    "tracking_time_out",
]

COMMAND = "motion"
"""The name of the command term of this package's tasks (the term every task term below reads)."""


def load_clips(
    motions: list[str], csv_fps: float | None, kinematics: RobotKinematics, feet: tuple[str, ...] = ()
) -> list[MotionClip]:
    """Every clip of ``motions`` (files, folders, globs; any format this package reads) for the robot of
    ``kinematics``; a bad file is a ``MotionFormatError`` that names it; a clip whose ``feet`` float or skate is
    warned about (``mimic_rl.motion.contacts.warn_about_feet``)."""
    clips = []
    for path in expand_motion_paths(list(motions)):
        clips.append(load_motion(path, robot=kinematics, csv_fps=csv_fps))
        warn_about_feet(str(path), kinematics, clips[-1], feet)
    return clips


@dataclass(kw_only=True)
class TrackingCommandSettings:
    """The settings of the motion command (defaults: the embedded env's ``TrackingEnvConfig`` and the G1); a backend's
    command config derives from this and from its simulator's ``CommandTermCfg``."""

    entity_name: str = "robot"
    motions: list[str] = field(default_factory=list)
    csv_fps: float | None = None
    anchor_body: str = "torso_link"
    end_effectors: tuple[str, ...] = G1_END_EFFECTORS
    feet: tuple[str, ...] = G1_FEET
    """The robot's foot bodies: a clip whose feet float or skate on them is warned about on loading."""
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


class TrackingCommand:
    """Clip, motion time and reference of every env; the MDP of each step (see the module docstring). Call
    ``_setup_tracking`` at the end of the term's ``__init__``."""

    cfg: Any
    _env: Any
    num_envs: int
    device: Any
    simulator = "the simulator"
    """The simulator's name in messages."""

    # ------------------------------------------------------------------ simulator hooks
    def _robot_names(self) -> tuple[list[str], list[str]]:
        """(body names, joint names) of the robot entity, in the simulator's order (the root body first)."""
        raise NotImplementedError

    def _robot_joint_limits(self) -> torch.Tensor:
        """``[J, 2]`` hard joint position limits in the simulator's joint order."""
        raise NotImplementedError

    def _robot_default_joint_pos(self) -> torch.Tensor:
        """``[N, J]`` default joint positions in the simulator's joint order."""
        raise NotImplementedError

    def _read_robot(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(body link poses ``[N, B, 7]``: world position and wxyz quaternion, body link velocities ``[N, B, 6]``:
        world linear and angular, joint positions ``[N, J]``, joint velocities ``[N, J]``), simulator order."""
        raise NotImplementedError

    def _reference_state_model(self, joint_ids: torch.Tensor) -> tuple[Any, list[int], list[int]]:
        """(a MuJoCo model of the robot, free joint first, the ``qpos`` and ``qvel`` addresses of the simulator's
        joints ``joint_ids`` in it): the layout of the physics rows ``_write_rows`` receives."""
        raise NotImplementedError

    def _write_rows(self, env_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Put physics rows (``qpos`` then ``qvel`` of ``_reference_state_model``'s model, root angular velocity
        local, positions from the env's origin) into the simulator's envs ``env_ids``."""
        raise NotImplementedError

    def refresh_body_states(self) -> None:
        """Make body poses and velocities describe the same instant as the joint state (after a step)."""

    def _reward_scale(self) -> float:
        """What the simulator's reward manager multiplies the reward by (the log's total is scaled by it)."""
        return 1.0

    # ------------------------------------------------------------------ setup
    def _setup_tracking(self, kinematics: RobotKinematics) -> None:
        """Load the clips, lay out bodies and joints by name, build the reference-state initialization."""
        cfg = self.cfg
        if not cfg.motions:
            raise ConfigError(f"--motion: expected motion files for the {self.simulator} tracking task, found none")
        dev = self.device
        self.library = MotionLibrary(load_clips(cfg.motions, cfg.csv_fps, kinematics, tuple(cfg.feet)), device=dev)
        self.library.check_sampling_mode(cfg.sampling_mode)
        root_body = self._layout_from_names()
        n = self.num_envs
        self.clip_ids = torch.zeros(n, dtype=torch.long, device=dev)
        self.motion_time = torch.zeros(n, device=dev)
        self.reference_mask = torch.ones(n, dtype=torch.bool, device=dev)
        """Every env has a reference, always (the contract's ``reference_mask``)."""
        env = self._env
        self._future_offsets = torch.arange(cfg.num_future_frames, device=dev) * (cfg.future_stride * env.step_dt)
        self._gen = torch.Generator(device=dev).manual_seed(int(env.cfg.seed or 0))
        self._evaluated_at = -1
        self._failures_counted_at = -1
        self._result: dict[str, Any] | None = None
        self._obs: dict[str, torch.Tensor] | None = None
        self.eval_clip: int | torch.Tensor | None = None
        """When set, every restart is at this clip's first frame, or env ``i``'s at clip ``eval_clip[i]``'s (a tensor
        ``[N]``; evaluation from each clip's start)."""
        limits = self.layout.joint_lower, self.layout.joint_upper
        self._init = self._reference_state_init(self.library.body_names.index(root_body), limits)

    def _layout_from_names(self) -> str:
        """Bodies and joints by name: the simulator's entity order against the library's; returns the root body."""
        cfg, lib = self.cfg, self.library
        names, joints = self._robot_names()
        lib_bodies = lib.body_names
        tracked = list(cfg.tracked_bodies or names)
        missing = [b for b in tracked if b not in lib_bodies or b not in names]
        if missing or cfg.anchor_body not in tracked:
            raise ConfigError(
                f"--motion: expected motions of {self.simulator}'s {cfg.entity_name} (bodies {tracked[:4]}...), found "
                f"motions without its bodies {(missing or [cfg.anchor_body])[:4]}; pass motions of this robot"
            )
        if sorted(lib.joint_names) != sorted(joints):
            raise ConfigError(
                f"--motion: expected the {len(joints)} joints of {self.simulator}'s {cfg.entity_name}, found motions "
                f"with {len(lib.joint_names)} (missing {[j for j in joints if j not in lib.joint_names][:4]}); pass "
                "motions of this robot"
            )
        dev = self.device
        self.tracked = tracked
        self._body_idx = torch.tensor([names.index(b) for b in tracked], device=dev)
        self._joint_idx = torch.tensor([joints.index(j) for j in lib.joint_names], device=dev)
        self._ref_tracked = [lib_bodies.index(b) for b in tracked]
        self._ref_anchor_only = [lib_bodies.index(cfg.anchor_body)]
        limits = self._robot_joint_limits()[self._joint_idx]  # hard limits, the library's joint order
        self.layout = TrackingLayout(
            anchor=tracked.index(cfg.anchor_body),
            root=tracked.index(names[0]) if names[0] in tracked else tracked.index(cfg.anchor_body),
            end_effectors=torch.tensor([tracked.index(b) for b in cfg.end_effectors], dtype=torch.long, device=dev),
            default_joint_pos=self._robot_default_joint_pos()[:, self._joint_idx],
            joint_lower=limits[:, 0],
            joint_upper=limits[:, 1],
        )
        return names[0]

    def _reference_state_init(self, root: int, limits: tuple[torch.Tensor, torch.Tensor]) -> Any:
        """The shared ``ReferenceStateInit`` (the embedded env's too) on the robot's MuJoCo model."""
        from mimic_rl.envs.common.reference_state import ReferenceStateInit

        cfg = self.cfg
        settings = ResetSettings(cfg.sampling_mode, cfg.clip_start_probability, cfg.init_noise)  # pushes: the task's
        model, q_adr, v_adr = self._reference_state_model(self._joint_idx)
        return ReferenceStateInit(settings, self.library, model, root, q_adr, v_adr, limits, self._env.step_dt)

    # ------------------------------------------------------------------ states
    def robot_state(self) -> BodyState:
        """The tracked bodies' and the joints' states of every env: positions relative to each env's origin, world
        orientation (wxyz), world velocities of the body frames, joints in the library's order."""
        pose, vel, joint_pos, joint_vel = self._read_robot()
        pose, vel = pose[:, self._body_idx], vel[:, self._body_idx]
        return BodyState(
            joint_pos=joint_pos[:, self._joint_idx],
            joint_vel=joint_vel[:, self._joint_idx],
            body_pos_w=pose[..., 0:3] - self._env.scene.env_origins.unsqueeze(1),
            body_quat_w=pose[..., 3:7],
            body_lin_vel_w=vel[..., 0:3],
            body_ang_vel_w=vel[..., 3:6],
        )

    def reference(self, clip_ids: torch.Tensor, times: torch.Tensor) -> tuple[BodyState, BodyState]:
        """Future frames ``[N, K]`` of the anchor alone (observations) and the current frame of the tracked bodies
        (rewards, terminations, metrics)."""
        now, future = self.library.state_and_future(
            clip_ids, times, self._future_offsets, self._ref_tracked, self._ref_anchor_only
        )
        return future, now

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
        cfg = self.cfg
        return step_evaluation(
            cfg.reward, cfg.termination, self.robot_state(), ref, future, self.layout, actions, last_actions,
            truncated, self._reward_scale(),
        )  # fmt: skip

    def step_result(self) -> dict[str, Any]:
        """This policy step's MDP (computed once per step, by whichever term asks first): the motion time advances
        by one step, then ``evaluate`` with the simulator's actions and episode lengths."""
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
        """The reference observation ``[N, K, 2 J + 9]`` (the simulator's ``generated_commands``)."""
        return self.observations()["reference"]

    # ------------------------------------------------------------------ the command manager's hooks
    def _update_metrics(self) -> None:
        """No per-term metrics: the MDP's are in the env's ``extras["log"]``."""

    def _update_command(self, env_ids: torch.Tensor | None = None) -> None:
        """The state changed (after a step or a reset): observe it anew."""
        del env_ids  # every env's observations are recomputed, from the same state for those not reset
        self._obs = self._observe()

    def _resample_command(self, env_ids: torch.Tensor | slice) -> None:
        """Restart ``env_ids``: fold this step's failures into the adaptive sampler, draw (clip, time) and write the
        noisy reference state (the embedded env's ``ReferenceStateInit``), or the evaluation clip's first frame."""
        if isinstance(env_ids, slice):
            env_ids = torch.arange(self.num_envs, device=self.device)[env_ids]
        env_ids = env_ids.to(self.device, torch.long)
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
        else:
            if isinstance(self.eval_clip, torch.Tensor):
                clip_ids = self.eval_clip.to(self.device)[env_ids]
            else:
                clip_ids = torch.full_like(draws[:, 0], self.eval_clip, dtype=torch.long)
            fresh = self._init.clip_starts(clip_ids, draws)
        self.clip_ids[env_ids] = fresh["clip_ids"]
        self.motion_time[env_ids] = fresh["times"]
        self._write_rows(env_ids, fresh["rows"])


# ---------------------------------------------------------------------- the task's terms (mjlab's and Isaac Lab's)
def _command(env: Any, command_name: str) -> TrackingCommand:
    return env.command_manager.get_term(command_name)


def observation_group(env: Any, command_name: str, group: str) -> torch.Tensor:
    """One observation group of the task's command (the whole group is one term)."""
    return _command(env, command_name).observations()[group]


def tracking_reward(env: Any, command_name: str) -> torch.Tensor:
    """The step's tracking reward ``[N]`` (``mimic_rl.tasks.tracking.tracking_reward``; the simulator's reward manager
    scales it by the step's dt)."""
    return _command(env, command_name).step_result()["reward"]


def tracking_terminated(env: Any, command_name: str) -> torch.Tensor:
    """The step's tracking terminations, bool ``[N]`` (``mimic_rl.tasks.tracking.tracking_terminations``)."""
    return _command(env, command_name).step_result()["terminated"]


def tracking_time_out(env: Any, command_name: str) -> torch.Tensor:
    """bool ``[N]``: the episode limit or the clip's end, and no termination."""
    return _command(env, command_name).step_result()["time_outs"]
