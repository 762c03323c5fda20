"""TensorBoard gets rsl_rl's tags beside ours, with the same numbers, so an rsl_rl user's dashboards work."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from mimic_rl.config import load_config
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.runners import OnPolicyRunner
from mimic_rl.runners.logging import RunLogger

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

# ours -> rsl_rl's, written out here (not read from the module under test); see rsl_rl/utils/logger.py
EXPECTED = {
    "loss/value": "Loss/value",
    "loss/surrogate": "Loss/surrogate",
    "loss/entropy": "Loss/entropy",
    "loss/learning_rate": "Loss/learning_rate",
    "perf/steps_per_s": "Perf/total_fps",
    "perf/collection_time": "Perf/collection_time",
    "perf/learning_time": "Perf/learning_time",
    "episode/reward": "Train/mean_reward",
    "episode/length": "Train/mean_episode_length",
}
RSL_RL_2 = {"loss/value": "Loss/value_function", "perf/collection_time": "Perf/collection time"}  # rsl_rl 2.x names


def _events(log_dir: Path) -> dict[str, dict[int, float]]:
    acc = event_accumulator.EventAccumulator(str(log_dir), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def _jsonl(log_dir: Path) -> dict[int, dict[str, float]]:
    rows = [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]
    return {row["iteration"]: row for row in rows}


def test_a_toy_run_writes_rsl_rl_tags_with_our_values(tmp_path):
    cfg = load_config("tracking_ppo")
    cfg.runner.num_steps_per_env, cfg.runner.time_budget_s, cfg.runner.save_interval = 24, None, 1000
    cfg.runner.logger = "tensorboard"
    cfg.algorithm.update(num_mini_batches=2, num_learning_epochs=1)
    cfg.actor, cfg.critic = {"hidden_dims": [16], "init_noise_std": 0.5}, {"hidden_dims": [16]}
    OnPolicyRunner(cfg, log_dir=tmp_path, env=PointMassTrackingEnv(num_envs=16, seed=0)).learn(3)
    events, rows = _events(tmp_path), _jsonl(tmp_path)
    assert set(rows) == {1, 2, 3}
    for ours, theirs in [*EXPECTED.items(), *RSL_RL_2.items()]:
        assert theirs in events, f"{theirs} missing from TensorBoard (tags: {sorted(events)})"
        logged = {it: row[ours] for it, row in rows.items() if ours in row}
        assert logged, f"{ours} never logged: the toy run must end episodes"
        assert events[theirs] == pytest.approx(logged, rel=1e-6), theirs  # float32 in the event file
        assert events[ours] == events[theirs]
    # metrics.jsonl keeps our names only
    assert not any(key[0].isupper() for row in rows.values() for key in row)
    # the policy's std: 0.5 at the start (init_noise_std), as rsl_rl's Policy/mean_std
    assert rows[1]["policy/mean_std"] == pytest.approx(0.5, rel=0.2)
    assert events["Policy/mean_std"] == pytest.approx({it: row["policy/mean_std"] for it, row in rows.items()})


def test_every_alias_goes_to_tensorboard_and_not_to_metrics_jsonl(tmp_path):
    logger = RunLogger(tmp_path, "tensorboard")
    logger.log(5, {"policy/mean_std": 0.25, "loss/rnd": 1.5, "loss/mirror": 0.5, "loss/behavior": 2.0, "x/y": 3.0})
    logger.close()
    events = _events(tmp_path)
    assert events["Policy/mean_std"] == {5: 0.25} and events["Loss/rnd"] == {5: 1.5}
    assert events["Loss/symmetry"] == {5: 0.5} and events["Loss/behavior"] == {5: 2.0}
    assert events["Policy/mean_noise_std"] == {5: 0.25}  # rsl_rl 2's spelling
    assert events["x/y"] == {5: 3.0} and len(events) == 10  # 5 of ours + 5 aliases, nothing else
    row = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert set(row) == {"iteration", "time", "policy/mean_std", "loss/rnd", "loss/mirror", "loss/behavior", "x/y"}


def test_the_tags_are_spelled_as_in_rsl_rl():
    """The installed rsl_rl's logger writes exactly these tags (its source is the reference)."""
    from mimic_rl.runners.logging import RSL_RL_TAGS

    spec = importlib.util.find_spec("rsl_rl")
    if spec is None:
        pytest.skip("rsl_rl is not installed")
    root = Path(spec.origin).parent
    logger, ppo = (root / "utils" / "logger.py").read_text(), (root / "algorithms" / "ppo.py").read_text()
    distillation = (root / "algorithms" / "distillation.py").read_text()
    assert 'f"Loss/{key}"' in logger  # the losses: Loss/<key of the algorithm's loss_dict>
    for tag in RSL_RL_TAGS.values():
        group, key = tag.split("/", 1)
        if group == "Loss" and key != "learning_rate":
            assert f'"{key}":' in ppo + distillation or f'loss_dict["{key}"]' in ppo, tag
        else:
            assert f'"{tag}"' in logger, tag
    assert set(EXPECTED.items()) <= set(RSL_RL_TAGS.items())
