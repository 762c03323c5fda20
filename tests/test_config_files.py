"""Configs a user writes in three lines: ``base:`` inheritance, ``--set`` overrides, one-line errors with the closest
valid key."""

from __future__ import annotations

import pytest
import yaml

from mimic_rl.cli import main
from mimic_rl.config import CONFIG_DIR, ConfigError, TrainConfig, load_config, save_config, to_dict
from mimic_rl.config_files import apply_overrides, merge, parse_override, read_config_file
from mimic_rl.errors import UsageError


def _write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_three_line_config_inherits_a_builtin_one(tmp_path):
    """Everything not in the file comes from tracking_ppo (read independently with yaml); lists are replaced, nested
    mappings merged key by key."""
    mine = _write(tmp_path / "mine.yaml", "base: tracking_ppo\nalgorithm: {learning_rate: 3.0e-4}\nactor:\n"
                  "  hidden_dims: [64, 32]\n  reference_encoder: {latent_dim: 16}\n")  # fmt: skip
    builtin = yaml.safe_load((CONFIG_DIR / "tracking_ppo.yaml").read_text())
    cfg = load_config(mine)
    assert cfg.algorithm["learning_rate"] == 3e-4
    assert cfg.algorithm["num_learning_epochs"] == builtin["algorithm"]["num_learning_epochs"] == 5
    assert cfg.actor["hidden_dims"] == [64, 32]
    assert cfg.actor["reference_encoder"] == {**builtin["actor"]["reference_encoder"], "latent_dim": 16}
    assert cfg.critic == builtin["critic"]
    assert cfg.env.termination.anchor_position == builtin["env"]["termination"]["anchor_position"] == 0.25
    assert cfg.runner.max_iterations == builtin["runner"]["max_iterations"]


def test_bases_chain_relative_to_the_file_that_names_them(tmp_path):
    _write(tmp_path / "shared" / "base.yaml", "base: tracking_ppo\nrunner: {save_interval: 7}\nenv: {num_envs: 3}\n")
    _write(tmp_path / "shared" / "middle.yaml", "base: base.yaml\nenv: {decimation: 2}\n")
    top = _write(tmp_path / "exp" / "top.yaml", "base: ../shared/middle.yaml\nenv: {num_envs: 5}\n")
    data = read_config_file(top)
    assert "base" not in data
    assert (data["runner"]["save_interval"], data["env"]["num_envs"], data["env"]["decimation"]) == (7, 5, 2)
    assert data["runner"]["max_iterations"] == 300  # from tracking_ppo, two bases up


def test_merge_replaces_lists_and_sections_that_switch_class():
    base = {"a": {"b": 1, "c": [1, 2]}, "env": {"backend": "mujoco", "robot": "g1"}, "keep": 1}
    out = merge(base, {"a": {"c": [3]}, "env": {"backend": "mjlab", "task": "T"}})
    assert out == {"a": {"b": 1, "c": [3]}, "env": {"backend": "mjlab", "task": "T"}, "keep": 1}
    assert base["a"]["c"] == [1, 2]  # the inputs are not changed
    assert merge(base, {"env": {"robot": "humanoid28"}})["env"] == {"backend": "mujoco", "robot": "humanoid28"}


@pytest.mark.parametrize(
    "files, pattern",
    [
        (
            {"a.yaml": "base: b.yaml\n", "b.yaml": "base: a.yaml\n"},
            r"b\.yaml: base: the bases form a cycle "
            r"\(a\.yaml -> b\.yaml -> a\.yaml\)",
        ),
        ({"a.yaml": "base: a.yaml\n"}, r"a\.yaml: base: the bases form a cycle \(a\.yaml -> a\.yaml\)"),
        (
            {"a.yaml": "base: nowhere\n"},
            r"a\.yaml: base: expected a built-in config \(amp_walk, distill, distill_deploy, tracking_ppo",
        ),
        ({"a.yaml": "base: [tracking_ppo]\n"}, r"a\.yaml: base: expected a built-in config name or a YAML path"),
        ({"a.yaml": "base: b.yaml\n", "b.yaml": "env: [1\n"}, r"b\.yaml: base of .*a\.yaml: expected valid YAML"),
    ],
)
def test_a_bad_base_is_one_line(tmp_path, files, pattern):
    for name, text in files.items():
        _write(tmp_path / name, text)
    with pytest.raises(ConfigError, match=pattern) as info:
        load_config(tmp_path / "a.yaml")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text, keys, value",
    [
        ("algorithm.learning_rate=3e-4", ["algorithm", "learning_rate"], 3e-4),
        ("actor.hidden_dims=[256,128]", ["actor", "hidden_dims"], [256, 128]),
        ("env.termination.anchor_position=null", ["env", "termination", "anchor_position"], None),
        ("runner.max_iterations=10", ["runner", "max_iterations"], 10),
        ("runner.logger=none", ["runner", "logger"], "none"),
        ("actor.obs_normalization=false", ["actor", "obs_normalization"], False),
        ("algorithm.gamma=-.5", ["algorithm", "gamma"], -0.5),
    ],
)
def test_set_values_are_read_as_yaml(text, keys, value):
    parsed_keys, parsed = parse_override(text)
    assert parsed_keys == keys and parsed == value and type(parsed) is type(value)


def test_set_overrides_after_base_and_file(tmp_path):
    mine = _write(tmp_path / "mine.yaml", "base: tracking_ppo\nalgorithm: {learning_rate: 1.0e-2}\n")
    sets = ["algorithm.learning_rate=3e-4", "actor.hidden_dims=[256,128]", "env.termination.anchor_position=null"]
    cfg = load_config(mine, overrides=sets)
    assert cfg.algorithm["learning_rate"] == 3e-4 and cfg.actor["hidden_dims"] == [256, 128]
    assert cfg.env.termination.anchor_position is None
    assert apply_overrides({"a": None}, ["a.b=1", "a.b=2"]) == {"a": {"b": 2}}  # in order; later ones win


@pytest.mark.parametrize(
    "sets, message",
    [
        (
            ["algorithm.lerning_rate=3e-4"],
            "--set algorithm.lerning_rate=3e-4: algorithm.lerning_rate: unknown key; did you mean "
            "algorithm.learning_rate?",
        ),
        (
            ["actor.hidden_dims=256"],
            "--set actor.hidden_dims=256: actor.hidden_dims: expected a list of whole numbers, found 256",
        ),
        (["env.num_envs=0"], "--set env.num_envs=0: env.num_envs: expected a number >= 1, found 0"),
        (
            ["runner.max_iterations=many"],
            "--set runner.max_iterations=many: runner.max_iterations: expected a whole number, found 'many'",
        ),
    ],
)
def test_a_bad_set_names_itself(sets, message):
    with pytest.raises(ConfigError) as info:
        load_config("tracking_ppo", overrides=sets)
    assert str(info.value) == message


@pytest.mark.parametrize("text", ["algorithm.learning_rate", "=3", "a..b=1", "a.b c=1"])
def test_a_set_without_key_and_value_is_a_usage_error(text):
    with pytest.raises(UsageError, match=r"^--set: expected KEY\.PATH=VALUE"):
        parse_override(text)


def test_set_below_a_value_that_is_not_a_section():
    with pytest.raises(UsageError, match=r"actor\.hidden_dims is \[8\], not a section"):
        apply_overrides({"actor": {"hidden_dims": [8]}}, ["actor.hidden_dims.x=1"])


def test_the_file_names_its_errors_and_the_resolved_config_has_no_base(tmp_path):
    bad = _write(tmp_path / "bad.yaml", "base: tracking_ppo\nactor: {hidden_dims: 256}\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert str(info.value) == f"{bad}: actor.hidden_dims: expected a list of whole numbers, found 256"
    good = _write(tmp_path / "good.yaml", "base: tracking_ppo\nenv: {num_envs: 3}\n")
    saved = save_config(load_config(good, overrides=["runner.seed=4"]), tmp_path / "run" / "config.yaml")
    data = yaml.safe_load(saved.read_text())
    assert "base" not in data and data["env"]["num_envs"] == 3 and data["runner"]["seed"] == 4
    assert to_dict(load_config(saved)) == to_dict(load_config(good, overrides=["runner.seed=4"]))
    assert isinstance(load_config(saved), TrainConfig)


def test_the_cli_prints_one_line_for_a_set_typo(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["train", "--set", "algorithm.lerning_rate=3e-4", "--iterations", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (
        "error: --set algorithm.lerning_rate=3e-4: algorithm.lerning_rate: unknown key; did you mean "
        "algorithm.learning_rate?"
    )
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())  # no run folder left behind
