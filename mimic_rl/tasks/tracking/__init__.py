"""The motion-tracking MDP core in pure torch (BeyondMimic / mjlab formulation), shared by every backend.

Backends adapt their simulator's body states to :class:`BodyState` tensors (world frame, quaternions wxyz) and call
these functions; nothing here imports a simulator. The step's MDP is tables of terms (``reward_terms``,
``termination_terms``, ``observation_terms``), each term a function of one :class:`StepContext`.
"""

from mimic_rl.tasks.tracking.amp_features import amp_feature_dim, amp_features
from mimic_rl.tasks.tracking.context import StepContext
from mimic_rl.tasks.tracking.deploy import (
    DEPLOY_GROUPS,
    DEPLOYABLE_TERMS,
    DeployObservations,
    SensorModel,
    deploy_reference,
    deploy_reference_dim,
    term_sizes,
)
from mimic_rl.tasks.tracking.initial_state import InitNoise, ResetSettings
from mimic_rl.tasks.tracking.metrics import (
    TrackingMetrics,
    end_effector_error,
    joint_position_error,
    joint_velocity_rms_error,
    mpjpe,
    root_relative_mpjpe,
    tracking_metrics,
)
from mimic_rl.tasks.tracking.observation_terms import observation_terms
from mimic_rl.tasks.tracking.observations import (
    body_pose_in_anchor_frame,
    projected_gravity,
    reference_observation,
    reference_observation_dim,
    relative_reference_body_poses,
)
from mimic_rl.tasks.tracking.rewards import (
    TrackingRewardConfig,
    action_rate_penalty,
    anchor_orientation_reward,
    anchor_position_reward,
    body_angular_velocity_reward,
    body_linear_velocity_reward,
    joint_limit_penalty,
    joint_position_reward,
    joint_velocity_reward,
    relative_body_orientation_reward,
    relative_body_position_reward,
    reward_terms,
    tracking_reward,
)
from mimic_rl.tasks.tracking.state import BodyState
from mimic_rl.tasks.tracking.step import TrackingLayout, clip_ends, observation_groups, step_evaluation
from mimic_rl.tasks.tracking.terminations import (
    TerminationConfig,
    anchor_height_termination,
    anchor_position_termination,
    anchor_tilt_termination,
    end_effector_height_termination,
    termination_terms,
    tracking_terminations,
)
from mimic_rl.tasks.tracking.terms import (
    ObservationTerm,
    RewardTerm,
    TerminationTerm,
    evaluate_observations,
    evaluate_rewards,
    evaluate_terminations,
)

__all__ = [
    "DEPLOYABLE_TERMS",
    "DEPLOY_GROUPS",
    "BodyState",
    "DeployObservations",
    "InitNoise",
    "ObservationTerm",
    "ResetSettings",
    "RewardTerm",
    "SensorModel",
    "StepContext",
    "TerminationConfig",
    "TerminationTerm",
    "TrackingLayout",
    "TrackingMetrics",
    "TrackingRewardConfig",
    "action_rate_penalty",
    "amp_feature_dim",
    "amp_features",
    "anchor_height_termination",
    "anchor_orientation_reward",
    "anchor_position_reward",
    "anchor_position_termination",
    "anchor_tilt_termination",
    "body_angular_velocity_reward",
    "body_linear_velocity_reward",
    "body_pose_in_anchor_frame",
    "clip_ends",
    "deploy_reference",
    "deploy_reference_dim",
    "end_effector_error",
    "end_effector_height_termination",
    "evaluate_observations",
    "evaluate_rewards",
    "evaluate_terminations",
    "joint_limit_penalty",
    "joint_position_error",
    "joint_position_reward",
    "joint_velocity_reward",
    "joint_velocity_rms_error",
    "mpjpe",
    "observation_groups",
    "observation_terms",
    "projected_gravity",
    "reference_observation",
    "reference_observation_dim",
    "relative_body_orientation_reward",
    "relative_body_position_reward",
    "relative_reference_body_poses",
    "reward_terms",
    "root_relative_mpjpe",
    "step_evaluation",
    "term_sizes",
    "termination_terms",
    "tracking_metrics",
    "tracking_reward",
    "tracking_terminations",
]
