"""Run an exported policy the way a robot driver would: MuJoCo, numpy and onnxruntime only (no torch, no mimic_rl).

    python tools/sim2sim.py runs/student/export            # noise and latency as the contract says
    python tools/sim2sim.py runs/student/export --no-noise --no-latency
    python tools/sim2sim.py runs/student/export --video sim2sim.mp4

It reads the folder of ``mimic-rl export --bake-motion`` (``policy.json``: the contract; ``policy.onnx``;
``robot.mjb``: the robot with its sensors; ``reference.npz``: the clip at every control step and its first state),
starts the robot at the clip's first frame, builds each observation from MuJoCo's sensor readings exactly as the
contract lists its terms (with each sensor's uniform noise and latency unless switched off), runs the policy once per
control step (a recurrent policy's state carried from step to step, zeros at the start) and MuJoCo's PD actuators at
the physics rate, and prints:

- success: 1 when the robot reaches the clip's end without a termination of the contract's evaluation (anchor
  height, position, tilt, end-effector height), else 0;
- global MPJPE: the mean distance (mm) between the robot's tracked bodies and the reference's, world frame,
  averaged over the steps the robot was alive;
- root-relative MPJPE: the same after subtracting each skeleton's root body position.

The file works when copied alone (``--help`` needs only numpy); ``mimic-rl eval`` computes the same metrics.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

__all__ = ["Contract", "ObservationBuilder", "main", "run"]


def _fail(message: str) -> NoReturn:
    """Print ``message`` (one line) and exit with code 2."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


# ------------------------------------------------------------------------------------------- quaternions (wxyz)
def quat_conjugate(q: np.ndarray) -> np.ndarray:
    """``q^-1`` of unit quaternions ``[..., 4]``."""
    return q * np.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b`` of ``[..., 4]`` quaternions."""
    w1, x1, y1, z1 = np.moveaxis(a, -1, 0)
    w2, x2, y2, z2 = np.moveaxis(b, -1, 0)
    return np.stack(
        (
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ),
        axis=-1,
    )


def quat_rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` ``[..., 3]`` expressed in the frame of ``q`` (``R(q)^T v``)."""
    w, xyz = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(xyz, v)
    return v - w * t + np.cross(xyz, t)


def quat_to_6d(q: np.ndarray) -> np.ndarray:
    """The first two columns of the rotation matrix of ``q``, row by row: ``[r00, r01, r10, r11, r20, r21]``."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        (
            1 - 2 * (y * y + z * z),
            2 * (x * y - w * z),
            2 * (x * y + w * z),
            1 - 2 * (x * x + z * z),
            2 * (x * z - w * y),
            2 * (y * z + w * x),
        ),
        axis=-1,
    )


def projected_gravity(q: np.ndarray) -> np.ndarray:
    """Gravity's direction ``(0, 0, -1)`` in the frame of ``q``."""
    return quat_rotate_inverse(q, np.array([0.0, 0.0, -1.0]))


# ------------------------------------------------------------------------------------------------ the contract
class Contract:
    """An export folder: the contract (``policy.json``), the robot, the baked clip and the policy's session."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        for name in ("policy.json", "policy.onnx", "robot.mjb", "reference.npz"):
            if not (self.folder / name).is_file():
                hint = " (export with mimic-rl export --bake-motion)" if name == "reference.npz" else ""
                _fail(f"error: {self.folder / name}: expected an export file, found none{hint}")
        self.meta = json.loads((self.folder / "policy.json").read_text())
        if "deploy" not in self.meta:
            _fail(f"error: {self.folder}/policy.json: expected a deployment contract (deploy), found none")
        self.deploy = self.meta["deploy"]
        with np.load(self.folder / "reference.npz") as data:
            self.table = {k: data[k] for k in data.files}
        self.default_joint_pos = np.asarray(self.meta["default_joint_pos"])
        self.steps = int(self.table["clip_steps"])

    def session(self) -> Any:
        """The ONNX policy (onnxruntime, CPU)."""
        import onnxruntime as ort

        return ort.InferenceSession(str(self.folder / "policy.onnx"), providers=["CPUExecutionProvider"])

    def model(self) -> Any:
        """The robot's MuJoCo model (with the sensors the contract names)."""
        import mujoco

        return mujoco.MjModel.from_binary_path(str(self.folder / "robot.mjb"))


class ObservationBuilder:
    """The policy's inputs from sensor readings, term by term as the contract lists them, with each sensor's noise
    (uniform) and latency (control steps) unless switched off."""

    def __init__(self, contract: Contract, model: Any, noise: bool, latency: bool, seed: int = 0) -> None:
        self.c = contract
        inputs = contract.deploy["inputs"]
        self.policy_terms = inputs["policy"]["terms"]
        self.ref_terms = inputs["reference"]["terms"] if inputs["reference"] else []
        for term in self.policy_terms + self.ref_terms:
            if term["name"] not in (*PRIVILEGED, *DEPLOYABLE):
                _fail(f"error: the policy reads {term['name']!r}, which this runner cannot compute")
        self.privileged = [t["name"] for t in self.policy_terms + self.ref_terms if t["name"] in PRIVILEGED]
        self.noise, self.latency = noise, latency
        self.rng = np.random.default_rng(seed)
        sensors = contract.deploy["sensors"]
        self.anchor = sensors["anchor_body"]
        self.adr = {}
        for kind in ("framepos", "framequat", "framelinvel", "frameangvel"):
            for body in (*sensors["tracked_bodies"], self.anchor):
                self.adr[f"{kind}:{body}"] = _sensor_slice(model, f"{kind}:{body}")
        joints = contract.deploy["action"]["joint_names"]
        self.joint_pos = np.concatenate([np.arange(*_sensor_span(model, f"jointpos:{j}")) for j in joints])
        self.joint_vel = np.concatenate([np.arange(*_sensor_span(model, f"jointvel:{j}")) for j in joints])
        self.history: dict[str, deque] = {}

    def read(self, sensordata: np.ndarray, name: str) -> np.ndarray:
        """One named sensor's reading."""
        return sensordata[self.adr[name]]

    def anchor_quat(self, sensordata: np.ndarray) -> np.ndarray:
        """The anchor's orientation (wxyz), the IMU's."""
        return self.read(sensordata, f"framequat:{self.anchor}")

    def exact(self, sensordata: np.ndarray, step: int, last_action: np.ndarray) -> dict[str, np.ndarray]:
        """Every term's exact value at control step ``step`` (the reference table's row)."""
        q = self.anchor_quat(sensordata)
        values = {
            "joint_pos_rel": sensordata[self.joint_pos] - self.c.default_joint_pos,
            "joint_vel": sensordata[self.joint_vel],
            "anchor_lin_vel_b": quat_rotate_inverse(q, self.read(sensordata, f"framelinvel:{self.anchor}")),
            "anchor_ang_vel_b": quat_rotate_inverse(q, self.read(sensordata, f"frameangvel:{self.anchor}")),
            "projected_gravity": projected_gravity(q),
            "last_action": last_action,
        }
        if self.ref_terms:
            t = self.c.table
            ref_quat = t["future_anchor_quat"][step]
            rel = quat_to_6d(quat_mul(quat_conjugate(np.broadcast_to(q, ref_quat.shape)), ref_quat))
            values["deploy_reference"] = np.concatenate(
                (t["future_joint_pos"][step], t["future_joint_vel"][step], rel), axis=-1
            )
            if self.ref_terms[0]["name"] == "reference_frames":  # privileged: the reference's position from the robot's
                offset = t["future_anchor_pos"][step] - self.read(sensordata, f"framepos:{self.anchor}")
                pos = quat_rotate_inverse(np.broadcast_to(q, ref_quat.shape), offset)
                values["reference_frames"] = np.concatenate(
                    (t["future_joint_pos"][step], t["future_joint_vel"][step], pos, rel), axis=-1
                )
        return values

    def __call__(
        self, sensordata: np.ndarray, step: int, last_action: np.ndarray, restart: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """``(policy [D], reference [K, F] or None)`` float32 as the sensors report them at control step ``step``."""
        values = self.exact(sensordata, step, last_action)
        parts = [self._sensed(t, values[t["name"]], restart) for t in self.policy_terms]
        policy = np.concatenate(parts).astype(np.float32)
        reference = None
        if self.ref_terms:
            reference = self._sensed(self.ref_terms[0], values[self.ref_terms[0]["name"]], restart).astype(np.float32)
        return policy, reference

    def _sensed(self, term: dict[str, Any], exact: np.ndarray, restart: bool) -> np.ndarray:
        lag = term["latency_steps"] if self.latency else 0
        past = self.history.get(term["name"])
        if past is None or restart:
            past = self.history[term["name"]] = deque([exact] * (lag + 1), maxlen=lag + 1)
        else:
            past.appendleft(exact)
        cols = slice(*term["sensor_columns"]) if "sensor_columns" in term else slice(None)  # the rest: the clip's
        value = np.array(exact, dtype=np.float64)
        value[..., cols] = past[lag][..., cols]
        amp = term["noise_uniform"] if self.noise else 0.0
        if amp > 0:
            value[..., cols] += amp * self.rng.uniform(-1.0, 1.0, size=value[..., cols].shape)
        return value


DEPLOYABLE = ("joint_pos_rel", "joint_vel", "anchor_ang_vel_b", "projected_gravity", "last_action", "deploy_reference")
PRIVILEGED = ("anchor_lin_vel_b", "reference_frames")
"""Terms a robot cannot compute without a state estimator; a simulation can (a teacher's sim2sim run)."""


def _sensor_span(model: Any, name: str) -> tuple[int, int]:
    import mujoco

    sid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
    if sid < 0:
        _fail(f"error: robot.mjb: expected the sensor {name!r} the contract names, found none")
    adr = int(model.sensor_adr[sid])
    return adr, adr + int(model.sensor_dim[sid])


def _sensor_slice(model: Any, name: str) -> slice:
    return slice(*_sensor_span(model, name))


# ----------------------------------------------------------------------------------------------------- the loop
def _terminated(c: Contract, obs: ObservationBuilder, sensordata: np.ndarray, step: int) -> list[str]:
    """The names of the evaluation's terminations that fire at table row ``step``."""
    limits = c.deploy["evaluation"]["terminations"]
    t, anchor = c.table, obs.anchor
    tracked = c.deploy["sensors"]["tracked_bodies"]
    ref_pos = t["body_pos_w"][step]
    ref_anchor = ref_pos[tracked.index(anchor)]
    pos = obs.read(sensordata, f"framepos:{anchor}")
    fired = []
    if limits.get("anchor_height") is not None and abs(ref_anchor[2] - pos[2]) > limits["anchor_height"]:
        fired.append("anchor_height")
    if limits.get("anchor_position") is not None and np.linalg.norm(ref_anchor - pos) > limits["anchor_position"]:
        fired.append("anchor_position")
    if limits.get("anchor_tilt") is not None:
        g_ref = projected_gravity(t["anchor_quat_w"][step])[2]
        if abs(g_ref - projected_gravity(obs.anchor_quat(sensordata))[2]) > limits["anchor_tilt"]:
            fired.append("anchor_tilt")
    ees = c.deploy["sensors"]["end_effectors"]
    if limits.get("ee_height") is not None and ees:
        z = np.array([obs.read(sensordata, f"framepos:{b}")[2] for b in ees])
        z_ref = ref_pos[[tracked.index(b) for b in ees], 2]
        if (np.abs(z_ref - z) > limits["ee_height"]).any():
            fired.append("ee_height")
    return fired


def recurrent_state(session: Any) -> dict[str, np.ndarray]:
    """A recurrent policy's state inputs (``hidden``, and ``cell`` for an LSTM; ``[layers, batch, size]``), zeros
    for one robot at an episode start; empty for a feed-forward policy. Each step's ``<name>_out`` is the next input."""
    state = {}
    for node in session.get_inputs():
        if node.name in ("hidden", "cell"):
            layers, _, size = node.shape
            state[node.name] = np.zeros((layers, 1, size), dtype=np.float32)
    return state


def run(folder: str | Path, noise: bool = True, latency: bool = True, seed: int = 0, video: str | None = None) -> dict:
    """Play the baked clip once from its first frame; returns the metrics (see the module docstring)."""
    import mujoco

    c = Contract(folder)
    model = c.model()
    data = mujoco.MjData(model)
    obs = ObservationBuilder(c, model, noise, latency, seed)
    session = c.session()
    d = c.deploy
    action_cfg, decimation = d["action"], int(d["decimation"])
    delay = int(action_cfg["delay_steps"])
    scale, offsets = c.table["action_scale"], c.table["action_offset"]
    tracked = d["sensors"]["tracked_bodies"]
    root = tracked.index(d["sensors"]["root_body"])
    data.qpos[:] = c.table["init_qpos"]
    data.qvel[:] = c.table["init_qvel"]
    mujoco.mj_forward(model, data)
    last_action = np.zeros(len(action_cfg["joint_names"]), dtype=np.float32)
    pending: deque = deque(maxlen=delay + 1)
    errors, root_errors, fired, frames = [], [], [], []
    renderer = _renderer(model) if video else None
    state = recurrent_state(session)
    step = 0
    while step < c.steps:
        policy, reference = obs(data.sensordata.copy(), step, last_action, restart=step == 0)
        feed = {"policy": policy[None], **state}
        if reference is not None:
            feed.update(reference=reference[None], reference_mask=np.ones(1, dtype=bool))
        outputs = session.run(["actions", *(f"{name}_out" for name in state)], feed)
        action, state = outputs[0][0], dict(zip(state, outputs[1:]))
        if not pending:
            pending.extend([action] * (delay + 1))
        else:
            pending.appendleft(action)
        data.ctrl[:] = offsets[step] + scale * pending[-1]
        for _ in range(decimation):
            mujoco.mj_step(model, data)
        step += 1
        sensed = data.sensordata.copy()
        pos = np.stack([obs.read(sensed, f"framepos:{b}") for b in tracked])
        ref = c.table["body_pos_w"][step]
        errors.append(1000.0 * np.linalg.norm(ref - pos, axis=-1).mean())
        root_errors.append(1000.0 * np.linalg.norm((ref - ref[root]) - (pos - pos[root]), axis=-1).mean())
        if renderer is not None:
            renderer.update_scene(data)
            frames.append(renderer.render())
        fired = _terminated(c, obs, sensed, step)
        if fired:
            break
        last_action = action
    if video:
        _write_video(video, frames, 1.0 / d["control_dt"])
    return {
        "success": 0.0 if fired else 1.0,
        "global_mpjpe_mm": float(np.mean(errors)),
        "root_mpjpe_mm": float(np.mean(root_errors)),
        "episode_length_fraction": step / c.steps,
        "terminations": fired,
        "privileged_terms": obs.privileged,
        "noise": noise,
        "latency": latency,
    }


def _renderer(model: Any) -> Any:
    import mujoco

    return mujoco.Renderer(model, 240, 320)


def _write_video(path: str, frames: list, fps: float) -> None:
    import imageio.v2 as imageio

    imageio.mimsave(path, frames, fps=fps)


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", help="a folder of mimic-rl export --bake-motion")
    parser.add_argument("--no-noise", action="store_true", help="exact sensor readings")
    parser.add_argument("--no-latency", action="store_true", help="current sensor readings (no latency)")
    parser.add_argument("--seeds", type=int, default=1, help="runs with noise seeds 0..N-1 (default 1)")
    parser.add_argument("--video", help="an MP4/GIF of the first run (needs imageio and an OpenGL backend)")
    parser.add_argument("--output", help="a JSON file for the metrics")
    args = parser.parse_args(argv)
    runs = [
        run(args.export, not args.no_noise, not args.no_latency, seed, args.video if seed == 0 else None)
        for seed in range(args.seeds)
    ]
    keys = ("success", "global_mpjpe_mm", "root_mpjpe_mm", "episode_length_fraction")
    summary = {k: float(np.mean([r[k] for r in runs])) for k in keys}
    print(
        f"sim2sim: success {summary['success']:.2f}, global MPJPE "
        f"{summary['global_mpjpe_mm']:.1f} mm, root-relative MPJPE {summary['root_mpjpe_mm']:.1f} mm, "
        f"{100 * summary['episode_length_fraction']:.0f}% of the clip ({len(runs)} run(s), noise "
        f"{'on' if not args.no_noise else 'off'}, latency {'on' if not args.no_latency else 'off'})"
    )
    if runs[0]["privileged_terms"]:
        print(f"note: the policy reads {runs[0]['privileged_terms']}, which a robot without a state estimator lacks")
    if args.output:
        Path(args.output).write_text(json.dumps({"runs": runs, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
