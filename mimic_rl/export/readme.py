"""The ``README.md`` of an export folder: ``policy.json``'s facts (inputs, observation layout, actions, control rate)
written for a person who wires the policy to a robot."""

from __future__ import annotations

from typing import Any

__all__ = ["export_readme"]


def export_readme(meta: dict[str, Any]) -> str:
    """Markdown describing the exported policy, from the metadata ``export_policy`` writes to ``policy.json``."""
    lines = ["# Exported policy", ""]
    source = ", ".join(f"{k} {meta[k]}" for k in ("checkpoint", "iteration", "robot", "simulator") if meta.get(k))
    lines += [f"Made by `mimic-rl export` from {source}." if source else "Made by `mimic-rl export`.", ""]
    files = meta.get("files", {})
    listed = ", ".join(f"`{name}` ({kind})" for kind, name in files.items())
    lines += [f"Files: {listed}, `policy.json` (these facts, as data).", ""]
    lines += _inputs(meta) + _layout(meta) + _actions(meta) + _check(meta)
    return "\n".join(lines).rstrip() + "\n"


def _inputs(meta: dict[str, Any]) -> list[str]:
    dtypes = meta.get("input_dtypes", {})
    lines = ["## Inputs (in this order)", "", "| name | shape | dtype |", "| --- | --- | --- |"]
    for name, shape in meta["inputs"].items():
        lines.append(f"| `{name}` | `{_shape(shape)}` | {dtypes.get(name, 'float32')} |")
    lines += ["", "Outputs: " + ", ".join(f"`{n}` `{_shape(s)}`" for n, s in meta["outputs"].items()) + ".", ""]
    lines += ["Feed raw observations: the observation normalization (and the reference encoder) are in the graph.", ""]
    if "recurrent" in meta:
        lines += [f"Recurrent policy: {meta['recurrent']}.", ""]
    return lines


def _layout(meta: dict[str, Any]) -> list[str]:
    layout = meta.get("observation_layout")
    if not layout:
        groups = meta.get("obs_groups")
        return ["## Observation layout", "", f"The simulator's observation groups, in this order: `{groups}`.", ""]
    lines = ["## Observation layout", "", f"`policy` ({layout['policy_size']} values), in this order:", ""]
    lines += _terms(layout["policy"])
    if "reference_frame" in layout and "reference" in meta["inputs"]:
        k, size = layout["num_future_frames"], layout["reference_frame_size"]
        lines += [
            f"`reference`: {k} frames of {size} values; frame k is the reference at the observation's time + "
            f"k * {layout['future_stride_steps']} * control_dt (offsets {layout['future_frame_offsets_s']} s), seen "
            f"from the robot's `{layout['anchor_body']}` frame. `reference_mask` is false where no reference is "
            "given. Each frame, in this order:",
            "",
        ]
        lines += _terms(layout["reference_frame"])
    return lines


def _terms(terms: list[list[Any]]) -> list[str]:
    lines = ["| # | term | size | slice |", "| --- | --- | --- | --- |"]
    start = 0
    for i, (name, size) in enumerate(terms):
        lines.append(f"| {i} | `{name}` | {size} | `[{start}:{start + size}]` |")
        start += size
    return [*lines, ""]


def _actions(meta: dict[str, Any]) -> list[str]:
    if meta.get("pd_target") is None:
        return []
    dt = meta["control_dt"]
    scale = meta["action_scale"]
    uniform = scale and all(s == scale[0] for s in scale)
    lines = ["## Actions", "", f"Joint position targets: `{meta['pd_target']}` (offset: {meta['action_offset']})."]
    lines += [f"Control rate: control_dt = {dt} s ({1.0 / dt:g} Hz): one policy step per control_dt.", ""]
    if uniform:
        lines += [f"action_scale: {scale[0]:g} for every joint.", ""]
    lines += ["| # | joint | default_joint_pos | action_scale |", "| --- | --- | --- | --- |"]
    for i, name in enumerate(meta["joint_names"]):
        lines.append(f"| {i} | `{name}` | {meta['default_joint_pos'][i]:g} | {scale[i]:g} |")
    return [*lines, ""]


def _check(meta: dict[str, Any]) -> list[str]:
    check = meta.get("check", {})
    errors = ", ".join(f"{k} {v:.2g}" for k, v in check.get("max_abs_error_vs_torch", {}).items())
    lines = ["## Check", "", f"Largest difference from the torch policy ({check.get('inputs')}): {errors}."]
    lines += [f"Not checked: {what}." for what in check.get("skipped", [])]
    return lines


def _shape(shape: list[Any]) -> str:
    """``[B, ...]``: the batch dimension first (recurrent states put it second, as given)."""
    dims = shape if "batch" in shape else ["batch", *shape]
    return "[" + ", ".join("B" if d == "batch" else str(d) for d in dims) + "]"
