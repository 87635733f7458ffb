"""torch.compile and xpkit: what runs eagerly while dynamo traces, and the test variant.

``compiled_whole`` is the test variant ``compile`` (declared functions under
``torch.compile``); ``is_compiling`` and ``eager_only`` keep xpkit's eager
loops out of a graph (`Adapter.compiling`, `Adapter.eager_only`).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from .._typing import UserFunction
    from ._base import LazyTags

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
    breaks the graph there, and makes it in the eager code after the break.
    """
    made = _EAGER.get(fn)
    if made is None:
        if torch.compiler.is_compiling():
            torch._dynamo.graph_break()  # (eager from here on)
        disable = torch.compiler.disable
        try:
            made = disable(fn, reason=reason)
        except TypeError:  # torch before 2.7 takes no reason
            made = disable(fn)
        _EAGER[fn] = made
    return cast("F", made)  # disable wraps fn with its signature


def compiled_whole(func: UserFunction, tags: LazyTags) -> UserFunction | None:
    """``func`` under ``torch.compile(fullgraph=True)``; None where it runs uncompiled.

    A graph break (a Python ``if`` on a tensor's value, ``float(x)``,
    ``.item()``) is then an error naming its cause. The ``aot_eager``
    backend captures the whole graph through AOTAutograd without generating
    kernels, so a test pays the capture, not a build.
    """
    if not tags.compiled:
        return None
    import torch

    compiled: UserFunction = torch.compile(func, fullgraph=True, backend="aot_eager")

    @functools.wraps(func)
    def run(*args: object, **kwargs: object) -> object:
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

    return run
