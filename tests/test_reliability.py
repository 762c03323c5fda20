"""Nothing a user feeds in poisons a run or runs code: NaN observations, crafted checkpoints, missing OpenGL, kills."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from helpers import toy_cfg

from mimic_rl.algorithms import MMPPO
from mimic_rl.envs import PointMassTrackingEnv
from mimic_rl.errors import CheckpointError, TrainingDiverged
from mimic_rl.models.normalization import EmpiricalNormalizer
from mimic_rl.serialization import load_checkpoint, remove_orphan_checkpoints, save_checkpoint

REPO = Path(__file__).resolve().parents[1]
AMP_RND = {
    "amp_cfg": {
        "amp_obs_extractor": "mimic_rl.envs.toy:amp_obs_extractor",
        "amp_ref_obs_extractor": "mimic_rl.envs.toy:amp_reference_extractor",
    },
    "rnd_cfg": {"weight": 0.1},
}


def _rollout_with_a_nan_row(alg, env, groups, row=3, at=10):
    """One rollout in which env ``row``'s observation groups ``groups`` are NaN at step ``at`` (the env itself is
    fed finite actions), then compute_returns."""
    obs = env.get_observations()
    with torch.inference_mode():
        for t in range(24):
            if t == at:
                obs = obs.clone()
                for group in groups:
                    obs[group][row] = float("nan")
            actions = alg.act(obs)
            obs, rewards, dones, extras = env.step(torch.nan_to_num(actions))
            if t == at - 1:
                obs = obs.clone()
                for group in groups:
                    obs[group][row] = float("nan")
            alg.process_env_step(obs, rewards, dones, extras)
        alg.compute_returns(obs)


def _normalizers(alg) -> list[tuple[str, EmpiricalNormalizer]]:
    modules = {"actor": alg.actor, "critic": alg.critic, "amp": alg.amp.discriminator, "rnd": alg.rnd.net}
    return [
        (f"{k}.{n}", m)
        for k, mod in modules.items()
        for n, m in mod.named_modules()
        if isinstance(m, EmpiricalNormalizer)
    ]


def test_a_nan_observation_row_never_poisons_a_normalizer():
    """NaN in one env's policy, reference, AMP and RND groups mid-rollout: every normalizer (observation, reference,
    AMP features, RND states) stays finite and counts the row; the policy stays finite on clean observations."""
    torch.manual_seed(0)
    env = PointMassTrackingEnv(num_envs=16)
    alg = MMPPO.construct_algorithm(env.get_observations(), env, toy_cfg(**AMP_RND), "cpu")
    _rollout_with_a_nan_row(alg, env, ("policy", "reference", "amp"))
    out = alg.update()
    norms = _normalizers(alg)
    assert len(norms) >= 5  # actor obs + reference, critic obs + reference, AMP features, RND states
    for name, norm in norms:
        assert bool(torch.isfinite(norm.mean).all() and torch.isfinite(norm.var).all()), name
    assert out["nonfinite_obs_rows"] >= 3 and float(alg.actor.obs_normalizer.nonfinite_rows) >= 1
    assert out["nonfinite_batches"] >= 1  # the mini-batches holding the row were skipped, and counted
    clean = env.get_observations()
    actions = alg.actor(clean["policy"], clean["reference"], clean["reference_mask"])
    assert bool(torch.isfinite(actions).all())
    assert all(torch.isfinite(p).all() for p in alg.actor.parameters())


def test_a_normalizer_leaves_out_exactly_the_nonfinite_rows():
    x = torch.tensor([[1.0, 2.0], [float("nan"), 0.0], [3.0, 4.0], [float("inf"), 1.0]])
    norm = EmpiricalNormalizer(2, eps=0.0)
    norm.update(x)
    torch.testing.assert_close(norm.mean, torch.tensor([2.0, 3.0]))
    torch.testing.assert_close(norm.var, torch.tensor([1.0, 1.0]))
    assert float(norm.count) == 2 and float(norm.nonfinite_rows) == 2
    assert "nonfinite_rows" not in norm.state_dict()  # not part of checkpoints


def test_a_nan_value_stops_training_with_a_clear_error():
    env = PointMassTrackingEnv(num_envs=8)
    alg = MMPPO.construct_algorithm(env.get_observations(), env, toy_cfg(), "cpu")
    with pytest.raises(TrainingDiverged, match=r"values contain NaN or inf"):
        _rollout_with_a_nan_row(alg, env, ("critic",))


def test_a_crafted_checkpoint_never_runs_its_payload(tmp_path):
    marker = tmp_path / "PAYLOAD_RAN"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "model_1.pt"
    torch.save({"actor_state_dict": {"w": Payload()}, "config": {}}, path)
    with pytest.raises(CheckpointError, match=r"model_1\.pt: --checkpoint: .*posix\.system.*weights_only=True"):
        load_checkpoint(path)
    from mimic_rl.models.teacher import load_teacher

    with pytest.raises(CheckpointError, match=r"--teacher"):
        load_teacher(path)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # the payload is real: unsafe loading runs it
    assert marker.exists()


def test_checkpoints_hold_plain_data_only(tmp_path):
    with pytest.raises(TypeError, match=r"state\.env\.generator: a Generator cannot be loaded safely"):
        save_checkpoint({"env": {"generator": torch.Generator()}}, tmp_path / "x.pt")
    assert not (tmp_path / "x.pt").exists() and not list(tmp_path.iterdir())


def test_import_and_training_need_no_opengl(tmp_path, data_dir):
    """With MUJOCO_GL naming a backend this machine lacks (or an invalid one), the package imports and an env steps;
    only rendering fails, with the package's clear error."""
    walk = str(data_dir / "motions/humanoid28/humanoid_walk.npz")
    code = f"""
import torch
from mimic_rl.envs.mujoco import MujocoTrackingEnv, TrackingEnvConfig
from mimic_rl.envs.mujoco.render import render_rollout
from mimic_rl.errors import RenderingUnavailable
env = MujocoTrackingEnv(TrackingEnvConfig(num_envs=2, motions=[{walk!r}]))
env.step(torch.zeros(2, env.num_actions))
try:
    render_rollout(env, {str(tmp_path / "r.gif")!r}, steps=1)
except RenderingUnavailable as exc:
    print("RENDER:", exc)
"""
    import ctypes.util

    for backend in ("osmesa", "bogus"):
        if backend == "osmesa" and ctypes.util.find_library("OSMesa"):
            continue  # OSMesa is installed here: it is not a missing backend
        env = {**os.environ, "MUJOCO_GL": backend}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "RENDER: rendering: expected an OpenGL backend" in proc.stdout and "MUJOCO_GL" in proc.stdout


def test_orphan_temporary_checkpoints_are_removed_at_the_next_start(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f".model_5.pt.tmp-{dead.pid}"
    orphan.write_bytes(b"half a checkpoint")
    live = tmp_path / f".model_6.pt.tmp-{os.getppid()}"  # a writer that is still running keeps its file
    live.write_bytes(b"being written")
    assert remove_orphan_checkpoints(tmp_path) == [orphan]
    assert not orphan.exists() and live.exists()


def test_a_killed_run_leaves_loadable_checkpoints_and_resumes(tmp_path):
    """SIGKILL a training run while it saves every iteration: every model_*.pt loads, the next start removes the
    temporary files the kill left, and --resume continues from the latest."""
    (tmp_path / "task.yaml").write_text(
        "runner: {num_steps_per_env: 4, save_interval: 1, logger: none}\n"
        "env: {num_envs: 2, motions: [motions/humanoid28_squat_reach.npz]}\n"
        "algorithm: {num_learning_epochs: 1, num_mini_batches: 1}\n"
    )
    run = tmp_path / "run"

    def argv(iterations: int, *extra: str) -> list[str]:
        cli = [sys.executable, "-m", "mimic_rl.cli", "train", "--task", str(tmp_path / "task.yaml"), "--no-eval"]
        return [*cli, "--iterations", str(iterations), "--log-dir", str(run), *extra]

    proc = subprocess.Popen(argv(500), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    # The run is killed on an event: its log line of iteration 4 (printed after model_1..3.pt were saved, while
    # iteration 4 is being saved). The watchdog only bounds a hang (a run that never gets there); no time is asserted.
    watchdog = threading.Timer(600, proc.kill)
    watchdog.start()
    output = []
    try:
        for line in proc.stdout:
            output.append(line)
            logged = re.match(r"it\s+(\d+)/", line)
            if logged and int(logged.group(1)) >= 4:
                break
    finally:
        watchdog.cancel()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    saved = sorted(run.glob("model_*.pt"))
    assert len(saved) >= 3, "".join(output[-20:])
    for path in saved:
        assert "actor_state_dict" in load_checkpoint(path)
    (run / f".model_999.pt.tmp-{proc.pid}").write_bytes(b"what a kill mid-write leaves")
    resumed = subprocess.run(argv(1, "--resume"), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stdout
    assert not list(run.glob(".model_*.tmp-*"))


def _train_until_iteration_3(tmp_path, then):
    """A small ``mimic-rl train`` in a subprocess, read until its progress line of iteration 3; then ``then(proc)``
    (which ends it) returns (stdout, stderr). Returns (the process, its run folder, stdout, stderr)."""
    (tmp_path / "task.yaml").write_text(
        "runner: {num_steps_per_env: 4, save_interval: 1000, logger: none}\n"
        "env: {num_envs: 2, motions: [motions/humanoid28_squat_reach.npz]}\n"
        "algorithm: {num_learning_epochs: 1, num_mini_batches: 1}\n"
    )
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "mimic_rl.cli", "train", "--task", str(tmp_path / "task.yaml"), "--no-eval"]
    argv += ["--iterations", "500", "--log-dir", str(run)]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    watchdog = threading.Timer(600, proc.kill)  # bounds a hang only; no time is asserted
    watchdog.start()
    try:
        for line in proc.stdout:
            logged = re.match(r"it\s+(\d+)/", line)
            if logged and int(logged.group(1)) >= 3:
                break
        out, err = then(proc)
    finally:
        watchdog.cancel()
    return proc, run, out, err


def test_sigterm_saves_the_last_finished_iteration_and_exits_143(tmp_path):
    """A scheduler's SIGTERM (preemption, ``timeout``) is handled like Ctrl-C: with no periodic save due, the run
    writes the models of its last finished iteration, says so in one line, and exits with 128 + 15."""

    def terminate(proc):
        proc.send_signal(signal.SIGTERM)
        return proc.communicate()

    proc, run, out, err = _train_until_iteration_3(tmp_path, terminate)
    assert proc.returncode == 143, err[-2000:]
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    saved = sorted(run.glob("model_*.pt"))
    assert len(saved) == 1 and "interrupted: saved" in out, (saved, out[-500:])
    iteration = int(saved[0].stem.split("_")[1])
    assert iteration >= 3 and load_checkpoint(saved[0])["iteration"] == iteration


def test_closed_stdout_saves_and_exits_141_without_a_traceback(tmp_path):
    """``mimic-rl train ... | head``: once the reader closes the pipe, the run writes the models of its last finished
    iteration (said on stderr, since stdout is gone), prints one line and exits with 128 + 13 (SIGPIPE's code), not
    with Python's BrokenPipeError traceback."""

    def close_stdout(proc):
        proc.stdout.close()  # what `head` does after its lines
        err = proc.stderr.read()
        proc.wait()
        return "", err

    proc, run, _, err = _train_until_iteration_3(tmp_path, close_stdout)
    assert proc.returncode == 141, err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
    assert "stopped: the standard output was closed (broken pipe)" in err and "interrupted: saved" in err, err
    saved = sorted(run.glob("model_*.pt"))
    assert len(saved) == 1 and int(saved[0].stem.split("_")[1]) >= 3, saved
    assert load_checkpoint(saved[0])["iteration"] == int(saved[0].stem.split("_")[1])


def test_a_broken_pipe_elsewhere_keeps_its_traceback(monkeypatch):
    """A BrokenPipeError while stdout is fine (a socket, a worker's pipe) is a bug to see, not a closed ``| head``:
    ``main`` re-raises it."""
    import mimic_rl.cli as cli

    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "cmd_plot", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["plot", "eval.json", "--output", "plots"])
