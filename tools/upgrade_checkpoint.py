"""Re-save a checkpoint of mimic_rl 0.1 (NumPy arrays, TensorDicts inside) as plain data that loads with
``weights_only=True``.

Loading the old file runs its pickle, so this only runs with ``--trust``: use it on files you wrote yourself.

    python tools/upgrade_checkpoint.py OLD.pt NEW.pt --trust
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
import torch

from mimic_rl.serialization import load_checkpoint, save_checkpoint


def plain(value: Any) -> Any:
    """``value`` with NumPy arrays as tensors and TensorDicts (any mapping) as dicts, recursively."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.astype(np.int64) if value.dtype == np.uint32 else value.copy())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor | str | int | float | bool | type(None)):
        return value
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    raise TypeError(f"cannot convert a {type(value).__name__} to plain data")


def main(argv: list[str] | None = None) -> int:
    """Command line: OLD NEW --trust."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--trust", action="store_true", help="confirm that OLD is a file you trust (its pickle runs)")
    args = parser.parse_args(argv)
    if not args.trust:
        print("error: --trust: loading OLD runs its pickle; pass --trust if you wrote it yourself", file=sys.stderr)
        return 2
    state = torch.load(args.old, map_location="cpu", weights_only=False)
    save_checkpoint(plain(state), args.new)
    load_checkpoint(args.new)  # the result loads safely
    print(f"wrote {args.new}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
