"""Typing cases that need only the core dependencies (NumPy)."""

from __future__ import annotations

from typing import Any, assert_type

import numpy as np
import user_lib

import xpkit
from xpkit import Backend, BackendName

NDArray = np.ndarray[Any, Any]

# -- the array type follows the name -------------------------------------------
b = Backend("numpy")
assert_type(b, Backend[NDArray])
assert_type(Backend(), Backend[NDArray])
assert_type(Backend("numpy", device="cpu"), Backend[NDArray])
assert_type(Backend("auto"), Backend[Any])
name: BackendName = "numpy"
some: Backend[Any] = Backend(name)  # a union of names: one of the libraries

# -- methods are typed in the array type -----------------------------------------
x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
assert_type(x, NDArray)
assert_type(b.asarray(x, dtype="float32", device="cpu"), NDArray)
assert_type(b.asarray_like([1, 2], x), NDArray)
assert_type(b.copy(x), NDArray)
assert_type(b.full((2, 2), 1.0), NDArray)
assert_type(b.full_like(x, 0.0), NDArray)
assert_type(b.ones_like(x), NDArray)
assert_type(b.zeros_like(x, shape=(3,)), NDArray)
assert_type(b.to_device(x), NDArray)
assert_type(b.to_gpu(x), NDArray)
assert_type(b.to_cpu(x), NDArray)
assert_type(b.to_numpy(x), NDArray)
assert_type(b.move(np.ones(3), copy=True), NDArray)
assert_type(b.matmul(x, x), NDArray)
assert_type(b.sort(x, axis=0), NDArray)
assert_type(b.expand_dims(x, 0), NDArray)
assert_type(b.flatnonzero(x), NDArray)
assert_type(b.concatenate([x, x], axis=1), NDArray)
assert_type(b.svd(x), tuple[NDArray, NDArray, NDArray])
U, s, Vt = b.svd(x, full_matrices=True)
assert_type(s, NDArray)
assert_type(b.dtype_to_str(x.dtype), str | None)
assert_type(b.name, str)
assert_type(b.device, str)
assert_type(b.library, str)
assert_type(b.dtypes, frozenset[str])
assert_type(b.capabilities, frozenset[str])

# -- check_arrays: arrays and host data, then None, then anything ---------------
assert_type(b.check_arrays(x, [1.0, 2.0], 3, np.float32(1.0)), list[NDArray])
assert_type(b.check_arrays(x, [[1, 2], [3, 4]], convert=True), list[NDArray])
assert_type(b.check_arrays(x, None), list[NDArray | None])
X2, y2 = b.check_arrays(x, x)
assert_type(X2, NDArray)

# -- b.create and b.xp ------------------------------------------------------------
assert_type(b.create.zeros((2, 3)), NDArray)
assert_type(b.create.arange(10), NDArray)
xp = b.xp
assert_type(xp.asarray([1.0]), NDArray)
assert_type(xp.zeros((2, 2), dtype=xp.float32), NDArray)
assert_type(xp.permute_dims(x, (1, 0)), NDArray)
assert_type(xp.astype(x, xp.float64), NDArray)
assert_type(xp.matmul(x, x), NDArray)
assert_type(xp.reshape(xp.take(x, xp.arange(2)), (-1,)), NDArray)
assert_type(xp.max(xp.abs(x), axis=1), NDArray)
assert_type(xp.linalg.svd(x, full_matrices=False), tuple[NDArray, NDArray, NDArray])
assert_type(xp.nonzero(x), tuple[NDArray, ...])
assert_type(xp.pi, float)

# -- from_arrays infers the type from its arguments --------------------------------
assert_type(Backend.from_arrays(x), Backend[NDArray])
assert_type(Backend.from_arrays(x, 1.0, None), Backend[NDArray])
assert_type(Backend.from_arrays(), Backend[NDArray])  # no arrays: NumPy
assert_type(Backend.from_arrays(1.0, None), Backend[NDArray])

# -- calls from user code in another module --------------------------------------
rng = np.random.default_rng(0)
Xh: NDArray = rng.standard_normal((20, 3))
yh: NDArray = rng.standard_normal((20, 1))
assert_type(user_lib.ridge_svd(Xh, yh, 1.0, b), NDArray)
assert_type(user_lib.standardize(Xh), NDArray)
assert_type(user_lib.host_result(Xh, b), NDArray)
assert_type(user_lib.any_backend(b), Backend[Any])
assert_type(xpkit.resolve_backend("numpy"), Backend[Any])
