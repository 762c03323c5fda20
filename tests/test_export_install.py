"""``mimic-rl export`` on the README's plain install: its dependencies, all-or-nothing folders, README and JSON."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest
import torch

from mimic_rl.cli import main
from mimic_rl.commands import load_policy
from mimic_rl.export import export_policy

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A one-iteration policy of the default task (the shipped motion: no data folder needed)."""
    run = tmp_path_factory.mktemp("run")
    args = ["train", "--num-envs", "4", "--iterations", "1", "--logger", "none", "--no-eval", "--log-dir", str(run)]
    assert main(args) == 0
    return run / "model_1.pt"


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _siblings(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.iterdir())


def test_the_plain_install_has_what_every_command_imports():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~ ;\[]", d)[0].lower() for d in project["dependencies"]}
    assert {"onnx", "onnxruntime", "torch", "numpy", "tensordict", "mujoco"} <= names
    dev = {re.split(r"[<>=!~ ;\[]", d)[0].lower(): d for d in project["optional-dependencies"]["dev"]}
    assert dev["rsl-rl-lib"].replace(" ", "") == "rsl-rl-lib>=5.4,<6"  # the 5.x API the tests compare against


def test_export_without_onnx_is_one_line_and_writes_nothing(checkpoint, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` fails, as on an install without it
    out = tmp_path / "new" / "export"
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: policy.onnx: expected the onnx package")
    assert "pip install" in err and "--no-onnx" in err
    assert list(tmp_path.iterdir()) == []  # no folder, no staging folder, no parent folder
    # TorchScript alone needs no onnx
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out), "--no-onnx"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "policy.json", "policy.pt", "robot.mjb"]


def test_a_failure_mid_export_leaves_no_partial_folder(checkpoint, tmp_path, monkeypatch):
    _, actor, _ = load_policy(checkpoint)

    def broken_export(module, inputs, path, **kwargs):
        Path(path).write_bytes(b"half an onnx file")
        raise RuntimeError("disk full")

    monkeypatch.setattr(torch.onnx, "export", broken_export)
    fresh = tmp_path / "a" / "b" / "export"
    with pytest.raises(RuntimeError, match="disk full"):
        export_policy(actor, fresh)
    assert list(tmp_path.iterdir()) == []  # neither the folder, nor its staging sibling, nor the parents made for it
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "policy.json").write_text('{"old": true}')
    (existing / "notes.txt").write_text("mine")
    before = _contents(existing)
    with pytest.raises(RuntimeError, match="disk full"):
        export_policy(actor, existing)
    assert _contents(existing) == before and _siblings(existing) == ["existing"]


def test_exporting_into_an_existing_folder_replaces_the_export_and_keeps_other_files(checkpoint, tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out)]) == 0
    files = ["README.md", "notes.txt", "policy.json", "policy.onnx", "policy.pt", "robot.mjb"]
    assert sorted(p.name for p in out.iterdir()) == files
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out), "--no-onnx"]) == 0
    # the old policy.onnx would not match this export's policy.json: it goes; the user's file stays
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "notes.txt", "policy.json", "policy.pt", "robot.mjb"]
    assert (out / "notes.txt").read_text() == "mine" and _siblings(out) == ["export"]
    assert json.loads((out / "policy.json").read_text())["files"] == {"torchscript": "policy.pt", "robot": "robot.mjb"}


def test_readme_and_json_give_the_actors_sizes_the_obs_order_and_the_control_rate(checkpoint, tmp_path):
    from mimic_rl.envs.registry import make_play_env

    out = tmp_path / "export"
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out)]) == 0
    cfg, actor, _ = load_policy(checkpoint)
    env_cfg = copy.deepcopy(cfg.env)
    env_cfg.num_envs = 1
    env = make_play_env(env_cfg)
    meta, readme = json.loads((out / "policy.json").read_text()), (out / "README.md").read_text()
    layout = meta["observation_layout"]
    d, (k, f), a = actor.obs_dim, actor.ref_shape, actor.num_actions
    assert meta["inputs"] == {"policy": [d], "reference": [k, f], "reference_mask": []}
    assert sum(size for _, size in layout["policy"]) == layout["policy_size"] == d
    assert sum(size for _, size in layout["reference_frame"]) * layout["num_future_frames"] == f * k
    assert meta["control_dt"] == pytest.approx(env.step_dt) and meta["control_hz"] == pytest.approx(1 / env.step_dt)
    assert meta["action_scale"] == pytest.approx(env.action_scale.tolist()) and len(meta["joint_names"]) == a
    assert meta["joint_names"] == list(env.joint_names)
    # the layout is the env's: last_action and projected gravity sit where the table says
    slices = dict(re.findall(r"\| `([^`]+)` \| \d+ \| `\[(\d+:\d+)\]` \|", readme))
    last, gravity = (slice(*map(int, slices[name].split(":"))) for name in ("last_action", "projected_gravity"))
    action = torch.linspace(-0.5, 0.5, a).unsqueeze(0)
    obs, *_ = env.step(action)
    env.close()
    torch.testing.assert_close(obs["policy"][0, last], action[0])
    assert obs["policy"][0, gravity][2] < -0.9  # upright at the start: gravity points down in the anchor frame
    assert slices["last_action"] == f"{d - a}:{d}"
    assert f"`policy` | `[B, {d}]` | float32" in readme and f"`reference` | `[B, {k}, {f}]` | float32" in readme
    assert f"`actions` `[B, {a}]`" in readme
    assert f"control_dt = {env.step_dt} s ({1 / env.step_dt:g} Hz)" in readme
    assert f"{k} frames of {f} values" in readme
    assert f"action_scale: {env.action_scale[0].item():g} for every joint" in readme


def test_without_onnxruntime_the_onnx_file_is_written_and_marked_unchecked(checkpoint, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    out = tmp_path / "export"
    assert main(["export", "--checkpoint", str(checkpoint), "--output", str(out)]) == 0
    assert "note: not checked: policy.onnx against torch (onnxruntime is not installed)" in capsys.readouterr().out
    check = json.loads((out / "policy.json").read_text())["check"]
    assert set(check["max_abs_error_vs_torch"]) == {"torchscript"} and len(check["skipped"]) == 1
    assert "Not checked: policy.onnx against torch" in (out / "README.md").read_text()
