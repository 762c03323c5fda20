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

from mimic_rl.rotations import quat_from_axis_angle, quat_mul

pytest.importorskip("mjlab")


def _states(embedded, clip_ids: torch.Tensor, times: torch.Tensor, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """MuJoCo rows of the reference at (clip, time), perturbed: envs 0 and 1 a little (they keep tracking), env 2
    lifted 0.3 m and env 3 moved 0.3 m back (they terminate), every env's joints, root orientation and velocities
    randomly; rounded to float32 so that both backends start from the very same numbers."""
    g = torch.Generator().manual_seed(seed)
    model, lib = embedded.model, embedded.library
    ref = lib.state(clip_ids, times, [lib.body_names.index(embedded.body_names[0])])
    n = clip_ids.shape[0]
    scale = torch.tensor([0.05, 0.05, 0.3, 0.3], dtype=torch.float64)

    def noise(*shape: int) -> torch.Tensor:
        u = 2.0 * torch.rand(*shape, generator=g, dtype=torch.float64) - 1.0
        return u * scale.reshape(-1, *([1] * (len(shape) - 1)))

    offset = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.3], [-0.3, 0.0, 0.0]], dtype=torch.float64)
    qpos = torch.zeros(n, model.nq, dtype=torch.float64)
    qvel = torch.zeros(n, model.nv, dtype=torch.float64)
    qpos[:, 0:3] = ref.body_pos_w[:, 0].double() + offset
    qpos[:, 3:7] = quat_mul(quat_from_axis_angle(noise(n, 3)), ref.body_quat_w[:, 0].double())
    qvel[:, 0:3] = ref.body_lin_vel_w[:, 0].double() + 2.0 * noise(n, 3)
    qvel[:, 3:6] = 3.0 * noise(n, 3)
    for j, name in enumerate(lib.joint_names):
        joint = model.joint(name)
        qpos[:, joint.qposadr[0]] = ref.joint_pos[:, j].double() + noise(n)
        qvel[:, joint.dofadr[0]] = ref.joint_vel[:, j].double() + 3.0 * noise(n)
    return qpos.float().double(), qvel.float().double()


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


def _compare_groups(ours: dict, theirs: dict, order: list[int], diffs: dict[str, float]) -> None:
    """Observation groups of both backends (the critic's block of body poses reordered by body name)."""
    for group in ("policy", "reference", "amp"):
        torch.testing.assert_close(ours[group], theirs[group], atol=1e-5, rtol=1e-5)
        diffs[f"obs/{group}"] = _max_diff(ours[group], theirs[group])
    width, n = ours["policy"].shape[-1], ours["policy"].shape[0]
    critic = theirs["critic"]
    bodies = critic[:, width:-1].reshape(n, -1, 9)[:, order].flatten(1)
    critic = torch.cat((critic[:, :width], bodies, critic[:, -1:]), dim=-1)
    torch.testing.assert_close(ours["critic"], critic, atol=1e-5, rtol=1e-5)
    diffs["obs/critic"] = _max_diff(ours["critic"], critic)


def test_one_mdp_two_backends(data_dir):
    env = shared_env(data_dir)
    command, robot = env.mimic_command, env.mimic_command.robot
    default = {n: float(v) for n, v in zip(robot.joint_names, robot.data.default_joint_pos[0])}
    embedded = embedded_env(data_dir, default)
    assert embedded.library.joint_names == command.library.joint_names
    order = [embedded.tracked.index(b) for b in command.tracked]  # embedded body index of each of mjlab's
    assert sorted(command.tracked) == sorted(embedded.tracked) and order == list(range(29, -1, -1))  # by name

    n = env.num_envs
    clip_ids = torch.tensor([0, 1, 0, 1])
    times = torch.tensor([7.34, 2.0, 0.5, 6.0])  # env 0 at B_HandsUp's end (7.35 s): a clip-end time-out
    qpos, qvel = _states(embedded, clip_ids, times)
    sensor = set_embedded_state(embedded, qpos, qvel)
    write_mujoco_state(env, qpos, qvel)
    g = torch.Generator().manual_seed(2)
    actions, last_actions = torch.rand(n, 29, generator=g), torch.rand(n, 29, generator=g)
    length = torch.tensor([3, 500, 499, 500])  # envs 1 and 3 at the episode limit (500 steps of 0.02 s)
    draws = embedded._init.draws(n, torch.Generator().manual_seed(0))
    ours = command.evaluate(clip_ids, times, actions, last_actions, length)
    stats = embedded.library.adaptive.stats
    theirs = embedded._evaluate(
        sensor, clip_ids, times, times, length, actions, last_actions, torch.zeros(n), stats, draws
    )  # fmt: skip
    diffs: dict[str, float] = {}

    # the state both MDPs see (the adapters: body order, frames, quaternion convention, env origins)
    state_e, state_m = embedded._state_from_sensors(sensor), command.robot_state()
    for field in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        e, m = getattr(state_e, field), getattr(state_m, field)
        e = e if field.startswith("joint") else e[:, order]
        diffs[f"state/{field}"] = _max_diff(e, m)
        torch.testing.assert_close(m, e, atol=1e-5, rtol=1e-5)

    # rewards: the total (the embedded env's is scaled by the step's dt, mjlab's reward manager scales ours) and
    # every weighted term (in the log); terminations, each term, time-outs
    torch.testing.assert_close(ours["reward"] * env.step_dt, theirs["reward"], atol=1e-6, rtol=1e-5)
    diffs["reward"] = _max_diff(ours["reward"] * env.step_dt, theirs["reward"])
    assert torch.equal(ours["terminated"], theirs["terminated"]) and torch.equal(ours["time_outs"], theirs["time_outs"])
    assert ours["terminated"].tolist() == [False, False, True, True]  # env 3 truncated too: terminated wins
    assert ours["time_outs"].tolist() == [True, True, False, False]  # the clip's end, the episode limit
    assert ours["termination_terms"].keys() == theirs["termination_terms"].keys() == {
        "anchor_height", "anchor_position", "anchor_tilt", "ee_height"
    }  # fmt: skip
    for name, value in theirs["termination_terms"].items():
        assert torch.equal(ours["termination_terms"][name], value), name
    assert ours["log"].keys() == theirs["log"].keys()
    for key, value in theirs["log"].items():
        torch.testing.assert_close(ours["log"][key], value, atol=1e-3 if "mm" in key else 1e-6, rtol=1e-5)
        diffs[f"log/{key}"] = _max_diff(ours["log"][key], value)
    assert {k for k in ours["log"] if k.startswith("reward/")} >= {"reward/joint_pos", "reward/joint_vel"}

    # metrics per env, and per body (bodies by name)
    for key, value in theirs["values"].items():
        torch.testing.assert_close(ours["values"][key], value, atol=1e-3, rtol=1e-5)
        diffs[f"metrics/{key}"] = _max_diff(ours["values"][key], value)
    torch.testing.assert_close(ours["body_error_mm"], theirs["body_error_mm"][:, order], atol=1e-3, rtol=1e-5)

    _compare_groups(ours["obs"], theirs["obs"], order, diffs)
    print("\nmax |mjlab - embedded| on one injected state:", {k: f"{v:.2g}" for k, v in diffs.items()})

    # the observations the policy acts on after mjlab's own forward() (the reset/step path), at the same times
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
