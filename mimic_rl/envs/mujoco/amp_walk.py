"""The embedded env of the style-only walking task (``env.backend: mujoco_amp_walk``, ``configs/amp_walk.yaml``).

The robot walks at a commanded heading and speed; no reward term looks at the clip. The clip is the AMP expert
(``amp_expert_sampler`` draws its consecutive-frame pairs) and the reference-state initialization's source (each
episode starts at a random frame of it, as in Peng et al. 2021). The MDP core is ``mimic_rl.tasks.amp_walk``.

Observation groups: ``policy`` (the tracking env's proprioception), ``critic`` (``policy`` plus the body poses in the
anchor frame and the anchor's height), ``command`` (speed, cos and sin of the commanded heading in the robot's
heading frame) and ``amp`` (``env.amp_features``, here ``body`` by default: ``mimic_rl.tasks.tracking.amp_features``,
joints, the anchor's height, velocities and tilt in its heading frame, the end effectors' positions). There is no
``reference`` group.

Episodes end when the anchor falls below ``env.command.fall_height_fraction`` of the clip's mean anchor height, or
after ``episode_length_s``. The env steps eagerly (``env.compile`` must be off).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from tensordict import TensorDict

from mimic_rl.envs.mujoco.config import TrackingEnvConfig
from mimic_rl.envs.mujoco.env import MujocoTrackingEnv
from mimic_rl.envs.mujoco.physics import DomainRandomization
from mimic_rl.envs.mujoco.robots import RobotConfig
from mimic_rl.errors import ConfigError
from mimic_rl.motion import MotionClip
from mimic_rl.tasks.amp_walk import (
    WalkCommandConfig,
    command_observation,
    command_velocity,
    fallen,
    heading_angle,
    sample_commands,
    velocity_reward,
)
from mimic_rl.tasks.tracking import StepContext, evaluate_observations, observation_terms
from mimic_rl.tasks.tracking.quality import MotionQuality

__all__ = ["AmpWalkEnvConfig", "MujocoAmpWalkEnv", "evaluate_amp_walk", "play_env"]


@dataclass
class AmpWalkEnvConfig(TrackingEnvConfig):
    """The tracking env's settings (robot, clip, physics, initialization) plus the walking command; the tracking
    rewards and terminations (``reward``, ``termination``) are not used."""

    backend: Literal["mujoco_amp_walk"] = "mujoco_amp_walk"
    command: WalkCommandConfig = field(default_factory=WalkCommandConfig)
    sampling_mode: Literal["start", "uniform", "adaptive"] = "uniform"
    episode_length_s: float = 20.0
    amp_features: Literal["joints", "body"] = "body"


class MujocoAmpWalkEnv(MujocoTrackingEnv):
    """N robots walking at commanded headings and speeds in the style of a clip (see the module docstring)."""

    def __init__(
        self, cfg: AmpWalkEnvConfig, robot: RobotConfig | None = None, clips: list[MotionClip] | None = None
    ) -> None:
        if cfg.compile:
            raise ConfigError("env.compile: the amp_walk env steps eagerly; set env.compile=false")
        if cfg.action_offset != "default":
            raise ConfigError(
                f"env.action_offset: amp_walk has no reference to offset actions from, found {cfg.action_offset!r}; "
                "set env.action_offset=default"
            )
        n, dev = int(cfg.num_envs), torch.device(cfg.device)
        self.command_speed = torch.zeros(n, device=dev)
        """Commanded planar speed ``[N]``, m/s."""
        self.command_heading = torch.zeros(n, device=dev)
        """Commanded world heading ``[N]``, rad."""
        table = observation_terms(amp=cfg.amp_features)
        self._groups_table = {k: v for k, v in table.items() if k in ("policy", "critic", "amp")}
        super().__init__(cfg, robot, clips)
        anchor_heights = torch.cat([self._clip_anchor_heights(c) for c in range(self.library.num_clips)])
        self.fall_height = float(cfg.command.fall_height_fraction * anchor_heights.mean())
        """Anchor height (m) below which an episode ends."""

    def _clip_anchor_heights(self, clip: int) -> torch.Tensor:
        duration = float(self.library.clip_duration[clip])
        times = torch.linspace(0.0, duration, max(2, int(duration / self.step_dt)), device=self.device)
        ids = torch.full_like(times, clip, dtype=torch.long)
        return self.library.state(ids, times, bodies=self._ref_anchor_only).body_pos_w[:, 0, 2]

    # ------------------------------------------------------------------ commands
    def _restart(self, env_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """The tracking env's restart, then a new command for each restarted env (relative to its new heading)."""
        super()._restart(env_ids, rows)
        robot = self._state_from_sensors(self._sensors[env_ids])
        start = heading_angle(robot.body_quat_w[:, self.anchor])
        speed, heading = sample_commands(self.cfg.command, start, self._gen)
        self.command_speed[env_ids] = speed
        self.command_heading[env_ids] = heading

    # ------------------------------------------------------------------ observations
    def _groups(
        self, sensor: torch.Tensor, last_actions: torch.Tensor, rows: torch.Tensor | None, robot: Any = None
    ) -> dict:
        """Every group of the envs ``rows`` (all envs: None) from their sensor rows (or their state ``robot``, already
        read from them) and last actions."""
        robot = self._state_from_sensors(sensor) if robot is None else robot
        ctx = StepContext(robot, self.tracking_layout, actions=last_actions)
        groups = evaluate_observations(self._groups_table, ctx)
        speed = self.command_speed if rows is None else self.command_speed[rows]
        heading = self.command_heading if rows is None else self.command_heading[rows]
        groups["command"] = command_observation(ctx.anchor_quat_w, speed, heading)
        return groups

    def _observe(self, sensor: torch.Tensor, clip_ids: torch.Tensor, obs_time: torch.Tensor, last_actions) -> dict:
        return self._groups(sensor, last_actions, None)  # the base env observes all envs here (its resets: below)

    def _observe_into(self, groups, rows, sensor, clip_ids, obs_time, last_actions) -> dict[str, torch.Tensor]:
        fresh = self._groups(sensor[rows], last_actions[rows], rows)
        return {name: value.index_put((rows,), fresh[name]) for name, value in groups.items()}

    def _tensordict(self, groups: dict) -> TensorDict:
        return TensorDict(dict(groups), batch_size=[self.num_envs], device=self.device)

    # ------------------------------------------------------------------ step
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
        """Reward, terminations, the values logged and the observations of the new state (eagerly)."""
        cmd = self.cfg.command
        robot = self._state_from_sensors(sensor)
        anchor_pos, anchor_vel = robot.body_pos_w[:, self.anchor], robot.body_lin_vel_w[:, self.anchor]
        target = command_velocity(self.command_speed, self.command_heading)
        tracking = velocity_reward(anchor_vel, target, cmd.velocity_std)
        scale = self.step_dt if self.cfg.reward_scale_by_dt else 1.0
        reward = cmd.velocity_weight * tracking * scale
        terminated = fallen(anchor_pos, self.fall_height)
        time_outs = (episode_length >= self.max_episode_length) & ~terminated
        dones = terminated | time_outs
        direction = target / self.command_speed.clamp(min=1e-6).unsqueeze(-1)
        along = (anchor_vel[:, :2] * direction).sum(-1)
        values = {
            "speed_along_command": along,
            "command_speed": self.command_speed.clone(),
            "velocity_error": (anchor_vel[:, :2] - target).norm(dim=-1),
        }
        log = {"reward/velocity": tracking.mean(), "termination/fall": terminated.float().mean()}
        log["reward/total"] = reward.mean()
        log.update({f"metrics/{k}": v.mean() for k, v in values.items()})
        return {
            "reward": reward,
            "terminated": terminated,
            "time_outs": time_outs,
            "dones": dones,
            "values": values,
            "termination_terms": {"fall": terminated},
            "body_error_mm": torch.zeros(self.num_envs, len(self.tracked), device=self.device),
            "log": log,
            "obs": self._groups(sensor, actions, None, robot),  # the state read above, not read again
            "metric_sums": torch.stack(list(values.values())).to(torch.float64).sum(-1),
            "episode_counts": torch.stack((dones.sum(), time_outs.sum())).to(torch.float64),
            "last_actions": torch.where(dones.unsqueeze(-1), 0.0, actions),
        }

    video_reference = False
    """Videos show the robot alone: no reference follows the commands."""

    def video_label(self, extras: dict[str, Any], env_index: int) -> str:
        """A video frame's status: env ``env_index``'s speed along its command and the command."""
        speed = float(extras["tracking"]["speed_along_command"][env_index])
        return f"speed {speed:.2f} m/s, command {float(self.command_speed[env_index]):.2f} m/s"

    def state_dict(self) -> dict[str, Any]:
        """The tracking env's state plus the commands."""
        return {
            **super().state_dict(),
            "command_speed": self.command_speed.clone(),
            "command_heading": self.command_heading.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()`` (the env must have been built with the same config)."""
        super().load_state_dict(state)
        self.command_speed.copy_(state["command_speed"])
        self.command_heading.copy_(state["command_heading"])


def evaluate_amp_walk(
    policy: Any,
    cfg: Any,
    num_envs: int = 64,
    robot: Any = None,
    check_env: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Walk ``num_envs`` envs for one episode each (``env.episode_length_s``, reference-state initialization at random
    frames, no domain randomization) with ``policy``; returns the JSON-ready ``{"clips": [entry], "summary": entry}``
    with the share of envs that did not fall, the mean speed along the commanded heading against the command, the
    share of envs within 20 % of their commanded speed, the velocity error, the motion-quality metrics, and each env's
    command and mean speed (``per_env``)."""
    env_cfg: AmpWalkEnvConfig = copy.deepcopy(cfg.env)
    env_cfg.compile = False
    env_cfg.randomization = DomainRandomization(enabled=False)
    env_cfg.quality_metrics = True
    env_cfg.device = cfg.runner.device
    env_cfg.num_envs = num_envs
    env = MujocoAmpWalkEnv(env_cfg, robot=robot)
    try:
        if check_env is not None:
            check_env(env)
        entry = _walk_episodes(env, policy)
    finally:
        env.close()
    return {"task": "amp_walk", "clips": [entry], "summary": dict(entry)}


def _walk_episodes(env: MujocoAmpWalkEnv, policy: Any) -> dict[str, Any]:
    n, dev = env.num_envs, env.device
    alive = torch.ones(n, dtype=torch.bool, device=dev)
    fell = torch.zeros(n, dtype=torch.bool, device=dev)
    steps = torch.zeros(n, device=dev)
    along = torch.zeros(n, dtype=torch.float64, device=dev)
    error = torch.zeros(n, dtype=torch.float64, device=dev)
    quality = MotionQuality(1, n, env.step_dt, dev)
    command = env.command_speed.clone()
    obs = env.get_observations()
    policy.reset()
    for _ in range(env.max_episode_length):
        obs, _, dones, extras = env.step(policy(obs))
        policy.reset(dones)
        values = extras["tracking"]
        along += torch.where(alive, values["speed_along_command"].double(), 0.0)
        error += torch.where(alive, values["velocity_error"].double(), 0.0)
        if "quality" in extras:
            quality.record(extras["quality"], alive.unsqueeze(0), steps.unsqueeze(0))
        steps += alive.float()
        fell |= alive & values["terminated"]
        alive &= ~dones
        if not bool(alive.any()):
            break
    mean_along = along / steps.clamp(min=1).double()
    ratio = (mean_along / command.double()).cpu()
    return {
        "name": "amp_walk",
        "no_fall_rate": float((~fell).float().mean()),
        "episode_length_fraction": float((steps / env.max_episode_length).mean()),
        "command_speed_m_s": float(command.mean()),
        "speed_along_command_m_s": float(mean_along.mean()),
        "speed_ratio": float(ratio.mean()),
        "within_20_percent": float(((ratio - 1.0).abs() <= 0.2).float().mean()),
        "velocity_error_m_s": float((error / steps.clamp(min=1).double()).mean()),
        **quality.result(0),
        "per_env": {"command_m_s": command.tolist(), "speed_along_command_m_s": mean_along.tolist()},
    }


def play_env(env_cfg: AmpWalkEnvConfig) -> MujocoAmpWalkEnv:
    """The env of ``env_cfg`` for a short run (``mimic-rl play``, videos)."""
    return MujocoAmpWalkEnv(copy.deepcopy(env_cfg))
