"""NumPy's differences, integrals and lookups along an axis, on shape-only arrays.

``np.gradient``, ``np.trapezoid``, ``np.unwrap`` and ``np.sinc`` are NumPy
Python over its ufuncs: each handler runs the same lines on shape-only
arrays (their operators and ufuncs, which the trace follows with NumPy's
temporary elision), so what they hold beside the result is charged as NumPy
allocates it (``np.gradient`` of an integer array casts it to float64
whole; ``np.unwrap`` holds four arrays of the differences' size).
``np.cumulative_sum`` and ``np.cumulative_prod`` are ``accumulate`` with an
initial slice concatenated in front; ``np.interp`` is C that makes its
result and a float64 copy of ``x`` unless ``x`` is float64 and contiguous
(measured); ``np.digitize`` is ``np.searchsorted`` on bins the trace can
read (given arrays), and is refused on shape-only bins, whose order it
reads. Gradients on coordinate arrays (not scalar spacings) are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import _creation as creation
from . import _manipulation as manipulation
from . import _rules as rules
from . import _statistics as statistics
from ._array import ShapeArray, made
from ._numpy_composites import ufunc
from ._operands import operand, trace_of

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = ["FUNCTIONS"]


def _at(ndim: int, axis: int, item: object) -> tuple[object, ...]:
    """An index taking ``item`` along ``axis`` and all of every other axis."""
    return tuple(item if i == axis else slice(None) for i in range(ndim))


def _gradient(
    f: Value, *varargs: Value, axis: Value = None, edge_order: int = 1
) -> object:
    """``np.gradient`` with scalar spacings: NumPy's slices and ufuncs, each axis."""
    trace = trace_of(f)
    x = operand(trace, f)
    axes = rules.axes_of(axis, x.ndim)
    if any(np.ndim(v) != 0 for v in varargs) or edge_order not in (1, 2):
        msg = "numpy.gradient on coordinate arrays (or of an edge order not 1 or 2)"
        raise trace.refuse(msg)
    spacings = list(varargs) * len(axes) if len(varargs) == 1 else list(varargs)
    spacings = spacings or [1.0] * len(axes)
    otype = x._name
    if rules.kind(x._name) not in (rules.FLOAT, rules.COMPLEX):
        if rules.kind(x._name) == rules.BOOL:
            msg = "numpy.gradient of booleans"
            raise trace.refuse(msg)
        x, otype = x.astype(np.float64), "float64"  # (NumPy: integers cast whole)
    outs = []
    for ax, dx in zip(axes, spacings, strict=True):
        n = x.ndim
        out = creation.empty_like(x, dtype=otype)
        out[_at(n, ax, slice(1, -1))] = (
            x[_at(n, ax, slice(2, None))] - x[_at(n, ax, slice(None, -2))]
        ) / (2.0 * dx)
        if edge_order == 1:
            for i, j in ((0, 1), (-1, -2)):
                out[_at(n, ax, i)] = (x[_at(n, ax, j)] - x[_at(n, ax, i)]) / dx
        else:
            for i, j, k, c in (
                (0, 1, 2, (-1.5, 2.0, -0.5)),
                (-1, -2, -3, (1.5, -2, 0.5)),
            ):
                out[_at(n, ax, i)] = (
                    c[0] / dx * x[_at(n, ax, i)]
                    + c[1] / dx * x[_at(n, ax, j)]
                    + c[2] / dx * x[_at(n, ax, k)]
                )
        outs.append(out)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _trapezoid(y: Value, x: Value = None, dx: Value = 1.0, axis: int = -1) -> object:
    """``np.trapezoid``: ``(d * (y[1:] + y[:-1]) / 2.0).sum(axis)`` as NumPy writes it."""
    trace = trace_of(y, x)
    v = operand(trace, y)
    (ax,) = rules.axes_of(axis, v.ndim)
    d: Value = dx
    if x is not None:
        xs = operand(trace, x)
        if xs.ndim == 1:
            shape = tuple(xs.shape[0] - 1 if i == ax else 1 for i in range(v.ndim))
            d = manipulation.reshape(statistics.diff(xs), shape)
        else:
            d = statistics.diff(xs, axis=ax)
    n = v.ndim
    upper, lower = v[_at(n, ax, slice(1, None))], v[_at(n, ax, slice(None, -1))]
    return (d * (upper + lower) / 2.0).sum(ax)  # (the sum a temporary: elided into)


def _sinc(x: Value) -> object:
    """``np.sinc``: ``pi * x``, ``where(x, x, eps)``, then ``sin(y) / y``."""
    a = operand(trace_of(x), x)
    a = np.pi * a
    eps = float(np.finfo(a._name).eps) if rules.kind(a._name) == rules.FLOAT else 1e-20
    y = ufunc("where")(a, a, eps)
    return ufunc("sin")(y) / y


def _unwrap(
    p: Value, discont: Value = None, axis: int = -1, *, period: float = 2 * np.pi
) -> ShapeArray:
    """``np.unwrap``: NumPy's lines on the differences, then a corrected copy of ``p``."""
    trace = trace_of(p)
    a = operand(trace, p)
    (ax,) = rules.axes_of(axis, a.ndim)
    dd = statistics.diff(a, axis=ax)
    discont = period / 2 if discont is None else discont
    name = str(np.result_type(np.dtype(dd._name), period))
    high = period // 2 if np.issubdtype(name, np.integer) else period / 2
    ddmod = ufunc("mod")(dd - (-high), period) + (-high)
    mask = (ddmod == -high) & (dd > 0)  # (copyto's where=)
    del mask
    ph_correct = ddmod - dd
    mask = abs(dd) < discont
    del mask
    up = made(trace, a.shape, name, (a,))  # array(p, copy=True, dtype=dtype)
    up[_at(a.ndim, ax, slice(1, None))] = a[
        _at(a.ndim, ax, slice(1, None))
    ] + ph_correct.cumsum(ax)
    return up


def _cumulative(
    x: Value,
    /,
    *,
    axis: Value = None,
    dtype: Value = None,
    out: Value = None,
    include_initial: bool = False,
) -> ShapeArray:
    """``np.cumulative_sum``/``_prod``: ``accumulate``, the initial slice concatenated."""
    trace = trace_of(x)
    a = operand(trace, x)
    if out is not None:
        msg = "numpy.cumulative_sum with out="
        raise trace.refuse(msg)
    if a.ndim == 0:
        a = manipulation.reshape(a, (1,))
    if axis is None and a.ndim > 1:
        msg = "numpy.cumulative_sum of several axes without an axis"
        raise trace.refuse(msg)
    (ax,) = rules.axes_of(0 if axis is None else axis, a.ndim)
    res = a.cumsum(ax, dtype)
    if include_initial:
        shape = tuple(1 if i == ax else d for i, d in enumerate(res.shape))
        first = made(trace, shape, res._name, (res,))
        res = manipulation.concat([first, res], axis=ax)
    return res


def _interp(
    x: Value,
    xp: Value,
    fp: Value,
    left: Value = None,
    right: Value = None,
    period: Value = None,
) -> ShapeArray:
    """``np.interp``: the result, and a float64 copy of ``x`` unless it is one already."""
    trace = trace_of(x, xp, fp)
    a = operand(trace, x)
    values = operand(trace, fp)
    name = "complex128" if values._name.startswith("complex") else "float64"
    copy = None
    if a._name != "float64" or not a._contiguous or period is not None:
        copy = made(trace, a.shape, "float64", (a,))
    result = made(trace, a.shape, name, (a, values))
    del copy
    return result


def _digitize(x: Value, bins: Value, right: bool = False) -> ShapeArray:
    """``np.digitize``: ``searchsorted`` of ``x`` in the bins (their order read)."""
    trace = trace_of(x)
    if isinstance(bins, ShapeArray):
        msg = "numpy.digitize on shape-only bins (it reads their order)"
        raise trace.refuse(msg)
    edges = np.asarray(bins)
    a = operand(trace, x)
    index = made(trace, a.shape, "int64", (a,))
    if edges.size > 1 and edges[0] > edges[-1]:  # (decreasing: subtracted from len)
        index = len(edges) - index
    return index


FUNCTIONS: dict[str, Callable[..., object]] = {
    "gradient": _gradient,
    "trapezoid": _trapezoid,
    "sinc": _sinc,
    "unwrap": _unwrap,
    "cumulative_sum": _cumulative,
    "cumulative_prod": _cumulative,
    "interp": _interp,
    "digitize": _digitize,
}
