"""The package's layers, read from its source: every ``import`` (inside functions and under ``TYPE_CHECKING`` too).

- ``mimic_rl/config.py`` and ``mimic_rl/runners/`` name no backend (``mimic_rl.envs.<backend>``) and no simulator;
  backends are reached through ``mimic_rl.envs.registry``.
- ``mimic_rl/config.py`` imports no algorithm and no env module: those layers register their config classes and
  validators with it.
- Only ``mimic_rl/envs/<backend>/`` imports ``mimic_rl.envs.<backend>``: no backend imports another.
- The import graph has no cycle.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = "mimic_rl"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

BACKENDS = ("mimic_rl.envs.mujoco", "mimic_rl.envs.mjlab", "mimic_rl.envs.isaaclab")
"""The modules (and packages) that are a backend."""
SIMULATORS = ("mujoco", "mujoco_warp", "warp", "mjlab", "isaaclab", "isaaclab_rl", "isaacsim")
"""Top-level modules of the simulators the backends wrap."""
CYCLES_ALLOWED_INSIDE: tuple[str, ...] = ()
"""Packages whose internal import edges the cycle check leaves out: none."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _imported_names(path: Path, module: str) -> set[str]:
    """Every module name ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), at any depth of its code."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, modules: set[str]) -> str:
    """A package name as the module it is in (``a.b.C`` -> ``a.b``); other names as they are."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return name


def import_graph() -> dict[str, set[str]]:
    """Module -> every module it imports: the package's own (``from a import b``: ``a.b`` when it is a module, else
    ``a``) and third-party ones by their imported name."""
    sources = _sources()
    modules = set(sources)
    return {
        name: {_resolve(t, modules) for t in _imported_names(path, name)} - {name} for name, path in sources.items()
    }


def internal_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The package's modules only."""
    return {name: {t for t in imported if t in graph} for name, imported in graph.items()}


def _violations(graph: dict[str, set[str]], importers: str, forbidden) -> list[str]:
    return sorted(
        f"{name} imports {target}"
        for name, imported in graph.items()
        if _within(name, importers)
        for target in imported
        if forbidden(target)
    )


def _names_backend(target: str) -> bool:
    return any(_within(target, b) for b in BACKENDS) or target.split(".")[0] in SIMULATORS


def test_config_and_runners_name_no_backend() -> None:
    graph = import_graph()
    bad = _violations(graph, "mimic_rl.config", _names_backend)
    bad += _violations(graph, "mimic_rl.runners", _names_backend)
    assert not bad, "reach a backend through mimic_rl.envs.registry:\n" + "\n".join(bad)


def test_config_imports_no_algorithm_or_env() -> None:
    layers = ("mimic_rl.algorithms", "mimic_rl.envs")
    bad = _violations(import_graph(), "mimic_rl.config", lambda t: any(_within(t, x) for x in layers))
    assert not bad, "register with mimic_rl.config instead:\n" + "\n".join(bad)


def test_only_a_backend_imports_itself() -> None:
    bad = [
        f"{name} imports {target}"
        for name, imported in import_graph().items()
        for target in imported
        for b in BACKENDS
        if _within(target, b) and not _within(name, b)
    ]
    assert not bad, "a backend is reached through mimic_rl.envs.registry, and shares code via mimic_rl.envs:\n" + (
        "\n".join(sorted(bad))
    )


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_find_cycles_finds_a_cycle() -> None:
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    edges = internal_graph(import_graph())
    for name, targets in edges.items():
        for package in CYCLES_ALLOWED_INSIDE:
            if _within(name, package):
                targets -= {t for t in targets if _within(t, package)}
    cycles = find_cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_config_alone_checks_the_algorithm_sections() -> None:
    """With only ``mimic_rl.config`` imported, unknown keys of the algorithm, actor and critic sections still fail at
    load time (the built-in validators and env configs are found by name on first use)."""
    code = (
        "import sys\n"
        "from mimic_rl.config import ConfigError, load_config\n"
        "assert not any(m.startswith(('mimic_rl.algorithms', 'mimic_rl.envs')) for m in sys.modules)\n"
        "for section in ('algorithm', 'actor', 'critic'):\n"
        "    try:\n"
        "        load_config({section: {'no_such_key': 1}})\n"
        "    except ConfigError as exc:\n"
        "        assert 'no_such_key' in str(exc), exc\n"
        "    else:\n"
        "        raise SystemExit(section + ': no error')\n"
        "print(type(load_config({}).env).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "TrackingEnvConfig"


@pytest.mark.parametrize("section", ["algorithm", "actor", "critic"])
def test_unknown_section_key_is_a_config_error(section: str) -> None:
    from mimic_rl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="no_such_key"):
        load_config({section: {"no_such_key": 1}})
