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
from typing import Any, TypeAlias

import numpy as np

__all__ = [
    "Array",
    "DType",
    "Device",
    "HostArray",
    "Namespace",
    "NativeDevice",
    "UserFunction",
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
