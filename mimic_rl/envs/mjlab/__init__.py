"""The mjlab backend: any task in mjlab's registry (e.g. its BeyondMimic G1 tracking task) as an rsl_rl ``VecEnv``, and
this package's own tracking task on mjlab (``MimicRL-Tracking-G1``, ``MimicRL-Tracking-G1-AMP``; ``task.py``).

Importing this package does not import mjlab (reading a config must not); ``make_mjlab_env`` does, says how to install
it when it is missing (``pip install -e ".[mjlab]"``), and registers this package's tasks in mjlab's registry. When
mjlab is already imported, importing this package registers them at once, so that code that imports mjlab and then
``mimic_rl.envs.mjlab`` finds them in mjlab's registry (``mimic_rl.envs.mjlab.task.register_tasks()`` does it
explicitly).
"""

import sys

from mimic_rl.envs.mjlab.config import MjlabEnvConfig

__all__ = ["MjlabEnvConfig"]

if "mjlab" in sys.modules:  # mjlab is here already: register this package's tasks with it
    from mimic_rl.envs.mjlab.task import register_tasks

    register_tasks()
