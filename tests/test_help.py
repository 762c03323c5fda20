"""Help and hints: every command's --help shows each option's default, an example and where outputs go; every flag
that a message or docstring of the package names exists."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from mimic_rl.cli import build_parser, main
from mimic_rl.run_config import run_config

PACKAGE = Path(__file__).resolve().parents[1] / "mimic_rl"
FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*[a-z0-9]")
OTHER_TOOLS = {"--nproc_per_node": "torchrun"}
"""Flags of other programs that the package's text names, with the program they belong to."""


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _all_options() -> set[str]:
    return {o for cmd in _subcommands().values() for a in cmd._actions for o in a.option_strings}


def flags_in_strings(source: str) -> list[tuple[str, str]]:
    """(flag, the string it is in) for every ``--flag`` inside a string constant (f-strings included) of ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(flag, node.value) for flag in FLAG.findall(node.value)]
    return found


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_help_shows_defaults_an_example_and_the_outputs(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    text = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert re.search(rf"^example:\n  mimic-rl {name} ", text, re.M), text
    assert re.search(r"^outputs?\b", text, re.M), text
    cmd = _subcommands()[name]
    formatter = cmd._get_formatter()
    for action in cmd._actions:
        if not action.option_strings or action.dest == "help":
            continue
        shown = formatter._get_help_string(action)
        assert action.help and re.search(r"\((default: .+|required)\)", shown), (name, action.option_strings, shown)
        if action.default not in (None, False):
            assert f"(default: {action.default})" in shown % {"default": action.default}


def test_every_flag_the_package_names_exists():
    """A renamed or removed flag leaves hints that name it: this fails then."""
    options = _all_options()
    unknown = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for flag, text in flags_in_strings(path.read_text()):
            if flag in OTHER_TOOLS:
                assert OTHER_TOOLS[flag] in text, (path, flag)
            elif flag not in options:
                unknown.append(f"{path.relative_to(PACKAGE.parent)}: {flag} in {text[:80]!r}")
    assert not unknown, "\n".join(unknown)


def test_the_flag_collector_finds_flags_in_fstrings_and_messages():
    source = 'x = f"{p}: --no-such-flag: bad; pass --log-dir"\ny = "use --robot-mjcf"\nz = "a-b --c_d --X"\n'
    assert sorted(f for f, _ in flags_in_strings(source)) == ["--c_d", "--log-dir", "--no-such-flag", "--robot-mjcf"]
    assert "--no-such-flag" not in _all_options() and "--log-dir" in _all_options()


@pytest.mark.parametrize("name", ["train", "distill", "eval", "play"])
def test_threads_is_an_option_of_the_commands_that_run_a_policy(name):
    needed = {"train": [], "distill": ["--teacher", "t.pt"], "play": ["--checkpoint", "c.pt"]}
    argv = [name, "--threads", "3", *needed.get(name, ["--checkpoint", "c.pt", "--output", "e.json"])]
    assert build_parser().parse_args(argv).threads == 3
    assert build_parser().parse_args(argv[:1] + argv[3:]).threads is None


def test_threads_reaches_the_runner_config():
    args = build_parser().parse_args(["train", "--threads", "2", "--iterations", "1"])
    assert run_config(args).runner.threads == 2
    assert run_config(build_parser().parse_args(["train"])).runner.threads is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--robot-mjcf", "/nope.xml"], "error: --robot-mjcf: applies to --robot g1, not to humanoid28"),
        (
            ["--robot", "g1", "--robot-mjcf", "/nope.xml"],
            "error: /nope.xml: --robot-mjcf: expected a file, found nothing",
        ),
        (["--robot", "g1"], "error: --robot-mjcf: expected the G1's MJCF for --robot g1, found none"),
        (["--threads", "0"], "error: --threads: expected a whole number >= 1, found 0"),
    ],
)
def test_robot_mjcf_and_threads_mistakes_are_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MIMIC_RL_DATA", raising=False)
    with pytest.raises(SystemExit) if "--threads" in argv else _NoRaise():
        code = main(["train", "--iterations", "1", *argv])
        assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err
    for flag in FLAG.findall(err):  # the hint names flags that exist, and no path that does not
        assert flag in _all_options()
    assert "$MIMIC_RL_DATA" not in err


class _NoRaise:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
