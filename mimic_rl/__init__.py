"""mimic_rl: humanoid motion imitation with reference-aware PPO, AMP, RND, DAgger and distillation."""

import os as _os

# MuJoCo picks its OpenGL backend when it is first imported; this package only renders offscreen, so default to EGL
# (GPU drivers or Mesa) rather than GLFW, which needs a display. An explicit MUJOCO_GL is respected.
_os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
