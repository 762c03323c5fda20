"""One MDP, two backends: the embedded MuJoCo env and mimic_rl's task on mjlab, given the same G1 state and the same
clip times, agree on the robot's body states, the observation groups, the rewards (every term), the terminations
(every term), the time-outs and the metrics, to float32 rounding.

What is compared: both envs load the same two clips (a CSV read by forward kinematics, an npz) and use the same reward
and termination settings; the same MuJoCo ``qpos``/``qvel`` rows (noisy reference states, pushed further from the
reference so that terms differ from 1 and some envs terminate) go into both. The embedded env evaluates its sensors at
that state (``mj_forward``), mjlab writes it through its entity API and recomputes the kinematics (MuJoCo Warp,
float32). Then each env's own MDP step (``MujocoTrackingEnv._evaluate``, ``MimicMotionCommand.evaluate``) runs at the
same clip times, actions, previous actions and episode lengths. Bodies are matched by name (the mjlab env of the
tests lists its tracked bodies in reverse order, so that a comparison by position would fail).

What differs by design is not compared: the physics of a step (MuJoCo C vs MuJoCo Warp, their contact and actuator
settings, float64 vs float32), and when in a step each env reads its state (the embedded env's sensors lag the end of
the step by one physics step and its reference is taken at that instant; the mjlab task reads the state at the end of
the step, with the reference at the end of the step).
"""

from __future__ import annotations

import pytest
import torch
from mjlab_task_helpers import embedded_env, set_embedded_state, shared_env, write_mujoco_state
from task_helpers import check_one_mdp_two_backends, perturbed_states

pytest.importorskip("mjlab")


def test_one_mdp_two_backends(data_dir):
    env = shared_env(data_dir)
    command, robot = env.mimic_command, env.mimic_command.robot
    default = {n: float(v) for n, v in zip(robot.joint_names, robot.data.default_joint_pos[0])}
    embedded = embedded_env(data_dir, default)
    assert embedded.library.joint_names == command.library.joint_names
    diffs = check_one_mdp_two_backends(
        command, embedded, lambda q, v: write_mujoco_state(env, q, v), env.step_dt, tol=1e-5
    )
    print("\nmax |mjlab - embedded| on one injected state:", {k: f"{v:.2g}" for k, v in diffs.items()})

    # the observations the policy acts on after mjlab's own forward() (the reset/step path), at the same times
    clip_ids, times = torch.tensor([0, 1, 0, 1]), torch.tensor([7.34, 2.0, 0.5, 6.0])
    qpos, qvel = perturbed_states(embedded, clip_ids, times)
    sensor = set_embedded_state(embedded, qpos, qvel)
    write_mujoco_state(env, qpos, qvel)
    last_actions = torch.rand(env.num_envs, 29, generator=torch.Generator().manual_seed(3))
    env.unwrapped.sim.forward()
    command.clip_ids.copy_(clip_ids)
    command.motion_time.copy_(times)
    env.unwrapped.action_manager.action.copy_(last_actions)
    command._update_command(None)
    observed = embedded._observe(sensor, clip_ids, times, last_actions)
    for group in ("policy", "reference"):
        torch.testing.assert_close(command.observations()[group], observed[group], atol=1e-5, rtol=1e-5)
    env.reset()
    embedded.close()
