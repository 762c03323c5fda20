"""``tools/servo_lag.py``: the open-loop replay on any built-in robot, and its lag per window of the clip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mimic_rl.envs.mujoco.robots import build_model, g1_config, humanoid28_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from servo_lag import main, servo_lag


def test_the_windows_split_the_replay_without_gap_or_overlap(data_dir):
    """Breakage caught: a step counted in two windows or in none, the last window dropped, a window of the wrong
    length. humanoid28's physics step is 5 ms, so a 0.5 s window holds 100 steps; the windows' means weighted by their
    step counts are the legs' mean over the whole replay, and their worst is its worst."""
    assert build_model(humanoid28_config(), sensors=False)[0].opt.timestep == pytest.approx(0.005)
    r = servo_lag(str(data_dir / "motions/humanoid28/humanoid_walk.npz"), feedforward=False, window=0.5)
    starts, means, worsts, steps = (np.array(c) for c in zip(*r["windows"]))
    np.testing.assert_allclose(starts, 0.5 * np.arange(len(starts)))
    assert (steps[:-1] == 100).all() and 0 < steps[-1] <= 100 and steps.sum() == r["steps"]
    assert (means * steps).sum() / steps.sum() == pytest.approx(r["legs"], rel=1e-9)
    assert worsts.max() <= r["worst"]


def test_on_the_g1_the_feed_forward_cuts_the_lag_of_the_envs_servos(data_dir):
    """Breakage caught: the G1 replayed on its MJCF as shipped (no actuators at all: ``build_model`` adds the env's
    position servos, kp 40-99 N m/rad with damping ratio 2), or the feed-forward's gain not applied. A velocity
    feed-forward of ``kv / kp`` cancels the servo's damping term, so the lag must fall (humanoid28's run: to a
    quarter; ``B_HandsUp``, whose arms move and legs hardly: 0.027 -> 0.016 rad)."""
    robot = g1_config(data_dir / "robots/unitree_g1/g1.xml")
    path = str(data_dir / "motions/g1/B_HandsUp.csv")
    off, on = (servo_lag(path, ff, robot, csv_fps=60) for ff in (False, True))
    assert 0 < on["mean"] < 0.7 * off["mean"] and on["legs"] <= off["legs"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["missing.npz"], "missing.npz"),
        (["--robot", "g1", "clip.csv"], "--robot-mjcf"),
        (["--window", "0", "clip.npz"], "--window: expected seconds > 0, found 0.0"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(monkeypatch, capsys, argv, said):
    """Breakage caught: a traceback for a missing clip or a G1 without its MJCF, one-step windows for a window of 0
    (argparse's own errors come after its usage line)."""
    monkeypatch.setattr(sys, "argv", ["servo_lag.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert said in err.splitlines()[-1] and "error: " in err.splitlines()[-1]


def test_a_reader_that_stops_early_ends_it_quietly(data_dir):
    """Breakage caught: ``| head`` reported as "error: [Errno 32] Broken pipe" with exit code 2, or Python's
    "Exception ignored ... BrokenPipeError" at exit. The pipe's reading end is closed before the tool prints."""
    tool = Path(__file__).resolve().parents[1] / "tools/servo_lag.py"
    clip = str(data_dir / "motions/humanoid28/humanoid_walk.npz")
    proc = subprocess.Popen([sys.executable, str(tool), clip], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and err == ""


def test_each_clip_is_loaded_once_for_both_settings(data_dir, monkeypatch, capsys):
    """Breakage caught: the tool loading (parsing, converting, checking the feet of) a clip once per setting, or a
    clip passed loaded replayed differently from its path: the same numbers either way."""
    path = str(data_dir / "motions/humanoid28/humanoid_walk.npz")
    robot = humanoid28_config()
    assert servo_lag(robot.load_clip(path), True, robot) == servo_lag(path, True, robot)
    loads = []
    original = type(robot).load_clip
    monkeypatch.setattr(type(robot), "load_clip", lambda self, *a, **k: loads.append(a[0]) or original(self, *a, **k))
    monkeypatch.setattr(sys, "argv", ["servo_lag.py", path, path])
    main()
    assert loads == [path, path] and len(capsys.readouterr().out.splitlines()) == 4
