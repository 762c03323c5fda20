"""The mjlab backend, for real: mjlab's own G1 tracking task (unchanged, from mjlab's registry) trained by this
package's runner through the command line, evaluated from the motion's start with mjlab's metrics, resumed, exported.

Needs mjlab (``pip install -e ".[mjlab]"``, a virtual environment of its own: .ci/run makes one); skipped without.
The first build compiles mjlab's warp kernels (~1-2 min on 2 CPU cores; cached on disk afterwards).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("mjlab")

TASK = "Mjlab-Tracking-Flat-Unitree-G1"


@pytest.fixture(scope="module")
def motion(data_dir: Path) -> str:
    return str(data_dir / "motions" / "g1" / "B_HandsUp.npz")


def _cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "mimic_rl.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_the_vec_env_contract(motion):
    from mimic_rl.envs.mjlab import MjlabEnvConfig
    from mimic_rl.envs.mjlab.env import make_mjlab_env

    env = make_mjlab_env(MjlabEnvConfig(task=TASK, num_envs=2, motions=[motion]))
    obs = env.get_observations()
    assert set(obs.keys()) == {"actor", "critic", "amp"} and obs.batch_size == torch.Size([2])
    assert obs["actor"].shape == (2, 160) and env.num_actions == 29
    for _ in range(3):
        obs, rewards, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert rewards.shape == (2,) and dones.dtype == torch.bool and extras["time_outs"].shape == (2,)
    command = env.motion_command
    error = (command.body_pos_w - command.robot_body_pos_w).norm(dim=-1).mean()  # bodies and envs
    torch.testing.assert_close(extras["log"]["metrics/global_mpjpe_mm"], 1000 * error)
    assert command.motion.time_step_total == 441
    robot = command.robot.data
    torch.testing.assert_close(obs["amp"], torch.cat((robot.joint_pos, robot.joint_vel), -1))
    # expert pairs: consecutive frames of the motion file itself, in the amp group's layout
    torch.manual_seed(0)
    prev, cur = env.amp_expert_sampler(64)
    with np.load(command.cfg.motion_file) as data:
        frames = torch.from_numpy(np.concatenate((data["joint_pos"], data["joint_vel"]), -1)).float()
    index = (prev[:, None, :] - frames[None]).abs().amax(-1).argmin(-1)  # the frame each expert state is
    torch.testing.assert_close(prev, frames[index])
    torch.testing.assert_close(cur, frames[index + 1])
    env.close()


def test_train_resume_eval_plot_export_through_the_cli(tmp_path, motion):
    run = tmp_path / "run"
    common = ["--env", f"mjlab:{TASK}", "--motion", motion, "--num-envs", "4", "--log-dir", str(run)]
    result = _cli("train", *common, "--iterations", "2", "--eval-envs", "2", "--logger", "none")
    assert result.returncode == 0, result.stderr[-2000:]
    evaluation = json.loads((run / "eval.json").read_text())
    (clip,) = evaluation["clips"]
    assert clip["name"] == "B_HandsUp" and clip["num_envs"] == 2 and clip["clip_steps"] == 440
    assert 0.0 <= clip["success_rate"] <= 1.0 and clip["global_mpjpe_mm"] > 0 and clip["root_mpjpe_mm"] > 0
    assert len(clip["per_body_mpjpe_mm"]) == 14  # the task's tracked bodies
    assert (run / "plots" / "error_over_time.png").exists()
    result = _cli("train", *common, "--iterations", "1", "--resume", "--no-eval", "--logger", "none")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "resumed from" in result.stdout and (run / "model_3.pt").exists()
    result = _cli("export", "--checkpoint", str(run / "model_3.pt"), "--output", str(tmp_path / "export"))
    assert result.returncode == 0, result.stderr[-2000:]
    meta = json.loads((tmp_path / "export" / "policy.json").read_text())
    assert meta["obs_groups"]["actor"] == ["actor"] and meta["inputs"]["policy"] == [160]
    assert meta["simulator"] == f"mjlab:{TASK}" and "joint_names" not in meta
    # a deployable student distilled from it, on the same task (the env comes from the teacher's config)
    student = tmp_path / "student"
    result = _cli("distill", "--teacher", str(run / "model_3.pt"), "--num-envs", "4", "--iterations", "1",
                  "--no-eval", "--logger", "none", "--log-dir", str(student))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    state = torch.load(student / "model_1.pt", weights_only=True)
    assert state["obs_groups"]["actor"] == ["actor"] and state["teacher_cfg"]["obs_groups"]["actor"] == ["actor"]


def test_amp_trains_on_mjlabs_task_with_expert_pairs_from_its_motion(tmp_path, motion):
    from mimic_rl.serialization import load_checkpoint

    run = tmp_path / "amp"
    args = ["--env", f"mjlab:{TASK}", "--task", "tracking_ppo_amp", "--motion", motion, "--num-envs", "4"]
    result = _cli("train", *args, "--iterations", "2", "--no-eval", "--logger", "none", "--log-dir", str(run))
    assert result.returncode == 0, result.stderr[-2000:]
    state = load_checkpoint(run / "model_2.pt")
    assert state["amp_state_dict"]["num_steps"] >= 2  # the discriminator stepped on its expert and policy pairs
    assert state["obs_groups"]["actor"] == ["actor"] and state["obs_groups"]["actor_reference"] is None


def test_bad_mjlab_input_is_one_line(tmp_path, data_dir):
    csv = str(data_dir / "motions" / "g1" / "B_HandsUp.csv")
    cases = [
        (["--env", "mjlab:Nope"], "error: --env mjlab:Nope: expected a registered mjlab task id"),
        (["--env", f"mjlab:{TASK}"], f"error: --motion: mjlab's {TASK} tracks one motion file, found 0"),
        (["--env", f"mjlab:{TASK}", "--motion", csv], "error: "),
        (["--env", f"mjlab:{TASK}", "--robot", "g1"], "error: --robot: applies to the embedded env"),
    ]
    for args, message in cases:
        result = _cli("train", *args, "--log-dir", str(tmp_path / "bad"), timeout=300)
        assert result.returncode == 2 and result.stderr.startswith(message), (args, result.stderr[-1000:])
        assert result.stderr.strip().count("\n") == 0, result.stderr
