"""mimic_rl: humanoid motion imitation with reference-aware PPO, AMP, RND, DAgger and distillation."""

import os as _os
import sys as _sys


def _import_mujoco_without_opengl() -> None:
    """Import MuJoCo with its OpenGL backend switched off, then restore ``MUJOCO_GL``.

    MuJoCo loads the backend named by ``MUJOCO_GL`` when it is first imported, and a missing library (no libEGL on a
    bare GPU server, no OSMesa) breaks the import itself. Training, evaluation and export need no OpenGL, so nothing
    here should depend on it; only rendering picks a backend, when it is asked to render
    (``mimic_rl.envs.mujoco.render``).
    """
    if "mujoco" in _sys.modules:
        return
    requested = _os.environ.get("MUJOCO_GL")
    _os.environ["MUJOCO_GL"] = "disable"
    try:
        import mujoco  # noqa: F401
    except ImportError:
        pass  # not installed: the modules that need it raise their own ImportError
    finally:
        if requested is None:
            del _os.environ["MUJOCO_GL"]
        else:
            _os.environ["MUJOCO_GL"] = requested


_import_mujoco_without_opengl()


def _sleeping_openmp_threads() -> None:
    """Let torch's OpenMP threads sleep while they wait (``OMP_WAIT_POLICY=PASSIVE``) unless the user chose a policy.

    By default they spin between parallel regions. On a machine shared with another job, spinning threads take the
    CPUs the working threads need: beside one other 2-thread job on 2 cores a run kept 0.18 of its speed alone with
    spinning threads, 0.57 with sleeping ones (``docs/benchmarks.md``).
    The OpenMP runtime reads the setting when torch is imported, so it applies when ``mimic_rl`` is imported first
    (the ``mimic-rl`` command; in your own scripts, import ``mimic_rl`` before ``torch`` or set it yourself).
    """
    if "torch" not in _sys.modules:
        _os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_sleeping_openmp_threads()

__version__ = "0.1.0"
