"""The Isaac Lab backend: any task in Isaac Lab 3.0's gym registry as an rsl_rl ``VecEnv``, run without Isaac Sim on
its Newton backend (``env.py``), and this package's own tracking task there (``MimicRL-Tracking-G1``,
``MimicRL-Tracking-G1-AMP``; ``task.py``), checked against the embedded env.

Importing this package does not import Isaac Lab (reading a config must not); ``make_isaaclab_env`` does, says how to
install it when it is missing (``python tools/install_isaaclab.py``), prepares the local assets and registers this
package's tasks.
"""

from mimic_rl.envs.isaaclab.config import IsaacLabEnvConfig

__all__ = ["IsaacLabEnvConfig"]
