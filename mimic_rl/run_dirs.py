"""Run folders: one run per folder, never two runs' files mixed.

``choose_log_dir`` picks the folder of ``mimic-rl train`` / ``distill``: a fresh ``runs/<task>-<YYYYmmdd-HHMMSS>``
when none is given; a given folder that holds a run already is refused unless the run is resumed (``--resume``) or
replaced (``--overwrite``: ``remove_run`` deletes only the files a run writes, listed by ``run_files``).
``read_jsonl`` and ``read_eval_history`` read a run's JSON-lines logs (``metrics.jsonl``, ``evals.jsonl``) for the
runner's resume, ``mimic-rl plot`` and ``tools/``, without importing torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from mimic_rl.errors import UsageError

__all__ = [
    "RUNS_ROOT",
    "choose_log_dir",
    "discard_if_empty",
    "eval_lines",
    "holds_run",
    "latest_run",
    "new_run_dir",
    "read_eval_history",
    "read_jsonl",
    "remove_run",
    "run_files",
]

RUNS_ROOT = Path("runs")
"""Where runs go without ``--log-dir`` (relative to the working directory)."""
_MARKERS = re.compile(r"^(config\.yaml|model_(\d+|best)\.pt|metrics\.jsonl|events\.out\.tfevents\..+)$")
"""Files whose presence means a folder holds a run."""
_TOP_LEVEL = re.compile(
    r"^(config\.yaml|model_(\d+|best)\.pt|\.model_(\d+|best)\.pt\.tmp-\d+|(metrics|evals)\.jsonl"
    r"|events\.out\.tfevents\..+|eval(_teacher)?\.json)$"
)
"""Files a run writes at the top of its folder (checkpoints and their temporary files, config, logs, evaluations)."""
_SUBFOLDERS = {"plots": re.compile(r"^.+\.png$"), "export": re.compile(r"^(policy\.(pt|onnx|json)|README\.md)$")}
"""Files a run writes in its subfolders (the plots of its evaluation, its export)."""
_LOGGER_FOLDERS = ("wandb",)
"""Subfolders that a logger fills with the run's files only (removed whole)."""


def holds_run(folder: Path) -> bool:
    """Whether ``folder`` holds a run's files (a config.yaml, a checkpoint, metrics.jsonl or TensorBoard events)."""
    return folder.is_dir() and any(_MARKERS.match(p.name) and p.is_file() for p in folder.iterdir())


def run_files(folder: Path) -> list[Path]:
    """The files (and logger folders) in ``folder`` that a run writes; anything else is the user's and stays."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if _TOP_LEVEL.match(p.name) and p.is_file() and not p.is_symlink()]
    for name, pattern in _SUBFOLDERS.items():
        sub = folder / name
        if sub.is_dir() and not sub.is_symlink():
            found += [p for p in sub.iterdir() if pattern.match(p.name) and p.is_file() and not p.is_symlink()]
    found += [folder / n for n in _LOGGER_FOLDERS if (folder / n).is_dir() and not (folder / n).is_symlink()]
    return sorted(found)


def remove_run(folder: Path) -> list[Path]:
    """Delete the run files of ``folder`` (``run_files``) and the subfolders that this empties; returns them."""
    removed = run_files(folder)
    for path in removed:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    for name in _SUBFOLDERS:
        sub = folder / name
        if sub.is_dir() and not sub.is_symlink() and not any(sub.iterdir()):
            sub.rmdir()
    return removed


def new_run_dir(name: str, root: Path = RUNS_ROOT) -> Path:
    """A new, empty ``root/<name>-<YYYYmmdd-HHMMSS>`` (``-2``, ``-3``, ... when another start took that second);
    created atomically, so two starts never share it."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = root / (f"{name}-{stamp}" if n == 1 else f"{name}-{stamp}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise UsageError(
        f"{root}: --log-dir: expected a free run folder name, found {name}-{stamp}-* all taken; pass --log-dir"
    )


def latest_run(name: str, root: Path = RUNS_ROOT) -> Path | None:
    """The folder ``root/<name>-*`` whose newest checkpoint was written last (None if none has a checkpoint)."""
    best: tuple[float, Path] | None = None
    for folder in root.glob(f"{name}-*") if root.is_dir() else []:
        times = [p.stat().st_mtime for p in folder.glob("model_*.pt") if re.fullmatch(r"model_\d+\.pt", p.name)]
        if times and (best is None or max(times) > best[0]):
            best = (max(times), folder)
    return None if best is None else best[1]


def _is_main_rank() -> bool:
    """Rank 0 of a ``torchrun`` launch (or a single process): the one that writes the run folder."""
    return os.environ.get("RANK", "0") == "0"


def choose_log_dir(log_dir: str | None, name: str, resume: str | None, overwrite: bool) -> tuple[Path, bool]:
    """(the run folder, whether it was made here) of a run of config ``name``; see the module's docstring.

    ``--resume`` alone without ``--log-dir`` continues the latest ``runs/<name>-*`` run."""
    if log_dir is None:
        if resume == "latest":
            latest = latest_run(name)
            if latest is None:
                raise UsageError(
                    f"{RUNS_ROOT / name}-*: --resume: expected a run of {name} with a model_<N>.pt, found none; pass "
                    "--log-dir RUN_FOLDER (the run to continue) or --resume CHECKPOINT"
                )
            return latest, False
        if not _is_main_rank():
            return RUNS_ROOT / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}", False  # only rank 0 writes
        return new_run_dir(name), True
    folder = Path(log_dir)
    if overwrite and resume is not None and (resume == "latest" or Path(resume).resolve().parent == folder.resolve()):
        raise UsageError(
            f"{folder}: --overwrite: would delete the checkpoint that --resume continues from; leave out --overwrite "
            "to continue the run, or pass another --log-dir"
        )
    if resume is None and not overwrite and holds_run(folder):
        found = ", ".join(p.name for p in sorted(folder.iterdir()) if _MARKERS.match(p.name))
        raise UsageError(
            f"{folder}: --log-dir: expected a new or empty run folder, found a run ({_shorten(found)}); pass --resume "
            "to continue it, --overwrite to replace it, or another --log-dir"
        )
    return folder, False


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 4].rsplit(", ", 1)[0] + ", ..."


def discard_if_empty(folder: Path) -> None:
    """Remove ``folder`` (a run folder made by ``new_run_dir``) if a failed start left it empty."""
    with contextlib.suppress(OSError):
        folder.rmdir()


def read_eval_history(path: Path) -> list[dict]:
    """The evaluations in ``path`` (a run's ``evals.jsonl``), in order; an empty list when it has none yet.

    A run resumed from a checkpoint older than its last evaluations evaluates that stretch again: an evaluation
    replaces every earlier line of its iteration or later (those of the stretch the crash lost). A line that is not
    JSON (one cut short by a killed process) is left out, and said on stderr; a JSON line without a numeric
    ``iteration`` is not an evaluation's, and is skipped."""
    history: list[dict] = []
    for entry in eval_lines(path):
        history = [e for e in history if e["iteration"] < entry["iteration"]] + [entry]
    return history


def eval_lines(path: Path) -> list[dict]:
    """The evaluations' lines of ``path`` (``read_jsonl``) as written, with ``iteration`` an int; a JSON line without
    a numeric ``iteration`` is skipped."""
    rows = []
    for row in read_jsonl(path):
        try:
            rows.append({**row, "iteration": int(row["iteration"])})
        except (KeyError, TypeError, ValueError):  # JSON, but not an evaluation's line
            continue
    return rows


def read_jsonl(path: Path) -> list[dict]:
    """The JSON lines of ``path`` in order (none when it does not exist); blank lines are skipped, and a line that is
    not JSON (one cut short by a killed process) is left out and said on stderr."""
    if not path.exists():
        return []
    rows: list[dict] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            print(f"{path}:{number}: not a JSON line (cut short?), left out", file=sys.stderr)
    return rows
