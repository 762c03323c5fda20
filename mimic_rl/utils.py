"""Small helpers shared across layers."""

from __future__ import annotations

import importlib
import inspect
import itertools
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any


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


def check_kwargs(
    fns: Callable[..., Any] | tuple[Callable[..., Any], ...],
    kwargs: dict[str, Any],
    where: str,
    reserved: tuple[str, ...] = (),
) -> None:
    """Raise ``ValueError`` naming any key of ``kwargs`` that none of ``fns`` names (or that the caller sets itself).

    Pass a class's ``__init__`` together with the ``__init__`` its ``**kwargs`` are forwarded to.
    """
    fns = fns if isinstance(fns, tuple) else (fns,)
    allowed: set[str] = set()
    for fn in fns:
        params = inspect.signature(fn).parameters
        allowed |= {n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    allowed -= {"self", *reserved}
    for key in kwargs:
        if key in reserved:
            raise ValueError(f"{where}: {key!r} is set by the builder and must not appear in the config")
        if key not in allowed:
            raise ValueError(f"{where}: unknown key {key!r}; allowed keys are {sorted(allowed)}")


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
