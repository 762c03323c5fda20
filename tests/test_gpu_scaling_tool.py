"""tools/gpu_scaling.sh on this CPU (the embedded env, a few iterations): it trains on the N shortest clips, brings
back the run's evaluations and its checkpoint in parts, and a fresh run folder continues from those parts."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIPS = {"M_ShortMove15.csv": 408, "M_ShortMove16.csv": 443, "M_ShortMove12.csv": 467}  # frames (CSV lines)


def _call(out: Path, run: Path, data: Path, robot: Path, **env: str) -> subprocess.CompletedProcess:
    cmd = ["bash", "tools/gpu_scaling.sh", str(out), "2", "1", "--robot", "g1", "--robot-mjcf", str(robot)]
    cmd += ["--set", "runner.eval_interval=1", "--set", "runner.save_interval=1", "--eval-envs", "1", "--threads", "1"]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    extra = {"ENV": "mujoco", "NUM_ENVS": "8", "DEVICE": "cpu", "RUN_DIR": str(run), "MIMIC_RL_DATA": str(data)}
    full = {**os.environ, "PATH": path, **extra, **env}
    return subprocess.run(cmd, cwd=ROOT, env=full, capture_output=True, text=True, timeout=600)


def test_a_scaling_row_trains_the_shortest_clips_and_continues_from_its_parts(tmp_path, data_dir):
    robot = data_dir / "robots" / "unitree_g1" / "g1.xml"
    data = tmp_path / "data"
    (data / "motions" / "g1_moves").mkdir(parents=True)
    for name in reversed(list(CLIPS)):  # the longest first: the choice is by length, not by order or name
        (data / "motions" / "g1_moves" / name).symlink_to(data_dir / "motions" / "g1_moves" / name)
    out, run = tmp_path / "out", tmp_path / "work" / "g1_2"
    first = _call(out, run, data, robot)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    log = (out / "train.log").read_text()
    assert "clips (2): M_ShortMove15.csv M_ShortMove16.csv" in log  # the two shortest, 408 and 443 frames
    assert sorted(p.name for p in (tmp_path / "work" / "clips_2").iterdir()) == [
        "M_ShortMove15.csv",
        "M_ShortMove16.csv",
    ]
    last = max(int(m) for m in re.findall(r"model_(\d+)\.pt\.part00", " ".join(p.name for p in out.iterdir())))
    parts = sorted(out.glob(f"model_{last}.pt.part*"))
    assert b"".join(p.read_bytes() for p in parts) == (run / f"model_{last}.pt").read_bytes()
    reached = json.loads((out / "reached.json").read_text())[0]
    evaluations = [json.loads(line) for line in (out / "evals.jsonl").read_text().splitlines()]
    assert reached["clips"] == 2 and reached["evaluations"] == len(evaluations) >= 1
    assert reached["last_env_steps"] == evaluations[-1]["total_steps"]

    # a fresh machine: the run folder is gone, the carried files of the first call hold the run
    carried = tmp_path / "carried"
    out.rename(carried)
    shutil.rmtree(run)
    second = _call(tmp_path / "out2", run, data, robot, RESUME_FROM=str(carried))
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    log = (tmp_path / "out2" / "train.log").read_text()
    assert f"resumed from {run / f'model_{last}.pt'} at iteration {last}" in log
    history = [json.loads(line)["iteration"] for line in (tmp_path / "out2" / "evals.jsonl").read_text().splitlines()]
    assert history[: len(evaluations)] == [e["iteration"] for e in evaluations] and history[-1] > last
