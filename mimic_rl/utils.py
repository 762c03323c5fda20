"""Small helpers shared across layers."""

from __future__ import annotations

import difflib
import importlib
import inspect
import itertools
import math
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mimic_rl.errors import ConfigError

FPS_RANGE = (1.0, 1000.0)
"""Frame rates outside this range are an error (mocap is captured at 30-480 fps; policies run at 25-200 Hz)."""


@dataclass(frozen=True)
class Range:
    """The allowed values of a numeric config field, as an annotation (``num_envs: Annotated[int, Range(1)]``) that
    ``mimic_rl.config`` checks when it loads a config; ``None`` bounds are open."""

    low: float | None = None
    high: float | None = None
    low_exclusive: bool = False

    def describe(self) -> str:
        """``>= 1``, ``> 0``, ``between 1 and 1000``, ... (for messages)."""
        if self.low is not None and self.high is not None:
            return f"a number between {self.low:g} and {self.high:g}"
        if self.low is not None:
            return f"a number {'>' if self.low_exclusive else '>='} {self.low:g}"
        return f"a number <= {self.high:g}"

    def check(self, value: float, path: str) -> None:
        """Raise ``ConfigError`` at ``path`` when ``value`` is not finite or out of range."""
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if ok and self.low is not None:
            ok = value > self.low if self.low_exclusive else value >= self.low
        if ok and self.high is not None:
            ok = value <= self.high
        if not ok:
            raise ConfigError(f"{path}: expected {self.describe()}, found {value!r}")


def available_devices() -> list[str]:
    """The torch devices this machine can run on: ``cpu`` and ``cuda:<i>`` for each visible GPU."""
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu", *(f"cuda:{i}" for i in range(gpus))]


def check_device(name: str, where: str) -> str:
    """``name`` if torch can run on that device here; else ``DeviceError`` (at ``where``, e.g. ``--device``) listing
    the available ones and suggesting the CPU."""
    import torch

    from mimic_rl.errors import DeviceError

    available = available_devices()
    fix = f"available here: {', '.join(available)}; pass --device cpu (runner.device in a config)"
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(f"{where}: expected a device such as cpu, cuda or cuda:0, found {name!r}; {fix}") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            build = "a CPU-only build of torch" if torch.version.cuda is None else "no CUDA GPU is visible"
            raise DeviceError(f"{where}: expected an available device, found {name!r}, but {build}; {fix}")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(f"{where}: expected an available device, found {name!r} (no such GPU); {fix}")
    elif device.type != "cpu":
        raise DeviceError(f"{where}: expected cpu or cuda, found {name!r} (not supported); {fix}")
    return name


def resolve_callable(spec: str | Callable[..., Any], what: str = "callable") -> Callable[..., Any]:
    """Return ``spec`` if it is callable, else import it from a ``"module:function"`` (or ``"module.function"``) string.

    Resolve once at construction time and keep the result; never resolve on a hot path.
    """
    if callable(spec):
        return spec
    if not isinstance(spec, str) or not spec:
        raise TypeError(f"{what}: expected a callable or a 'module:function' string, got {spec!r}")
    if ":" in spec:
        module_name, _, attr_path = spec.partition(":")
    else:
        module_name, _, attr_path = spec.rpartition(".")
    if not module_name or not attr_path:
        raise ValueError(f"{what}: cannot parse {spec!r}; write it as 'package.module:function'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"{what}: cannot import module {module_name!r} from {spec!r}: {exc}") from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise AttributeError(
                f"{what}: module {module_name!r} has no attribute {attr_path!r} (from {spec!r})"
            ) from exc
    if not callable(obj):
        raise TypeError(f"{what}: {spec!r} resolved to a non-callable {type(obj).__name__}")
    return obj


def accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` can be called with keyword argument ``name`` (explicitly or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def unknown_key_message(where: str, key: str, allowed: Iterable[str]) -> str:
    """``<where>.<key>: unknown key; did you mean <where>.<closest>?`` (``difflib``), or the valid keys when none is
    close; ``where`` is the dotted path of the section (``""`` at the top level)."""
    allowed = sorted(str(a) for a in allowed)
    prefix = f"{where}." if where else ""
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    hint = f"did you mean {prefix}{close[0]}?" if close else f"valid keys: {', '.join(allowed)}"
    return f"{prefix}{key}: unknown key; {hint}"


def check_kwargs(
    fns: Callable[..., Any] | tuple[Callable[..., Any], ...],
    kwargs: dict[str, Any],
    where: str,
    reserved: tuple[str, ...] = (),
) -> None:
    """Raise ``ConfigError`` naming any key of ``kwargs`` that none of ``fns`` names (or that the caller sets itself),
    or whose value does not fit the parameter's annotation (``int``, ``float``, ``str``, ``bool``, ``Sequence[int]``,
    ``dict``, and their unions with ``None``; other annotations are not checked).

    Pass a class's ``__init__`` together with the ``__init__`` its ``**kwargs`` are forwarded to.
    """
    fns = fns if isinstance(fns, tuple) else (fns,)
    params: dict[str, inspect.Parameter] = {}
    for fn in fns:
        for n, p in inspect.signature(fn).parameters.items():
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                params.setdefault(n, p)
    allowed = set(params) - {"self", *reserved}
    for key, value in kwargs.items():
        path = f"{where}[{key!r}]" if where.endswith("]") else f"{where}.{key}"
        if key in reserved:
            raise ConfigError(f"{path}: set by the builder, not a config key; remove it")
        if key not in allowed:
            if where.endswith("]"):
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                hint = f"did you mean {where}[{close[0]!r}]?" if close else f"valid keys: {', '.join(sorted(allowed))}"
                raise ConfigError(f"{path}: unknown key; {hint}")
            raise ConfigError(unknown_key_message(where, key, allowed))
        kinds = annotation_kinds(params[key].annotation)
        if kinds is not None and not any(_is_kind(value, kind) for kind in kinds):
            raise ConfigError(f"{path}: expected {describe_kinds(kinds)}, found {value!r}")


_KINDS = {
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
    "str": "a string",
    "None": "null",
    "Sequence[int]": "a list of whole numbers",
    "list[int]": "a list of whole numbers",
    "tuple[int, ...]": "a list of whole numbers",
    "Sequence[float]": "a list of numbers",
    "list[float]": "a list of numbers",
    "tuple[float, ...]": "a list of numbers",
    "list[str]": "a list of strings",
    "Sequence[str]": "a list of strings",
    "dict": "a mapping",
    "Mapping": "a mapping",
}


def annotation_kinds(annotation: Any) -> list[str] | None:
    """The kinds of value a parameter annotated ``annotation`` takes (``["a number", "null"]`` for ``float | None``),
    or None when some alternative is not one this module knows (then nothing is checked)."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if not text:
        return None
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    kinds = []
    for part in parts:
        base = re.sub(r"^(typing\.|collections\.abc\.)", "", part)
        kind = _KINDS.get(base) or (_KINDS["dict"] if re.match(r"^(dict|Mapping)\[", base) else None)
        if kind is None:
            return None
        kinds.append(kind)
    return kinds


def describe_kinds(kinds: list[str]) -> str:
    """``a number or null``, ``a list of whole numbers``, ... (for messages)."""
    return " or ".join(dict.fromkeys(kinds))


def _is_number(value: Any, whole: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) if whole else math.isfinite(value)


def _is_kind(value: Any, kind: str) -> bool:
    """Whether ``value`` (as YAML gives it) is of ``kind`` (one of the descriptions of ``_KINDS``)."""
    checks: dict[str, Callable[[Any], bool]] = {
        "true or false": lambda v: isinstance(v, bool),
        "a whole number": lambda v: _is_number(v, whole=True),
        "a number": _is_number,
        "a string": lambda v: isinstance(v, str),
        "null": lambda v: v is None,
        "a mapping": lambda v: isinstance(v, dict),
        "a list of whole numbers": lambda v: isinstance(v, list | tuple) and all(_is_number(x, True) for x in v),
        "a list of numbers": lambda v: isinstance(v, list | tuple) and all(_is_number(x) for x in v),
        "a list of strings": lambda v: isinstance(v, list | tuple) and all(isinstance(x, str) for x in v),
    }
    return checks[kind](value)


_COPIES = itertools.count()


def _own_code(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a function or a bound method) running a code object of its own: torch.compile keeps its compiled
    graphs per code object, so this copy's cache holds only what this one caller compiles."""
    bound = getattr(fn, "__self__", None)
    f = getattr(fn, "__func__", fn)
    name = f"{f.__name__}__{next(_COPIES)}"
    names = {"co_name": name, **({"co_qualname": name} if sys.version_info >= (3, 11) else {})}
    code = f.__code__.replace(**names)
    copy = types.FunctionType(code, f.__globals__, name, f.__defaults__, f.__closure__)
    copy.__kwdefaults__ = f.__kwdefaults__
    return types.MethodType(copy, bound) if bound is not None else copy


def compiled_or_eager(
    fn: Callable[..., Any], enabled: bool, options: dict[str, Any] | None = None, hint: str = ""
) -> Callable[..., Any]:
    """``fn`` under ``torch.compile`` with fixed shapes when ``enabled``; if the compiler backend fails (no C++
    compiler, ...), warn once (adding ``hint``) and run ``fn`` eagerly from then on, with the same results.

    For callers whose inputs never change shape, dtype or device and whose constants never change (a fixed-size env
    built once): ``fn`` gets a code object of its own, and after three warm-up calls only the guards that tell its
    compiled graphs apart are evaluated (``skip_guard_eval_unsafe``; the guards of a large method cost ~150 us per
    call on a CPU). A call that needs a new graph (say, another grad mode) is compiled with full guards.
    """
    if not enabled:
        return fn
    import torch

    state: dict[str, Any] = {"fn": torch.compile(_own_code(fn), dynamic=False, options=options), "calls": 0}

    def call(*args: Any) -> Any:
        try:
            if state["calls"] < 3:  # warm-up with every guard (the calling contexts show up)
                state["calls"] += 1
                return state["fn"](*args)
            try:
                with torch.compiler.set_stance(skip_guard_eval_unsafe=True):
                    return state["fn"](*args)
            except RuntimeError as error:  # a new context (grad mode, ...) needs its own graph: compile it, guarded
                if "skip_guard_eval_unsafe" not in str(error):
                    raise
                return state["fn"](*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:
            inner = error.inner_exception
            warnings.warn(
                f"torch.compile failed ({type(inner).__name__}: {str(inner)[:200]}); running "
                f"{getattr(fn, '__name__', 'the function')} eagerly. {hint}",
                RuntimeWarning,
                stacklevel=2,
            )
            state["fn"] = fn
            return fn(*args)

    return call
