"""Add Isaac Lab 3.0 (kit-less: its Newton backend, no Isaac Sim) to the Python environment that runs this script.

    python tools/install_isaaclab.py            # into this interpreter's environment (a virtual environment of its own)
    python tools/install_isaaclab.py --dry-run  # print the pip commands only
    python tools/install_isaaclab.py --no-compile  # pip's --no-compile: no byte-compiling at install (CI)

Isaac Lab 3.0.0 on PyPI is one wheel (``isaaclab``, with ``isaaclab_newton``, ``isaaclab_rl``, ``isaaclab_tasks`` and
``isaaclab_assets``) that asks for Python 3.12 and pins ``torch==2.11.0``. On Python 3.12 with a GPU, install it the
plain way (``pip install isaaclab==3.0.0``, which brings its CUDA torch). On this project's Python 3.11 with the CPU
torch, this script installs the wheel with ``--no-deps --ignore-requires-python``, then every requirement the wheel
declares for this platform except those that would replace torch or that a headless CPU run never imports
(``SKIPPED``), and ``mujoco-usd-converter`` (``EXTRA``). pip then reports the skipped requirements as conflicts: that
is expected. Its requirements pin ``mujoco~=3.12`` (through ``newton[sim]``) and ``rsl-rl-lib==5.5.1``, so give it a
virtual environment of its own, as for mjlab (``docs/isaaclab.md``). Torch must be installed first
(``pip install torch==2.13.0``): this script never installs torch.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys

ISAACLAB = "isaaclab==3.0.0"
EXTRA = ["mujoco-usd-converter==0.6.1"]
"""What this package adds: the MJCF-to-USD converter of ``MimicRL-Tracking-G1`` (0.6 is its release for MuJoCo 3.12,
the version ``newton[sim]==1.6.1`` pins)."""
SKIPPED = {
    "torch": "installed before, the build you chose (a pin would pull a CUDA build)",
    "torchvision": "not imported by the Newton tasks; PyPI's build does not import beside the CPU torch",
    "open3d": "mesh tools of the asset importers (large; not used by the Newton tasks)",
    "transformers": "language models of other tasks (large)",
    "pin": "Pinocchio, for the manipulation tasks' inverse kinematics",
    "pin-pink": "inverse kinematics of the manipulation tasks (needs pin)",
    "daqp": "quadratic programs of pin-pink",
    "pyglet": "the GUI viewer (run with --viz none)",
    "pyopengl-accelerate": "the GUI viewer",
    "imgui-bundle": "the GUI viewer",
    "hidapi": "teleoperation devices",
}


def requirements() -> list[str]:
    """The installed Isaac Lab wheel's requirements for this platform, less ``SKIPPED`` (extras left out)."""
    from packaging.requirements import Requirement  # installed by main() where a fresh environment lacks it

    out = []
    for line in importlib.metadata.requires("isaaclab") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # another platform's or an extra's
        if req.name.lower() in SKIPPED:
            continue
        req.marker = None
        out.append(str(req))
    return out


def main() -> int:
    """Install the wheel, then its requirements; returns pip's exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="print the pip commands, install nothing")
    parser.add_argument(
        "--no-compile", action="store_true", help="pass --no-compile to pip: modules are compiled when first imported"
    )
    args = parser.parse_args()
    try:
        importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        print("error: torch is not installed here; pip install torch==2.13.0 first (the CPU build)", file=sys.stderr)
        return 2
    pip = [sys.executable, "-m", "pip", "install", "--quiet", *(["--no-compile"] if args.no_compile else [])]
    wheel = [*pip, "--no-deps", "--ignore-requires-python", ISAACLAB]
    print(" ".join(wheel), flush=True)
    if not args.dry_run and subprocess.call(wheel):
        return 1
    if args.dry_run:
        return 0
    try:
        import packaging.requirements  # noqa: F401  (to read the wheel's requirement lines)
    except ImportError:
        if subprocess.call([*pip, "packaging"]):
            return 1
        importlib.invalidate_caches()
    rest = [*pip, *requirements(), *EXTRA]
    print(" ".join(rest), flush=True)
    return 1 if subprocess.call(rest) else 0


if __name__ == "__main__":
    sys.exit(main())
