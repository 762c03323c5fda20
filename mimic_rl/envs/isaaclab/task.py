"""mimic_rl's tracking task on Isaac Lab 3.0 (``MimicRL-Tracking-G1``), in Isaac Lab's gym registry.

The scene is a ground plane and the Unitree G1, its USD made from the robot's MJCF (``assets.g1_usd``), with implicit
PD actuators from the G1's actuator table (``mimic_rl.envs.common.robots.G1_ACTUATORS``: the embedded env's, mjlab's)
and its home pose as the default pose. Physics: Newton with MuJoCo Warp (the ``newton_mjwarp`` preset, also the
default), 5 ms steps, 4 per policy step (50 Hz), as the embedded env. Actions are joint position targets offset from
the default pose, scaled per joint by BeyondMimic's rule ``0.25 * effort / kp`` (as mjlab's G1 task).

The motion, the observations, the reward, the terminations and the metrics are this package's
(``command.IsaacLabMotionCommand``): the terms below only hand its per-step result to Isaac Lab's managers.
Observation groups: ``policy``, ``reference`` ``[N, K, 2 J + 9]``, ``critic`` and, in the AMP variant, ``amp``;
``IsaacLabVecEnv`` adds ``reference_mask``. One reward term (the tracking reward; Isaac Lab's reward manager scales it
by the step's dt, as the embedded env does), one termination term (the tracking terminations) and one time-out (the
episode limit or the clip's end). No domain randomization (the embedded env's pushes are not modelled here).

``register_tasks()`` adds the tasks to gym's registry; ``mimic_rl.envs.isaaclab.env`` calls it whenever it reaches
Isaac Lab.
"""

from __future__ import annotations

from typing import Any

from mimic_rl.envs.common.robots import G1_ACTUATORS, G1_HOME_POSE
from mimic_rl.envs.common.tracking_command import (
    COMMAND,
    observation_group,
    tracking_reward,
    tracking_terminated,
    tracking_time_out,
)

__all__ = ["MIMIC_G1", "MIMIC_G1_AMP", "g1_articulation", "mimic_g1_env_cfg", "register_tasks"]

MIMIC_G1 = "MimicRL-Tracking-G1"
MIMIC_G1_AMP = "MimicRL-Tracking-G1-AMP"


def g1_articulation(usd_path: str = "") -> Any:
    """The G1 as an Isaac Lab ``ArticulationCfg``: its USD, implicit PD actuators per motor group (kp, kd, effort
    limit, armature) and the home pose."""
    import isaaclab.sim as sim_utils
    from isaaclab.actuators import ImplicitActuatorCfg
    from isaaclab.assets import ArticulationCfg
    from isaaclab_newton.sim.schemas import NewtonArticulationCfg

    actuators = {
        f"group{i}": ImplicitActuatorCfg(
            joint_names_expr=[g.joints],
            stiffness=g.kp,
            damping=g.kd,
            effort_limit_sim=g.effort,
            armature=g.armature or 0.0,
        )
        for i, g in enumerate(G1_ACTUATORS)
    }
    return ArticulationCfg(
        prim_path="{ENV_REGEX_NS}/Robot",
        spawn=sim_utils.UsdFileCfg(
            usd_path=usd_path, articulation_props=[NewtonArticulationCfg(self_collision_enabled=False)]
        ),
        init_state=ArticulationCfg.InitialStateCfg(pos=(0.0, 0.0, 0.0), joint_pos=dict(G1_HOME_POSE)),
        actuators=actuators,
    )


def _g1_action_scale() -> dict[str, float]:
    """BeyondMimic's per-joint action scale ``0.25 * effort / kp``, by the actuator table's joint regexes."""
    return {g.joints: 0.25 * g.effort / g.kp for g in G1_ACTUATORS}


def mimic_g1_env_cfg(amp: bool = False, play: bool = False) -> Any:
    """The env config of ``MimicRL-Tracking-G1`` (``amp``: the ``-AMP`` variant; ``play``: evaluation, episodes from
    the clips' start). Set the robot's ``usd_path`` and the command's ``motions`` and ``robot_mjcf`` before building
    it (``mimic_rl.envs.isaaclab.env.isaaclab_env_config`` does)."""
    cfg = _g1_env_cfg_class()()
    _set_g1_managers(cfg, amp, play)
    return cfg


def _g1_env_cfg_class() -> Any:
    """The env's configclass: simulation (Newton's MuJoCo-Warp solver, 200 Hz physics, 50 Hz control), a flat ground
    and the G1; its managers are left empty for ``_set_g1_managers``."""
    import isaaclab.sim as sim_utils
    from isaaclab.envs import ManagerBasedRLEnvCfg
    from isaaclab.scene import InteractiveSceneCfg
    from isaaclab.terrains import TerrainImporterCfg
    from isaaclab.utils import configclass
    from isaaclab_newton.physics import MJWarpSolverCfg, NewtonCfg
    from isaaclab_tasks.utils import PresetCfg

    @configclass
    class MimicPhysicsCfg(PresetCfg):
        newton_mjwarp: NewtonCfg = NewtonCfg(
            solver_cfg=MJWarpSolverCfg(njmax=300, nconmax=100, integrator="implicitfast", cone="pyramidal"),
            num_substeps=1,
        )
        default: NewtonCfg = newton_mjwarp

    @configclass
    class SceneCfg(InteractiveSceneCfg):
        terrain = TerrainImporterCfg(
            prim_path="/World/ground",
            terrain_type="plane",
            collision_group=-1,
            physics_material=sim_utils.RigidBodyMaterialCfg(static_friction=0.6, dynamic_friction=0.6),
        )
        robot = g1_articulation()

    @configclass
    class EnvCfg(ManagerBasedRLEnvCfg):
        scene: SceneCfg = SceneCfg(num_envs=64, env_spacing=3.0)
        commands: Any = None
        actions: Any = None
        observations: Any = None
        rewards: Any = None
        terminations: Any = None
        events: Any = None

        def __post_init__(self) -> None:
            self.decimation = 4
            self.episode_length_s = 10.0
            self.sim.dt = 0.005
            self.sim.physics = MimicPhysicsCfg()

    return EnvCfg


def _set_g1_managers(cfg: Any, amp: bool, play: bool) -> None:
    """Fill ``cfg``'s managers: the motion command, joint-position actions around the default pose, one observation
    term per group (``policy``, ``reference``, ``critic`` and, with ``amp``, ``amp``), the tracking reward, the
    tracking terminations and the time-out, no events."""
    import isaaclab.envs.mdp as mdp
    from isaaclab.managers import ObservationGroupCfg, ObservationTermCfg, RewardTermCfg, TerminationTermCfg
    from isaaclab.utils import configclass

    from mimic_rl.envs.isaaclab.command import IsaacLabMotionCommandCfg

    def group(name: str) -> Any:
        params = {"command_name": COMMAND, "group": name}
        group_cfg = ObservationGroupCfg(concatenate_terms=True, enable_corruption=False)
        setattr(group_cfg, name, ObservationTermCfg(func=observation_group, params=params))  # the group is one term
        return group_cfg

    def terms(name: str, **items: Any) -> Any:
        """A manager's config: a configclass with one attribute per term (Isaac Lab's managers read attributes)."""
        return configclass(type(name, (), {"__annotations__": dict.fromkeys(items, Any), **items}))()

    groups = ["policy", "reference", "critic", *(["amp"] if amp else [])]
    params = {"command_name": COMMAND}
    cfg.commands = terms(
        "CommandsCfg", **{COMMAND: IsaacLabMotionCommandCfg(sampling_mode="start" if play else "adaptive")}
    )
    cfg.actions = terms(
        "ActionsCfg",
        joint_pos=mdp.JointPositionActionCfg(
            asset_name="robot", joint_names=[".*"], scale=_g1_action_scale(), use_default_offset=True
        ),
    )
    cfg.observations = terms("ObservationsCfg", **{name: group(name) for name in groups})
    cfg.rewards = terms("RewardsCfg", tracking=RewardTermCfg(func=tracking_reward, weight=1.0, params=params))
    cfg.terminations = terms(
        "TerminationsCfg",
        tracking=TerminationTermCfg(func=tracking_terminated, params=params),
        time_out=TerminationTermCfg(func=tracking_time_out, params=params, time_out=True),
    )
    cfg.events = terms("EventsCfg")


def _rl_cfg() -> Any:
    """An rsl_rl PPO config for Isaac Lab's own train script (the actor reads ``policy``, the critic ``critic``: its
    MLPs take flat groups only; ``mimic-rl train`` has its own)."""
    from isaaclab_rl.rsl_rl import RslRlOnPolicyRunnerCfg

    cfg = RslRlOnPolicyRunnerCfg()
    cfg.obs_groups = {"actor": ["policy"], "critic": ["critic"]}
    cfg.experiment_name = "mimic_rl_g1_tracking"
    return cfg


def register_tasks() -> None:
    """Add ``MimicRL-Tracking-G1`` and ``MimicRL-Tracking-G1-AMP`` to gym's registry (once)."""
    import gymnasium as gym

    for task_id, amp in ((MIMIC_G1, False), (MIMIC_G1_AMP, True)):
        if task_id not in gym.registry:
            gym.register(
                id=task_id,
                entry_point="isaaclab.envs:ManagerBasedRLEnv",
                disable_env_checker=True,
                kwargs={
                    "env_cfg_entry_point": f"{__name__}:{'amp_' if amp else ''}env_cfg",
                    "rsl_rl_cfg_entry_point": f"{__name__}:_rl_cfg",
                },
            )


def env_cfg() -> Any:
    """``MimicRL-Tracking-G1``'s env config (gym's entry point)."""
    return mimic_g1_env_cfg()


def amp_env_cfg() -> Any:
    """``MimicRL-Tracking-G1-AMP``'s env config (gym's entry point)."""
    return mimic_g1_env_cfg(amp=True)
