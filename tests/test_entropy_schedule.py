"""``algorithm.entropy_coef`` as a schedule over iterations (issue 30: the 3-clip G1 runs tracked better without the
entropy bonus late in training; the measured runs branched from a checkpoint with ``--set
algorithm.entropy_coef=0.0``, which a step schedule does in one run)."""

from __future__ import annotations

import json

import pytest
import torch
from test_runner import _params, small_cfg

from mimic_rl.algorithms.schedules import entropy_schedule
from mimic_rl.runners import OnPolicyRunner


def _run(cfg, log_dir, iterations, checkpoint=None):
    runner = OnPolicyRunner(cfg, log_dir=log_dir)
    if checkpoint is not None:
        runner.load(checkpoint)
    runner.learn(iterations)
    runner.close()
    return runner


def _cfg(entropy_coef):
    cfg = small_cfg()
    cfg.algorithm["entropy_coef"] = entropy_coef
    return cfg


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
    logged = [json.loads(line) for line in (tmp_path / "s" / "metrics.jsonl").read_text().splitlines()]
    assert [row["loss/entropy_coef"] for row in logged if "loss/entropy_coef" in row] == [0.05, 0.05, 0.0, 0.0]


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
