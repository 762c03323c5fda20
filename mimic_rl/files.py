"""Paths a user passes in: say precisely what is wrong (missing, a folder, a symlink loop, empty) before opening."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from mimic_rl.errors import UsageError

__all__ = ["PathProblem", "check_file", "check_folder", "output_file", "output_folder", "path_problem"]


class PathProblem(UsageError, FileNotFoundError):
    """A path does not lead to what was expected (also a ``FileNotFoundError`` for callers that catch that)."""


def path_problem(path: str | Path, want: str = "file") -> str | None:
    """Why ``path`` is not a readable ``want`` (``"file"`` or ``"folder"``), in a few words; None when it is one."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop (the link points back at itself)"
        if p.is_symlink():
            return f"a broken symbolic link (to {os.readlink(p)}, which does not exist)"
        parent = p.parent
        if exc.errno == errno.ENOTDIR or (parent != p and parent.exists() and not parent.is_dir()):
            return f"nothing: {parent} is a file, not a folder"
        if exc.errno == errno.EACCES:
            return "a path it cannot read (permission denied)"
        return "nothing (no such file or folder)"
    is_dir = os.path.isdir(p)
    if want == "file" and is_dir:
        return "a folder, not a file"
    if want == "folder" and not is_dir:
        return "a file, not a folder"
    if not os.access(p, os.R_OK):
        return "a path it cannot read (permission denied)"
    if want == "file" and st.st_size == 0:
        return "an empty file"
    return None


def check_file(path: str | Path, what: str, fix: str = "") -> Path:
    """``path`` as a ``Path`` if it is a readable, non-empty file; else ``PathProblem`` naming it and ``what`` it
    should be (e.g. ``"--checkpoint: expected a checkpoint file (model_<N>.pt)"``), with ``fix`` appended."""
    problem = path_problem(path, "file")
    if problem is None:
        return Path(path)
    raise PathProblem(f"{path}: {what}: expected a file, found {problem}" + (f"; {fix}" if fix else ""))


def check_folder(path: str | Path, what: str, fix: str = "") -> Path:
    """``path`` as a ``Path`` if it is a readable folder; else ``PathProblem`` (see ``check_file``)."""
    problem = path_problem(path, "folder")
    if problem is None:
        return Path(path)
    raise PathProblem(f"{path}: {what}: expected a folder, found {problem}" + (f"; {fix}" if fix else ""))


def _check_parents(p: Path, flag: str) -> None:
    """The nearest existing parent of ``p`` must be a folder (a path below a file cannot be written)."""
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"{p}: {flag}: expected a path inside a folder, found {parent}, which is a file")
            return


def output_file(path: str | Path, flag: str) -> Path:
    """``path`` as a file to write: not an existing folder, and its parent not a file."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{p}: {flag}: expected a file to write, found a folder; pass a file name (e.g. {p}/out.json)")
    _check_parents(p, flag)
    return p


def output_folder(path: str | Path, flag: str) -> Path:
    """``path`` as a folder to write into: not an existing file."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{p}: {flag}: expected a folder, found a file; pass a folder (it is created if missing)")
    _check_parents(p, flag)
    return p
