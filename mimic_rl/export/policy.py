"""Deployable policies: ``policy.onnx``, ``policy.pt`` (TorchScript) and ``policy.json`` (what a robot needs).

The exported graph is the actor's deterministic output: observation normalization, the reference encoder (with the
mask) and the trunk. Inputs: ``policy`` ``[B, D]`` float32, and for reference-conditioned policies ``reference``
``[B, K, F]`` float32 and ``reference_mask`` ``[B]`` bool. Output: ``actions`` ``[B, A]``; the metadata's
``pd_target`` says how they become joint targets (from the default pose, or from the reference pose one control step
ahead when the policy was trained with ``action_offset: reference``). ``export_policy`` checks both files against
torch on random inputs (TorchScript always, ONNX through onnxruntime when it is installed) and fails on a mismatch;
it writes the folder all at once (``README.md`` included), so a failed export leaves nothing half-written.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mimic_rl.errors import MimicRLError
from mimic_rl.export.folder import staged_folder
from mimic_rl.export.readme import export_readme
from mimic_rl.export.state import recurrent_state_names
from mimic_rl.models.actor_critic import Actor

__all__ = [
    "EXPORT_FILES",
    "ExportedPolicy",
    "check_onnx_export",
    "export_policy",
    "policy_metadata",
]

EXPORT_FILES = (
    "policy.pt",
    "policy.onnx",
    "policy.json",
    "README.md",
    "robot.mjb",
    "reference.npz",
    "policy_baked.onnx",
)
"""What an export writes; re-exporting into a folder replaces them all (a file this export skips is removed)."""


class ExportedPolicy(nn.Module):
    """The actor's deterministic forward pass as a self-contained module (a copy, in eval mode, on the CPU).

    A recurrent actor takes its state as explicit inputs and returns the next one: ``hidden`` ``[layers, B, H]``
    (and ``cell`` for an LSTM) in, ``hidden_out`` (and ``cell_out``) out; zeros start an episode.
    """

    def __init__(self, actor: Actor) -> None:
        super().__init__()
        import copy

        self.actor = copy.deepcopy(actor).cpu().eval()
        self.has_reference = actor.ref_shape is not None
        self.recurrent = actor.is_recurrent
        self.lstm = len(recurrent_state_names(actor)) == 2

    def forward(self, policy: torch.Tensor, *rest: torch.Tensor) -> Any:
        """Actions ``[B, A]`` (recurrent: followed by the next hidden state tensors)."""
        reference = reference_mask = None
        if self.has_reference:
            reference, reference_mask, rest = rest[0], rest[1], rest[2:]
        if not self.recurrent:
            return self.actor(policy, reference, reference_mask)
        state = (rest[0], rest[1]) if self.lstm else rest[0]
        actions, state = self.actor.step(policy, reference, reference_mask, state)
        return (actions, *state) if self.lstm else (actions, state)


def _input_names(actor: Actor) -> list[str]:
    names = ["policy"] + (["reference", "reference_mask"] if actor.ref_shape is not None else [])
    names += list(recurrent_state_names(actor))
    return names


def _example_inputs(actor: Actor, batch: int = 4, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(batch, actor.obs_dim, generator=g)]
    if actor.ref_shape is not None:
        mask = torch.ones(batch, dtype=torch.bool)
        mask[0] = False  # exercise the no-reference path too
        inputs += [torch.randn(batch, *actor.ref_shape, generator=g), mask]
    if actor.is_recurrent:
        rnn = actor.memory.rnn
        states = len(recurrent_state_names(actor))
        inputs += [torch.randn(rnn.num_layers, batch, rnn.hidden_size, generator=g) for _ in range(states)]
    return tuple(inputs)


def policy_metadata(actor: Actor, env: Any | None = None, **extra: Any) -> dict[str, Any]:
    """What a deployment needs besides the graph: the obs layout, joint names, default pose and action scale."""
    meta: dict[str, Any] = {
        "inputs": {"policy": [actor.obs_dim]},
        "outputs": {"actions": [actor.num_actions]},
        "input_dtypes": {name: "bool" if name == "reference_mask" else "float32" for name in _input_names(actor)},
        "observation_normalization": "inside the graph: feed raw observations",
        "actor_cfg": actor.config,
    }
    if actor.ref_shape is not None:
        meta["inputs"].update(reference=list(actor.ref_shape), reference_mask=[])
    if actor.is_recurrent:
        rnn = actor.memory.rnn
        state = [rnn.num_layers, "batch", rnn.hidden_size]
        states = {name: state for name in recurrent_state_names(actor)}
        meta["inputs"].update(states)
        meta["outputs"].update({f"{k}_out": v for k, v in states.items()})
        meta["recurrent"] = "feed the *_out tensors back as the next step's inputs; zeros at an episode start"
    if env is not None:
        meta.update(
            robot=getattr(getattr(env, "robot", None), "name", None),
            joint_names=list(getattr(env, "joint_names", [])),
            default_joint_pos=env.default_joint_pos.cpu().tolist() if hasattr(env, "default_joint_pos") else None,
            action_scale=env.action_scale.cpu().tolist() if hasattr(env, "action_scale") else None,
            control_dt=getattr(env, "step_dt", None),
            control_hz=1.0 / env.step_dt if getattr(env, "step_dt", None) else None,
            action_offset=getattr(getattr(env, "cfg", None), "action_offset", "default"),
            pd_target=_pd_target(getattr(env, "cfg", None)),
            observation_layout=_layout(env),
        )
    meta.update(extra)
    return meta


def _layout(env: Any) -> dict[str, Any]:
    """The embedded env's observation terms in order, ``[name, size]`` each, with the sizes they add up to."""
    j, a = len(getattr(env, "joint_names", [])), getattr(env, "num_actions", 0)
    cfg = getattr(env, "cfg", None)
    policy = [
        ["joint_pos - default_joint_pos", j],
        ["joint_vel", j],
        ["anchor_lin_vel_b", 3],
        ["anchor_ang_vel_b", 3],
        ["projected_gravity", 3],
        ["last_action", a],
    ]
    frame = [
        ["ref_joint_pos", j],
        ["ref_joint_vel", j],
        ["ref_anchor_pos_in_robot_anchor", 3],
        ["ref_anchor_ori_in_robot_anchor_6d", 6],
    ]
    frames, stride = getattr(cfg, "num_future_frames", None), getattr(cfg, "future_stride", None)
    dt = getattr(env, "step_dt", None)
    offsets = [round(k * stride * dt, 9) for k in range(frames)] if frames and stride and dt else None
    return {
        "policy": policy,
        "policy_size": sum(size for _, size in policy),
        "reference_frame": frame,
        "reference_frame_size": sum(size for _, size in frame),
        "num_future_frames": frames,
        "future_stride_steps": stride,
        "future_frame_offsets_s": offsets,
        "anchor_body": getattr(getattr(env, "robot", None), "anchor_body", None),
    }


def check_onnx_export() -> None:
    """Raise a ``MimicRLError`` (one line: what is missing and how to get it) when ``onnx`` cannot be imported."""
    try:
        import onnx  # noqa: F401  (torch.onnx.export imports it to write the file)
    except ImportError as exc:
        raise MimicRLError(
            f"policy.onnx: expected the onnx package (a dependency of mimic_rl), found it cannot be imported ({exc}); "
            "reinstall mimic_rl (pip install -e .) or pip install 'onnx>=1.17' 'onnxruntime>=1.17', or write "
            "TorchScript only (mimic-rl export --no-onnx)"
        ) from None


def export_policy(
    actor: Actor,
    output_dir: str | Path,
    metadata: dict[str, Any] | None = None,
    onnx: bool = True,
    atol: float = 1e-5,
    extra_files: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``policy.pt`` (TorchScript), ``policy.onnx``, ``policy.json``, ``README.md`` and ``extra_files``
    (``mimic_rl.export.contract.write_deploy_files``); verify the graphs against torch. All or nothing: on any error
    ``output_dir`` is left as it was (or absent)."""
    from mimic_rl.export.contract import write_deploy_files

    if onnx:
        check_onnx_export()
    out = Path(output_dir)
    with staged_folder(out, owned=EXPORT_FILES) as staging:
        files, check = _write_graphs(actor, staging, onnx, atol)
        if extra_files:
            baked = write_deploy_files(staging, extra_files, atol)
            check["max_abs_error_vs_torch"].update(baked)
            files.update({Path(name).stem.replace(".", "_"): name for name in extra_files})
        meta = {**(metadata or policy_metadata(actor)), "files": dict(files)}
        meta["check"] = check
        (staging / "policy.json").write_text(json.dumps(meta, indent=2))
        (staging / "README.md").write_text(export_readme(meta))
    written = {**files, "metadata": "policy.json", "readme": "README.md"}
    return {k: out / name for k, name in written.items()}


def _write_graphs(actor: Actor, folder: Path, onnx: bool, atol: float) -> tuple[dict[str, str], dict[str, Any]]:
    """``policy.pt`` (and ``policy.onnx``) in ``folder``, each checked against torch on fresh random inputs."""
    module = ExportedPolicy(actor)
    inputs, fresh = _example_inputs(actor), _example_inputs(actor, batch=7, seed=1)
    names = _input_names(actor)
    outputs = ["actions"] + [f"{n}_out" for n in names if n in ("hidden", "cell")]
    files, errors, skipped = {"torchscript": "policy.pt"}, {}, []
    with warnings.catch_warnings():
        # shape checks in the actor become constants of the trace; the checks below compare the graphs with torch
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.jit.trace(module, inputs, check_trace=False).save(str(folder / files["torchscript"]))
        with torch.no_grad():
            reference = _as_tuple(module(*fresh))
            traced = _as_tuple(torch.jit.load(str(folder / files["torchscript"]))(*fresh))
        errors["torchscript"] = max(_check("TorchScript", a, b, atol) for a, b in zip(traced, reference))
        if onnx:
            files["onnx"] = "policy.onnx"
            states = ("hidden", "cell", "hidden_out", "cell_out")
            axes = {n: {1 if n in states else 0: "batch"} for n in names + outputs}
            torch.onnx.export(
                module,
                inputs,
                str(folder / files["onnx"]),
                input_names=names,
                output_names=outputs,
                dynamic_axes=axes,
                dynamo=False,
            )
    if onnx:
        runtime = _onnx_outputs(folder / files["onnx"], names, outputs, fresh)
        if runtime is None:
            skipped.append("policy.onnx against torch (onnxruntime is not installed)")
        else:
            errors["onnx"] = max(
                _check("ONNX (onnxruntime)", torch.from_numpy(a), b, atol) for a, b in zip(runtime, reference)
            )
    inputs_note = "7 random rows" + (", one without reference" if actor.ref_shape is not None else "")
    check = {"atol": atol, "max_abs_error_vs_torch": errors, "inputs": inputs_note}
    return files, {**check, "skipped": skipped} if skipped else check


def _as_tuple(x: Any) -> tuple[torch.Tensor, ...]:
    return tuple(x) if isinstance(x, tuple | list) else (x,)


def _onnx_outputs(path: Path, names: list[str], outputs: list[str], inputs: tuple[torch.Tensor, ...]) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {n: x.numpy() for n, x in zip(names, inputs)}
    return session.run(outputs, feed)


def _check(what: str, got: torch.Tensor, expected: torch.Tensor, atol: float) -> float:
    err = float((got - expected).abs().max())
    if not err <= atol:
        raise RuntimeError(f"exported {what} policy differs from torch by {err:.3g} (> {atol})")
    return err


def _pd_target(cfg: Any) -> str:
    """How the env turns actions into PD targets, in words (``policy.json``'s ``pd_target``)."""
    if getattr(cfg, "action_offset", "default") != "reference":
        return "default_joint_pos + action_scale * actions"
    ff = getattr(cfg, "reference_velocity_feedforward", False)
    feedforward = " + kv / kp * reference_joint_vel(t + control_dt)" if ff else ""
    return "reference_joint_pos(t + control_dt)" + feedforward + " + action_scale * actions"
