"""mimic_rl on Isaac Lab 3.0 without Isaac Sim (Newton, MuJoCo Warp), in the virtual environment that
``tools/install_isaaclab.py`` fills (``.venv-isaaclab`` in CI): the tracking task against the embedded env, and
training through the command line on Isaac Lab's own humanoid and on this package's task.

One MDP, two backends: given the same G1 state (written through Isaac Lab's articulation by the command's own restart
path) and the same clip times, the embedded env and ``MimicRL-Tracking-G1`` agree on the robot's body states, the
observation groups, the rewards (every term), the terminations (every term), the time-outs and the metrics, to float32
rounding of Newton's kinematics (``TOL``). The Isaac Lab env lists its tracked bodies in reverse order, so that a
comparison by position would fail.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch
from task_helpers import (
    CSV_FPS,
    NUM_ENVS,
    REWARD,
    TERMINATION,
    check_one_mdp_two_backends,
    cli,
    embedded_env,
    g1_mjcf,
    motions,
)

pytest.importorskip("isaaclab")

TOL = 1e-5


@functools.lru_cache(maxsize=1)
def shared_env(data_dir: Path):
    """``MimicRL-Tracking-G1-AMP`` (every group) with ``NUM_ENVS`` envs and both clips, its tracked bodies in the
    reverse of Isaac Lab's order."""
    from mimic_rl.envs.isaaclab.config import IsaacLabEnvConfig
    from mimic_rl.envs.isaaclab.env import isaaclab_env_config, make_isaaclab_env
    from mimic_rl.envs.isaaclab.task import MIMIC_G1_AMP

    torch.set_num_threads(1)
    cfg = IsaacLabEnvConfig(
        task=MIMIC_G1_AMP,
        num_envs=NUM_ENVS,
        motions=motions(data_dir),
        csv_fps=CSV_FPS,
        reward=REWARD,
        termination=TERMINATION,
        robot_mjcf=g1_mjcf(data_dir),
    )
    env_cfg = isaaclab_env_config(cfg)

    bodies = [
        "pelvis", *[f"{s}_{p}_link" for s in ("left", "right") for p in
                    ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")],
        "waist_yaw_link", "waist_roll_link", "torso_link",
        *[f"{s}_{p}_link" for s in ("left", "right") for p in
          ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")],
    ]  # fmt: skip
    env_cfg.commands.motion.tracked_bodies = tuple(reversed(bodies))
    return make_isaaclab_env(cfg, env_cfg)


def test_one_mdp_two_backends(data_dir):
    env = shared_env(data_dir)
    command, robot = env.mimic_command, env.mimic_command.robot
    assert robot.body_names[0] == "pelvis" and command.tracked[-1] == "pelvis"
    default = {n: float(v) for n, v in zip(robot.joint_names, robot.data.default_joint_pos.torch[0])}
    embedded = embedded_env(data_dir, default)
    assert embedded.library.joint_names == command.library.joint_names

    def write_state(qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        ids = torch.arange(env.num_envs, device=env.device)
        command._write_rows(ids, torch.cat((qpos, qvel), dim=-1).to(env.device))

    diffs = check_one_mdp_two_backends(command, embedded, write_state, env.step_dt, tol=TOL)
    print("\nmax |Isaac Lab - embedded| on one injected state:", {k: f"{v:.2g}" for k, v in diffs.items()})
    env.reset()
    embedded.close()


def test_restarts_are_reference_state_init_and_eval_clips_start_each_env_at_its_clip(data_dir):
    """After a reset every env stands at its clip's reference state within the init noise; with ``eval_clip`` a
    tensor, env i starts at the first frame of clip ``eval_clip[i]``."""
    env = shared_env(data_dir)
    command = env.mimic_command
    noise = command.cfg.init_noise
    per_env = torch.arange(NUM_ENVS) % 2
    for eval_clip in (None, per_env):
        command.eval_clip = eval_clip
        env.reset()
        if eval_clip is not None:
            assert command.clip_ids.tolist() == per_env.tolist() and command.motion_time.tolist() == [0.0] * NUM_ENVS
        ref = command.library.state(command.clip_ids, command.motion_time, command._ref_tracked)
        state = command.robot_state()
        root = command.tracked.index("pelvis")
        assert float((state.body_pos_w[:, root] - ref.body_pos_w[:, root]).abs().max()) <= noise.root_pos + 1e-4
        assert float((state.joint_pos - ref.joint_pos).abs().max()) <= noise.joint_pos + 1e-4
        assert float((state.joint_vel - ref.joint_vel).abs().max()) <= noise.velocity + 1e-3
    command.eval_clip = None
    env.reset()


def test_train_eval_resume_through_the_cli(tmp_path, data_dir):
    """Two iterations of ``MimicRL-Tracking-G1`` on two clips, each evaluated from its first frame; one more resumed;
    then two iterations of Isaac Lab's own ``Isaac-Humanoid`` (no clips: no evaluation)."""
    run = tmp_path / "g1"
    common = [
        "--env", "isaaclab:MimicRL-Tracking-G1", "--motion", *motions(data_dir), "--csv-fps", str(CSV_FPS),
        "--robot-mjcf", g1_mjcf(data_dir), "--num-envs", "4", "--logger", "none", "--log-dir", str(run),
    ]  # fmt: skip
    result = cli("train", *common, "--iterations", "2", "--eval-envs", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    evaluation = json.loads((run / "eval.json").read_text())
    assert [c["name"] for c in evaluation["clips"]] == ["B_HandsUp", "B_Fence2"]
    assert evaluation["env"] == "isaaclab:MimicRL-Tracking-G1"
    for clip in evaluation["clips"]:
        assert clip["num_envs"] == 2 and 0 < clip["global_mpjpe_mm"] < 1000 and 0.0 <= clip["success_rate"] <= 1.0
    result = cli("train", *common, "--iterations", "1", "--resume", "--no-eval")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "model_3.pt").is_file()

    humanoid = tmp_path / "humanoid"
    args = ["--env", "isaaclab:Isaac-Humanoid", "--num-envs", "4", "--iterations", "2"]
    result = cli("train", *args, "--logger", "none", "--log-dir", str(humanoid))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (humanoid / "model_2.pt").is_file() and not (humanoid / "eval.json").exists()
    assert "eval: skipped (isaaclab:Isaac-Humanoid has no motion clips" in result.stdout


@pytest.mark.parametrize(
    "args, env, expected",
    [
        (
            ["--env", "isaaclab:Isaac-Velocity-Flat-G1-v0"],  # Isaac Lab 2.x's id
            {},
            "error: --env isaaclab:Isaac-Velocity-Flat-G1-v0: expected a registered Isaac Lab task id, found none; "
            "did you mean Isaac-Velocity-Flat-G1",
        ),
        (["--env", "isaaclab:Isaac-Humanoid"], {"ISAACSIM_ASSET_ROOT": "EMPTY"}, "an asset is missing"),
        (
            ["--env", "isaaclab:Isaac-Humanoid", "--set", "env.num_future_frames=3"],
            {},
            "error: env.num_future_frames: applies to this package's tasks (MimicRL-Tracking-*), not to Isaac Lab's "
            "Isaac-Humanoid; leave it out",
        ),
    ],
)
def test_bad_input_is_one_line(args, env, expected, tmp_path):
    """An unknown task id (with the closest ids), a missing asset (naming ``ISAACSIM_ASSET_ROOT``), a tracking setting
    on another task: one line, exit code 2."""
    if env.get("ISAACSIM_ASSET_ROOT") == "EMPTY":
        env = {"ISAACSIM_ASSET_ROOT": str(tmp_path)}
    result = cli("train", *args, "--num-envs", "2", "--iterations", "1", "--log-dir", str(tmp_path / "run"), env=env)
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert expected in last and "Traceback" not in result.stderr, last
    if "asset" in expected:
        assert "ISAACSIM_ASSET_ROOT" in last
