"""The bad inputs of ``tests/test_cli_errors.py``, made on the fly from the real clips and the shipped motion.

``make_workspace(root, data_dir)`` writes every bad file into ``root`` and returns the paths the cases refer to;
``CASES`` lists (id, argv, patterns the one-line message must match). ``{name}`` in an argv is a workspace path.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import numpy as np
import torch

SMALL_TASK = """
runner: {num_steps_per_env: 4, max_iterations: 1, save_interval: 1, logger: none}
env: {num_envs: 2, robot: humanoid28, motions: [motions/humanoid28_squat_reach.npz], episode_length_s: 2.0}
algorithm: {num_learning_epochs: 1, num_mini_batches: 1}
actor: {hidden_dims: [16], reference_encoder: {type: mlp, latent_dim: 8, hidden_dims: [8]}}
critic: {hidden_dims: [16], reference_encoder: {type: mlp, latent_dim: 8, hidden_dims: [8]}}
"""
FOOTLESS_MJCF = """<mujoco><worldbody><body name="torso" pos="0 0 1"><freejoint/><geom size="0.1"/>
<body name="leg"><joint name="hip" type="hinge"/><geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/></body>
</body></worldbody></mujoco>
"""
RESUME = ["train", "--iterations", "1", "--no-eval", "--logger", "none", "--resume", "--log-dir"]
"""A resume without --task: the run folder's own config.yaml is used."""
TRAIN = ["train", "--task", "{small_task}", "--iterations", "1", "--num-envs", "2", "--no-eval", "--logger", "none"]


class Payload:
    """A pickled object whose loading would run ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _isaac_arrays(data_dir: Path) -> dict[str, np.ndarray]:
    with np.load(data_dir / "motions/humanoid28/humanoid_walk.npz") as f:
        return {k: f[k] for k in f.files}


def _npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _huge_header_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` with ``dof_positions`` replaced by a header that declares 10^12 x 28 floats (4 bytes of data)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 28)})
    _npz(path, {k: v for k, v in arrays.items() if k != "dof_positions"})
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("dof_positions.npy", header.getvalue() + b"\0\0\0\0")


def _motions(root: Path, data_dir: Path) -> dict[str, Path]:
    p: dict[str, Path] = {}
    walk = _isaac_arrays(data_dir)
    real = (data_dir / "motions/humanoid28/humanoid_walk.npz").read_bytes()
    (root / "truncated.npz").write_bytes(real[: len(real) // 2])
    variants = {
        "complex": {"dof_positions": walk["dof_positions"].astype(np.complex64)},
        "strings": {"dof_positions": walk["dof_positions"].astype(str)},
        "fps_negative": {"fps": np.array(-60)},
        "fps_huge": {"fps": np.array(1e9)},
        "fps_text": {"fps": np.array("sixty")},
        "nan_body": {"body_positions": np.where(np.arange(154)[:, None, None] == 77, np.nan, walk["body_positions"])},
        "zero_quat": {"body_rotations": np.zeros_like(walk["body_rotations"])},
        "wrong_joints": {"dof_names": walk["dof_names"][:27], "dof_positions": walk["dof_positions"][:, :27]},
    }
    for name, changes in variants.items():
        _npz(root / f"{name}.npz", {**walk, **changes})
    objects = dict(walk)
    objects["dof_positions"] = walk["dof_positions"].astype(object)
    with open(root / "objects.npz", "wb") as f:
        np.savez(f, **objects)  # numpy pickles object arrays; the loader must refuse them unread
    _huge_header_npz(root / "huge.npz", walk)
    (root / "empty.npz").write_bytes(b"")
    csv = (data_dir / "motions/g1/B_HandsUp.csv").read_text().splitlines()
    (root / "cols.csv").write_text("\n".join(",".join(r.split(",")[:-1]) for r in csv) + "\n")
    (root / "text_cell.csv").write_text("\n".join([csv[0], csv[1].replace(csv[1].split(",")[2], "high", 1)]) + "\n")
    (root / "empty_dir").mkdir()
    (root / "other_dir").mkdir()
    (root / "other_dir" / "notes.txt").write_text("not a motion\n")
    (root / "loop.npz").symlink_to(root / "loop.npz")
    (root / "broken.npz").symlink_to(root / "does_not_exist.npz")
    (root / "not_xml.xml").write_text("this is not an MJCF\n")
    (root / "a_file").write_text("a file where a folder is expected\n")
    for name in [*variants, "truncated", "objects", "huge", "empty", "loop", "broken"]:
        p[name] = root / f"{name}.npz"
    p.update(cols=root / "cols.csv", text_cell=root / "text_cell.csv", empty_dir=root / "empty_dir")
    p.update(other_dir=root / "other_dir", not_xml=root / "not_xml.xml", a_file=root / "a_file")
    return p


def _configs(root: Path) -> dict[str, Path]:
    texts = {
        "small_task": SMALL_TASK,
        "unknown_key": "env: {num_env: 4}\n",
        "bad_type": "runner: {max_iterations: many}\n",
        "syntax": "env:\n  num_envs: [4\n",
        "top_list": "- runner\n- env\n",
        "empty_yaml": "",
        "bad_choice": "env: {sampling_mode: random}\n",
        "bad_alg_value": "algorithm: {learning_rate: fast}\n",
        "bad_range": "env: {reward: {body_pos_std: -0.1}}\n",
        "yaml_cuda": "runner: {device: cuda}\n",
        "hidden_int": "base: tracking_ppo\nactor: {hidden_dims: 256}\n",
        "cycle_a": "base: cycle_b.yaml\n",
        "cycle_b": "base: cycle_a.yaml\n",
        "base_task": "base: small_task.yaml\nalgorithm: {learning_rate: 3.0e-4}\n",
        "fewer_frames": SMALL_TASK.replace("episode_length_s: 2.0}", "episode_length_s: 2.0, num_future_frames: 3}"),
    }
    out = {}
    for name, text in texts.items():
        out[name] = root / f"{name}.yaml"
        out[name].write_text(text)
    out["binary_yaml"] = root / "binary.yaml"
    out["binary_yaml"].write_bytes(b"\x00\xff\xfe\x01" * 8)
    return out


def _checkpoints(root: Path, good: Path) -> dict[str, Path]:
    out = {"good": good}
    data = good.read_bytes()
    out["truncated_pt"] = root / "truncated.pt"
    out["truncated_pt"].write_bytes(data[: len(data) // 3])
    out["text_pt"] = root / "text.pt"
    out["text_pt"].write_text("definitely not a checkpoint\n")
    for name, obj in {
        "list_pt": [1, 2, 3],
        "foreign_pt": {"weights": torch.zeros(3), "epoch": 4},
        "rsl_rl_pt": {"actor_state_dict": {"mlp.0.weight": torch.zeros(4, 3)}, "iter": 10},
        "numpy_pt": {"config": {}, "actor_cfg": {}, "actor_state_dict": {}, "array": np.zeros(3)},
    }.items():
        out[name] = root / f"{name}.pt"
        torch.save(obj, out[name])
    out["marker"] = root / "PAYLOAD_RAN"
    out["crafted_pt"] = root / "crafted.pt"
    torch.save({"actor_state_dict": Payload(out["marker"]), "config": {}}, out["crafted_pt"])
    out["plain_pickle_pt"] = root / "plain_pickle.pt"
    out["plain_pickle_pt"].write_bytes(pickle.dumps(Payload(out["marker"])))
    for name, text in {"empty_cfg_run": "", "corrupt_cfg_run": "runner: {num_steps_per_env: [\n"}.items():
        out[name] = root / name
        out[name].mkdir()
        shutil.copy(good, out[name] / "model_1.pt")
        (out[name] / "config.yaml").write_text(text)
    out["no_ckpt_run"] = root / "no_ckpt_run"
    out["no_ckpt_run"].mkdir()
    return out


def _eval_jsons(root: Path, good_eval: Path) -> dict[str, Path]:
    text = good_eval.read_text()
    out = {"good_eval": good_eval}
    for name, content in {
        "truncated_json": text[: len(text) // 2],
        "list_json": "[1, 2, 3]\n",
        "missing_keys_json": '{"clips": [{"name": "walk"}], "summary": {}}\n',
    }.items():
        out[name] = root / f"{name}.json"
        out[name].write_text(content)
    out["binary_json"] = root / "binary.json"
    out["binary_json"].write_bytes(b"\x00\xff\x10" * 10)
    return out


def make_workspace(root: Path, data_dir: Path, good: Path, good_eval: Path) -> dict[str, str]:
    """Every bad input under ``root``; ``good`` is a trained checkpoint and ``good_eval`` its eval JSON."""
    paths = {"root": root, "data": data_dir, "g1_xml": data_dir / "robots/unitree_g1/g1.xml"}
    paths["walk"] = data_dir / "motions/humanoid28/humanoid_walk.npz"
    paths["hands_up_npz"] = data_dir / "motions/g1/B_HandsUp.npz"
    paths["hands_up_csv"] = data_dir / "motions/g1/B_HandsUp.csv"
    paths.update(_motions(root, data_dir))
    paths.update(_configs(root))
    paths.update(_checkpoints(root, good))
    paths.update(_eval_jsons(root, good_eval))
    paths["footless_xml"] = root / "footless.xml"  # a robot with none of the known foot bodies
    paths["footless_xml"].write_text(FOOTLESS_MJCF)
    return {k: str(v) for k, v in paths.items()}


def _train(*extra: str) -> list[str]:
    return [*TRAIN, *extra]


# (id, argv, regexes the one-line message must match (the first names the file, key or flag))
CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    # ---------------------------------------------------------------- motion files, through train and convert
    ("motion_truncated", _train("--motion", "{truncated}"), (r"truncated\.npz", r"damaged")),
    ("motion_complex", ["convert", "{complex}", "--output", "{root}/o.npz"], (r"complex\.npz: dof_positions", r"real")),
    ("motion_strings", _train("--motion", "{strings}"), (r"strings\.npz: dof_positions", r"real numbers")),
    ("motion_objects", ["convert", "{objects}", "--output", "{root}/o.npz"], (r"objects\.npz: dof_positions", "obj")),
    ("motion_huge_header", _train("--motion", "{huge}"), (r"huge\.npz: dof_positions", r"declares shape")),
    ("motion_fps_negative", _train("--motion", "{fps_negative}"), (r"fps_negative\.npz: fps", r"found -60")),
    ("motion_fps_huge", ["convert", "{fps_huge}", "--output", "{root}/o.npz"], (r"fps_huge\.npz: fps", r"1e\+09")),
    ("motion_fps_text", _train("--motion", "{fps_text}"), (r"fps_text\.npz: fps", r"real numbers")),
    ("motion_nan", _train("--motion", "{nan_body}"), (r"nan_body\.npz: body_pos_w", r"finite")),
    ("motion_zero_quat", ["convert", "{zero_quat}", "--output", "{root}/o.npz"], (r"zero_quat\.npz", r"unit quat")),
    ("motion_wrong_joints", _train("--motion", "{wrong_joints}"), (r"wrong_joints\.npz", r"28")),
    ("motion_empty_file", _train("--motion", "{empty}"), (r"empty\.npz", r"empty file")),
    ("motion_missing", _train("--motion", "{root}/nowhere.npz"), (r"nowhere\.npz: --motion", r"no such file")),
    ("motion_symlink_loop", _train("--motion", "{loop}"), (r"loop\.npz: --motion", r"symbolic link loop")),
    ("motion_broken_link", _train("--motion", "{broken}"), (r"broken\.npz: --motion", r"broken symbolic link")),
    ("motion_empty_folder", _train("--motion", "{empty_dir}"), (r"empty_dir: --motion", r"an empty folder")),
    ("motion_folder_of_others", _train("--motion", "{other_dir}"), (r"other_dir: --motion", r"none \.npz or \.csv")),
    ("motion_g1_on_humanoid28", _train("--motion", "{hands_up_npz}"), (r"B_HandsUp\.npz", r"--robot")),
    (
        "csv_columns",
        _train("--robot", "g1", "--robot-mjcf", "{g1_xml}", "--csv-fps", "60", "--motion", "{cols}"),
        (r"cols\.csv: row 1", r"36 columns"),
    ),
    (
        "csv_text_cell",
        ["convert", "{text_cell}", "--robot", "{g1_xml}", "--csv-fps", "60", "--output", "{root}/o.npz"],
        (r"text_cell\.csv: row 2", r"numbers"),
    ),
    (
        "csv_without_fps",
        _train("--robot", "g1", "--robot-mjcf", "{g1_xml}", "--motion", "{hands_up_csv}"),
        (r"B_HandsUp\.csv: fps", r"--csv-fps"),
    ),
    ("g1_without_mjcf", _train("--robot", "g1", "--motion", "{hands_up_npz}"), (r"--robot-mjcf", r"g1")),
    ("mjcf_folder", _train("--robot", "g1", "--robot-mjcf", "{data}", "--motion", "{hands_up_npz}"), ("--robot-mjcf",)),
    (
        "mjcf_not_xml",
        _train("--robot", "g1", "--robot-mjcf", "{not_xml}", "--motion", "{hands_up_npz}"),
        (r"not_xml\.xml: --robot-mjcf", r"MJCF"),
    ),
    ("convert_folder_to_file", ["convert", "{data}/motions/g1", "--output", "{root}/o.npz"], (r"--output", "folder")),
    ("convert_fps_zero", ["convert", "{walk}", "--fps", "0", "--output", "{root}/o.npz"], (r"--fps", r"frame rate")),
    (
        "convert_pin_feet_without_robot",
        ["convert", "{walk}", "--pin-feet", "--output", "{root}/o.npz"],
        (r"--pin-feet: expected --robot", r"humanoid28"),
    ),
    (
        "convert_feet_not_bodies",
        ["convert", "{walk}", "--robot", "humanoid28", "--feet", "left_foot", "paw", "--output", "{root}/o.npz"],
        (r"--feet: expected bodies of the robot, found paw;", r"right_foot"),
    ),
    (
        "convert_robot_missing",
        ["convert", "{walk}", "--robot", "{root}/nope.xml", "--output", "{root}/o.npz"],
        (r"nope\.xml: --robot: expected a file", r"humanoid28"),
    ),
    (
        "convert_pin_feet_footless_robot",
        ["convert", "{walk}", "--robot", "{footless_xml}", "--pin-feet", "--output", "{root}/o.npz"],
        (r"footless\.xml: --pin-feet", r"--feet BODY"),
    ),
    # ---------------------------------------------------------------- configs
    ("task_missing", _train("--task", "no_such_task"), (r"no_such_task: --task", r"tracking_ppo")),
    (
        "config_unknown_key",
        _train("--task", "{unknown_key}"),
        (r"unknown_key\.yaml: env\.num_env: unknown key; did you mean env\.num_envs\?",),
    ),
    ("config_bad_type", _train("--task", "{bad_type}"), (r"runner\.max_iterations", r"whole number, found 'many'")),
    ("config_syntax", _train("--task", "{syntax}"), (r"syntax\.yaml", r"line 3")),
    ("config_top_list", _train("--task", "{top_list}"), (r"top_list\.yaml", r"found a list")),
    ("config_empty", _train("--task", "{empty_yaml}"), (r"empty_yaml\.yaml", r"empty file")),
    ("config_binary", _train("--task", "{binary_yaml}"), (r"binary\.yaml", r"(binary|YAML)")),
    ("config_bad_choice", _train("--task", "{bad_choice}"), (r"env\.sampling_mode", r"'random'")),
    ("config_bad_alg_value", _train("--task", "{bad_alg_value}"), (r"algorithm\.learning_rate", r"'fast'")),
    ("config_bad_range", _train("--task", "{bad_range}"), (r"env\.reward\.body_pos_std", r"> 0, found -0\.1")),
    (
        "config_hidden_dims_int",
        _train("--task", "{hidden_int}"),
        (
            r"hidden_int\.yaml: actor\.hidden_dims: expected a "
            r"list of whole numbers, found 256$",
        ),
    ),
    ("config_base_cycle", _train("--task", "{cycle_a}"), (r"cycle_b\.yaml: base", r"cycle_a\.yaml -> cycle_b\.yaml")),
    (
        "config_set_typo",
        _train("--set", "algorithm.lerning_rate=3e-4"),
        (
            r"--set algorithm\.lerning_rate=3e-4: algorithm\.lerning_rate: unknown key; did you mean "
            r"algorithm\.learning_rate\?",
        ),
    ),
    ("config_set_no_value", _train("--set", "algorithm.learning_rate"), (r"--set", r"KEY\.PATH=VALUE")),
    (
        "entropy_schedule_without_initial",
        _train("--set", "algorithm.entropy_coef={{mode: step, final: 0.0, end: 10}}"),
        (r"algorithm\.entropy_coef\.initial: missing", r"mode and initial, e\.g\. \{mode: step, initial: 0\.005"),
    ),
    (
        "entropy_schedule_bad_end",
        _train("--set", "algorithm.entropy_coef={{mode: step, initial: 0.005, end: ten}}"),
        (r"algorithm\.entropy_coef\.end: expected a whole number >= 0", r"9_830_400\), found 'ten'"),
    ),
    (
        "entropy_schedule_bad_unit",
        _train("--set", "algorithm.entropy_coef={{mode: step, initial: 0.005, end: 10, unit: steps}}"),
        (r"algorithm\.entropy_coef\.unit: expected one of \('iterations', 'env_steps'\), found 'steps'",),
    ),
    (
        "feedforward_without_reference_offset",
        _train("--set", "env.action_offset=default", "--set", "env.reference_velocity_feedforward=true"),
        (r"env\.reference_velocity_feedforward", r"action_offset: reference", r"env\.action_offset=reference"),
    ),
    # ---------------------------------------------------------------- options
    (
        "log_dir_holds_run",
        _train("--log-dir", "{root}/good_run"),
        (r"good_run: --log-dir", r"--resume", r"--overwrite"),
    ),
    ("log_dir_overwrite_resume", _train("--log-dir", "{root}/good_run", "--resume", "--overwrite"), (r"--overwrite",)),
    ("mjcf_for_humanoid28", _train("--robot-mjcf", "{g1_xml}"), (r"--robot-mjcf", r"--robot g1")),
    ("threads_zero", _train("--threads", "0"), (r"--threads", r"found 0")),
    ("num_envs_zero", _train("--num-envs", "0"), (r"--num-envs", r">= 1, found 0")),
    ("num_envs_negative", _train("--num-envs", "-3"), (r"--num-envs", r"found -3")),
    ("num_envs_text", _train("--num-envs", "many"), (r"--num-envs", r"found 'many'")),
    ("iterations_negative", _train("--iterations", "-1"), (r"--iterations", r"found -1")),
    ("iterations_zero", _train("--iterations", "0"), (r"--iterations", r"found 0")),
    ("time_budget_negative", _train("--time-budget", "-5"), (r"--time-budget", r"found -5")),
    ("time_budget_nan", _train("--time-budget", "nan"), (r"--time-budget", r"found nan")),
    ("seed_negative", _train("--seed", "-1"), (r"--seed", r"found -1")),
    ("eval_envs_zero", _train("--eval-envs", "0"), (r"--eval-envs", r"found 0")),
    ("csv_fps_nan", _train("--csv-fps", "nan"), (r"--csv-fps", r"frame rate")),
    ("csv_fps_huge", _train("--csv-fps", "1e9"), (r"--csv-fps", r"frame rate")),
    *(  # on a machine without CUDA (on a GPU machine, --device cuda is valid)
        [
            ("device_cuda", _train("--device", "cuda"), (r"--device", r"available here: cpu", r"--device cpu")),
            ("config_cuda", _train("--task", "{yaml_cuda}"), (r"runner\.device", r"--device cpu")),
        ]
        if not torch.cuda.is_available()
        else []
    ),
    ("device_bogus", _train("--device", "gpu"), (r"--device", r"'gpu'", r"--device cpu")),
    ("device_index", _train("--device", "cuda:7"), (r"--device", r"cuda:7")),
    ("unknown_option", _train("--lr", "3"), (r"--lr", r"unrecognized")),
    ("robot_choice", _train("--robot", "h1"), (r"--robot", r"'h1'")),
    ("log_dir_is_file", _train("--log-dir", "{a_file}"), (r"a_file: --log-dir", r"found a file")),
    ("play_steps_zero", ["play", "--checkpoint", "{good}", "--steps", "0"], (r"--steps", r"found 0")),
    ("play_video_suffix", ["play", "--checkpoint", "{good}", "--video", "{root}/v.avi"], (r"--video", r"\.gif")),
    ("play_device_index", ["play", "--checkpoint", "{good}", "--device", "cuda:99"], (r"--device", r"cuda:99")),
    (
        "eval_device_bogus",
        ["eval", "--checkpoint", "{good}", "--output", "{root}/e.json", "--device", "tpu"],
        (r"--device", r"'tpu'", r"--device cpu"),
    ),
    (
        "eval_num_envs_zero",
        ["eval", "--checkpoint", "{good}", "--output", "{root}/e.json", "--num-envs", "0"],
        ("--num",),
    ),
    ("eval_output_folder", ["eval", "--checkpoint", "{good}", "--output", "{root}"], (r"--output", r"a folder")),
    (
        "eval_action_noise_negative",
        ["eval", "--checkpoint", "{good}", "--output", "{root}/e.json", "--action-noise", "-1"],
        (r"--action-noise", r"a number >= 0", r"found -1"),
    ),
    ("export_output_file", ["export", "--checkpoint", "{good}", "--output", "{a_file}"], (r"--output", r"a file")),
    # ---------------------------------------------------------------- checkpoints
    ("ckpt_missing", ["eval", "--checkpoint", "{root}/model_9.pt", "--output", "{root}/e.json"], (r"--checkpoint",)),
    ("ckpt_folder", ["eval", "--checkpoint", "{root}", "--output", "{root}/e.json"], (r"--checkpoint", r"a folder")),
    ("ckpt_truncated", ["eval", "--checkpoint", "{truncated_pt}", "--output", "{root}/e.json"], (r"truncated\.pt",)),
    ("ckpt_text", ["export", "--checkpoint", "{text_pt}", "--output", "{root}/x"], (r"text\.pt: --checkpoint",)),
    ("ckpt_list", ["play", "--checkpoint", "{list_pt}"], (r"list_pt\.pt", r"found a list")),
    (
        "ckpt_foreign",
        ["eval", "--checkpoint", "{foreign_pt}", "--output", "{root}/e.json"],
        (r"foreign_pt\.pt", "keys"),
    ),
    ("ckpt_rsl_rl", ["play", "--checkpoint", "{rsl_rl_pt}"], (r"rsl_rl_pt\.pt", r"rsl_rl", r"--teacher")),
    ("ckpt_numpy", ["export", "--checkpoint", "{numpy_pt}", "--output", "{root}/x"], (r"numpy_pt\.pt", r"numpy")),
    ("ckpt_crafted", ["export", "--checkpoint", "{crafted_pt}", "--output", "{root}/x"], (r"crafted\.pt", r"system")),
    (
        "ckpt_plain_pickle",
        ["eval", "--checkpoint", "{plain_pickle_pt}", "--output", "{root}/e.json"],
        (r"plain_pickle\.pt", r"safe loader refuses"),
    ),
    ("resume_crafted", _train("--resume", "{crafted_pt}"), (r"crafted\.pt: --resume", r"system")),
    ("teacher_crafted", ["distill", "--teacher", "{crafted_pt}", "--no-eval"], (r"crafted\.pt: --teacher",)),
    ("teacher_foreign", ["distill", "--teacher", "{foreign_pt}", "--no-eval"], (r"foreign_pt\.pt: --teacher",)),
    ("teacher_missing", ["distill", "--teacher", "{root}/none.pt", "--no-eval"], (r"none\.pt: --teacher",)),
    ("teacher_none", ["distill", "--no-eval", "--log-dir", "{root}/no_teacher"], (r"^error: --teacher", r"found none")),
    ("resume_mismatch", _train("--task", "{fewer_frames}", "--resume", "{good}"), (r"--resume", r"5x", r"3x")),
    (
        "eval_other_robot",
        ["eval", "--checkpoint", "{good}", "--output", "{root}/e.json", "--motion", "{hands_up_npz}"],
        (r"B_HandsUp\.npz", r"another robot"),
    ),
    (
        "convert_other_robot",
        ["convert", "{hands_up_npz}", "--robot", "humanoid28", "--output", "{root}/c.npz"],
        (r"B_HandsUp\.npz", r"another robot", r"convert: --robot "),
    ),
    ("resume_nothing", _train("--resume", "--log-dir", "{no_ckpt_run}"), (r"no_ckpt_run: --resume", r"found none")),
    ("resume_empty_config", [*RESUME, "{empty_cfg_run}"], (r"empty_cfg_run/config\.yaml", r"empty file")),
    ("resume_corrupt_config", [*RESUME, "{corrupt_cfg_run}"], (r"corrupt_cfg_run/config\.yaml", r"YAML")),
    # ---------------------------------------------------------------- eval JSON for plot
    ("plot_truncated_json", ["plot", "{truncated_json}", "--output", "{root}/p"], (r"truncated_json\.json", "JSON")),
    ("plot_list_json", ["plot", "{list_json}", "--output", "{root}/p"], (r"list_json\.json: clips",)),
    (
        "plot_missing_keys",
        ["plot", "{missing_keys_json}", "--output", "{root}/p"],
        (r"missing_keys_json", r"over_time"),
    ),
    ("plot_binary_json", ["plot", "{binary_json}", "--output", "{root}/p"], (r"binary\.json", r"binary|JSON")),
    ("plot_missing_file", ["plot", "{root}/none.json", "--output", "{root}/p"], (r"none\.json",)),
    ("plot_output_file", ["plot", "{good_eval}", "--output", "{a_file}"], (r"a_file: --output", r"a file")),
]

# valid inputs that must be accepted (exit code 0)
CONTROLS: list[tuple[str, list[str], dict[str, str]]] = [
    (
        "convert_real_csv",
        ["convert", "{hands_up_csv}", "--robot", "{g1_xml}", "--csv-fps", "60", "--output", "{root}/c.npz"],
        {},
    ),
    (
        "convert_pin_feet",
        ["convert", "{walk}", "--robot", "humanoid28", "--pin-feet", "--fps", "50", "--output", "{root}/p.npz"],
        {},
    ),
    ("train_folder_of_motions", _train("--motion", "{data}/motions/humanoid28", "--log-dir", "{root}/ok_run"), {}),
    (
        "train_with_base_and_set",
        _train("--task", "{base_task}", "--set", "runner.seed=3", "--log-dir", "{root}/ok_b"),
        {},
    ),
    ("eval_good", ["eval", "--checkpoint", "{good}", "--output", "{root}/ok_eval.json", "--num-envs", "1"], {}),
    ("plot_good", ["plot", "{good_eval}", "--output", "{root}/ok_plots"], {}),
    ("train_without_opengl", _train("--log-dir", "{root}/ok_gl"), {"MUJOCO_GL": "osmesa"}),
    (
        "export_without_opengl",
        ["export", "--checkpoint", "{good}", "--output", "{root}/ok_x", "--no-onnx"],
        {"MUJOCO_GL": "osmesa"},
    ),
]
