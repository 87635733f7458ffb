"""torch.compile and xpkit: what runs eagerly while dynamo traces, and the test variant.

``compiled_whole`` is the test variant ``compile`` (declared functions under
``torch.compile``); ``is_compiling`` and ``eager_only`` keep xpkit's eager
loops out of a graph (`Adapter.compiling`, `Adapter.eager_only`).
"""

from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from .._typing import UserFunction
    from ._lazy_tags import LazyTags

__all__ = ["compiled_whole", "eager_only", "is_compiling"]

F = TypeVar("F", bound=Callable[..., object])

#: ``torch.compiler.is_compiling``, once looked up (asked on every batching
#: call while torch is imported).
_IS_COMPILING: list[Callable[[], bool]] = []
#: Each function's eager version (`eager_only`), made once.
_EAGER: dict[Callable[..., object], Callable[..., object]] = {}


def is_compiling(torch: Callable[[], ModuleType]) -> bool:
    """``torch.compiler.is_compiling()``: dynamo is tracing the caller.

    ``torch`` gives the module, asked once.
    """
    if not _IS_COMPILING:
        _IS_COMPILING.append(torch().compiler.is_compiling)
    return bool(_IS_COMPILING[0]())


def eager_only(torch: ModuleType, fn: F, reason: str) -> F:
    """``torch.compiler.disable(fn, reason=reason)``, made once per function.

    Asked first while dynamo traces (which cannot trace ``disable``), it
    breaks the graph there, giving ``reason`` (the error under
    ``fullgraph=True``), and makes it in the eager code after the break.
    """
    made = _EAGER.get(fn)
    if made is None:
        if torch.compiler.is_compiling():
            _graph_break(torch, reason)  # (eager from here on)
        disable = torch.compiler.disable
        try:
            made = disable(fn, reason=reason)
        except TypeError:  # torch before 2.7 takes no reason
            made = disable(fn)
        _EAGER[fn] = made
    return cast("F", made)  # disable wraps fn with its signature


def _graph_break(torch: ModuleType, reason: str) -> None:
    """``torch._dynamo.graph_break(reason)`` (torch before 2.7 takes no reason)."""
    try:
        torch._dynamo.graph_break(msg=reason)
    except TypeError:
        torch._dynamo.graph_break()


def compiled_whole(func: UserFunction, tags: LazyTags) -> UserFunction | None:
    """``func`` under ``torch.compile(fullgraph=True)``; None where it runs uncompiled.

    A graph break (a Python ``if`` on a tensor's value, ``float(x)``,
    ``.item()``) is then an error naming its cause. The ``aot_eager``
    backend captures the whole graph through AOTAutograd without generating
    kernels, so a test pays the capture, not a build.

    Across a suite: Dynamo keeps its compiled graphs, and counts them
    against its recompile limit (8), on the function's code object, which
    outlives each test, so the ninth test that called ``func`` with new
    shapes or arguments failed ``FailOnRecompileLimitHit``. At that limit
    ``func`` is compiled afresh from a copy of its code (a code object
    with no cache: nothing process-wide is reset) and the call retried.
    Where ``func`` raises (a check of its input), Dynamo raised its own
    error instead ("Observed exception"); see `_own_exceptions`.
    """
    if not tags.compiled:
        return None
    import torch

    if func not in _COMPILED:
        _COMPILED[func] = _compile(func)

    @functools.wraps(func)
    def run(*args: object, **kwargs: object) -> object:
        try:
            return _own_exceptions(func, _COMPILED[func], args, kwargs)
        except torch._dynamo.exc.FailOnRecompileLimitHit:
            fresh = _fresh_code(func)
            if fresh is None:  # (not a Python function: nothing to copy)
                raise
            _COMPILED[func] = _compile(fresh)
        return _own_exceptions(func, _COMPILED[func], args, kwargs)

    return run


#: Each declared function's compiled version, kept across tests (its cache
#: is Dynamo's, on the code object compiled).
_COMPILED: dict[UserFunction, UserFunction] = {}


def _compile(func: UserFunction) -> UserFunction:
    import torch

    compiled: UserFunction = torch.compile(func, fullgraph=True, backend="aot_eager")
    return compiled


def _own_exceptions(
    func: UserFunction,
    compiled: UserFunction,
    args: tuple[object, ...],
    kwargs: dict[str, object],
) -> object:
    """``compiled(*args, **kwargs)``, or the exception ``func`` raises eagerly.

    Where Dynamo cannot trace a call (``func`` raises: "Observed
    exception", or an f-string of a traced number in its message), the
    call runs eagerly: the function's own exception, type and message,
    reaches the test. Where the eager call returns, Dynamo's error is
    raised: a graph break the variant is there to report.
    """
    import torch

    try:
        # Dynamo's advisory on tracing through array_api_compat's
        # lru_cache-d type checks (is_torch_array, ...): correct here, and an
        # error under a test suite's filterwarnings = error.
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message="Dynamo detected a call to a `functools.lru_cache`",
                category=UserWarning,
            )
            return compiled(*args, **kwargs)
    except torch._dynamo.exc.TorchDynamoException as exc:
        refused = exc
    func(*args, **kwargs)
    raise refused


def _fresh_code(func: UserFunction) -> UserFunction | None:
    """A copy of Python function ``func`` on a copy of its code object (no Dynamo cache)."""
    if not isinstance(func, types.FunctionType):
        return None
    fresh = types.FunctionType(
        func.__code__.replace(),
        func.__globals__,
        func.__name__,
        func.__defaults__,
        func.__closure__,
    )
    fresh.__kwdefaults__ = func.__kwdefaults__
    fresh.__qualname__ = func.__qualname__
    fresh.__module__ = func.__module__
    fresh.__dict__.update(func.__dict__)
    return fresh
