"""Backends: the config imports none, the registry builds the one a config names, and the package has no import
cycle; simulators that are not installed give one line and exit code 2."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from mimic_rl.config import ConfigError, load_config, to_dict
from mimic_rl.envs.registry import backend_names, env_config_class

PACKAGE = Path(__file__).resolve().parent.parent / "mimic_rl"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_the_config_imports_no_backend():
    """(``import mimic_rl`` itself imports the ``mujoco`` bindings with OpenGL off, see ``mimic_rl/__init__.py``.)"""
    code = (
        "import sys, mimic_rl.config as c; cfg = c.load_config({'env': {'backend': 'mjlab', 'task': 'T'}}); "
        "print(sorted(m for m in sys.modules if m in ('mjlab', 'isaaclab') or m.startswith("
        "('mimic_rl.envs.mujoco', 'mimic_rl.envs.mjlab.env', 'mimic_rl.envs.isaaclab'))))"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_config_names_its_backend_and_round_trips():
    assert backend_names() == ["isaaclab", "mjlab", "mujoco", "mujoco_amp_walk"]
    cfg = load_config({"env": {"backend": "mjlab", "task": "Mjlab-Tracking-Flat-Unitree-G1", "num_envs": 8}})
    assert type(cfg.env) is env_config_class("mjlab") and cfg.env.num_envs == 8
    assert load_config(to_dict(cfg)).env == cfg.env
    walk = load_config("amp_walk")  # a subclass of the tracking env's config, with its own backend name
    assert type(walk.env) is env_config_class("mujoco_amp_walk") and walk.env.command.speed_range == (1.0, 2.0)
    assert load_config(to_dict(walk)).env == walk.env
    assert load_config("tracking_ppo").env.backend == "mujoco"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"backend": "bullet"},
            "env.backend: expected one of ['isaaclab', 'mjlab', 'mujoco', 'mujoco_amp_walk'], found 'bullet'",
        ),
        ({"backend": "mjlab", "robot": "g1"}, "env.robot: unknown key; valid keys: "),
        ({"backend": "mjlab", "num_envs": 0}, "env.num_envs"),
    ],
)
def test_bad_env_sections_name_the_key(env, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_config({"env": env})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_time_nodes(body: list[ast.stmt]):
    """The statements that run when a module is imported: not function bodies, not ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _import_time_nodes(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _import_time_nodes(getattr(node, field, []) or [])


def _all_nodes(body: list[ast.stmt]):
    """Every statement, function bodies included, except those under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _all_nodes(node.orelse)
            continue
        yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            yield from _all_nodes(getattr(node, field, []) or [])


def _import_time_edges(path: Path, name: str, deferred: bool = False) -> set[str]:
    """Package modules that ``path`` imports when it is imported (module level; not under TYPE_CHECKING), and with
    ``deferred`` also those it imports inside functions."""
    tree = ast.parse(path.read_text())
    edges = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for sub in (_all_nodes if deferred else _import_time_nodes)(tree.body):
        if isinstance(sub, ast.Import):
            edges |= {a.name for a in sub.names if a.name.startswith("mimic_rl")}
        elif isinstance(sub, ast.ImportFrom):
            base = sub.module or ""
            if sub.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - sub.level + 1], base]).strip(".")
            if base.startswith("mimic_rl"):
                edges.add(base)
    return edges


def _graph(modules: dict[str, Path], deferred: bool = False) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        targets = set()
        for edge in _import_time_edges(path, name, deferred):
            while edge and edge not in modules:  # "from pkg.mod import name" -> pkg.mod
                edge = edge.rpartition(".")[0]
            if edge and edge != name:
                targets.add(edge)
        graph[name] = targets
    return graph


def _assert_acyclic(graph: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and not name_is_parent(nxt, node):
                raise AssertionError(f"import cycle: {' -> '.join([*stack, node, nxt])}")
            if nxt not in state:
                visit(nxt, [*stack, node])
        state[node] = 2

    def name_is_parent(package: str, module: str) -> bool:
        return module.startswith(package + ".")  # a package's __init__ importing its own submodules

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_the_package_import_graph_has_no_cycle():
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    _assert_acyclic(_graph(modules))
    # The learning core breaks no cycle with an import inside a function either (algorithm <-> builder did)
    core = ("mimic_rl.algorithms", "mimic_rl.storage", "mimic_rl.models")
    _assert_acyclic(
        {k: {t for t in v if t.startswith(core)} for k, v in _graph(modules, True).items() if k.startswith(core)}
    )
    result = _run(
        "import importlib, pkgutil, mimic_rl\n"
        "for m in pkgutil.walk_packages(mimic_rl.__path__, 'mimic_rl.'):\n"
        "    if not m.name.startswith(('mimic_rl.envs.mjlab.env', 'mimic_rl.envs.mjlab.evaluation')):\n"
        "        importlib.import_module(m.name)"
    )
    assert result.returncode == 0, result.stderr  # every module imports in a fresh interpreter


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("mujoco:task", "error: --env: expected mujoco, mjlab:<task id> or isaaclab:<task id>, found 'mujoco:task'"),
        ("mjlab", "error: --env: expected mujoco, mjlab:<task id> or isaaclab:<task id>, found 'mjlab'"),
    ],
)
def test_env_option_errors_are_one_line(tmp_path, env, message):
    result = subprocess.run(
        [sys.executable, "-m", "mimic_rl.cli", "train", "--env", env, "--log-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr


def test_isaaclab_missing_is_one_line(tmp_path):
    """Without Isaac Lab, ``--env isaaclab:...`` is one line with the install command (with it,
    ``tests/test_isaaclab_task.py`` runs it)."""
    if importlib.util.find_spec("isaaclab") is not None:
        pytest.skip("Isaac Lab is installed here: tests/test_isaaclab_task.py runs it")
    result = subprocess.run(
        [sys.executable, "-m", "mimic_rl.cli", "train", "--env", "isaaclab:Isaac-Humanoid", "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: env.backend isaaclab: Isaac Lab is not installed"), result.stderr
    assert "python tools/install_isaaclab.py" in result.stderr and result.stderr.count("\n") == 1


def test_mjlab_missing_is_one_line(tmp_path):
    try:
        import mjlab  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("mjlab is installed here: tests/test_mjlab.py runs it")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mimic_rl.cli",
            "train",
            "--env",
            "mjlab:Mjlab-Tracking-Flat-Unitree-G1",
            "--log-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: env.backend mjlab: mjlab is not installed"), result.stderr
    assert 'pip install -e ".[mjlab]"' in result.stderr and result.stderr.count("\n") == 1


def test_set_env_keys_apply_to_the_env_that_env_picks():
    """``--env`` replaces the config's env section by the backend's defaults; the ``--set env.*`` of the command line
    apply to that section (before, they were dropped silently), and a key the backend does not have is named."""
    from mimic_rl.cli import build_parser
    from mimic_rl.errors import ConfigError
    from mimic_rl.run_config import run_config

    def config(*argv: str):
        return run_config(build_parser().parse_args(["train", "--env", "mjlab:MimicRL-Tracking-G1", *argv]))

    cfg = config("--set", "env.num_future_frames=3", "--set", "algorithm.gamma=0.98")
    assert cfg.env.backend == "mjlab" and cfg.env.num_future_frames == 3 and cfg.algorithm["gamma"] == 0.98
    with pytest.raises(ConfigError, match=r"^--set env.robot=g1: env.robot: unknown key"):
        config("--set", "env.robot=g1")
