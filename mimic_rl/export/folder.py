"""All-or-nothing output folders: files are written into a hidden sibling folder and moved into place at the end.

A failed (or interrupted) export leaves no half-written folder behind, and an existing folder exactly as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

__all__ = ["staged_folder"]


@contextlib.contextmanager
def staged_folder(output: str | Path, owned: tuple[str, ...] = ()) -> Iterator[Path]:
    """Yield an empty staging folder beside ``output``; on success its files replace those of ``output``.

    A missing ``output`` is the staging folder renamed; an existing one receives the staged files (each replaced
    atomically), and the files named in ``owned`` that this run did not write are removed, so that the folder never
    mixes two runs' files. On an error nothing of ``output`` changes, and the staging folder and the parent folders
    created for it are removed.
    """
    target = Path(output).resolve()
    created = _missing_parents(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"
    staging.mkdir()  # the usual permissions (mkdtemp's would be owner-only)
    try:
        yield staging
        _publish(staging, target, owned)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for parent in created:  # deepest first; a folder another process filled meanwhile stays
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


def _missing_parents(target: Path) -> list[Path]:
    """The parent folders of ``target`` that do not exist yet, deepest first."""
    missing = []
    for parent in target.parents:
        if parent.exists():
            break
        missing.append(parent)
    return missing


def _publish(staging: Path, target: Path, owned: tuple[str, ...]) -> None:
    if not target.exists():
        with contextlib.suppress(OSError):  # another process may have made it meanwhile: fill it below
            staging.rename(target)
            return
    written = {p.name for p in staging.iterdir()}
    for name in written:
        os.replace(staging / name, target / name)
    for name in set(owned) - written:
        with contextlib.suppress(FileNotFoundError):
            (target / name).unlink()
    staging.rmdir()
