"""``algorithm.entropy_coef`` as a schedule over iterations or env steps (issue 30: the 3-clip G1 runs tracked better
without the entropy bonus late in training; the measured runs branched from a checkpoint with ``--set
algorithm.entropy_coef=0.0``, which a step schedule does in one run)."""

from __future__ import annotations

import json

import pytest
import torch
from test_runner import _params, small_cfg

from mimic_rl.algorithms.schedules import Schedule, entropy_schedule
from mimic_rl.runners import OnPolicyRunner

PER_ITERATION = 4 * 8  # small_cfg: 4 envs x 8 steps


def _run(cfg, log_dir, iterations, checkpoint=None):
    runner = OnPolicyRunner(cfg, log_dir=log_dir)
    if checkpoint is not None:
        runner.load(checkpoint)
    runner.learn(iterations)
    runner.close()
    return runner


def _cfg(entropy_coef, num_envs=4):
    cfg = small_cfg()
    cfg.algorithm["entropy_coef"] = entropy_coef
    cfg.env.num_envs = num_envs
    return cfg


def _logged(log_dir):
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    return [row["loss/entropy_coef"] for row in rows if "loss/entropy_coef" in row]


def test_a_step_schedule_trains_as_the_branch_resumed_without_the_bonus(tmp_path):
    """Four iterations with ``{mode: step, initial: 0.05, final: 0.0, end: 2}`` give bitwise the models of two
    iterations at 0.05, saved, and two more resumed at 0.0 (the measured branch runs); and not those of 0.05 kept."""
    scheduled = _run(_cfg({"mode": "step", "initial": 0.05, "final": 0.0, "end": 2}), tmp_path / "s", 4)
    _run(_cfg(0.05), tmp_path / "b", 2)
    branch = _run(_cfg(0.0), tmp_path / "c", 2, checkpoint=tmp_path / "b" / "model_2.pt")
    kept = _run(_cfg(0.05), tmp_path / "k", 4)
    a, b, k = _params(scheduled), _params(branch), _params(kept)
    assert all(torch.equal(a[key], b[key]) for key in a), [key for key in a if not torch.equal(a[key], b[key])]
    assert not all(torch.equal(a[key], k[key]) for key in a)  # the bonus changes the models: the test can fail
    assert _logged(tmp_path / "s") == [0.05, 0.05, 0.0, 0.0]
    over_steps = {"mode": "step", "initial": 0.05, "final": 0.0, "end": 2 * PER_ITERATION, "unit": "env_steps"}
    stepped = _run(_cfg(over_steps), tmp_path / "e", 4)  # the same switch, on the env-step clock
    e = _params(stepped)
    assert all(torch.equal(a[key], e[key]) for key in a) and _logged(tmp_path / "e") == [0.05, 0.05, 0.0, 0.0]
    assert stepped.alg.env_steps == stepped.total_steps == 4 * PER_ITERATION


def test_an_env_step_schedule_keeps_its_clock_when_a_resume_changes_the_env_count(tmp_path):
    """Switch at 4 iterations' worth of 4 envs (128 env steps): two iterations at 4 envs (64), resumed at 8 envs (64 a
    iteration), the third update is at 64 env steps (bonus on), the fourth at 128 (off); an iteration clock would have
    kept the bonus through the fourth update."""
    spec = {"mode": "step", "initial": 0.05, "final": 0.0, "end": 4 * PER_ITERATION, "unit": "env_steps"}
    _run(_cfg(spec), tmp_path / "a", 2)
    resumed = _run(_cfg(spec, num_envs=8), tmp_path / "b", 2, checkpoint=tmp_path / "a" / "model_2.pt")
    assert _logged(tmp_path / "a") == [0.05, 0.05] and _logged(tmp_path / "b") == [0.05, 0.0]
    assert resumed.alg.env_steps == resumed.total_steps == 2 * 32 + 2 * 64


def test_a_checkpoint_without_env_steps_counts_them_from_its_iteration(tmp_path):
    """Checkpoints written before MMPPO counted env steps resume at ``iteration x`` this run's env steps per
    iteration."""
    runner = _run(_cfg(0.01), tmp_path / "a", 3)
    state = torch.load(tmp_path / "a" / "model_3.pt", weights_only=True)
    assert state["algorithm_env_steps"] == 3 * PER_ITERATION
    del state["algorithm_env_steps"]
    runner.alg.env_steps = 0
    runner.alg.load(state)
    assert runner.alg.env_steps == 3 * PER_ITERATION


def test_a_resumed_run_takes_the_schedule_at_its_iteration(tmp_path):
    """A linear schedule continues from the checkpoint's iteration, not from its start."""
    cfg = _cfg({"mode": "linear", "initial": 0.04, "final": 0.0, "start": 0, "end": 4})
    _run(cfg, tmp_path / "a", 2)
    resumed = _run(cfg, tmp_path / "b", 1, checkpoint=tmp_path / "a" / "model_2.pt")
    assert resumed.alg.entropy_coef == pytest.approx(0.04 * (1 - 2 / 4))  # the coefficient of the third update


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("0.01", "expected a number or a schedule"),
        (True, "expected a number or a schedule"),
        ({"mode": "step", "end": 3}, r"entropy_coef\.initial: missing"),
        ({"initial": 0.01}, r"entropy_coef\.mode: missing"),
        ({"mode": "step", "initial": 0.01, "stop": 3}, r"unknown key\(s\) \['stop'\]"),
        ({"mode": "linear", "initial": 0.01, "start": 5, "end": 2}, "end >= start"),
        ({"mode": "step", "initial": float("nan")}, r"entropy_coef\.initial: expected a finite number"),
        ({"mode": "step", "initial": 0.01, "unit": "steps"}, r"entropy_coef\.unit: expected one of \('iterations'"),
        ({"mode": "step", "initial": 0.01, "end": 1600.5, "unit": "env_steps"}, r"entropy_coef\.end: expected a whole"),
        ({"mode": "exponential", "initial": 0.01, "decay": 0.9, "unit": "env_steps"}, "decays per iteration"),
    ],
)
def test_bad_entropy_schedules_name_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        entropy_schedule(spec)


def test_entropy_schedule_values():
    """Hand-computed values of the step and linear forms, and a number as a constant."""
    step = entropy_schedule({"mode": "step", "initial": 0.005, "final": 0.0, "end": 1600})
    assert [step(i) for i in (0, 1599, 1600, 5000)] == [0.005, 0.005, 0.0, 0.0]
    linear = entropy_schedule({"mode": "linear", "initial": 0.004, "final": 0.0, "start": 100, "end": 300})
    assert [linear(i) for i in (0, 100, 200, 300, 400)] == pytest.approx([0.004, 0.004, 0.002, 0.0, 0.0])
    assert entropy_schedule(0.005)(10_000) == 0.005
    over_steps = entropy_schedule({"mode": "step", "initial": 0.005, "final": 0.0, "end": 1.0e7, "unit": "env_steps"})
    assert over_steps.end == 10_000_000 and isinstance(over_steps.end, int)  # YAML's 1.0e+7 is a float
    assert [over_steps.at(5000, n) for n in (9_999_999, 10_000_000)] == [0.005, 0.0]  # the iteration is not read
    assert step.at(1600, 0) == 0.0  # an iteration schedule does not read the env steps


def test_only_the_entropy_bonus_runs_on_env_steps():
    """The other schedules (DAgger's coefficient, RND's weight, the teacher probability) count iterations: asking them
    for env steps is an error, not a schedule that silently runs on iterations."""
    with pytest.raises(ValueError, match=r"dagger_cfg\['coef'\]\.unit: this schedule runs over iterations"):
        Schedule.from_any({"mode": "step", "initial": 1.0, "end": 10, "unit": "env_steps"}, "dagger_cfg['coef']")
    with pytest.raises(ValueError, match="runs over iterations, not env_steps"):
        Schedule.from_any(Schedule("step", unit="env_steps"), "teacher_action_prob")
