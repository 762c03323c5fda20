"""Every user mistake through the real ``mimic-rl`` entry point: one line on stderr naming the file, key or flag and
the problem, exit code 2, no traceback, within 60 s. Valid inputs next to them must still be accepted.

The corpus (``cli_corpus.py``) is built from the real clips in ``MIMIC_RL_DATA`` and the shipped motion; the cases
run several at a time, once per session, each in a process of its own forked from a server that has imported the
package (``cli_runner.py``: ~4 s less per command); the valid controls and the ``--debug`` tests run the installed
console script itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_corpus import CASES, CONTROLS, SMALL_TASK, make_workspace
from cli_runner import run_forked

from mimic_rl.cli import main

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300
"""Bounds a hung command (it then counts as failed: its rc is "timeout"); no test asserts how long a command took."""


def _entry_point() -> list[str]:
    """The installed console script (what a user runs), else the module."""
    script = Path(sys.executable).parent / "mimic-rl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mimic_rl.cli"]


def _run(argv: list[str], env_extra: dict[str, str], cwd: Path, timeout_s: float = TIMEOUT_S) -> dict:
    """One command through the installed console script, in a fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("MIMIC_RL_DEBUG",)}
    env.update(OMP_NUM_THREADS="1", **env_extra)
    try:
        proc = subprocess.run(
            [*_entry_point(), *argv], capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd
        )
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = "timeout", str(exc.stdout), str(exc.stderr)
    return {"rc": rc, "stdout": out, "stderr": err, "argv": argv}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir):
    """Runs every case and control once; returns ({id: result}, workspace paths)."""
    root = tmp_path_factory.mktemp("corpus")
    (root / "small.yaml").write_text(SMALL_TASK)
    good_dir = root / "good_run"
    assert main(["train", "--task", str(root / "small.yaml"), "--log-dir", str(good_dir), "--eval-envs", "1"]) == 0
    paths = make_workspace(root, data_dir, good_dir / "model_1.pt", good_dir / "eval.json")
    jobs = {case_id: (run_forked, argv, {}) for case_id, argv, _ in CASES}
    jobs.update({case_id: (_run, argv, env) for case_id, argv, env in CONTROLS})
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {
            case_id: pool.submit(run, [a.format(**paths) for a in argv], env, REPO)
            for case_id, (run, argv, env) in jobs.items()
        }
        results = {case_id: f.result() for case_id, f in futures.items()}
    return results, paths


def _show(result: dict) -> str:
    out, err = result["stdout"][-1500:], result["stderr"][-3000:]
    return f"argv {result['argv']}\nrc {result['rc']}\nstderr:\n{err}\nstdout:\n{out}"


@pytest.mark.parametrize("case_id, patterns", [(c[0], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_a_mistake_gets_one_line_and_exit_code_2(corpus, case_id, patterns):
    results, paths = corpus
    result = results[case_id]
    assert result["rc"] == 2, _show(result)
    lines = [line for line in result["stderr"].splitlines() if line.strip() and not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), _show(result)
    assert "Traceback" not in result["stderr"] + result["stdout"], _show(result)
    for pattern in patterns:
        assert re.search(pattern, lines[0]), f"{pattern!r} not in the message\n{_show(result)}"
    assert not Path(paths["marker"]).exists(), "a crafted checkpoint ran its payload"


@pytest.mark.parametrize("case_id", [c[0] for c in CONTROLS])
def test_valid_inputs_are_accepted(corpus, case_id):
    results, _ = corpus
    assert results[case_id]["rc"] == 0, _show(results[case_id])


def test_the_corpus_covers_every_class_of_mistake():
    ids = [c[0] for c in CASES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    for prefix in ("motion_", "csv_", "config_", "ckpt_", "resume_", "plot_", "device_", "num_envs_", "teacher_"):
        assert any(i.startswith(prefix) for i in ids), prefix


def test_debug_shows_the_traceback(tmp_path):
    """``--debug`` (or MIMIC_RL_DEBUG=1) turns the one line back into the traceback."""
    argv = ["train", "--motion", str(tmp_path / "none.npz"), "--no-eval", "--debug"]
    plain = _run(argv[:-1], {}, REPO)
    debug = _run(argv, {}, REPO)
    by_env = _run(argv[:-1], {"MIMIC_RL_DEBUG": "1"}, REPO)
    assert plain["rc"] == 2 and "Traceback" not in plain["stderr"]
    for result in (debug, by_env):
        assert result["rc"] != 0 and "Traceback" in result["stderr"] and "PathProblem" in result["stderr"]


def test_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    """Only the package's expected errors become one line: anything else is a bug and propagates."""
    import mimic_rl.cli

    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(mimic_rl.cli, "cmd_convert", broken)
    with pytest.raises(ZeroDivisionError):
        main(["convert", "x.npz", "--output", str(tmp_path / "o.npz")])


def test_a_failed_start_leaves_no_files_behind(tmp_path, corpus):
    """A bad checkpoint or config at start or resume writes no config.yaml, logs or events into the run folder."""
    _, paths = corpus
    run = tmp_path / "run"
    assert main(["train", "--task", paths["small_task"], "--log-dir", str(run), "--resume", paths["crafted_pt"]]) == 2
    assert not run.exists()
    fresh = tmp_path / "fresh"
    assert main(["train", "--task", paths["fewer_frames"], "--log-dir", str(fresh), "--resume", paths["good"]]) == 2
    assert not fresh.exists()
    shutil.copytree(Path(paths["good"]).parent, tmp_path / "copy")
    before = sorted(p.name for p in (tmp_path / "copy").iterdir())
    config = (tmp_path / "copy" / "config.yaml").read_text()
    argv = ["train", "--task", paths["fewer_frames"], "--log-dir", str(tmp_path / "copy"), "--resume", "--no-eval"]
    assert main(argv) == 2
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == before
    assert (tmp_path / "copy" / "config.yaml").read_text() == config


def test_a_warning_line_is_printed_once_per_process(capsys):
    """Breakage caught: the same warning printed once per env that loads a clip (a run's training env and its
    evaluation env both load every clip), or distinct warnings swallowed with the repeats."""
    from mimic_rl import cli

    cli._show_warning(UserWarning("test_cli_errors.npz: said   twice"), UserWarning, "env.py", 1)
    cli._show_warning(UserWarning("test_cli_errors.npz: said\ntwice"), UserWarning, "evaluation.py", 2)
    cli._show_warning(UserWarning("test_cli_errors.npz: said once"), UserWarning, "env.py", 1)
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["warning: test_cli_errors.npz: said twice", "warning: test_cli_errors.npz: said once"]
