"""The deployment contract of an exported policy: what ``policy.json`` says a robot driver must compute, and the
files that let a policy run without this package (``robot.mjb``, ``reference.npz``, ``policy_baked.onnx``).

The contract (``policy.json`` ``"deploy"``) lists, for each graph input, the observation terms in order with their
sizes, offsets, units, scale (1: raw values) and clip range (none), the sensor each is read from and its noise and
latency; the reference command's frames; the action's joint order, scale, offset and delay; the control and physics
rates and the PD gains per joint; the evaluation's termination thresholds. ``tools/sim2sim.py`` implements it with
numpy and MuJoCo alone.
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

from mimic_rl.export.state import recurrent_state_names
from mimic_rl.models.actor_critic import Actor
from mimic_rl.rotations import quat_conjugate_mul, quat_to_6d
from mimic_rl.tasks.tracking import DEPLOYABLE_TERMS, InitNoise, observation_terms, term_sizes

__all__ = [
    "BakedPolicy",
    "bake_reference",
    "deploy_contract",
    "noise_free",
    "observation_layout",
    "write_deploy_files",
]

TERM_DOC = {
    "joint_pos_rel": ("rad", "jointpos sensors minus default_joint_pos, in joint_names order"),
    "joint_vel": ("rad/s", "jointvel sensors, in joint_names order"),
    "anchor_lin_vel_b": ("m/s", "framelinvel of the anchor body, rotated into the anchor frame (needs an estimator)"),
    "anchor_ang_vel_b": ("rad/s", "frameangvel of the anchor body rotated into the anchor frame (an IMU's gyro)"),
    "projected_gravity": ("1", "(0, 0, -1) rotated into the anchor frame by framequat of the anchor (the IMU)"),
    "last_action": ("1", "the policy's previous output (zeros at an episode's start)"),
    "body_poses_b": ("m, 6D", "privileged: every tracked body's pose in the anchor frame"),
    "anchor_height": ("m", "privileged: the anchor's world height"),
    "joint_pos": ("rad", "jointpos sensors"),
    "reference_frames": ("mixed", "privileged: reference joints, anchor position and orientation from the robot's"),
    "deploy_reference": (
        "rad, rad/s, 6D",
        "per frame: reference joint positions [J], velocities [J], 6D of framequat(anchor)^-1 * reference anchor "
        "quat (first two columns of the rotation matrix, row by row)",
    ),
}


def _group_terms(env: Any, groups: list[str]) -> list[dict[str, Any]]:
    """The terms of ``groups`` in order, each with its size, offset, unit, source and sensor model."""
    table = observation_terms(deployable=True)
    sizes = term_sizes(len(env.joint_names), env.num_actions, len(env.tracked))
    deploy = getattr(env.cfg, "deploy", None)
    sensors = deploy.sensors() if deploy is not None and deploy.enabled else {}
    rows, offset = [], 0
    for group in groups:
        for term in table[group]:
            unit, source = TERM_DOC.get(term.name, ("", ""))
            model = sensors.get(term.name)
            rows.append(
                {
                    "name": term.name,
                    "group": group,
                    "size": sizes[term.name],
                    "offset": offset,
                    "unit": unit,
                    "source": source,
                    "scale": 1.0,
                    "clip": None,
                    "noise_uniform": model.noise if model else 0.0,
                    "latency_steps": model.latency_steps if model else 0,
                }
            )
            if term.name == "deploy_reference":  # noise and latency are the orientation estimate's: the 6D columns
                rows[-1]["sensor_columns"] = [2 * len(env.joint_names), 2 * len(env.joint_names) + 6]
            offset += sizes[term.name]
    return rows


def observation_layout(contract: dict[str, Any], layout: dict[str, Any], num_joints: int) -> dict[str, Any]:
    """``policy_metadata``'s ``observation_layout`` (the README's table) for the groups of ``contract``."""
    terms = contract["inputs"]["policy"]["terms"]
    out = {**layout, "policy": [[t["name"], t["size"]] for t in terms], "policy_size": sum(t["size"] for t in terms)}
    reference = contract["inputs"]["reference"]
    if reference and reference["group"] == "deploy_reference":
        frame = [["ref_joint_pos", num_joints], ["ref_joint_vel", num_joints], ["ref_anchor_ori_in_robot_anchor_6d", 6]]
        out.update(reference_frame=frame, reference_frame_size=2 * num_joints + 6)
    return out


def deploy_contract(env: Any, obs_groups: dict[str, Any]) -> dict[str, Any]:
    """``policy.json``'s ``"deploy"`` section for a policy reading ``obs_groups`` (resolved) of the embedded ``env``."""
    actor = list(obs_groups.get("actor") or [])
    reference = obs_groups.get("actor_reference")
    policy_terms = _group_terms(env, actor)
    ref_terms = _group_terms(env, [reference]) if reference else []
    names = [t["name"] for t in policy_terms + ref_terms]
    m, cfg = env.model, env.cfg
    deploy = cfg.deploy
    stride = cfg.future_stride
    return {
        "deployable": all(n in DEPLOYABLE_TERMS for n in names),
        "privileged_terms": [n for n in names if n not in DEPLOYABLE_TERMS],
        "inputs": {
            "policy": {"groups": actor, "terms": policy_terms, "size": sum(t["size"] for t in policy_terms)},
            "reference": None
            if not reference
            else {
                "group": reference,
                "terms": ref_terms,
                "num_frames": cfg.num_future_frames,
                "frame_offsets_steps": [k * stride for k in range(cfg.num_future_frames)],
                "frame_offsets_s": [round(k * stride * env.step_dt, 9) for k in range(cfg.num_future_frames)],
                "time": "frame k is the reference at (observation time + k * stride * control_dt), clamped to the "
                "clip; the observation time is one physics step before the control step's end (sensor readings)",
            },
            "reference_mask": "all true (bool [B])",
        },
        "action": {
            "joint_names": list(env.joint_names),
            "scale": env.action_scale.cpu().tolist(),
            "offset": env.default_joint_pos.cpu().tolist(),
            "pd_target": "offset + scale * actions"
            if cfg.action_offset == "default"
            else "reference_joint_pos(t + control_dt)"
            + (" + kv / kp * reference_joint_vel(t + control_dt)" if cfg.reference_velocity_feedforward else "")
            + " + scale * actions (reference.npz action_offset[step] + scale * actions)",
            "clip": None,
            "delay_steps": deploy.action_delay_steps if deploy.enabled else 0,
        },
        "control_dt": env.step_dt,
        "physics_dt": env.sim_dt,
        "decimation": cfg.decimation,
        "pd_gains": {
            "kp": m.actuator_gainprm[:, 0].tolist(),
            "kd": (-m.actuator_biasprm[:, 2]).tolist(),
            "effort_limit": m.actuator_forcerange[:, 1].tolist(),
            "law": "torque = clip(kp * (target - q) - kd * qd, -effort_limit, effort_limit)",
        },
        "sensors": {
            "anchor_body": env.robot.anchor_body,
            "tracked_bodies": list(env.tracked),
            "root_body": env.tracked[env.root],
            "end_effectors": [env.tracked[int(i)] for i in env.end_effectors],
            "names": "framepos:<body>, framequat:<body> (wxyz), framelinvel:<body>, frameangvel:<body> (world frame), "
            "jointpos:<joint>, jointvel:<joint> in robot.mjb",
        },
        "evaluation": {
            "terminations": {k: getattr(cfg.termination, k) for k in cfg.termination.__dataclass_fields__},
            "success": "the clip's end reached without a termination",
        },
    }


class BakedPolicy(nn.Module):
    """A reference-conditioned actor with one clip's reference command inside the graph (BeyondMimic's baked ONNX,
    and the reference it computes as an output): inputs ``policy`` ``[B, D]``, ``time_step`` ``[B]`` int64 (control
    steps since the clip's start) and ``anchor_quat_w`` ``[B, 4]`` (the IMU's orientation, wxyz); outputs ``actions``
    , ``reference`` ``[B, K, 2 J + 6]`` and ``joint_pos_target`` ``[B, J]`` (the PD targets of the actions).

    A recurrent actor's state goes in and out explicitly, as in ``policy.onnx``: ``hidden`` (and ``cell``) after the
    inputs above, ``hidden_out`` (and ``cell_out``) after the outputs; zeros start an episode."""

    def __init__(self, actor: Actor, table: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.actor = copy.deepcopy(actor).cpu().eval()
        self.state_names = recurrent_state_names(actor)
        for key in ("future_joint_pos", "future_joint_vel", "future_anchor_quat", "action_offset", "action_scale"):
            self.register_buffer(key, torch.as_tensor(table[key], dtype=torch.float32))

    def forward(self, policy: torch.Tensor, time_step: torch.Tensor, anchor_quat_w: torch.Tensor, *state) -> Any:
        """``(actions, reference, joint_pos_target)``, then the next recurrent state (if any)."""
        last = self.future_joint_pos.shape[0] - 1
        idx = time_step.clamp(0, last)
        ref_quat = self.future_anchor_quat[idx]
        quat = anchor_quat_w.unsqueeze(-2).expand_as(ref_quat)
        rel = quat_to_6d(quat_conjugate_mul(quat, ref_quat))
        reference = torch.cat((self.future_joint_pos[idx], self.future_joint_vel[idx], rel), dim=-1)
        mask = torch.ones(policy.shape[0], dtype=torch.bool)
        if not self.state_names:
            actions, next_state = self.actor(policy, reference, mask), ()
        else:
            actions, hidden = self.actor.step(policy, reference, mask, state if len(state) == 2 else state[0])
            next_state = tuple(hidden) if len(self.state_names) == 2 else (hidden,)
        return actions, reference, self.action_offset[idx] + self.action_scale * actions, *next_state


def bake_reference(env: Any) -> dict[str, np.ndarray]:
    """The reference of the env's first clip at every control step of an evaluation from its first frame, and the
    noise-free initial state (``reference.npz``): ``future_*`` ``[T + 1, K, ...]`` (the reference command's frames at
    each observation), ``body_pos_w`` ``[T + 1, B, 3]``, ``anchor_quat_w`` ``[T + 1, 4]``, ``joint_pos``
    ``[T + 1, J]`` (metrics and terminations), ``action_offset`` ``[T + 1, J]`` and ``action_scale`` ``[J]`` (PD
    target = offset[step] + scale * action), ``init_qpos`` / ``init_qvel``, ``time_s``."""
    dt, sim_dt = env.step_dt, env.sim_dt
    duration = float(env.library.clip_duration[0])
    steps = next(n for n in range(1, 10**7) if n * dt + dt > duration + 1e-6)  # the step whose episode times out
    times = torch.tensor([0.0] + [n * dt - sim_dt for n in range(1, steps + 1)], device=env.device)
    ids = torch.zeros(len(times), dtype=torch.long, device=env.device)
    future, ref = env.reference_at(ids, times)
    if env.cfg.action_offset == "reference":  # the PD targets' offset: the reference one control step ahead
        ahead = torch.arange(steps + 1, device=env.device) * dt + dt
        offset = env.reference_action_offset(ids, ahead)
    else:
        offset = env.default_joint_pos.expand(steps + 1, -1)
    anchor = env.anchor
    state = env.initial_state()
    return {
        "time_s": times.cpu().numpy(),
        "future_joint_pos": future.joint_pos.cpu().numpy(),
        "future_joint_vel": future.joint_vel.cpu().numpy(),
        "future_anchor_quat": future.body_quat_w[:, :, 0].cpu().numpy(),
        "future_anchor_pos": future.body_pos_w[:, :, 0].cpu().numpy(),
        "body_pos_w": ref.body_pos_w.cpu().numpy(),
        "anchor_quat_w": ref.body_quat_w[:, anchor].cpu().numpy(),
        "joint_pos": ref.joint_pos.cpu().numpy(),
        "joint_vel": ref.joint_vel.cpu().numpy(),
        "action_offset": offset.cpu().numpy(),
        "action_scale": env.action_scale.cpu().numpy(),
        "init_qpos": state[0],
        "init_qvel": state[1],
        "clip_steps": np.array(steps),
    }


def noise_free(env_cfg: Any) -> Any:
    """A copy of an embedded env config for baking: one env at its first clip's first frame, no noise, no
    randomization."""
    from mimic_rl.motion import expand_motion_paths

    cfg = copy.deepcopy(env_cfg)
    cfg.num_envs, cfg.sampling_mode, cfg.compile = 1, "start", False
    cfg.motions = [str(path) for path in expand_motion_paths(cfg.motions)[:1]]
    cfg.init_noise = InitNoise(0.0, 0.0, 0.0, 0.0)
    cfg.randomization = dataclasses.replace(cfg.randomization, enabled=False)
    return cfg


def write_deploy_files(folder: Any, files: dict[str, Any], atol: float = 1e-5) -> dict[str, Any]:
    """Write ``files`` (``robot.mjb``: an ``MjModel``; ``reference.npz``: ``bake_reference``'s arrays;
    ``policy_baked.onnx``: ``(actor, arrays)``) into ``folder``; returns the baked graph's check against torch."""
    from pathlib import Path

    folder = Path(folder)
    check: dict[str, Any] = {}
    if "robot.mjb" in files:
        import mujoco

        mujoco.mj_saveModel(files["robot.mjb"], str(folder / "robot.mjb"), None)
    if "reference.npz" in files:
        np.savez(folder / "reference.npz", **files["reference.npz"])
    if "policy_baked.onnx" in files:
        actor, table = files["policy_baked.onnx"]
        check["policy_baked.onnx"] = _export_baked(BakedPolicy(actor, table), folder / "policy_baked.onnx", atol)
    return check


def _export_baked(module: BakedPolicy, path: Any, atol: float) -> float:
    """Export ``module`` to ONNX and return its largest difference from torch on a few rows (onnxruntime)."""
    steps = module.future_joint_pos.shape[0]
    g = torch.Generator().manual_seed(0)
    policy = torch.randn(4, module.actor.obs_dim, generator=g)
    time_step = torch.tensor([0, 1, steps // 2, steps + 3])
    quat = torch.nn.functional.normalize(torch.randn(4, 4, generator=g), dim=-1)
    state = ()
    if module.state_names:
        rnn = module.actor.memory.rnn
        state = tuple(torch.randn(rnn.num_layers, 4, rnn.hidden_size, generator=g) for _ in module.state_names)
    inputs = (policy, time_step, quat, *state)
    with warnings.catch_warnings():  # the actor's shape checks become constants of the trace; checked below
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        _onnx_export(module, inputs, path)
    with torch.no_grad():
        expected = module(*inputs)
    try:
        import onnxruntime as ort
    except ImportError:
        return float("nan")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = ["policy", "time_step", "anchor_quat_w", *module.state_names]
    got = session.run(None, {name: x.numpy() for name, x in zip(names, inputs)})
    err = max(float(np.abs(a - b.numpy()).max()) for a, b in zip(got, expected))
    if not err <= atol:
        raise RuntimeError(f"exported policy_baked.onnx differs from torch by {err:.3g} (> {atol})")
    return err


def _onnx_export(module: BakedPolicy, inputs: tuple[torch.Tensor, ...], path: Any) -> None:
    states = module.state_names
    outputs = ["actions", "reference", "joint_pos_target", *(f"{name}_out" for name in states)]
    axes = {n: {0: "batch"} for n in ("policy", "time_step", "anchor_quat_w", *outputs[:3])}
    axes |= {n: {1: "batch"} for n in (*states, *(f"{name}_out" for name in states))}
    torch.onnx.export(
        module,
        inputs,
        str(path),
        input_names=["policy", "time_step", "anchor_quat_w", *states],
        output_names=outputs,
        dynamic_axes=axes,
        dynamo=False,
    )
