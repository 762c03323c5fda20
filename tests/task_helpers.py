"""Shared pieces of the tests of mimic_rl's tracking task on a simulator (mjlab, Isaac Lab): the clips and MDP settings
they run, the embedded env as the second implementation of the MDP, a way to put one physical state into it, perturbed
states to compare on, and the comparison of one MDP step of both backends (``check_one_mdp_two_backends``)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mimic_rl.rotations import quat_from_axis_angle, quat_mul
from mimic_rl.tasks.tracking import TerminationConfig, TrackingRewardConfig

NUM_ENVS = 4
CSV_FPS = 60.0
REWARD = TrackingRewardConfig(joint_pos_weight=0.5, joint_vel_weight=0.2)
"""The defaults plus the joint terms, so that every reward term is compared."""
TERMINATION = TerminationConfig(anchor_position=0.25)
"""The defaults plus ``anchor_position``, so that every termination term is compared."""


def motions(data_dir: Path) -> list[str]:
    """Two G1 clips in two formats: a Unitree CSV (body states by forward kinematics) and a BeyondMimic npz."""
    g1 = data_dir / "motions" / "g1"
    return [str(g1 / "B_HandsUp.csv"), str(g1 / "B_Fence2.npz")]


def g1_mjcf(data_dir: Path) -> str:
    """The shared G1 MJCF (the same file as mjlab's G1; Isaac Lab's task makes its USD from it)."""
    return str(data_dir / "robots" / "unitree_g1" / "g1.xml")


def embedded_env(data_dir: Path, default_joint_pos: dict[str, float]):
    """The embedded env on the same clips with the same MDP settings, no randomization, and the simulator's default
    pose (the pose that ``policy`` observes joint positions relative to)."""
    from mimic_rl.envs.mujoco import DomainRandomization, MujocoTrackingEnv, TrackingEnvConfig, g1_config

    robot = dataclasses.replace(g1_config(g1_mjcf(data_dir)), default_joint_pos=default_joint_pos)
    cfg = TrackingEnvConfig(
        robot="g1",
        robot_mjcf=g1_mjcf(data_dir),
        motions=motions(data_dir),
        csv_fps=CSV_FPS,
        num_envs=NUM_ENVS,
        reward=REWARD,
        termination=TERMINATION,
        randomization=DomainRandomization(enabled=False),
        num_threads=1,
    )
    return MujocoTrackingEnv(cfg, robot=robot)


def set_embedded_state(env, qpos: torch.Tensor, qvel: torch.Tensor) -> torch.Tensor:
    """Put the rows into the embedded env's physics and evaluate its sensors there (``mj_forward``: no latency);
    returns the raw sensor rows its MDP reads."""
    ids = np.arange(env.num_envs)
    env.physics.set_state(ids, qpos.numpy(), qvel.numpy())
    env.physics.refresh_sensors(ids)
    return torch.from_numpy(env.physics.sensordata.copy())


def perturbed_states(embedded, clip_ids: torch.Tensor, times: torch.Tensor, seed: int = 1):
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


def _compare_groups(ours: dict, theirs: dict, order: list[int], diffs: dict[str, float], tol: float) -> None:
    """Observation groups of both backends (the critic's block of body poses reordered by body name)."""
    for group in ("policy", "reference", "amp"):
        torch.testing.assert_close(ours[group], theirs[group], atol=tol, rtol=tol)
        diffs[f"obs/{group}"] = _max_diff(ours[group], theirs[group])
    width, n = ours["policy"].shape[-1], ours["policy"].shape[0]
    critic = theirs["critic"]
    bodies = critic[:, width:-1].reshape(n, -1, 9)[:, order].flatten(1)
    critic = torch.cat((critic[:, :width], bodies, critic[:, -1:]), dim=-1)
    torch.testing.assert_close(ours["critic"], critic, atol=tol, rtol=tol)
    diffs["obs/critic"] = _max_diff(ours["critic"], critic)


def check_one_mdp_two_backends(
    command: Any, embedded: Any, write_state: Callable[[torch.Tensor, torch.Tensor], None], step_dt: float, tol: float
) -> dict[str, float]:
    """Put one perturbed G1 state into a simulator (``write_state(qpos, qvel)``) and into the embedded env, run each
    env's own MDP step (``TrackingCommand.evaluate``, ``MujocoTrackingEnv._evaluate``) at the same clip times,
    actions, previous actions and episode lengths, and assert that the body states, rewards (every term), terminations
    (every term), time-outs, metrics and observation groups agree to ``tol`` (states, observations; rewards to
    ``tol / 10`` absolute, metrics in mm to ``100 tol``). Bodies are matched by name. Returns the largest difference
    of each quantity."""
    n = embedded.num_envs
    order = [embedded.tracked.index(b) for b in command.tracked]  # embedded body index of each of the simulator's
    assert sorted(command.tracked) == sorted(embedded.tracked) and order == list(range(29, -1, -1))  # by name
    clip_ids = torch.tensor([0, 1, 0, 1])
    times = torch.tensor([7.34, 2.0, 0.5, 6.0])  # env 0 at B_HandsUp's end (7.35 s): a clip-end time-out
    qpos, qvel = perturbed_states(embedded, clip_ids, times)
    sensor = set_embedded_state(embedded, qpos, qvel)
    write_state(qpos, qvel)
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
    state_e, state_s = embedded._state_from_sensors(sensor), command.robot_state()
    for field in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        e, s = getattr(state_e, field), getattr(state_s, field)
        e = e if field.startswith("joint") else e[:, order]
        diffs[f"state/{field}"] = _max_diff(e, s)
        torch.testing.assert_close(s, e, atol=tol, rtol=tol)

    # rewards: the total (the embedded env's is scaled by the step's dt, the simulator's reward manager scales ours)
    # and every weighted term (in the log); terminations, each term, time-outs
    torch.testing.assert_close(ours["reward"] * step_dt, theirs["reward"], atol=tol / 10, rtol=tol)
    diffs["reward"] = _max_diff(ours["reward"] * step_dt, theirs["reward"])
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
        torch.testing.assert_close(ours["log"][key], value, atol=100 * tol if "mm" in key else tol / 10, rtol=tol)
        diffs[f"log/{key}"] = _max_diff(ours["log"][key], value)
    assert {k for k in ours["log"] if k.startswith("reward/")} >= {"reward/joint_pos", "reward/joint_vel"}

    # metrics per env, and per body (bodies by name)
    for key, value in theirs["values"].items():
        torch.testing.assert_close(ours["values"][key], value, atol=100 * tol, rtol=tol)
        diffs[f"metrics/{key}"] = _max_diff(ours["values"][key], value)
    torch.testing.assert_close(ours["body_error_mm"], theirs["body_error_mm"][:, order], atol=100 * tol, rtol=tol)
    _compare_groups(ours["obs"], theirs["obs"], order, diffs, tol)
    return diffs


def cli(*args: str, timeout: int = 900, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``mimic-rl ARGS`` in a subprocess (one thread)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MJLAB_WARP_QUIET": "1", **(env or {})}
    cmd = [sys.executable, "-m", "mimic_rl.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
