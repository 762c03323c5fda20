"""Pick an OpenGL backend for MuJoCo's offscreen renderer when, and only when, something is rendered.

``import mimic_rl`` loads MuJoCo with its OpenGL backend switched off (see ``mimic_rl/__init__.py``), so training,
evaluation and export work on machines without any OpenGL library. ``offscreen_renderer`` then tries the backend the
user named in ``MUJOCO_GL`` or, when none is named, EGL (GPU drivers or Mesa), OSMesa (software) and GLFW (a display),
and raises ``RenderingUnavailable`` naming what failed and what to install.
"""

from __future__ import annotations

import importlib
import os
import sys

import mujoco

from mimic_rl.errors import RenderingUnavailable

__all__ = ["offscreen_renderer"]

BACKENDS = ("egl", "osmesa", "glfw")
_active: str | None = None
"""The backend that rendered last in this process (OpenGL platforms cannot be switched once one works)."""


def _load_backend(name: str) -> None:
    """Make MuJoCo's ``gl_context`` module load backend ``name`` (a fresh PyOpenGL for each attempt)."""
    os.environ["MUJOCO_GL"] = name
    if os.environ.get("PYOPENGL_PLATFORM") not in (None, name):
        del os.environ["PYOPENGL_PLATFORM"]  # set by an earlier failed attempt; let the next backend choose
    for module in [m for m in sys.modules if m == "OpenGL" or m.startswith(("OpenGL.", "mujoco.egl", "mujoco.osm"))]:
        del sys.modules[module]
    from mujoco.rendering.classic import gl_context

    importlib.reload(gl_context)
    if not hasattr(gl_context, "GLContext"):
        raise RenderingUnavailable(f"MuJoCo did not load an OpenGL context for MUJOCO_GL={name!r}")


def offscreen_renderer(model: mujoco.MjModel, width: int, height: int) -> mujoco.Renderer:
    """A ``mujoco.Renderer`` of ``width`` x ``height`` pixels on the first OpenGL backend that works."""
    global _active
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if _active is not None:
        candidates: tuple[str, ...] = (_active,)
    elif requested and requested not in ("disable", "disabled", "off", "false", "0"):
        candidates = (requested,)
    else:
        candidates = BACKENDS
    failures = []
    for name in candidates:
        try:
            if name != _active:
                _load_backend(name)
            renderer = mujoco.Renderer(model, height, width)
        except Exception as exc:  # PyOpenGL raises AttributeError/ImportError, MuJoCo FatalError/RuntimeError
            failures.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip())
            continue
        _active = name
        return renderer
    tried = "; ".join(failures)
    raise RenderingUnavailable(
        f"rendering: expected an OpenGL backend for offscreen rendering, found none that works ({tried}); install "
        "EGL (apt-get install libegl1 libgl1-mesa-dri) or OSMesa (apt-get install libosmesa6), or set MUJOCO_GL to a "
        "backend this machine has"
    )
