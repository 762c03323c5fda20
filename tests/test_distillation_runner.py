"""Distillation on the embedded MuJoCo env: the runner, exact resume, the `mimic-rl distill` command, student export."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import straight_and_resumed
from test_runner import small_cfg

from mimic_rl.cli import main
from mimic_rl.config import ConfigError, DistillConfig, load_config
from mimic_rl.runners import DistillationRunner, OnPolicyRunner, load_checkpoint


@pytest.fixture(scope="module")
def teacher(tmp_path_factory, data_dir):
    """A (barely) trained teacher checkpoint of this package on the humanoid28 walk clip."""
    folder = tmp_path_factory.mktemp("teacher")
    runner = OnPolicyRunner(small_cfg(data_dir), log_dir=folder)
    runner.learn(1)
    runner.close()
    return folder / "model_1.pt"


def distill_cfg(teacher_path) -> DistillConfig:
    state = load_checkpoint(teacher_path)
    cfg = load_config({**{k: v for k, v in state["config"].items() if k in ("runner", "env")}}, DistillConfig)
    cfg.teacher.checkpoint = str(teacher_path)
    cfg.student = {"hidden_dims": [32, 32]}
    cfg.algorithm = {"gradient_length": 4, "teacher_action_prob": {"mode": "linear", "initial": 1.0, "end": 2}}
    return cfg


def test_resume_is_bitwise_identical_to_distilling_straight_through(tmp_path, teacher):
    straight, resumed = straight_and_resumed(
        lambda d: DistillationRunner(distill_cfg(teacher), log_dir=d), tmp_path, 3, 2
    )
    assert resumed.iteration == straight.iteration == 3
    a, b = straight.alg.student.state_dict(), resumed.alg.student.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    assert (straight.env.physics.state == resumed.env.physics.state).all()
    state = load_checkpoint(tmp_path / "a" / "model_3.pt")
    assert "student_state_dict" in state and state["teacher_cfg"]["kind"] == "actor"
    assert "critic" not in json.dumps(state["student_cfg"])  # the student reads no privileged group


def test_the_student_never_reads_privileged_groups(tmp_path, teacher):
    runner = DistillationRunner(distill_cfg(teacher))
    obs = runner.env.get_observations()
    alg = runner.alg
    assert alg.student.obs_dim == obs["policy"].shape[-1] and "critic" not in alg.storage.get()["obs"].keys()
    poisoned = obs.clone()
    poisoned["critic"] = torch.full_like(obs["critic"], float("nan"))
    with torch.no_grad():
        s_obs, ref, mask = alg._student_inputs(poisoned)
        assert bool(torch.isfinite(alg.student(s_obs, ref, mask)).all())
    cfg = distill_cfg(teacher)
    cfg.algorithm["student_obs_group"] = "critic"
    with pytest.raises(ValueError, match="privileged"):
        DistillationRunner(cfg)
    with pytest.raises(ConfigError, match=r"^student\.hidden_dim: unknown key; did you mean student\.hidden_dims\?$"):
        load_config({"student": {"hidden_dim": [8]}}, DistillConfig)


def test_distill_command_trains_evaluates_and_exports_the_student(tmp_path, teacher):
    run = tmp_path / "student"
    args = ["distill", "--teacher", str(teacher), "--num-envs", "4", "--iterations", "2", "--log-dir", str(run)]
    assert main([*args, "--logger", "none", "--eval-envs", "2"]) == 0
    state = load_checkpoint(run / "model_2.pt")
    assert state["config"]["env"]["motions"] == load_checkpoint(teacher)["config"]["env"]["motions"]
    student = json.loads((run / "eval.json").read_text())["summary"]
    teacher_eval = json.loads((run / "eval_teacher.json").read_text())["summary"]
    assert student["root_mpjpe_mm"] > 0 and teacher_eval["root_mpjpe_mm"] > 0
    meta = json.loads((run / "export" / "policy.json").read_text())
    assert meta["actor_cfg"] == state["student_cfg"] and meta["check"]["max_abs_error_vs_torch"]["onnx"] < 1e-5
    assert (
        main(["eval", "--checkpoint", str(run / "model_2.pt"), "--output", str(tmp_path / "e.json"), "--num-envs", "2"])
        == 0
    )
    code = main(["distill", "--teacher", str(teacher), "--iterations", "1", "--log-dir", str(run), "--resume",
                 "--logger", "none", "--no-eval", "--no-export"])  # fmt: skip
    assert code == 0 and load_checkpoint(run / "model_3.pt")["iteration"] == 3
    assert main(["distill", "--teacher", str(tmp_path / "nope.pt")]) == 2  # one line: see test_cli_errors


def test_a_recurrent_history_only_student_distils_evaluates_and_exports(tmp_path, teacher, monkeypatch):
    from mimic_rl.export import export_policy
    from mimic_rl.runners.evaluation import evaluate_policy

    cfg = distill_cfg(teacher)
    cfg.student = {"hidden_dims": [32], "rnn_type": "lstm", "rnn_hidden_dim": 16, "use_reference": False}
    runner = DistillationRunner(cfg, log_dir=tmp_path)
    runner.learn(1)
    student = runner.alg.get_policy()
    assert student.is_recurrent and student.ref_shape is None
    cfg.env.compile = True  # evaluation builds one short env per clip and never compiles them

    def no_compile(*args, **kwargs):
        raise AssertionError("evaluation compiled an env")

    monkeypatch.setattr(torch, "compile", no_compile)
    summary = evaluate_policy(student, cfg, num_envs=2)["summary"]
    assert summary["root_mpjpe_mm"] > 0 and 0 < summary["episode_length_fraction"] <= 1
    meta = json.loads(export_policy(student, tmp_path / "export")["metadata"].read_text())
    assert meta["inputs"]["hidden"] == [1, "batch", 16] and "cell_out" in meta["outputs"]
