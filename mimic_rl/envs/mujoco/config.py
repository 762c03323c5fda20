"""Settings of the embedded MuJoCo tracking env (``TrackingEnvConfig``), every field with a default."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from mimic_rl.envs.mujoco.physics import DomainRandomization
from mimic_rl.motion.adaptive import AdaptiveSamplingConfig
from mimic_rl.motion.clip import FPS_RANGE
from mimic_rl.tasks.tracking import (
    DeployObservations,
    InitNoise,
    ResetSettings,
    TerminationConfig,
    TrackingRewardConfig,
)
from mimic_rl.utils import Range

__all__ = ["InitNoise", "TrackingEnvConfig"]


@dataclass
class TrackingEnvConfig:
    """Settings of the tracking env; every field has a default."""

    backend: Literal["mujoco"] = "mujoco"
    """The embedded MuJoCo backend (``env.backend``; see ``mimic_rl.envs.registry``)."""
    num_envs: Annotated[int, Range(1)] = 64
    robot: Literal["humanoid28", "g1"] = "humanoid28"
    robot_mjcf: str | None = None
    motions: list[str] = field(default_factory=list)
    csv_fps: Annotated[float | None, Range(*FPS_RANGE)] = None
    decimation: Annotated[int, Range(1)] = 4
    episode_length_s: Annotated[float, Range(0, low_exclusive=True)] = 10.0
    num_future_frames: Annotated[int, Range(1)] = 5
    future_stride: Annotated[int, Range(1)] = 1
    """Future reference frames are ``future_stride`` policy steps apart."""
    sampling_mode: Literal["start", "uniform", "adaptive"] = "adaptive"
    adaptive_sampling: AdaptiveSamplingConfig = field(default_factory=AdaptiveSamplingConfig)
    """How ``sampling_mode: adaptive`` weighs start times by failure (``mimic_rl.motion.adaptive``)."""
    clip_start_probability: Annotated[float, Range(0, 1)] = 0.0
    """Share of episodes that start at their clip's first frame whatever ``sampling_mode`` says: evaluation starts
    there, and a clip's start (the robot taking over a motion already under way) is rarely drawn otherwise."""
    init_noise: InitNoise = field(default_factory=InitNoise)
    reward: TrackingRewardConfig = field(default_factory=TrackingRewardConfig)
    termination: TerminationConfig = field(default_factory=TerminationConfig)
    randomization: DomainRandomization = field(default_factory=DomainRandomization)
    deploy: DeployObservations = field(default_factory=DeployObservations)
    """The deployable observation groups (``deploy_policy``, ``deploy_reference``) with sensor noise, latency and
    action delay (``mimic_rl.tasks.tracking.deploy``); off by default."""
    action_offset: Literal["default", "reference"] = "default"
    """PD targets are ``offset + action_scale * action``: ``"default"`` offsets from the default pose; ``"reference"``
    from the reference's joint positions one policy step ahead (a residual policy: zero action tracks the reference
    open-loop, so learning starts from feed-forward tracking and only has to add balance)."""
    reference_velocity_feedforward: bool = False
    """With ``action_offset: reference``, add ``kv / kp`` times the reference's joint velocities (one policy step
    ahead) to the PD targets, so that a position servo's damping pulls towards the reference's velocity instead of
    braking every motion (``kp (q* - q) + kv (qd* - qd)``; needs position actuators)."""
    action_scale_factor: Annotated[float | None, Range(0, low_exclusive=True)] = None
    """Multiplies the robot's action scale (rad of PD target per unit of action); None: the robot's own factor
    (``RobotConfig.action_scale_factor``: humanoid28 0.3, the G1 1.0)."""
    reward_scale_by_dt: bool = True
    num_threads: Annotated[int | None, Range(1)] = None
    """Physics threads (MuJoCo's rollout pool); None: torch's intra-op threads when the env is built (the run's
    ``--threads``, see ``mimic_rl.runners.threads``)."""
    torch_threads: Annotated[int | None, Range(1)] = None
    """Torch threads inside ``step()``; None: 1 on the CPU, else unchanged. The step's tensors are small (tens of
    thousands of numbers at 1,024 envs), so OpenMP's fork/join costs more than it saves, and a second thread waits on
    a busy core when the machine is shared (``docs/benchmarks.md``). The caller's setting is restored after each
    step; the physics keeps its own pool (``num_threads``)."""
    amp_features: Literal["joints", "body"] = "joints"
    """What the ``amp`` group (the AMP discriminator's state) holds: ``joints``, the joint positions and velocities,
    whose expert pairs are the reference observation's (``amp_reference_extractor``); ``body``, also the anchor's
    height, velocities and tilt and the end effectors' positions in its heading frame
    (``mimic_rl.tasks.tracking.amp_features``), whose expert pairs the env draws from its clips
    (``amp_expert_sampler``, which AMP then uses instead of the reference observation)."""
    quality_metrics: bool = False
    """Measure how the robot moves (foot sliding, joint jerk, torque, power, ground penetration) each step, for the
    evaluation (``mimic_rl.tasks.tracking.quality``; ``mimic-rl eval`` turns it on): adds MuJoCo sensors, no physics.
    """
    compile: bool = False
    """Fuse the per-step MDP (reference interpolation, observations, rewards, terminations, metrics) with
    ``torch.compile``: fewer, larger kernels instead of ~2,500 small eager ops per step. Costs a one-off compile
    (tens of seconds on a CPU, needs a C++ compiler there); results match eager to float32 rounding."""
    seed: Annotated[int, Range(0)] = 0
    device: str = "cpu"

    def reset_settings(self) -> ResetSettings:
        """What reference-state initialization reads of this config."""
        return ResetSettings(
            self.sampling_mode, self.clip_start_probability, self.init_noise, self.randomization.push_interval_s
        )
