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
    assert set(obs.keys()) == {"actor", "critic"} and obs.batch_size == torch.Size([2])
    assert obs["actor"].shape == (2, 160) and env.num_actions == 29
    for _ in range(3):
        obs, rewards, dones, extras = env.step(torch.zeros(2, env.num_actions))
    assert rewards.shape == (2,) and dones.dtype == torch.bool and extras["time_outs"].shape == (2,)
    assert env.motion_command.motion.time_step_total == 441
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
