import os
import sys
from pathlib import Path

import pytest

import mimic_rl  # noqa: F401  (first, before torch: sets a sleeping OpenMP wait policy, so parallel workers share cores)

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("MUJOCO_GL", "egl")  # headless offscreen rendering (mimic_rl picks it when it renders)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The shared real-data folder (``MIMIC_RL_DATA``, default ``../shared/data`` beside the repository)."""
    root = Path(__file__).resolve().parents[1]
    path = Path(os.environ.get("MIMIC_RL_DATA", root.parent / "shared" / "data")).resolve()  # relative: from the cwd
    if not path.is_dir():
        pytest.skip(f"shared data folder {path} not found; set MIMIC_RL_DATA")
    return path
