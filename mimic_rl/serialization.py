"""Checkpoints that a crash cannot corrupt and that never execute code.

A checkpoint holds tensors, numbers, strings, lists, tuples and dicts only: ``save_checkpoint`` refuses anything else
(naming where it is), and ``load_checkpoint`` reads with ``torch.load(weights_only=True)``, which cannot run a pickled
payload. Every failure to read is a ``CheckpointError`` that names the file and the problem.
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from mimic_rl.errors import CheckpointError
from mimic_rl.files import path_problem

__all__ = [
    "MissingCheckpoint",
    "checkpoint_kind",
    "latest_checkpoint",
    "load_checkpoint",
    "numbered_checkpoints",
    "remove_orphan_checkpoints",
    "save_checkpoint",
]


class MissingCheckpoint(CheckpointError, FileNotFoundError):
    """The checkpoint path leads to no file (nothing there, a folder, a broken link)."""


PLAIN_TYPES = (torch.Tensor, int, float, str, bool, bytes, type(None))
_TMP = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)$")


def _check_plain(value: Any, where: str) -> None:
    """Raise ``TypeError`` naming the first value under ``where`` that ``torch.load(weights_only=True)`` refuses."""
    if isinstance(value, PLAIN_TYPES):
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str | int):
                raise TypeError(f"checkpoint: {where}: keys must be strings or ints, found {type(key).__name__}")
            _check_plain(item, f"{where}.{key}")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")
        return
    raise TypeError(
        f"checkpoint: {where}: a {type(value).__name__} cannot be loaded safely (weights_only=True); store tensors, "
        "numbers, strings, lists and dicts"
    )


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write ``state`` to ``path`` atomically: a temporary file in the same folder, fsync, then rename.

    A crash (or an exception) at any point leaves the previous file at ``path`` intact; a temporary file left by a
    killed process is removed at the next start (``remove_orphan_checkpoints``).
    """
    _check_plain(state, "state")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphan_checkpoints(folder: str | Path) -> list[Path]:
    """Delete the temporary checkpoint files in ``folder`` whose writing process is gone (a kill mid-write)."""
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for p in folder.iterdir():
        match = _TMP.match(p.name)
        if match and int(match["pid"]) != os.getpid() and not _pid_alive(int(match["pid"])):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu", what: str = "--checkpoint") -> dict:
    """A checkpoint dict, read without executing code (``weights_only=True``); ``what`` names the option the path came
    from in error messages."""
    path = Path(path)
    problem = path_problem(path, "file")
    if problem is not None:
        hint = ""
        if problem.startswith("a folder"):
            latest = latest_checkpoint(path)
            hint = f"; pass a checkpoint file such as {latest}" if latest else "; pass a model_<N>.pt file"
        raise MissingCheckpoint(f"{path}: {what}: expected a checkpoint file, found {problem}{hint}")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols on foreign files; the error says enough
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:
        detail = " ".join(str(exc).split())
        found = re.search(r"(?:Unsupported global: GLOBAL|unsupported GLOBAL) ([\w.]+)", detail)
        if found is None:
            other = re.search(r"WeightsUnpickler error: (.*?)(?: Check the documentation|$)", detail)
            what_found = f"pickled data the safe loader refuses ({other.group(1).strip() if other else 'unreadable'})"
            raise CheckpointError(
                f"{path}: {what}: expected a PyTorch checkpoint of plain data, found {what_found}; checkpoints are "
                "loaded with weights_only=True and never run code"
            ) from None
        name = found.group(1)
        if name.startswith("numpy"):
            name += " (NumPy arrays: checkpoints of mimic_rl 0.1 held them; tools/upgrade_checkpoint.py converts them)"
        raise CheckpointError(
            f"{path}: {what}: expected tensors, numbers, strings, lists and dicts, found {name}, which loading would "
            "have to execute; checkpoints are loaded with weights_only=True, so this file is refused (re-save it as "
            "plain data if you wrote it and trust it)"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, IndexError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"{path}: {what}: expected a complete PyTorch checkpoint, found a truncated or damaged file ({first})"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(
            f"{path}: {what}: expected a checkpoint (a dict of models and settings), found a {type(state).__name__}"
        )
    return state


def checkpoint_kind(state: Mapping[str, Any]) -> str:
    """``"train"`` (this package's PPO), ``"distill"`` (this package's distillation), ``"rsl_rl"`` or ``"unknown"``."""
    if "config" in state and "student_state_dict" in state and "student_cfg" in state:
        return "distill"
    if "config" in state and "actor_state_dict" in state and "actor_cfg" in state:
        return "train"
    if "actor_state_dict" in state or "model_state_dict" in state:
        return "rsl_rl"
    return "unknown"


def numbered_checkpoints(log_dir: str | Path) -> list[tuple[int, Path]]:
    """The ``model_<iteration>.pt`` files in ``log_dir`` as ``(iteration, path)``, by iteration (not
    ``model_best.pt``)."""
    found = []
    for p in Path(log_dir).glob("model_*.pt"):
        stem = p.stem.removeprefix("model_")
        if stem.isdigit():
            found.append((int(stem), p))
    return sorted(found)


def latest_checkpoint(log_dir: str | Path) -> Path | None:
    """The ``model_<iteration>.pt`` with the highest iteration in ``log_dir`` (None if there is none)."""
    found = numbered_checkpoints(log_dir)
    return found[-1][1] if found else None
