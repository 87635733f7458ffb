"""The standard's reductions, sorting, searching and set functions on shape-only arrays.

A reduction makes the reduced shape; ``var`` and ``std`` also hold a centred
copy of their input while they run where the library computes them so
(`Profile.numpy_internals`; `xpkit._adapters._shapes._array.reduction`). Sorting makes the sorted shape (and the
indices alongside, `Profile.sort_indices`: torch; an argsort the values,
`Profile.argsort_values`: JAX), and holds a row's scratch while it runs
where the library does (`Profile.sort_scratch`). Functions whose result's
shape depends on the values (``nonzero``, the ``unique_*`` family) are
`_sets`'.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from .._kernel_scratch import cumulative_scratch, sort_scratch
from .._trace import active_trace
from . import _rules as rules
from ._array import ShapeArray, binary, lift, made

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = [
    "all",
    "any",
    "argmax",
    "argmin",
    "argsort",
    "count_nonzero",
    "cumulative_prod",
    "cumulative_sum",
    "diff",
    "max",
    "mean",
    "min",
    "prod",
    "searchsorted",
    "sort",
    "std",
    "sum",
    "top_k",
    "var",
]


def _array(x: Value) -> ShapeArray:
    return lift(active_trace(x), x)


def _reduce(
    func: str, x: Value, rule: str, axis: Value, keepdims: bool, dtype: Value = None
) -> ShapeArray:
    """The standard's reduction ``func`` of ``x``, its dtype by ``rule`` (`reduction`)."""
    a = _array(x)
    result = reduction(a, rule, axis, keepdims, rules.dtype_name_of(a._trace, dtype))
    rules.hold_workspace(func, (a,), (result,))
    return result


def sum(
    x: Value, /, *, axis: Value = None, dtype: Value = None, keepdims: bool = False
) -> ShapeArray:
    """The sum over ``axis``."""
    return _reduce("sum", x, "sum", axis, keepdims, dtype)


def prod(
    x: Value, /, *, axis: Value = None, dtype: Value = None, keepdims: bool = False
) -> ShapeArray:
    """The product over ``axis``."""
    return _reduce("prod", x, "sum", axis, keepdims, dtype)


def mean(x: Value, /, *, axis: Value = None, keepdims: bool = False) -> ShapeArray:
    """The mean over ``axis``."""
    return _reduce("mean", x, "mean", axis, keepdims)


def var(
    x: Value, /, *, axis: Value = None, correction: float = 0.0, keepdims: bool = False
) -> ShapeArray:
    """The variance over ``axis``."""
    return _reduce("var", x, "spread", axis, keepdims)


def std(
    x: Value, /, *, axis: Value = None, correction: float = 0.0, keepdims: bool = False
) -> ShapeArray:
    """The standard deviation over ``axis``."""
    return _reduce("std", x, "spread", axis, keepdims)


def max(x: Value, /, *, axis: Value = None, keepdims: bool = False) -> ShapeArray:
    """The maximum over ``axis``."""
    return _reduce("max", x, "max", axis, keepdims)


def min(x: Value, /, *, axis: Value = None, keepdims: bool = False) -> ShapeArray:
    """The minimum over ``axis``."""
    return _reduce("min", x, "max", axis, keepdims)


def all(x: Value, /, *, axis: Value = None, keepdims: bool = False) -> ShapeArray:
    """Whether every element over ``axis`` is true."""
    return _reduce("all", x, "any", axis, keepdims)


def any(x: Value, /, *, axis: Value = None, keepdims: bool = False) -> ShapeArray:
    """Whether any element over ``axis`` is true."""
    return _reduce("any", x, "any", axis, keepdims)


def argmax(
    x: Value, /, *, axis: int | None = None, keepdims: bool = False
) -> ShapeArray:
    """Indices of the maxima over ``axis``."""
    return _reduce("argmax", x, "arg", axis, keepdims)


def argmin(
    x: Value, /, *, axis: int | None = None, keepdims: bool = False
) -> ShapeArray:
    """Indices of the minima over ``axis``."""
    return _reduce("argmin", x, "arg", axis, keepdims)


def count_nonzero(
    x: Value, /, *, axis: Value = None, keepdims: bool = False
) -> ShapeArray:
    """How many elements over ``axis`` are not zero.

    NumPy's makes a bool copy (of another dtype's array) and sums it into
    its int buffers (over every axis, it counts in place); torch's workspace
    (`Profile.workspace`) is its own.
    """
    a = _array(x)
    result = _reduce("count_nonzero", a, "arg", axis, keepdims)
    if a._trace.profile.numpy_internals and (axis is not None or keepdims):
        each = builtins.min(rules.BUFFER_ELEMENTS, a.size) * rules.itemsize(
            result._name
        )
        copy = a.size if a._name != "bool" else 0
        a._trace.spike(copy + rules.ITERATOR_BYTES + each)
    return result


def _cumulative(
    x: Value, axis: Value, dtype: Value, include_initial: bool, product: bool = False
) -> ShapeArray:
    a = _array(x)
    if axis is None and a.ndim != 1:
        msg = "a cumulative function of a multi-dimensional array needs an axis"
        raise a._trace.refuse(msg)
    (ax,) = rules.axes_of(0 if axis is None else axis, a.ndim)
    shape = tuple(d + include_initial if i == ax else d for i, d in enumerate(a.shape))
    name = rules.dtype_name_of(a._trace, dtype) or rules.sum_dtype(
        a._trace.profile, a._name
    )
    if (
        product
        and dtype is None
        and a._trace.profile.dtype_rules.cumulative_prod_keeps_int
        and a._name != "bool"
    ):
        name = a._name  # (JAX's cumulative_prod keeps an integer's dtype)
    # Into another dtype, the input is cast whole first (NumPy's accumulate,
    # torch's cumsum), held while the result is made.
    cast = made(a._trace, a.shape, name, (a,)) if name != a._name else None
    if include_initial:  # (array-api-compat's: the sums, a slab of zeros, joined)
        sums = made(a._trace, a.shape, name, (a, cast))
        zeros = made(
            a._trace, tuple(1 if i == ax else d for i, d in enumerate(a.shape)), name
        )
        result = made(a._trace, shape, name, (sums, zeros))
        del sums, zeros
    else:
        result = made(a._trace, shape, name, (a, cast))
    block = a._trace.profile.cumulative_block
    a._trace.spike(cumulative_scratch(result.nbytes, shape[ax], block))
    del cast
    return result


def cumulative_sum(
    x: Value,
    /,
    *,
    axis: Value = None,
    dtype: Value = None,
    include_initial: bool = False,
) -> ShapeArray:
    """Cumulative sums along ``axis``."""
    return _cumulative(x, axis, dtype, include_initial)


def cumulative_prod(
    x: Value,
    /,
    *,
    axis: Value = None,
    dtype: Value = None,
    include_initial: bool = False,
) -> ShapeArray:
    """Cumulative products along ``axis``."""
    return _cumulative(x, axis, dtype, include_initial, product=True)


def diff(x: Value, /, *, axis: int = -1, n: int = 1, **_: Value) -> ShapeArray:
    """The ``n``-th differences along ``axis``, as the libraries compute them.

    Each difference is of two views of the last, all but its first and all
    but its last element along ``axis`` (NumPy's, torch's), ``!=`` for a
    bool array: a view whose rows lie apart is buffered by NumPy's ufunc
    (`rules.buffer_operands`: two buffers each, 2.3 times a 100 kB budget
    while they were not counted), and a library without views copies each.
    """
    a = _array(x)
    (ax,) = rules.axes_of(axis, a.ndim)
    op = "!=" if a._name == "bool" else "-"
    step = a  # (each difference of the last, which lives until the next is made)
    for _step in range(builtins.max(n, 1)):
        ahead, behind = (
            tuple(part if i == ax else slice(None) for i in range(a.ndim))
            for part in (slice(1, None), slice(None, -1))
        )
        step = binary(op, step[ahead], step[behind])
    return step


def sort(
    x: Value, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> ShapeArray:
    """``x`` sorted along ``axis``."""
    a = _array(x)
    indices = None
    if a._trace.profile.sort_indices:  # computed alongside, then dropped
        indices = made(a._trace, a.shape, "int64", (a,))
    result = made(a._trace, a.shape, a._name, (a,))
    _sort_scratch(a, axis, 1 + (indices is not None))
    del indices
    rules.hold_workspace("sort", (a,), (result,), descending=descending, stable=stable)
    return result


def argsort(
    x: Value, /, *, axis: int = -1, descending: bool = False, stable: bool = True
) -> ShapeArray:
    """The indices that sort ``x`` along ``axis``."""
    a = _array(x)
    profile = a._trace.profile
    values = None
    if profile.sort_indices or profile.argsort_values:  # computed alongside
        values = made(a._trace, a.shape, a._name, (a,))
    # (the default index dtype: JAX's int32 without 64-bit types)
    result = made(a._trace, a.shape, profile.default_int, (a,))
    _sort_scratch(a, axis, 2)
    del values
    options = {"descending": descending, "stable": stable}
    rules.hold_workspace("argsort", (a,), (result,), **options)
    return result


def top_k(
    x: Value, k: int, /, *, axis: int = -1, mode: str = "largest"
) -> tuple[ShapeArray, ShapeArray]:
    """The ``k`` largest (or smallest) values along ``axis`` and their indices."""
    a = _array(x)
    (ax,) = rules.axes_of(axis, a.ndim)
    shape = tuple(k if i == ax else d for i, d in enumerate(a.shape))
    values = made(a._trace, shape, a._name, (a,))
    indices = made(a._trace, shape, a._trace.profile.default_int, (a,))
    _sort_scratch(a, axis, 2)
    return values, indices


def _sort_scratch(a: ShapeArray, axis: int, operands: int) -> None:
    """What a sort of ``operands`` arrays like ``a`` holds while it runs (`Profile.sort_scratch`)."""
    if a.ndim:
        (ax,) = rules.axes_of(axis, a.ndim)
        scratch = a._trace.profile.sort_scratch
        a._trace.spike(sort_scratch(scratch, a.shape[ax], operands))


def searchsorted(
    x1: Value, x2: Value, /, *, side: str = "left", sorter: Value = None
) -> ShapeArray:
    """Where ``x2``'s elements would go in the sorted ``x1``."""
    trace = active_trace(x1, x2)
    sorted_values, values = lift(trace, x1), lift(trace, x2)
    name = trace.profile.dtype_rules.index_dtype or trace.profile.default_int
    result = made(trace, values.shape, name, (sorted_values, values))  # (JAX: int32)
    rules.hold_workspace("searchsorted", (sorted_values, values), (result,), side=side)
    return result


def reduction(
    x: ShapeArray, rule: str, axis: Value, keepdims: bool, dtype: str | None
) -> ShapeArray:
    """A reduction of ``x`` over ``axis``: ``rule`` names its dtype's rule.

    ``"sum"`` (integers widen), ``"mean"`` (floating), ``"max"`` (its own),
    ``"any"`` (bool), ``"arg"`` (the index dtype); ``"spread"`` (``var``,
    ``std``: floating, and a centred copy of ``x`` held while it runs where
    the library computes it so, `Profile.numpy_internals`).
    """
    profile = x._trace.profile
    shape = rules.reduced(x.shape, axis, keepdims)
    if profile.numpy_internals:  # its iterator
        x._trace.release(x._trace.hold(rules.ITERATOR_BYTES))
    if rule == "spread":  # (of a complex array: real)
        dtype, rule = dtype or rules.REDUCED_DTYPES["spread"](profile, x._name), "mean"
        if profile.numpy_internals or profile.centred_spread:
            # (the mean, with its axes kept, and the centred copy, held while
            # the squares are summed)
            float_name = rules.float_of(profile, x._name)
            kept = rules.reduced(x.shape, axis, True)
            mean = made(x._trace, kept, float_name, (x,))
            centred = made(x._trace, x.shape, float_name, (x, mean))
            result = reduction(x, rule, axis, keepdims, dtype)
            del mean, centred
            return result
    if dtype is None:
        dtype = rules.REDUCED_DTYPES[rule](profile, x._name)
    cast = None  # (torch's sum of bools casts them whole to int64 first)
    if profile.casts_whole and rule == "sum" and dtype != x._name:
        cast = made(x._trace, x.shape, dtype, (x,))
    result = made(x._trace, shape, dtype, (x, cast))
    del cast
    return result
