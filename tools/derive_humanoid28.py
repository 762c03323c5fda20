"""Print the humanoid28 bone offsets derived from Isaac Lab's humanoid_amp clips (the numbers in humanoid28.xml).

Each child body's position in its parent's frame is constant over every frame of the clips (they are the forward
kinematics of the joint angles); this prints its mean and its largest deviation.

    python tools/derive_humanoid28.py [--data $MIMIC_RL_DATA]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import torch

from mimic_rl.motion import load_motion
from mimic_rl.rotations import quat_apply_inverse

PARENTS = {
    "torso": "pelvis",
    "head": "torso",
    "right_upper_arm": "torso",
    "right_lower_arm": "right_upper_arm",
    "right_hand": "right_lower_arm",
    "left_upper_arm": "torso",
    "left_lower_arm": "left_upper_arm",
    "left_hand": "left_lower_arm",
    "right_thigh": "pelvis",
    "right_shin": "right_thigh",
    "right_foot": "right_shin",
    "left_thigh": "pelvis",
    "left_shin": "left_thigh",
    "left_foot": "left_shin",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = Path(os.environ.get("MIMIC_RL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--data", type=Path, default=default)
    args = parser.parse_args()
    offsets: dict[str, list[torch.Tensor]] = {child: [] for child in PARENTS}
    for name in ("walk", "run", "dance"):
        clip = load_motion(args.data / f"motions/humanoid28/humanoid_{name}.npz")
        pos = torch.from_numpy(clip.body_pos_w).double()
        quat = torch.from_numpy(clip.body_quat_w).double()
        for child, parent in PARENTS.items():
            c, p = clip.body_names.index(child), clip.body_names.index(parent)
            offsets[child].append(quat_apply_inverse(quat[:, p], pos[:, c] - pos[:, p]))
    for child, parent in PARENTS.items():
        o = torch.cat(offsets[child])
        mean = o.mean(0).numpy()
        spread = float((o - o.mean(0)).abs().max())
        print(
            f'{child:16s} in {parent:16s} pos="{np.round(mean, 4)[0]:g} {np.round(mean, 4)[1]:g} '
            f'{np.round(mean, 4)[2]:g}"   (max deviation {spread:.1e} m)'
        )


if __name__ == "__main__":
    main()
