"""A checkpoint that does not fit this run's config (another task, another extension or network size) ends in one
line through the real entry point: which part and tensor, both shapes, the task it was trained with and the fix;
exit code 2, no traceback, and nothing written or overwritten in the run folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_corpus import SMALL_TASK

REPO = Path(__file__).resolve().parents[1]
AMP = """
algorithm:
  num_learning_epochs: 1
  num_mini_batches: 1
  amp_cfg:
    amp_obs_extractor: mimic_rl.envs.mujoco.env:amp_obs_extractor
    amp_ref_obs_extractor: mimic_rl.envs.mujoco.env:amp_reference_extractor
    batch_size: 8
    replay_buffer_size: 64
    hidden_dims: [{hidden}]
"""


def _amp_task(hidden: int) -> str:
    """The small task with an AMP discriminator of one hidden layer of ``hidden`` units."""
    base = SMALL_TASK.replace("algorithm: {num_learning_epochs: 1, num_mini_batches: 1}\n", "")
    return base + AMP.format(hidden=hidden)


def _cli(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MIMIC_RL_DEBUG"}
    env["OMP_NUM_THREADS"] = "1"
    command = [sys.executable, "-m", "mimic_rl.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def _train(task: Path, run: Path, *extra: str) -> subprocess.CompletedProcess:
    return _cli("train", "--task", str(task), "--log-dir", str(run), "--iterations", "1", "--no-eval", *extra)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A small PPO run and a small AMP run (one iteration each), and their task files."""
    root = tmp_path_factory.mktemp("mismatch")
    paths = {"ppo_task": root / "ppo.yaml", "amp_task": root / "amp.yaml", "amp_wide_task": root / "amp_wide.yaml"}
    paths["ppo_task"].write_text(SMALL_TASK)
    paths["amp_task"].write_text(_amp_task(16))
    paths["amp_wide_task"].write_text(_amp_task(24))
    for name in ("ppo", "amp"):
        done = _train(paths[f"{name}_task"], root / name)
        assert done.returncode == 0, done.stderr
        paths[name] = root / name / "model_1.pt"
    return paths


def _one_line_error(done: subprocess.CompletedProcess, *needles: str) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_cross_task_resume_names_the_part_and_the_task(runs, tmp_path):
    run = tmp_path / "run"
    line = _one_line_error(_train(runs["amp_task"], run, "--resume", str(runs["ppo"])), "--resume", "amp")
    assert str(runs["ppo"]) in line and f"--task {runs['ppo'].parent / 'config.yaml'}" in line
    assert not run.exists()
    line = _one_line_error(_train(runs["ppo_task"], run, "--resume", str(runs["amp"])), "--resume", "amp")
    assert "not have" in line and f"--task {runs['amp'].parent / 'config.yaml'}" in line
    assert not run.exists()


def test_extension_shape_mismatch_names_the_tensor_and_both_shapes(runs, tmp_path):
    run = tmp_path / "run"
    line = _one_line_error(
        _train(runs["amp_wide_task"], run, "--resume", str(runs["amp"])),
        "amp.discriminator.net.0.weight",
        "checkpoint (16, ",
        "this config (24, ",
    )
    assert "--task" in line
    assert not run.exists()


def test_a_mismatched_resume_in_the_run_folder_changes_nothing(runs, tmp_path):
    run = tmp_path / "copy"
    shutil.copytree(runs["ppo"].parent, run)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    _one_line_error(_train(runs["amp_task"], run, "--resume"), "amp", "--resume")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def _toy_amp_runner(log_dir):
    """A runner of the default config with AMP on the point-mass toy (its own feature extractors), 4 envs."""
    from mimic_rl.config import load_config
    from mimic_rl.envs import PointMassTrackingEnv
    from mimic_rl.runners import OnPolicyRunner

    cfg = load_config("tracking_ppo")
    cfg.runner.num_steps_per_env, cfg.runner.logger, cfg.runner.save_interval = 8, "none", 1000
    amp = {"amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
           "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor"}  # fmt: skip
    cfg.algorithm.update(num_mini_batches=2, num_learning_epochs=1, amp_cfg=amp)
    cfg.actor, cfg.critic = {"hidden_dims": [16]}, {"hidden_dims": [16]}
    return OnPolicyRunner(cfg, log_dir, env=PointMassTrackingEnv(num_envs=4))


def test_a_carry_row_of_another_layout_resumes_with_a_fresh_one(tmp_path, capsys):
    """A checkpoint whose rollout carry row has another layout (one saved before the embedded env stopped returning
    the reference twice) resumes its models with a warning and a fresh carry row; the same checkpoint with its own
    layout restores the carry row. Breakage caught: a crash on the old layout, a copy into the wrong columns, a carry
    row restored without the warning."""
    import torch

    from mimic_rl.serialization import load_checkpoint, save_checkpoint

    first = _toy_amp_runner(tmp_path / "a")
    first.learn(1)
    state = load_checkpoint(tmp_path / "a" / "model_1.pt")
    carry = state["algorithm_runtime"]["storage_carry"]
    key = next(k for k, v in carry.items() if v.dtype == torch.float32)
    carry[key] = torch.cat((carry[key], torch.zeros(*carry[key].shape[:-1], 5)), dim=-1)  # an old group's columns
    save_checkpoint(state, tmp_path / "old.pt")
    fresh_carry = _toy_amp_runner(None).alg.rollout.carry_state()

    old = _toy_amp_runner(tmp_path / "b")
    old.load(tmp_path / "old.pt", resume=True)
    assert "another layout" in capsys.readouterr().out
    assert all(torch.equal(a, b) for a, b in zip(first.alg.actor.parameters(), old.alg.actor.parameters()))
    assert all(torch.equal(v, fresh_carry[k]) for k, v in old.alg.rollout.carry_state().items())
    old.learn(1)  # training goes on
    assert old.iteration == 2

    same = _toy_amp_runner(tmp_path / "c")
    same.load(tmp_path / "a" / "model_1.pt", resume=True)
    assert "another layout" not in capsys.readouterr().out
    assert all(torch.equal(v, first.alg.rollout.carry_state()[k]) for k, v in same.alg.rollout.carry_state().items())


def test_a_resume_from_an_earlier_checkpoint_into_its_folder_is_refused_and_a_new_folder_branches(runs, tmp_path):
    """Resuming from ``model_1.pt`` in a folder that holds ``model_2.pt`` would write a second course of training over
    the first (and ``--resume`` alone would later pick the other course's ``model_2.pt``): one line naming the later
    checkpoint and the fix, exit 2, the folder unchanged; the same checkpoint continued into a new folder trains."""
    run = tmp_path / "run"
    assert _train(runs["ppo_task"], run, "--iterations", "2").returncode == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert {"model_1.pt", "model_2.pt"} <= set(before)
    line = _one_line_error(_train(runs["ppo_task"], run, "--resume", str(run / "model_1.pt")), "model_2.pt")
    assert "iteration 1" in line and f"--resume {run / 'model_1.pt'} --log-dir NEW" in line
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    branch = tmp_path / "branch"
    done = _train(runs["ppo_task"], branch, "--resume", str(run / "model_1.pt"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in branch.glob("model_*.pt")) == ["model_2.pt"]
    assert _train(runs["ppo_task"], run, "--resume").returncode == 0  # from the latest, model_2.pt: no later one
    assert (run / "model_3.pt").is_file()
