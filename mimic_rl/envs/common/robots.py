"""Robot facts every backend shares: PD actuator groups and the Unitree G1's table (Unitree's motor specs as mjlab uses
them: position control at a 10 Hz natural frequency with damping ratio 2, ``kp = armature * w^2``,
``kd = 2 * 2 * armature * w``, ``w = 2 pi 10``), its home pose and end effectors. The embedded env builds its MuJoCo
actuators from them (``mimic_rl.envs.mujoco.robots``), Isaac Lab's task its implicit actuators."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["G1_ACTUATORS", "G1_END_EFFECTORS", "G1_FEET", "G1_HOME_POSE", "ActuatorGroup"]


@dataclass(frozen=True)
class ActuatorGroup:
    """PD position control for the joints whose names match ``joints`` (a regex, full match)."""

    joints: str
    kp: float
    kd: float
    effort: float
    armature: float | None = None


G1_ACTUATORS = (
    ActuatorGroup(r".*_(shoulder_(pitch|roll|yaw)|elbow|wrist_roll)_joint", 14.25, 0.907, 25.0, 0.003610),  # 5020
    ActuatorGroup(r".*_hip_(pitch|yaw)_joint|waist_yaw_joint", 40.18, 2.558, 88.0, 0.010178),  # 7520-14
    ActuatorGroup(r".*_hip_roll_joint|.*_knee_joint", 99.10, 6.309, 139.0, 0.025102),  # 7520-22
    ActuatorGroup(r".*_wrist_(pitch|yaw)_joint", 16.78, 1.068, 5.0, 0.004250),  # 4010
    ActuatorGroup(r"waist_(pitch|roll)_joint|.*_ankle_(pitch|roll)_joint", 28.50, 1.814, 50.0, 0.007219),  # 2x5020
)
"""The G1's 29 joints by motor."""

G1_HOME_POSE = {
    r".*_hip_pitch_joint": -0.1,
    r".*_knee_joint": 0.3,
    r".*_ankle_pitch_joint": -0.2,
    r".*_shoulder_pitch_joint": 0.2,
    r".*_elbow_joint": 1.28,
    r"left_shoulder_roll_joint": 0.2,
    r"right_shoulder_roll_joint": -0.2,
}
"""Joint-name regex -> angle (rad); other joints 0. The pelvis stands at z = 0.7837 m in it."""

G1_END_EFFECTORS = ("left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link")
"""The ankles' and wrists' last links."""
G1_FEET = ("left_ankle_roll_link", "right_ankle_roll_link")
"""The links that carry the soles' collision geoms."""
