"""The embedded MuJoCo backend: robots, batched physics and the vectorized tracking env."""

from mimic_rl.envs.mujoco.env import (
    InitNoise,
    MujocoTrackingEnv,
    TrackingEnvConfig,
    amp_obs_extractor,
    amp_reference_extractor,
)
from mimic_rl.envs.mujoco.physics import BatchedPhysics, DomainRandomization
from mimic_rl.envs.mujoco.robots import (
    ActuatorGroup,
    RobotConfig,
    build_model,
    g1_config,
    humanoid28_config,
    robot_config,
)

__all__ = [
    "ActuatorGroup",
    "BatchedPhysics",
    "DomainRandomization",
    "InitNoise",
    "MujocoTrackingEnv",
    "RobotConfig",
    "TrackingEnvConfig",
    "amp_obs_extractor",
    "amp_reference_extractor",
    "build_model",
    "g1_config",
    "humanoid28_config",
    "robot_config",
]
