"""mimic_rl's tracking task on mjlab (``MimicRL-Tracking-G1``, ``MimicRL-Tracking-G1-AMP``), in mjlab's registry.

The scene, the robot (mjlab's G1 entity), the actions (joint position targets, mjlab's G1 scales, offset from the
default pose), the physics and the domain randomization (pushes, foot friction, torso centre of mass) are those of
mjlab's own G1 tracking task. The motion, the observations, the reward, the terminations and the metrics are this
package's (``command.MimicMotionCommand``): the terms below only hand its per-step result to mjlab's managers.

Observation groups (mjlab's): ``policy``, ``reference`` ``[N, K, 2 J + 9]``, ``critic`` and, in the AMP variant,
``amp``; ``MjlabVecEnv`` adds ``reference_mask`` (the package's contract; the critic reads the same ``reference``).
One reward term (the tracking reward, scaled by the step's dt by mjlab's reward manager, as the embedded env scales
it), one termination term (the tracking terminations) and one time-out (the episode limit or the clip's end).
mjlab's self-collision penalty, observation noise and encoder bias are left out: the embedded env has none.

``register_tasks()`` adds the tasks to mjlab's registry; ``mimic_rl.envs.mjlab`` calls it whenever it reaches mjlab.
"""

from __future__ import annotations

from typing import Any

from mimic_rl.envs.common.tracking_command import (
    COMMAND,
    observation_group,
    tracking_reward,
    tracking_terminated,
    tracking_time_out,
)

__all__ = ["MIMIC_G1", "MIMIC_G1_AMP", "mimic_g1_env_cfg", "register_tasks"]

MIMIC_G1 = "MimicRL-Tracking-G1"
MIMIC_G1_AMP = "MimicRL-Tracking-G1-AMP"


def _group(name: str) -> Any:
    from mjlab.managers import ObservationGroupCfg, ObservationTermCfg

    term = ObservationTermCfg(func=observation_group, params={"command_name": COMMAND, "group": name})
    return ObservationGroupCfg(terms={name: term}, concatenate_terms=True, enable_corruption=False)


def mimic_g1_env_cfg(amp: bool = False, play: bool = False) -> Any:
    """The env config of ``MimicRL-Tracking-G1`` (``amp``: the ``-AMP`` variant; ``play``: evaluation, no
    randomization, episodes from the clips' start). Set the command's ``motions`` before building it."""
    from mjlab.managers import RewardTermCfg, TerminationTermCfg
    from mjlab.tasks.tracking.config.g1.env_cfgs import unitree_g1_flat_tracking_env_cfg

    from mimic_rl.envs.mjlab.command import MimicMotionCommandCfg

    cfg = unitree_g1_flat_tracking_env_cfg(play=play)  # scene, G1 entity, actions, sim, events
    cfg.scene.sensors = ()  # the self-collision sensor fed a penalty this task does not have
    cfg.commands = {COMMAND: MimicMotionCommandCfg(sampling_mode="start" if play else "adaptive")}
    groups = ["policy", "reference", "critic", *(["amp"] if amp else [])]
    cfg.observations = {name: _group(name) for name in groups}
    params = {"command_name": COMMAND}
    cfg.rewards = {"tracking": RewardTermCfg(func=tracking_reward, weight=1.0, params=params)}
    cfg.terminations = {
        "tracking": TerminationTermCfg(func=tracking_terminated, params=params),
        "time_out": TerminationTermCfg(func=tracking_time_out, params=params, time_out=True),
    }
    cfg.events.pop("encoder_bias", None)  # joint positions are observed unbiased, as on the embedded env
    if play:
        cfg.events = {}  # evaluation runs the nominal robot, as the embedded env's does
    cfg.curriculum = {}
    return cfg


def _rl_cfg() -> Any:
    """mjlab's G1 tracking PPO settings (what mjlab's own train script would use; mimic-rl train has its own)."""
    from mjlab.tasks.tracking.config.g1.rl_cfg import unitree_g1_tracking_ppo_runner_cfg

    cfg = unitree_g1_tracking_ppo_runner_cfg()
    cfg.obs_groups = {"actor": ("policy",), "critic": ("critic",)}  # rsl_rl's MLPs take flat groups only
    cfg.experiment_name = "mimic_rl_g1_tracking"
    return cfg


def register_tasks() -> None:
    """Add ``MimicRL-Tracking-G1`` and ``MimicRL-Tracking-G1-AMP`` to mjlab's task registry (once)."""
    from mjlab.tasks import registry

    known = set(registry.list_tasks())
    for task_id, amp in ((MIMIC_G1, False), (MIMIC_G1_AMP, True)):
        if task_id not in known:
            registry.register_mjlab_task(
                task_id=task_id,
                env_cfg=mimic_g1_env_cfg(amp=amp),
                play_env_cfg=mimic_g1_env_cfg(amp=amp, play=True),
                rl_cfg=_rl_cfg(),
            )
