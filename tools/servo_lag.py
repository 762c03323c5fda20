"""How far humanoid28's position servos lag a clip open-loop, with and without a velocity feed-forward.

    python tools/servo_lag.py $MIMIC_RL_DATA/motions/humanoid28/humanoid_run.npz [more clips]

The root is carried along the reference (set every physics step), contacts are off, and each joint's PD target is
the reference one control step ahead (``action_offset: reference`` with a zero residual), or that plus ``kv / kp``
times the reference's joint velocity (``reference_velocity_feedforward``). Prints the mean joint lag (all joints,
legs) and the worst, and how often a leg servo is at its force limit: whether the servos can follow the clip's
joint motion at all, apart from balance.
"""

from __future__ import annotations

import argparse
import warnings

import mujoco
import numpy as np

from mimic_rl.envs.mujoco.robots import humanoid28_config, servo_kv_over_kp


def _lerp(x: np.ndarray, fps: float, t: float) -> np.ndarray:
    """``x`` (frames first) at time ``t``, linearly interpolated."""
    f = min(t * fps, len(x) - 1.0)
    i = min(int(f), len(x) - 2)
    return x[i] + (f - i) * (x[i + 1] - x[i])


def servo_lag(path: str, feedforward: bool, decimation: int = 4) -> dict[str, float]:
    """Open-loop replay of one clip; the lag statistics in rad and the leg servos' saturated share."""
    cfg = humanoid28_config()
    model = mujoco.MjModel.from_xml_path(cfg.mjcf)
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    clip = cfg.load_clip(path)
    q, dq = np.asarray(clip.joint_pos, float), np.asarray(clip.joint_vel, float)
    root_pos, root_quat = np.asarray(clip.body_pos_w, float)[:, 0], np.asarray(clip.body_quat_w, float)[:, 0]
    gain = servo_kv_over_kp(model) if feedforward else np.zeros(model.nu)
    legs = [i for i in range(model.nu) if any(k in model.actuator(i).name for k in ("hip", "knee", "ankle"))]
    dt, duration, fps = model.opt.timestep, (len(q) - 1) / clip.fps, clip.fps
    data = mujoco.MjData(model)
    data.qpos[:3], data.qpos[3:7], data.qpos[7:], data.qvel[6:] = root_pos[0], root_quat[0], q[0], dq[0]
    lag, saturated = [], []
    for k in range(int(duration / dt) - 1):
        t = k * dt
        if k % decimation == 0:
            ahead = min(t + decimation * dt, duration)
            data.ctrl[:] = _lerp(q, fps, ahead) + gain * _lerp(dq, fps, ahead)
        quat = _lerp(root_quat, fps, t)
        data.qpos[:3], data.qpos[3:7], data.qvel[:6] = _lerp(root_pos, fps, t), quat / np.linalg.norm(quat), 0.0
        mujoco.mj_step(model, data)
        lag.append(np.abs(data.qpos[7:] - _lerp(q, fps, t + dt)))
        force = np.abs(data.actuator_force[legs])
        saturated.append(force >= model.actuator_forcerange[legs, 1] - 1e-6)
    err = np.array(lag)
    return {"mean": err.mean(), "legs": err[:, legs].mean(), "worst": err.max(), "saturated": np.mean(saturated)}


def main() -> None:
    """Print one line per clip and setting."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("clips", nargs="+", help="humanoid28 clips (.npz)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # the clips' repeated-frame notice
    for path in args.clips:
        for feedforward in (False, True):
            r = servo_lag(path, feedforward)
            name = path.rsplit("/", 1)[-1]
            print(
                f"{name:22s} feed-forward {'on ' if feedforward else 'off'}: joint lag mean {r['mean']:.3f} rad, "
                f"legs {r['legs']:.3f}, worst {r['worst']:.2f}; leg servos at their limit {r['saturated']:.1%}"
            )


if __name__ == "__main__":
    main()
