"""Names for what flows through xpkit's code, as array-api-extra's ``_typing``.

An array of one of seven libraries, a dtype or device of any of them, a
namespace, a function of the user's: none has one static type that every
library's stubs agree on (CuPy ships none), so each is `typing.Any` to a
type checker. Naming them says what a parameter holds, and keeps ``Any``
itself for the few true boundaries (the arguments of a user's function).
Public signatures that a type checker should follow more closely use
`xpkit.Backend`'s ``ArrayT`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeAlias

import numpy as np

__all__ = [
    "Array",
    "DType",
    "DaskClient",
    "Device",
    "HostArray",
    "JSONObject",
    "Namespace",
    "Narrowing",
    "NativeDevice",
    "ProgressBar",
    "TaskFuture",
    "UserFunction",
    "UserResult",
    "Value",
]

#: An array of any supported library (NumPy, torch, array-api-strict, CuPy,
#: JAX, Dask, ndonnx), or an object a function must first check is one.
Array: TypeAlias = Any
#: A NumPy array on the host (what every library's array becomes there).
HostArray: TypeAlias = np.ndarray[Any, Any]
#: A dtype: any library's dtype object, or its name.
DType: TypeAlias = Any
#: A device as the caller may give it: a string or any library's device object.
Device: TypeAlias = Any
#: A library's own device object (``torch.device``, a JAX ``Device``, ...).
NativeDevice: TypeAlias = Any
#: An Array-API namespace of any library (``array_api_compat.numpy``, ...).
Namespace: TypeAlias = Any
#: A Python value of the caller's, to be checked (a scalar, a shape, ...).
Value: TypeAlias = Any
#: A callable of the caller's (``fn`` of `map_batches`).
UserFunction: TypeAlias = Callable[..., Any]
#: What a user's function returned (``fn`` of `map_batches`): an array, or a
#: tuple, list or dict of arrays, until it is checked; also what `map_batches`
#: hands back in the same structure.
UserResult: TypeAlias = Any
#: A ``dask.distributed.Client`` (an executor of `map_batches`; distributed is
#: optional, and mypy checks xpkit without it).
DaskClient: TypeAlias = Any
#: A pool's handle on one task it runs (a ``concurrent.futures.Future`` of
#: joblib's workers, a ``distributed.Future``).
TaskFuture: TypeAlias = Any
#: How a library rounds float64 into a narrower float: once, to the nearest
#: ("exact", NumPy's); to float32 first, then again (torch: a value just
#: under float16's overflow threshold reaches it, and becomes inf); or so,
#: with float32's subnormals flushed to 0 (JAX's own arrays on XLA's CPU);
#: or that, but float16 rounded once (XLA's CPU where the processor
#: converts float64 to float16 itself: AVX512-FP16).
Narrowing: TypeAlias = Literal[
    "exact", "via float32", "via float32, flushed", "flushed, float16 once"
]
#: Plain data as ``--json`` prints it (str keys; numbers, strings, None,
#: lists and objects as values).
JSONObject: TypeAlias = dict[str, Any]


class ProgressBar(Protocol):
    """A progress bar (tqdm's, or a test's): advanced by items, closed at the end."""

    def update(self, n: int) -> object:
        """Advance the bar by ``n`` items."""

    def close(self) -> None:
        """Finish the bar."""
