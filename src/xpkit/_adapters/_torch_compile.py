"""torch's test variant ``compile``: declared functions under ``torch.compile``."""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._typing import UserFunction
    from ._base import LazyTags

__all__ = ["compiled_whole"]


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
