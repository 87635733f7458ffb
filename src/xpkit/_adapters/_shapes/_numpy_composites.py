"""NumPy's functions that NumPy writes in Python from its ufuncs, on shape-only arrays.

``np.average`` with weights, ``np.isclose``, ``np.cross``, ``np.ptp``,
``np.polyval`` and ``np.column_stack`` are a few lines of NumPy's own
Python, and what those lines make beside the result is their cost:
``np.average(x, axis=1, weights=w)`` multiplies ``x`` by the weights whole
before it sums (an array of ``x``'s size, not the result's), ``np.isclose``
holds ``abs(x - y)`` while it compares, ``np.cross`` casts both operands
whole, ``np.polyval``'s Horner loop holds each step's product beside the
last step's sum (in float64 for a float32 ``x``: its coefficients are
float64 scalars). Each handler runs the same lines on shape-only arrays
(their operators and NumPy's ufuncs, which the trace follows with their
temporary elision and buffers); NumPy's checks of values (weights summing
to zero) are left out. Measured against tracemalloc in
``tests/adapters/test_shapes_numpy_functions.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import _manipulation as manipulation
from . import _rules as rules
from ._array import ShapeArray, made, view_of
from ._operands import operand, trace_of
from ._statistics import reduction

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = ["FUNCTIONS", "operand", "trace_of", "ufunc"]

#: Kinds NumPy averages in float64 (at least).
_EXACT = frozenset({rules.BOOL, rules.INT, rules.UINT})


def ufunc(name: str) -> Callable[..., Value]:
    """NumPy's ufunc ``name``: called with a shape-only operand, the trace's handler runs."""
    function: Callable[..., Value] = getattr(np, name)
    return function


def _keepdims(keepdims: Value) -> bool:
    return keepdims is not np._NoValue and bool(keepdims)


def _average(
    a: Value,
    axis: Value = None,
    weights: Value = None,
    returned: Value = False,
    *,
    keepdims: Value = np._NoValue,
) -> object:
    """``np.average``: with weights, ``a * w`` in the result's dtype, then its sum."""
    trace = trace_of(a, weights)
    x, keep = operand(trace, a), _keepdims(keepdims)
    if weights is None:
        avg = reduction(x, "mean", axis, keep, None)
        scl: ShapeArray | None = None
    else:
        w = operand(trace, weights)
        if w.shape != x.shape:  # (a view along axis, broadcast against x)
            axes = rules.axes_of(axis, x.ndim)
            w = manipulation.reshape(
                w, tuple(d if i in axes else 1 for i, d in enumerate(x.shape))
            )
        base = "float64" if rules.kind(x._name) in _EXACT else None
        name = str(np.result_type(x._name, w._name, *([base] if base else [])))
        scl = reduction(w, "sum", axis, keep, name)
        avg = ufunc("multiply")(x, w, dtype=name).sum(axis, keepdims=keep) / scl
    if not returned:
        return avg
    if scl is None or scl.shape != avg.shape:  # (NumPy's broadcast copy)
        scl = made(trace, avg.shape, avg._name if scl is None else scl._name, (avg,))
    return avg, scl


def _isclose(
    a: Value,
    b: Value,
    rtol: Value = 1e-05,
    atol: Value = 1e-08,
    equal_nan: Value = False,
) -> object:
    """``np.isclose``: ``abs(x - y)`` held while it is compared, then three masks."""
    trace = trace_of(a, b, rtol, atol)
    x, y, atol, rtol = (
        v if isinstance(v, int | float | complex) else operand(trace, v)
        for v in (a, b, atol, rtol)
    )
    if isinstance(y, ShapeArray):  # (inexact, so abs of the smallest int is safe)
        name = str(np.result_type(y._name, 1.0))
        y = y if y._name == name else y.astype(name)
    elif isinstance(y, int):
        y = float(y)
    result = ufunc("less_equal")(abs(x - y), atol + rtol * abs(y)) & ufunc("isfinite")(
        y
    ) | (x == y)
    if equal_nan:
        result |= ufunc("isnan")(x) & ufunc("isnan")(y)
    return result


def _cross(
    a: Value,
    b: Value,
    axisa: Value = -1,
    axisb: Value = -1,
    axisc: Value = -1,
    axis: Value = None,
) -> ShapeArray:
    """``np.cross``: the result, both operands cast whole, one product held."""
    if axis is not None:
        axisa, axisb, axisc = (axis,) * 3
    trace = trace_of(a, b)
    x = manipulation.moveaxis(operand(trace, a), axisa, -1)
    y = manipulation.moveaxis(operand(trace, b), axisb, -1)
    if x.shape[-1] not in (2, 3) or y.shape[-1] not in (2, 3):
        msg = "numpy.cross of vectors of neither 2 nor 3 components"
        raise trace.refuse(msg)
    vectors = rules.broadcast(x.shape[:-1], y.shape[:-1])
    three = 3 in (x.shape[-1], y.shape[-1])
    name = str(np.promote_types(x._name, y._name))
    result = made(trace, (*vectors, 3) if three else vectors, name, (x, y))
    held = [made(trace, v.shape, name, (v,)) for v in (x, y)]  # (astype: copies)
    held.append(made(trace, vectors, name, (x, y)))  # (a product, then subtracted)
    del held
    return manipulation.moveaxis(result, -1, axisc) if three else result


def _ptp(
    a: Value, axis: Value = None, out: Value = None, keepdims: Value = np._NoValue
) -> Value:
    """``np.ptp``: ``subtract`` (a ufunc call: no elision) of the maximum and minimum."""
    x, keep = operand(trace_of(a), a), _keepdims(keepdims)
    return ufunc("subtract")(x.max(axis, keepdims=keep), x.min(axis, keepdims=keep))


def _polyval(p: Value, x: Value) -> Value:
    """``np.polyval``: ``y = y * x + pv`` for each coefficient, from ``zeros_like(x)``.

    Coefficients of more axes: each ``pv`` a row, broadcast against ``x``.
    """
    trace = trace_of(p, x)
    points = operand(trace, x)
    coefficients = operand(trace, p) if isinstance(p, ShapeArray) else np.asarray(p)
    if coefficients.ndim == 0:  # (NumPy cannot iterate over it)
        msg = f"numpy.polyval of coefficients of shape {coefficients.shape}"
        raise trace.refuse(msg)
    y: Value = made(trace, points.shape, points._name, (points,))
    for pv in coefficients:  # (NumPy's scalars, or 0-d arrays of a shape-only p)
        y = y * points + pv
    return y


def _column_stack(tup: Value) -> ShapeArray:
    """``np.column_stack``: 1-d arrays as columns (views), then one concatenate."""
    trace = trace_of(*tup)
    parts = []
    for v in tup:
        x = operand(trace, v)
        if x.ndim < 2:  # (a view with axes in front, transposed)
            x = manipulation.expand_dims(x, axis=tuple(range(2 - x.ndim))).T
        parts.append(x)
    return manipulation.concat(parts, axis=1)


def _diagonal(a: Value, offset: int = 0, axis1: int = 0, axis2: int = 1) -> ShapeArray:
    """``np.diagonal``: a view, ``axis1`` and ``axis2`` dropped, the diagonal last."""
    x = operand(trace_of(a), a)
    (i,), (j,) = rules.axes_of(axis1, x.ndim), rules.axes_of(axis2, x.ndim)
    size = max(min(x.shape[i] - max(-offset, 0), x.shape[j] - max(offset, 0)), 0)
    kept = tuple(d for k, d in enumerate(x.shape) if k not in (i, j))
    return view_of(x, (*kept, size), contiguous=False)


def _convolved(default: str) -> Callable[..., ShapeArray]:
    """``np.convolve`` (``default`` "full") or ``np.correlate`` ("valid") of two 1-d arrays.

    The result, and each operand first cast whole to its dtype, or laid out
    contiguous where it is strided, held while it runs (tracemalloc: a
    float32 row 1.00x of that, a strided one too).
    """

    def convolved(a: Value, v: Value, mode: Value = default) -> ShapeArray:
        trace = trace_of(a, v)
        x, k = operand(trace, a), operand(trace, v)
        if x.ndim != 1 or k.ndim != 1 or not x.size or not k.size:
            msg = f"numpy.convolve of arrays of shapes {x.shape} and {k.shape}"
            raise trace.refuse(msg)
        n, m = x.shape[0], k.shape[0]
        lengths = {"full": n + m - 1, "same": max(n, m), "valid": abs(n - m) + 1}
        if mode not in lengths:
            msg = f"numpy.convolve with mode={mode!r}"
            raise trace.refuse(msg)
        name = str(np.promote_types(x._name, k._name))
        held = [
            made(trace, u.shape, name, (u,))
            for u in (x, k)
            if u._name != name or not u._contiguous
        ]
        result = made(trace, (lengths[mode],), name, (x, k))
        del held
        return result

    return convolved


#: NumPy function name -> its handler on shape-only arrays.
FUNCTIONS: dict[str, Callable[..., object]] = {
    "convolve": _convolved("full"),
    "correlate": _convolved("valid"),
    "average": _average,
    "isclose": _isclose,
    "cross": _cross,
    "ptp": _ptp,
    "polyval": _polyval,
    "column_stack": _column_stack,
    "diagonal": _diagonal,
}
