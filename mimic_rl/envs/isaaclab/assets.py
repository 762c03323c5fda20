"""The USD assets Isaac Lab's tasks load, made on this machine and cached: nothing is downloaded, nothing committed.

Isaac Lab's tasks load their ground plane and robots from NVIDIA's asset server (``ISAACSIM_ASSET_ROOT``, by default
a cloud bucket). Without Isaac Sim or network access, ``prepare_asset_root`` writes a local root with what the tasks
this package runs need: the ground plane every task spawns (a collision plane, ``GROUND_PLANE``), and the MuJoCo
humanoid of ``Isaac-Humanoid`` (the humanoid USD that ships inside the ``newton`` package, its five single-axis joints
renamed to the names Isaac Lab's humanoid config expects). ``g1_usd`` converts the Unitree G1's MJCF into USD with
``mujoco-usd-converter`` for ``MimicRL-Tracking-G1``. Files are written atomically into the cache
(``$MIMIC_RL_CACHE/isaaclab``, default ``~/.cache/mimic_rl/isaaclab``); a user's own ``ISAACSIM_ASSET_ROOT`` is left
alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["GROUND_PLANE", "HUMANOID", "HUMANOID_JOINTS", "asset_cache", "g1_usd", "prepare_asset_root"]

GROUND_PLANE = "Isaac/IsaacLab/Environments/Grid/default_ground_plane_checker_v1/default_ground_plane.usda"
"""Where Isaac Lab's ``GroundPlaneCfg`` finds its USD under the asset root."""
HUMANOID = "Isaac/Robots/IsaacSim/Humanoid/humanoid_instanceable.usd"
"""Where Isaac Lab's ``HUMANOID_CFG`` finds its USD under the asset root."""
HUMANOID_JOINTS = {
    "abdomen_x": "pelvis",
    "right_knee": "right_shin",
    "left_knee": "left_shin",
    "right_elbow": "right_lower_arm",
    "left_elbow": "left_lower_arm",
}
"""Newton's humanoid joint name -> the name Isaac Lab's humanoid (its actuator and gear tables) gives that joint."""

_GROUND_PLANE_USDA = """#usda 1.0
(
    defaultPrim = "GroundPlane"
    metersPerUnit = 1
    upAxis = "Z"
)

def Xform "GroundPlane"
{
    def Plane "CollisionPlane" (
        prepend apiSchemas = ["PhysicsCollisionAPI"]
    )
    {
        uniform token axis = "Z"
        double length = 1000
        double width = 1000
    }
}
"""


def asset_cache() -> Path:
    """The folder the assets are made in: ``$MIMIC_RL_CACHE/isaaclab``, default ``~/.cache/mimic_rl/isaaclab``."""
    base = os.environ.get("MIMIC_RL_CACHE") or Path.home() / ".cache" / "mimic_rl"
    return Path(base) / "isaaclab"


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _humanoid_usda() -> str:
    """Newton's humanoid USD with its joints named as Isaac Lab's humanoid config expects."""
    import newton.examples

    text = (Path(newton.examples.__file__).parent / "assets" / "humanoid.usda").read_text()
    for old, new in HUMANOID_JOINTS.items():
        joint = f'RevoluteJoint "{old}"'
        if joint not in text:
            raise RuntimeError(f"newton's humanoid.usda: expected the joint {old!r}; this newton release is not 1.6")
        text = text.replace(joint, f'RevoluteJoint "{new}"')
    return text


def prepare_asset_root() -> Path:
    """The local asset root (made when missing): the ground plane and the humanoid of ``Isaac-Humanoid``."""
    root = asset_cache() / "asset_root"
    if not (root / GROUND_PLANE).is_file():
        _write_atomic(root / GROUND_PLANE, _GROUND_PLANE_USDA)
    if not (root / HUMANOID).is_file():
        _write_atomic(root / HUMANOID, _humanoid_usda())
    return root


def g1_usd(mjcf: str | Path) -> Path:
    """The USD of the robot MJCF ``mjcf`` (``mujoco-usd-converter``), made once per MJCF content; returns its root
    layer."""
    from mujoco_usd_converter import Converter, __version__

    mjcf = Path(mjcf)
    key = hashlib.sha256(mjcf.read_bytes() + f"{mjcf.resolve()}|{__version__}".encode()).hexdigest()[:16]
    out = asset_cache() / "robots" / f"{mjcf.stem}-{key}"
    done = out / "usd_path.txt"
    if done.is_file():
        return out / done.read_text().strip()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        layer = Path(str(Converter().convert(str(mjcf), str(tmp / "usd")).path))
        (tmp / "usd_path.txt").write_text(str(layer.relative_to(tmp)))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out / (out / "usd_path.txt").read_text().strip()
