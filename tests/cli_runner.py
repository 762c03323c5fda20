"""Runs ``mimic-rl`` commands as child processes of a fork server that has already imported the package.

A command started through the console script spends ~4 s importing torch, tensordict and MuJoCo before it reads
its first argument; the error corpus of ``test_cli_errors.py`` runs ~100 of them. Here one server process imports
those modules once and forks a fresh child per command. Each child is still a process of its own (its own exit
code, stdout, stderr, working directory and environment) that runs ``mimic_rl.cli.main`` exactly as the console
script does (``sys.exit(main())``); the console script itself stays covered by the tests that run it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import traceback
from pathlib import Path

PRELOAD = ["torch", "tensordict", "mujoco", "mimic_rl.cli", "mimic_rl.runners", "cli_runner"]
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


def _child(argv: list[str], env_extra: dict[str, str], cwd: str, out_path: str, err_path: str, code_path: str) -> None:
    """In the forked child: the environment and streams of a fresh command, then ``main(argv)`` and its exit code
    (also written to ``code_path``: see :func:`run_forked`)."""
    os.environ.pop("MIMIC_RL_DEBUG", None)
    os.environ.update(OMP_NUM_THREADS="1", **env_extra)
    os.chdir(cwd)
    with open(out_path, "w") as out, open(err_path, "w") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
    from mimic_rl.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # what the console script does with an uncaught exception: its traceback, exit code 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    Path(code_path).write_text(str(int(code or 0)))
    os._exit(int(code or 0))


def run_forked(argv: list[str], env_extra: dict[str, str], cwd: Path, timeout_s: float = 300) -> dict:
    """``{"rc", "stdout", "stderr", "argv"}`` of one command; rc is ``"timeout"`` when it ran past ``timeout_s``.

    The exit code is the one the child wrote before exiting, else the process's: the forkserver passes a child's
    status over a pipe and reports 255 when that read fails (seen once under load, from a child that had printed its
    one-line error), which is not the command's exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path, code_path = (os.path.join(tmp, name) for name in ("out", "err", "code"))
        proc = _CONTEXT.Process(target=_child, args=(argv, env_extra, str(cwd), out_path, err_path, code_path))
        proc.start()
        proc.join(timeout_s)
        if proc.is_alive():
            proc.kill()
            proc.join()
            rc: int | str = "timeout"
        else:
            written = Path(code_path).read_text() if Path(code_path).exists() else ""
            rc = int(written) if written else proc.exitcode
        read = [Path(p).read_text() if Path(p).exists() else "" for p in (out_path, err_path)]
    return {"rc": rc, "stdout": read[0], "stderr": read[1], "argv": argv}
