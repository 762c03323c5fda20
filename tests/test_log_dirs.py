"""Runs never mix: a run folder that holds a run is refused unless resumed or replaced; without --log-dir every start
gets a folder of its own."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from cli_corpus import SMALL_TASK

from mimic_rl import run_dirs
from mimic_rl.cli import main
from mimic_rl.errors import UsageError
from mimic_rl.run_dirs import choose_log_dir, holds_run, latest_run, new_run_dir, remove_run, run_files

RUN_FILES = [
    "config.yaml",
    "model_1.pt",
    "model_20.pt",
    ".model_21.pt.tmp-123",
    "model_best.pt",  # runner.keep_best
    ".model_best.pt.tmp-7",
    "metrics.jsonl",
    "events.out.tfevents.1700000000.host.1.0",
    "eval.json",
    "eval_teacher.json",
    "plots/per_body_error.png",
    "export/policy.onnx",
    "export/policy.json",
    "export/policy.pt",
    "export/README.md",
]
USER_FILES = ["notes.txt", "model_best_mine.pt", "config.yml", "plots/notes.md", "export/README", "data/model_3.pt"]


def _make(folder: Path, names: list[str]) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x")


def test_overwrite_deletes_only_the_files_a_run_writes(tmp_path):
    _make(tmp_path, RUN_FILES + USER_FILES)
    (tmp_path / "wandb" / "run-1").mkdir(parents=True)
    expected = sorted([tmp_path / n for n in RUN_FILES] + [tmp_path / "wandb"])
    assert run_files(tmp_path) == expected
    assert remove_run(tmp_path) == expected
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == sorted(USER_FILES)
    assert not (tmp_path / "wandb").exists() and (tmp_path / "plots").is_dir()  # plots/ keeps the user's notes


def test_a_folder_holds_a_run_when_it_has_a_config_checkpoint_or_logs(tmp_path):
    assert not holds_run(tmp_path / "missing") and not holds_run(tmp_path)
    _make(tmp_path, [*USER_FILES, "eval.json"])
    assert not holds_run(tmp_path)
    for name in ("config.yaml", "model_3.pt", "metrics.jsonl", "events.out.tfevents.1.h.2.0"):
        folder = tmp_path / name.replace(".", "_")
        _make(folder, [name])
        assert holds_run(folder), name


def test_choosing_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert choose_log_dir(str(tmp_path / "new"), "t", None, False) == (tmp_path / "new", False)
    (tmp_path / "empty").mkdir()
    assert choose_log_dir(str(tmp_path / "empty"), "t", None, False)[0] == tmp_path / "empty"
    _make(tmp_path / "old", ["config.yaml", "model_2.pt"])
    with pytest.raises(UsageError) as info:
        choose_log_dir(str(tmp_path / "old"), "t", None, False)
    assert str(info.value) == (
        f"{tmp_path / 'old'}: --log-dir: expected a new or empty run folder, found a run (config.yaml, model_2.pt); "
        "pass --resume to continue it, --overwrite to replace it, or another --log-dir"
    )
    assert choose_log_dir(str(tmp_path / "old"), "t", "latest", False)[0] == tmp_path / "old"
    assert choose_log_dir(str(tmp_path / "old"), "t", None, True)[0] == tmp_path / "old"
    for resume in ("latest", str(tmp_path / "old" / "model_2.pt")):
        with pytest.raises(UsageError, match=r"--overwrite: would delete the checkpoint that --resume continues"):
            choose_log_dir(str(tmp_path / "old"), "t", resume, True)
    folder, made = choose_log_dir(None, "tracking_ppo", None, False)
    assert made and folder.is_dir() and not any(folder.iterdir())
    assert folder.parent == Path("runs") and folder.name.startswith("tracking_ppo-")


def test_two_starts_in_the_same_second_get_two_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20250101-120000")
    folders = [new_run_dir("task", tmp_path) for _ in range(3)]
    assert [f.name for f in folders] == ["task-20250101-120000", "task-20250101-120000-2", "task-20250101-120000-3"]


def test_resume_alone_continues_the_latest_run_of_the_task(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match=r"runs/small-\*: --resume: expected a run of small with a model_<N>\.pt"):
        choose_log_dir(None, "small", "latest", False)
    for i, name in enumerate(["small-20250101-120000", "small-20250101-120000-2", "other-20250102-000000"]):
        _make(tmp_path / "runs" / name, ["model_1.pt"])
        stamp = 1_700_000_000 + [20, 10, 30][i]
        os.utime(tmp_path / "runs" / name / "model_1.pt", (stamp, stamp))
    assert latest_run("small") == Path("runs/small-20250101-120000")  # its checkpoint is the newer one
    assert choose_log_dir(None, "small", "latest", False) == (Path("runs/small-20250101-120000"), False)


def _train(tmp_path: Path, *extra: str) -> int:
    task = tmp_path / "small.yaml"
    task.write_text(SMALL_TASK)
    return main(["train", "--task", str(task), "--no-eval", "--iterations", "1", *extra])


def test_a_second_train_into_the_same_folder_is_refused_then_overwritten(tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(tmp_path, "--log-dir", str(run), "--iterations", "2") == 0
    assert (run / "model_2.pt").is_file()
    (run / "notes.txt").write_text("mine")
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    capsys.readouterr()
    assert _train(tmp_path, "--log-dir", str(run)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {run}: --log-dir: expected a new or empty run folder")
    assert "--resume" in err[0] and "--overwrite" in err[0]
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before  # nothing written
    assert main(["distill", "--teacher", str(run / "model_2.pt"), "--log-dir", str(run), "--no-eval"]) == 2
    assert _train(tmp_path, "--log-dir", str(run), "--overwrite") == 0
    names = sorted(p.name for p in run.iterdir())
    assert names == ["config.yaml", "metrics.jsonl", "model_1.pt", "notes.txt"]  # model_2.pt of the old run: gone
    assert _train(tmp_path, "--log-dir", str(run), "--resume") == 0  # --resume continues it
    assert (run / "model_2.pt").is_file()


def test_without_log_dir_each_run_gets_a_new_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_dirs.time, "strftime", lambda fmt, *a: "20250101-120000")
    assert _train(tmp_path) == 0 and _train(tmp_path) == 0
    out = capsys.readouterr().out
    first, second = Path("runs/small-20250101-120000"), Path("runs/small-20250101-120000-2")
    assert f"new run folder: {first}" in out and f"new run folder: {second}" in out
    assert (first / "model_1.pt").is_file() and (second / "model_1.pt").is_file()
    assert _train(tmp_path, "--motion", "nowhere.npz") == 2
    assert sorted(p.name for p in Path("runs").iterdir()) == [first.name, second.name]  # a failed start: no folder
