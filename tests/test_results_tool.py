"""tools/results.py and its report: the matrix, resuming, pause-free wall times, the AMP verdict, the report itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import results
import results_report


def test_the_matrix_pairs_configs_clips_and_seeds_and_students_wait_for_their_teachers():
    jobs = results.matrix(None)
    trains = [j for j in jobs if j.kind == "train" and j.config != "amp_walk"]
    assert len(trains) == 2 * 3 * 3 and len(jobs) == len(trains) + 2 * 3 + 1  # and the style-only walk, seed 0
    student = next(j for j in jobs if j.name == "handsup/student/s1")
    assert student.after == ("handsup/tracking_ppo/s1",) and student.iterations == 1200
    assert {j.clip.key for j in results.matrix(["walk"])} == {"walk"}


def test_a_run_resumes_from_its_latest_checkpoint_and_is_finished_only_with_its_evaluations(tmp_path):
    job = next(j for j in results.matrix(["walk"]) if j.name == "walk/tracking_ppo_amp/s2")
    cmd = results.train_command(job, tmp_path)
    assert cmd[:4] == ["mimic-rl", "train", "--task", "tracking_ppo_amp"]
    assert cmd[cmd.index("--seed") + 1] == "2" and cmd[cmd.index("--iterations") + 1] == "600"
    assert cmd[cmd.index("--set") + 1] == "algorithm.desired_kl=0.01"  # the report's runs, measured at 0.01
    run = tmp_path / job.name
    run.mkdir(parents=True)
    for it in (100, 400):
        (run / f"model_{it}.pt").write_bytes(b"")
    cmd = results.train_command(job, tmp_path)
    assert cmd[:3] == ["mimic-rl", "train", "--resume"] and cmd[cmd.index("--iterations") + 1] == "200"
    assert results.steps_left(job, tmp_path) == 200 * 256 * 24
    (run / "model_600.pt").write_bytes(b"")
    assert not results.finished(job, tmp_path)  # trained, not yet evaluated
    for name in ("results_eval.json", "results_exact.json"):
        (run / name).write_text("{}")
    assert results.finished(job, tmp_path)


def test_training_hours_leave_pauses_out(tmp_path):
    stamps = [0.0, 10.0, 20.0, 5000.0, 5010.0]  # a stop of 4980 s between 20 and 5000
    (tmp_path / "metrics.jsonl").write_text(
        "\n".join(json.dumps({"iteration": i, "time": t}) for i, t in enumerate(stamps))
    )
    assert results_report.training_hours(tmp_path) == pytest.approx(30.0 / 3600)


def test_a_line_cut_short_by_a_killed_run_is_left_out_of_the_report(tmp_path, capsys):
    lines = [json.dumps({"iteration": i, "time": 10.0 * i}) for i in range(4)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + '\n{"iteration": 4, "ti')  # SIGKILL mid-write
    assert results_report.training_hours(tmp_path) == pytest.approx(30.0 / 3600)
    assert "metrics.jsonl:5: not a JSON line" in capsys.readouterr().err


def _means(n=3, **amp):
    ppo = {"success_rate": 0.95, "root_mpjpe_mm": 30.0, "foot_slide_mm_s": 100.0, "joint_jerk": 1000.0, "n": n}
    return {"tracking_ppo": ppo, "tracking_ppo_amp": {**ppo, **amp}}


@pytest.mark.parametrize(
    ("amp", "met"),
    [
        ({"foot_slide_mm_s": 84.0}, True),  # -16 % sliding
        ({"joint_jerk": 849.0}, True),  # -15.1 % jerk
        ({"foot_slide_mm_s": 86.0, "joint_jerk": 900.0}, False),  # neither 15 % lower
        ({"foot_slide_mm_s": 50.0, "success_rate": 0.89}, False),  # 0.06 less success
        ({"foot_slide_mm_s": 50.0, "root_mpjpe_mm": 33.3}, False),  # root MPJPE +11 %
        ({"foot_slide_mm_s": 50.0, "success_rate": 1.0, "root_mpjpe_mm": 32.9}, True),
    ],
)
def test_the_amp_verdict_applies_issue_34s_numbers(amp, met):
    line = results_report.verdict(_means(**amp))[0]
    assert ("**met**" in line) == met, line
    assert "not yet" in results_report.verdict(_means(n=2, foot_slide_mm_s=10.0))[0]


def test_the_report_shows_means_ranges_and_what_is_missing(tmp_path):
    jobs = results.matrix(["walk"])
    runs = tmp_path / "runs"
    for seed, (success, slide) in enumerate([(1.0, 100.0), (0.9, 140.0)]):
        run = runs / f"walk/tracking_ppo/s{seed}"
        run.mkdir(parents=True)
        summary = {"success_rate": success, "global_mpjpe_mm": 70.0, "root_mpjpe_mm": 25.0, "foot_slide_mm_s": slide}
        (run / "results_eval.json").write_text(json.dumps({"summary": summary}))
    out = tmp_path / "results.md"
    results_report.write_report(jobs, runs, out, "test box")
    text = out.read_text()
    assert (
        "| `tracking_ppo` | 2 of 3 | 0.95 [0.90-1.00] | 70.0 [70.0-70.0] | 25.0 [25.0-25.0] | 120 [100-140] |" in text
    )
    assert "| `tracking_ppo_amp` | 0 of 3 | not run yet |" in text
    assert "| walk, 0 | not run yet |" in text and "Verdict: needs both configs." in text


def test_the_walking_task_is_evaluated_by_its_report_and_filmed_and_reported_against_its_target(tmp_path):
    (job,) = results.matrix(["amp_walk"])
    assert job.config == "amp_walk" and job.iterations * 256 * 24 <= 30e6  # within the target's budget
    outputs = [out.name for out, _ in results.eval_commands(job, tmp_path)]
    assert outputs == ["results_report.json", "results_walk_4880.mp4"]
    run = tmp_path / job.name
    run.mkdir(parents=True)
    (run / "results_report.json").write_text(json.dumps({"checkpoint": str(run / "model_2000.pt")}))
    outputs = [out.name for out, _ in results.eval_commands(job, tmp_path)]
    assert outputs[0] == "results_report.json"  # a report of an earlier checkpoint is redone at the end
    (run / "results_report.json").write_text(json.dumps({"checkpoint": str((run / "model_4880.pt").resolve())}))
    assert [out.name for out, _ in results.eval_commands(job, tmp_path)] == ["results_walk_4880.mp4"]
    walking = {"no_fall_rate": 0.95, "speed_along_command_m_s": 1.2, "command_speed_m_s": 1.5, "speed_ratio": 0.85}
    walking.update(within_20_percent=0.7, velocity_error_m_s=0.3, foot_slide_mm_s=90.0, joint_jerk=800.0)
    walking["per_env"] = {"command_m_s": [1.0, 1.2, 1.5, 2.0], "speed_along_command_m_s": [1.3, 1.5, 1.5, 1.8]}
    score = {"policy_logit": -0.5, "expert_logit": 0.4, "policy_style_reward": 0.3, "expert_style_reward": 0.8}
    report = {"checkpoint": str(run / "model_2000.pt"), "walking": walking, "discriminator": score}
    (run / "results_report.json").write_text(json.dumps(report))
    out = tmp_path / "results.md"
    results_report.write_report([job], tmp_path, out, "test box")
    text = out.read_text()
    assert "| 0 | 2000 it. (12.3 M env steps) | 0.95 | 1.20 / 1.50 (0.85) | 70 % | 0.30 | -0.50 / 0.40 |" in text
    assert "seed 0: meets the target at 12.3 M env steps" in text
    assert "1.00-1.33: 1.40 (2 envs); 1.33-1.67: 1.50 (1 envs); 1.67-2.00: 1.80 (1 envs)" in text
    walking["speed_ratio"] = 0.79  # more than 20 % slower than commanded
    (run / "results_report.json").write_text(json.dumps(report))
    results_report.write_report([job], tmp_path, out, "test box")
    assert "seed 0: misses the target" in out.read_text()


def test_eval_only_evaluates_the_trained_runs_and_trains_nothing(tmp_path, monkeypatch):
    jobs = results.matrix(["walk"])
    for name, it in (("walk/tracking_ppo/s0", 600), ("walk/tracking_ppo/s1", 300), ("walk/student/s1", 1200)):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / f"model_{it}.pt").write_bytes(b"")
    calls = []
    monkeypatch.setattr(results, "run_job", lambda job, runs, train=True: calls.append((job.name, train)) or [])
    results.schedule(jobs, tmp_path, 1, eval_only=True)
    # s1's teacher is half trained, yet its trained student is evaluated: evaluations wait on nothing
    assert sorted(calls) == [("walk/student/s1", False), ("walk/tracking_ppo/s0", False)]
