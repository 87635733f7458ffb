"""A user's library: code written once against ``Backend[A]``, for any A.

Imported by the other cases (a separate module, as a user's package would
be): the array type flows through the user's own generic functions.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

import xpkit

A = TypeVar("A")


def ridge_svd(X: A, y: A, alpha: float, backend: xpkit.Backend[A]) -> A:
    """The README's ridge regression, typed: the result is the backend's type."""
    xp = backend.xp
    Xc, yc = backend.check_arrays(X, y)
    U, s, Vt = backend.svd(Xc)
    d = xp.divide(s, xp.add(xp.multiply(s, s), alpha))
    Uty = backend.matmul(xp.permute_dims(U, (1, 0)), yc)
    dUty = xp.multiply(xp.expand_dims(d, axis=1), Uty)
    return backend.matmul(xp.permute_dims(Vt, (1, 0)), dUty)


def standardize(x: A) -> A:
    """Works on whatever library ``x`` belongs to (found by from_arrays)."""
    b = xpkit.Backend.from_arrays(x)
    xp = b.xp
    mean = xp.mean(x, axis=0, keepdims=True)
    std = xp.std(x, axis=0, keepdims=True)
    return xp.divide(xp.subtract(x, mean), std)


def host_result(x: A, backend: xpkit.Backend[A]) -> np.ndarray[Any, Any]:
    """Back to NumPy, whatever the library."""
    return backend.to_numpy(backend.xp.sum(x, axis=0))


def any_backend(backend: xpkit.Backend) -> xpkit.Backend:
    """A bare ``Backend`` annotation is ``Backend[Any]`` (no type argument needed)."""
    return backend
