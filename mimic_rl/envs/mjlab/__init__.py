"""The mjlab backend: any task in mjlab's registry (e.g. its BeyondMimic G1 tracking task) as an rsl_rl ``VecEnv``.

Importing this package does not import mjlab; ``make_mjlab_env`` does, and says how to install it when it is missing
(``pip install -e ".[mjlab]"``).
"""

from mimic_rl.envs.mjlab.config import MjlabEnvConfig

__all__ = ["MjlabEnvConfig"]
