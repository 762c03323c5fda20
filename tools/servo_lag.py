"""How far a robot's position servos lag a clip open-loop, with and without a velocity feed-forward.

    python tools/servo_lag.py $MIMIC_RL_DATA/motions/humanoid28/humanoid_run.npz [more clips]
    python tools/servo_lag.py --robot g1 --robot-mjcf $MIMIC_RL_DATA/robots/unitree_g1/g1.xml --csv-fps 60 \\
        --window 1 $MIMIC_RL_DATA/motions/g1_moves/M_Move11.csv

The robot is the env's (``build_model``: the G1's actuators as the embedded env sets them). The root is carried along
the reference (set every physics step), contacts are off, and each joint's PD target is the reference one control
step ahead (``action_offset: reference`` with a zero residual), or that plus ``kv / kp`` times the reference's joint
velocity (``reference_velocity_feedforward``). Prints the mean joint lag (all joints, legs) and the worst, and how
often a leg servo is at its force limit: whether the servos can follow the clip's joint motion at all, apart from
balance; with ``--window S``, the legs' mean and worst lag in each S seconds of the clip (where in it they lag).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import mujoco
import numpy as np

from mimic_rl.envs.mujoco.robots import RobotConfig, build_model, robot_config, servo_kv_over_kp
from mimic_rl.errors import MimicRLError
from mimic_rl.motion import MotionClip


def _lerp(x: np.ndarray, fps: float, t: float) -> np.ndarray:
    """``x`` (frames first) at time ``t``, linearly interpolated."""
    f = min(t * fps, len(x) - 1.0)
    i = min(int(f), len(x) - 2)
    return x[i] + (f - i) * (x[i + 1] - x[i])


def servo_lag(
    path: str | MotionClip,
    feedforward: bool,
    robot: RobotConfig | None = None,
    csv_fps: float | None = None,
    decimation: int = 4,
    window: float | None = None,
) -> dict:
    """Open-loop replay of one clip (a path, or a clip ``robot.load_clip`` loaded) on ``robot`` (humanoid28 when
    None); the lag statistics in rad, the leg servos' saturated share, the number of physics ``steps`` replayed and,
    with ``window`` (s), ``windows``: ``(start s, legs' mean lag, legs' worst lag, steps)`` per window of ``window /
    timestep`` steps (the last one shorter)."""
    cfg = robot or robot_config("humanoid28")
    model, _, _ = build_model(cfg, sensors=False)
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    clip = cfg.load_clip(path, csv_fps) if isinstance(path, (str, os.PathLike)) else path
    q, dq = np.asarray(clip.joint_pos, float), np.asarray(clip.joint_vel, float)
    root_pos, root_quat = np.asarray(clip.body_pos_w, float)[:, 0], np.asarray(clip.body_quat_w, float)[:, 0]
    joints = [int(model.actuator_trnid[a, 0]) for a in range(model.nu)]  # the clip's joints: the actuators' order
    qadr, vadr = model.jnt_qposadr[joints], model.jnt_dofadr[joints]
    gain = servo_kv_over_kp(model) if feedforward else np.zeros(model.nu)
    legs = [i for i in range(model.nu) if any(k in model.actuator(i).name for k in ("hip", "knee", "ankle"))]
    dt, duration, fps = model.opt.timestep, (len(q) - 1) / clip.fps, clip.fps
    data = mujoco.MjData(model)
    data.qpos[:3], data.qpos[3:7], data.qpos[qadr], data.qvel[vadr] = root_pos[0], root_quat[0], q[0], dq[0]
    lag, saturated = [], []
    for k in range(int(duration / dt) - 1):
        t = k * dt
        if k % decimation == 0:
            ahead = min(t + decimation * dt, duration)
            data.ctrl[:] = _lerp(q, fps, ahead) + gain * _lerp(dq, fps, ahead)
        quat = _lerp(root_quat, fps, t)
        data.qpos[:3], data.qpos[3:7], data.qvel[:6] = _lerp(root_pos, fps, t), quat / np.linalg.norm(quat), 0.0
        mujoco.mj_step(model, data)
        lag.append(np.abs(data.qpos[qadr] - _lerp(q, fps, t + dt)))
        force = np.abs(data.actuator_force[legs])
        saturated.append(force >= model.actuator_forcerange[legs, 1] - 1e-6)
    err = np.array(lag)
    out = {"mean": err.mean(), "legs": err[:, legs].mean(), "worst": err.max(), "saturated": np.mean(saturated)}
    out["steps"] = len(err)
    if window:
        per = max(1, round(window / dt))  # physics steps per window
        rows = [err[i : i + per, legs] for i in range(0, len(err), per)]
        out["windows"] = [(i * per * dt, float(r.mean()), float(r.max()), len(r)) for i, r in enumerate(rows)]
    return out


def main() -> None:
    """Print one line per clip and setting (and one per window)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("clips", nargs="+", help="clips of the robot (npz, or CSV with --csv-fps)")
    parser.add_argument("--robot", default="humanoid28", choices=("humanoid28", "g1"), help="the robot (humanoid28)")
    parser.add_argument("--robot-mjcf", default=None, help="the robot's MJCF (g1)")
    parser.add_argument("--csv-fps", type=float, default=None, help="frame rate of CSV clips")
    parser.add_argument("--window", type=float, default=None, help="also the legs' lag per this many seconds")
    args = parser.parse_args()
    if args.window is not None and not args.window > 0:
        parser.error(f"--window: expected seconds > 0, found {args.window}")
    warnings.simplefilter("ignore")  # the clips' repeated-frame and feet notices
    try:  # a missing or malformed clip or MJCF, no MJCF for g1: one line
        robot = robot_config(args.robot, args.robot_mjcf)
        for path in args.clips:
            clip = robot.load_clip(path, args.csv_fps)  # once for both settings
            for feedforward in (False, True):
                r = servo_lag(clip, feedforward, robot, window=args.window)
                _print(path, feedforward, r, args.window)
        sys.stdout.flush()  # here, so that a closed pipe is caught below and not at exit
    except BrokenPipeError:  # the reader closed early (| head): stop quietly, as Python's docs advise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except (MimicRLError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def _print(path: str, feedforward: bool, r: dict, window: float | None) -> None:
    """One clip's line for one setting, then its windows' lines."""
    name = path.rsplit("/", 1)[-1]
    print(
        f"{name:22s} feed-forward {'on ' if feedforward else 'off'}: joint lag mean {r['mean']:.3f} rad, "
        f"legs {r['legs']:.3f}, worst {r['worst']:.2f}; leg servos at their limit {r['saturated']:.1%}"
    )
    windows = r.get("windows", [])
    for start, mean, worst, steps in windows:  # the last window ends with the clip
        end = start + window * steps / windows[0][3]
        print(f"    {start:6.1f}-{end:.1f} s: legs {mean:.3f} rad, worst {worst:.2f}")


if __name__ == "__main__":
    main()
