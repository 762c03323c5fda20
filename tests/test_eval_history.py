"""tools/eval_history.py: a run's evaluations as a table, and when its mean success first reached a target."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import eval_history

from mimic_rl.runners.logging import evaluated_iterations


def _entry(iteration: int, successes: tuple[float, float]) -> dict:
    clips: list[dict] = [
        {"name": "short", "duration_s": 2.0, "success_rate": successes[0]},
        {"name": "long", "duration_s": 3.0, "success_rate": successes[1]},
    ]
    # the run's summary: the mean over clips (mimic_rl.tasks.tracking.from_start.summarize, tested there)
    summary = {"success_rate": sum(successes) / 2, "global_mpjpe_mm": 60.0, "episode_length_fraction": 0.91}
    return {"iteration": iteration, "total_steps": iteration * 10_000, "summary": summary, "clips": clips}


def _write(run: Path, entries: list[dict]) -> None:
    run.mkdir()
    (run / "evals.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_the_first_evaluation_at_the_target_and_its_env_steps_per_clip_second(tmp_path, capsys):
    # mean successes 0.25, 0.75, 0.85 (the clips count once each), 0.9: the target 0.8 is first met at iteration 150
    run = tmp_path / "run"
    _write(run, [_entry(50, (0.5, 0.0)), _entry(100, (1.0, 0.5)), _entry(150, (1.0, 0.7)), _entry(200, (1.0, 0.8))])
    reached = eval_history.first_reached(run, eval_history.read_history(run), 0.8)
    assert reached.env_steps == 1_500_000 and reached.mean_success == pytest.approx(0.85)
    assert reached.total_duration_s == 5.0 and reached.env_steps_per_clip_second == pytest.approx(300_000)
    assert reached.last_env_steps == 2_000_000 and reached.last_mean_success == pytest.approx(0.9)
    out = tmp_path / "reached.json"
    assert eval_history.main([str(run), "--every", "3", "--json", str(out)]) == 0
    rows = capsys.readouterr().out.splitlines()
    # the first, the crossing (iteration 150) and the last are printed whatever --every says; iteration 100 is not
    assert [r.split()[0] for r in rows[2:-3]] == ["0.50", "1.50", "2.00"]
    assert rows[3].split() == ["1.50", "0.85", "60.0", "91%", "1.00", "0.70"]  # iteration 150, each clip's success
    assert rows[-3].endswith("at 1.50 M env steps (0.85); 0.30 M env steps per clip-second")
    assert rows[-2] == "every clip's success >= 0.9: not reached by 2.00 M env steps (lowest clip 0.80 there)"
    # fewer evaluations than the default window of 5: no average
    assert rows[-1] == "mean success over 5 evaluations >= 0.8 (held): not reached by 2.00 M env steps"
    assert json.loads(out.read_text())[0]["env_steps"] == 1_500_000
    assert eval_history.first_reached(run, eval_history.read_history(run), 0.95).env_steps is None
    each = eval_history.first_reached(run, eval_history.read_history(run), 0.8, each_target=0.7)
    assert (each.each_clip_env_steps, each.each_clip_lowest) == (1_500_000, 0.7)  # 1.0 / 0.7 at iteration 150
    assert eval_history.main([str(run), "--each-target", "0.7"]) == 0
    last = capsys.readouterr().out.splitlines()[-2]
    assert last == "every clip's success >= 0.7: at 1.50 M env steps (lowest clip 0.70)"


def test_the_held_line_averages_the_window_of_evaluations_ending_at_each(tmp_path, capsys):
    # mean successes 0.25, 0.75, 0.85, 0.9, 0.3, 0.95, 1.0: one evaluation crosses 0.8 at 150 (1.5 M env steps), but
    # averaged over 3 the means are 0.617, 0.833 (at 200), ...: held from 2.0 M; over 4: 0.6875, 0.7, 0.75, 0.7875
    # (at most), not held
    successes = [(0.5, 0.0), (1.0, 0.5), (1.0, 0.7), (1.0, 0.8), (0.3, 0.3), (1.0, 0.9), (1.0, 1.0)]
    run = tmp_path / "run"
    _write(run, [_entry(50 * (i + 1), s) for i, s in enumerate(successes)])
    history = eval_history.read_history(run)
    three = eval_history.first_reached(run, history, 0.8, window=3)
    assert three.env_steps == 1_500_000 and three.held_env_steps == 2_000_000
    assert three.held_mean_success == pytest.approx((0.75 + 0.85 + 0.9) / 3)
    four = eval_history.first_reached(run, history, 0.8, window=4)
    assert four.held_env_steps is None and four.held_mean_success == pytest.approx((0.3 + 0.95 + 1.0 + 0.9) / 4)
    assert eval_history.first_reached(run, history, 0.8, window=1).held_env_steps == 1_500_000  # = the first crossing
    assert eval_history.main([str(run), "--window", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "mean success over 3 evaluations >= 0.8 (held): at 2.00 M env steps (0.83); 0.40 M env steps per clip-second"
    )
    assert eval_history.main([str(run), "--window", "4"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "mean success over 4 evaluations >= 0.8 (held): not reached by 3.50 M env steps (at most 0.79)"
    )


def test_a_resumed_run_s_redone_evaluations_replace_the_lost_stretch(tmp_path):
    # evaluated at 100 and 150, crashed, resumed from the checkpoint of iteration 100: 150 (lost) is evaluated again
    run = tmp_path / "run"
    lost, redone = _entry(150, (1.0, 1.0)), _entry(150, (0.0, 0.0))
    _write(run, [_entry(50, (0.0, 0.0)), _entry(100, (0.0, 0.0)), lost, _entry(100, (0.5, 0.5)), redone])
    history = eval_history.read_history(run)
    assert [e["iteration"] for e in history] == [50, 100, 150]
    assert history[1]["clips"][0]["success_rate"] == 0.5 and history[2] == redone
    assert eval_history.first_reached(run, history, 0.8).env_steps is None


def test_a_line_cut_short_by_a_killed_run_is_left_out_and_said(tmp_path, capsys):
    run = tmp_path / "run"
    _write(run, [_entry(50, (0.0, 0.0)), _entry(100, (1.0, 1.0))])
    with open(run / "evals.jsonl", "a") as f:
        f.write(json.dumps(_entry(150, (1.0, 1.0)))[:40])  # killed while writing
    assert [e["iteration"] for e in eval_history.read_history(run)] == [50, 100]
    assert capsys.readouterr().err.strip() == f"{run / 'evals.jsonl'}:3: not a JSON line (cut short?), left out"
    # the runner's resume reads the same file the same way: 150 has no evaluation, so it is done again
    assert evaluated_iterations(run / "evals.jsonl") == {50, 100}


def test_a_json_line_that_is_not_an_evaluation_is_skipped_by_the_tools_and_the_runner_alike(tmp_path):
    """Breakage caught: the tools stopping with a KeyError traceback on a JSON line without a numeric iteration, which
    the runner's resume skips."""
    run = tmp_path / "run"
    _write(run, [_entry(50, (0.0, 0.0)), {"note": "x"}, {"iteration": None}, _entry(100, (1.0, 1.0))])
    assert [e["iteration"] for e in eval_history.read_history(run)] == [50, 100]
    assert evaluated_iterations(run / "evals.jsonl") == {50, 100}


def test_a_folder_without_evaluations_is_one_line_and_exit_code_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert eval_history.main([str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no evals.jsonl" in err[0]
