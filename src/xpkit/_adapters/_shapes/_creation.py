"""The standard's creation functions on shape-only arrays.

A created array is charged like any other. Data the caller wrote out (a list,
a scalar) becomes an array of its shape; an array of a library that ``fn``
closes over is an input, charged nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .._trace import Trace, active_trace
from . import _rules as rules
from ._array import ShapeArray, astype, copy_of, lift, made

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = [
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "full",
    "full_like",
    "linspace",
    "meshgrid",
    "ones",
    "ones_like",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]


def _name(trace: Trace, dtype: Value, default: str) -> str:
    return rules.dtype_name_of(trace, dtype) or default


def _new(shape: Value, dtype: Value, default: str | None = None) -> ShapeArray:
    trace = active_trace()
    name = _name(trace, dtype, default or trace.profile.default_float)
    return made(trace, rules.as_shape(shape), name)


def zeros(shape: Value, *, dtype: Value = None, device: Value = None) -> ShapeArray:
    """An array of zeros."""
    return _new(shape, dtype)


def ones(shape: Value, *, dtype: Value = None, device: Value = None) -> ShapeArray:
    """An array of ones."""
    return _new(shape, dtype)


def empty(shape: Value, *, dtype: Value = None, device: Value = None) -> ShapeArray:
    """An uninitialised array."""
    return _new(shape, dtype)


def _fill_dtype(fill_value: Value) -> str | None:
    trace = active_trace()
    if isinstance(fill_value, bool):
        return "bool"
    if isinstance(fill_value, int):
        return trace.profile.default_int
    if isinstance(fill_value, complex):
        return trace.profile.default_complex
    return None


def full(
    shape: Value, fill_value: Value, *, dtype: Value = None, device: Value = None
) -> ShapeArray:
    """An array filled with ``fill_value``."""
    return _new(shape, dtype, _fill_dtype(fill_value))


def _like(x: Value, dtype: Value, shape: Value = None) -> ShapeArray:
    trace = active_trace()
    a = lift(trace, x)
    target = a.shape if shape is None else rules.as_shape(shape)
    return made(trace, target, _name(trace, dtype, a._name), (a,))


def zeros_like(
    x: Value, /, *, dtype: Value = None, device: Value = None, **kw: Value
) -> ShapeArray:
    """Zeros shaped like ``x``."""
    return _like(x, dtype, kw.get("shape"))


def ones_like(
    x: Value, /, *, dtype: Value = None, device: Value = None, **kw: Value
) -> ShapeArray:
    """Ones shaped like ``x``."""
    return _like(x, dtype, kw.get("shape"))


def empty_like(
    x: Value, /, *, dtype: Value = None, device: Value = None, **kw: Value
) -> ShapeArray:
    """An uninitialised array shaped like ``x``."""
    return _like(x, dtype, kw.get("shape"))


def full_like(
    x: Value,
    /,
    fill_value: Value,
    *,
    dtype: Value = None,
    device: Value = None,
    **kw: Value,
) -> ShapeArray:
    """``fill_value`` shaped like ``x``."""
    return _like(x, dtype, kw.get("shape"))


def _number(trace: Trace, v: Value) -> float:
    if isinstance(v, ShapeArray):
        msg = "a range bounded by an array's value"
        raise trace.refuse(msg)
    return float(v)


def arange(
    start: Value,
    /,
    stop: Value = None,
    step: Value = 1,
    *,
    dtype: Value = None,
    device: Value = None,
) -> ShapeArray:
    """Evenly spaced values in ``[start, stop)``."""
    trace = active_trace()
    begin, end = (
        (0.0, _number(trace, start))
        if stop is None
        else (
            _number(trace, start),
            _number(trace, stop),
        )
    )
    stride = _number(trace, step)
    if stride == 0:
        msg = "arange with step 0"
        raise trace.refuse(msg)
    count = max(math.ceil((end - begin) / stride), 0)
    ints = all(isinstance(v, int) for v in (start, stop, step) if v is not None)
    default = trace.profile.default_int if ints else trace.profile.default_float
    return made(trace, (count,), _name(trace, dtype, default))


def linspace(
    start: Value,
    stop: Value,
    /,
    num: int,
    *,
    dtype: Value = None,
    device: Value = None,
    endpoint: bool = True,
) -> ShapeArray:
    """``num`` evenly spaced values from ``start`` to ``stop``."""
    return _new((num,), dtype)


def eye(
    n_rows: int,
    n_cols: int | None = None,
    /,
    *,
    k: int = 0,
    dtype: Value = None,
    device: Value = None,
) -> ShapeArray:
    """A 2-D array with ones on the ``k``-th diagonal."""
    return _new((n_rows, n_rows if n_cols is None else n_cols), dtype)


def asarray(
    obj: Value, /, *, dtype: Value = None, device: Value = None, copy: Value = None
) -> ShapeArray:
    """``obj`` as an array: itself where it is one (``copy=True``: a copy)."""
    trace = active_trace()
    if isinstance(obj, ShapeArray):
        name = rules.dtype_name_of(trace, dtype)
        if name is not None and name != obj._name:
            return astype(obj, name)
        return copy_of(obj) if copy else obj
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return astype(
            lift(trace, obj), rules.dtype_name_of(trace, dtype), copy=bool(copy)
        )
    if _holds_arrays(obj):
        msg = "asarray() of a sequence of arrays"
        raise trace.refuse(msg)
    data = np.asarray(obj)  # data the caller wrote out: small
    default = {
        "b": "bool",
        "i": trace.profile.default_int,
        "u": trace.profile.default_int,
        "f": trace.profile.default_float,
        "c": trace.profile.default_complex,
    }.get(data.dtype.kind)
    if default is None:
        msg = f"asarray() of {type(obj).__name__} data"
        raise trace.refuse(msg)
    return made(trace, tuple(data.shape), _name(trace, dtype, default))


def _holds_arrays(obj: Value) -> bool:
    if isinstance(obj, list | tuple):
        return any(_holds_arrays(v) for v in obj)
    return isinstance(obj, ShapeArray)


def from_dlpack(x: Value, /, **kwargs: Value) -> ShapeArray:
    """Refused: DLPack needs a buffer."""
    msg = "from_dlpack() of a shape-only array"
    raise active_trace().refuse(msg)


def meshgrid(*arrays: Value, indexing: str = "xy") -> list[ShapeArray]:
    """Coordinate grids of 1-D ``arrays``."""
    trace = active_trace()
    parts = [lift(trace, a) for a in arrays]
    shape = [a.shape[0] for a in parts]
    if indexing == "xy" and len(shape) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    return [made(trace, tuple(shape), a._name, (a,)) for a in parts]  # (its dtype)


def tril(x: Value, /, *, k: int = 0) -> ShapeArray:
    """The lower triangle (a new array)."""
    return copy_of(lift(active_trace(x), x))


def triu(x: Value, /, *, k: int = 0) -> ShapeArray:
    """The upper triangle (a new array)."""
    return copy_of(lift(active_trace(x), x))
