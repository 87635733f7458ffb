"""NumPy's order statistics and nan-functions on shape-only arrays.

These are written in Python inside NumPy, and what they make beside the
result is most of their cost: ``np.percentile`` partitions a copy of its
input, then takes the two neighbours of each level and interpolates
between them (five arrays of the result's shape at once); ``np.nanmean``
copies its input with the NaNs replaced and holds two masks; ``np.nanmax``
reduces with ``fmax`` and copies nothing. Each handler charges what NumPy
2's own code allocates (measured against tracemalloc in
``tests/adapters/test_shapes_numpy_functions.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import _rules as rules
from ._array import ShapeArray, made
from ._numpy_composites import ufunc
from ._operands import lifted, operand
from ._statistics import reduction

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = ["FUNCTIONS"]

#: ``method=`` values that take a neighbour (no interpolation between two).
_TAKES = frozenset(
    {"lower", "higher", "nearest", "inverted_cdf", "closest_observation"}
)
#: Elements ``np.histogram`` bins at a time.
_BLOCK = 65536
#: Bool masks ``np.nan_to_num`` holds at once (``isposinf``, ``isneginf``).
_NAN_TO_NUM_MASKS = 5


def _levels_dtype(x: ShapeArray, q: Value) -> str:
    """The quantiles' dtype: ``x``'s float, widened by ``q`` unless a Python number."""
    name = rules.float_of(x._trace.profile, x._name)
    if isinstance(q, bool | int | float):  # (weak)
        return name
    given = getattr(q, "dtype", None)
    other = rules.dtype_name_of(x._trace, given) if given is not None else None
    if other is None or rules.kind(other) != rules.FLOAT:
        other = "float64"  # (a list of numbers, an integer array: float64)
    return str(np.result_type(name, other))


def _masks(x: ShapeArray, count: int) -> list[ShapeArray]:
    return [made(x._trace, x.shape, "bool", (x,)) for _ in range(count)]


def _order_statistic(
    x: ShapeArray,
    q: Value,
    axis: Value,
    overwrite: Value,
    keepdims: Value,
    interpolates: bool,
) -> ShapeArray:
    """Quantiles ``q`` of ``x``: its partitioned copy, then a take or a lerp."""
    levels = q.shape if isinstance(q, ShapeArray) else np.shape(q)
    copy = None if overwrite else made(x._trace, x.shape, x._name, (x,))
    one = reduction(x, "mean", axis, bool(keepdims), None)  # (one level's shape)
    shape, name = (*levels, *one.shape), _levels_dtype(x, q)
    del one
    if not interpolates:  # (the neighbour taken, in x's dtype)
        moved = axis is not None and rules.axes_of(axis, x.ndim) != (0,)
        # (NumPy moves the axis first; take copies that view contiguous)
        contiguous = made(x._trace, x.shape, x._name, (x,)) if moved else None
        result = made(x._trace, shape, x._name, (x,))
        del contiguous, copy
        return result
    # previous, next and their difference; the difference scaled, the result
    sides = [made(x._trace, shape, x._name, (x,)) for _ in range(3)]
    scaled = made(x._trace, shape, name, (x,))
    result = made(x._trace, shape, name, (x,))
    del sides, scaled, copy
    return result


def _quantile(
    a: Value,
    q: Value,
    axis: Value = None,
    out: Value = None,
    overwrite_input: Value = False,
    method: Value = "linear",
    keepdims: Value = False,
    *,
    weights: Value = None,
    **_: Value,
) -> ShapeArray:
    """``np.quantile`` and ``np.percentile``: the levels' axes come first."""
    x = lifted(a, q)
    if weights is not None:
        msg = "numpy.quantile with weights="
        raise x._trace.refuse(msg)
    return _order_statistic(x, q, axis, overwrite_input, keepdims, method not in _TAKES)


def _median(
    a: Value,
    axis: Value = None,
    out: Value = None,
    overwrite_input: Value = False,
    keepdims: Value = False,
) -> ShapeArray:
    """``np.median``: a partitioned copy, then the mean of the middle one or two."""
    x = lifted(a)
    copy = None if overwrite_input else made(x._trace, x.shape, x._name, (x,))
    result = reduction(x, "mean", axis, bool(keepdims), None)
    if rules.kind(x._name) in (rules.FLOAT, rules.COMPLEX):  # (its check for NaN:
        last = made(x._trace, result.shape, x._name, (x,))  # the last of each row,
        nan = made(x._trace, result.shape, "bool", (last,))  # and whether it is NaN)
        del last, nan
    del copy
    return result


def _replaced(x: ShapeArray, extra_masks: int = 0) -> list[ShapeArray]:
    """What NumPy's ``_replace_nan`` holds: a copy and the NaN mask (floats only)."""
    if rules.kind(x._name) not in (rules.FLOAT, rules.COMPLEX):
        return []
    copy = made(x._trace, x.shape, x._name, (x,))
    return [copy, *_masks(x, 1 + extra_masks)]


def _nan_reduction(
    rule: str, extra_masks: int = 0, *, counted: bool = False
) -> Callable[..., ShapeArray]:
    """``np.nansum``, ``nanprod``, ``nanmean``: the replaced copy held while it reduces.

    ``counted``: ``nanmean``'s count of the values (an intp array of the
    result's shape), held with its total and the result.
    """

    def reduce(
        a: Value,
        axis: Value = None,
        dtype: Value = None,
        out: Value = None,
        keepdims: Value = False,
        **_: Value,
    ) -> ShapeArray:
        if not counted:
            return _nan_reduce(a, rule, extra_masks, axis, dtype, keepdims)
        x = lifted(a)
        count = made(
            x._trace, rules.reduced(x.shape, axis, bool(keepdims)), "int64", (x,)
        )
        result = _nan_reduce(a, rule, extra_masks, axis, dtype, keepdims)
        del count
        return result

    return reduce


def _nan_reduce(
    a: Value, rule: str, extra_masks: int, axis: Value, dtype: Value, keepdims: Value
) -> ShapeArray:
    x = lifted(a)
    held = _replaced(x, extra_masks)
    wanted = rules.dtype_name_of(x._trace, dtype)
    if rule == "spread":  # (centred and squared in the copy; a complex one's conj)
        rule, wanted = (
            "mean",
            wanted or rules.REDUCED_DTYPES[rule](x._trace.profile, x._name),
        )
        if rules.kind(x._name) == rules.COMPLEX:
            held.append(made(x._trace, x.shape, x._name, (x,)))
    result = reduction(x, rule, axis, bool(keepdims), wanted)
    del held
    return result


def _nan_spread(
    a: Value,
    axis: Value = None,
    dtype: Value = None,
    out: Value = None,
    ddof: Value = 0,
    keepdims: Value = False,
    **_: Value,
) -> ShapeArray:
    """``np.nanvar``/``nanstd``: the copy, its mask and its complement."""
    return _nan_reduce(a, "spread", 1, axis, dtype, keepdims)


def _nan_extreme(
    a: Value, axis: Value = None, out: Value = None, keepdims: Value = False, **_: Value
) -> ShapeArray:
    """``np.nanmax``/``nanmin``: ``fmax.reduce`` of the array itself."""
    return reduction(lifted(a), "max", axis, bool(keepdims), None)


def _nan_arg(
    a: Value, axis: Value = None, out: Value = None, *, keepdims: Value = False
) -> ShapeArray:
    """``np.nanargmax``/``nanargmin``: the replaced copy, then ``argmax``."""
    x = lifted(a)
    held = _replaced(x)
    result = reduction(x, "arg", axis, bool(keepdims), None)
    del held
    return result


def _nan_accumulation(
    a: Value, axis: Value = None, dtype: Value = None, out: Value = None
) -> ShapeArray:
    """``np.nancumsum``/``nancumprod``: the replaced copy, then ``cumsum``."""
    x = lifted(a)
    held = _replaced(x)
    result = x.cumsum(axis, dtype)
    del held
    return result


def _nan_to_num(a: Value, copy: Value = True, **_: Value) -> ShapeArray:
    """``np.nan_to_num``: a copy, and the masks of NaN and each infinity."""
    x = lifted(a)
    if not copy:
        msg = "numpy.nan_to_num with copy=False (it writes into its input)"
        raise x._trace.refuse(msg)
    result = made(x._trace, x.shape, x._name, (x,))
    if rules.kind(x._name) in (rules.FLOAT, rules.COMPLEX):
        masks = _masks(x, _NAN_TO_NUM_MASKS)  # (held at once, then dropped)
        del masks
    return result


def _partition(a: Value, kth: Value, axis: Value = -1, **_: Value) -> ShapeArray:
    """``np.partition``: a copy (flattened where ``axis`` is None)."""
    x = lifted(a)
    shape = (x.size,) if axis is None else x.shape
    return made(x._trace, shape, x._name, (x,))


def _searchsorted(
    a: Value, v: Value, side: Value = "left", sorter: Value = None
) -> ShapeArray:
    """``np.searchsorted``: the indices, of ``v``'s shape."""
    values = lifted(v, a)
    return made(values._trace, values.shape, "int64", (values,))


def _unsigned_dtype(first: Value, last: Value) -> np.dtype[np.generic]:
    """The dtype of NumPy's ``_unsigned_subtract(last, first)``: a signed int's unsigned."""
    name = np.result_type(first, last)
    return np.dtype(name.char.upper()) if name.kind == "i" else name


def _edge(value: Value) -> Value:
    """A range's end as NumPy reads it: a shape-only array's, a scalar of its dtype."""
    if isinstance(value, ShapeArray):  # (its value unknown: a.min(), a.max())
        return np.dtype(value._name).type(0)
    return value


def _histogram(a: Value, bins: Value = 10, *rest: Value, **kw: Value) -> object:
    """``np.histogram``: NumPy's own lines, on its first two blocks of 65,536 elements.

    Each block's masks, bin indices and their corrections; a block's arrays
    live until the next block's replace them (their sizes are the same
    after the second), the last block's until it returns. Elements outside
    ``range``: every one, at the most.
    """
    x = lifted(a)
    span, weights = (rest[0] if rest else kw.get("range")), kw.get("weights")
    if weights is not None or isinstance(bins, str) or np.ndim(bins) > 1:
        msg = "numpy.histogram with weights or bins chosen by a rule"
        raise x._trace.refuse(msg)
    flat = (x.astype("uint8") if x._name == "bool" else x).ravel()
    own = np.dtype(flat._name).type(0)  # (a.min() and a.max(): x's scalars)
    first, last = (own, own) if span is None else (_edge(v) for v in span)
    if np.ndim(bins) == 1:
        return _histogram_sorted(flat, bins, bool(kw.get("density")))
    name = np.result_type(first, last, np.dtype(flat._name))
    if name.kind in "biu":
        name = np.result_type(name, float)
    edges = made(x._trace, (int(bins) + 1,), name.name, ())
    n = made(x._trace, (int(bins),), "int64", ())
    denominator = _unsigned_dtype(first, last).type(1)
    for start in range(0, min(flat.size, 2 * _BLOCK), _BLOCK):
        tmp_a = flat[start : start + _BLOCK]
        keep = tmp_a >= first
        keep &= tmp_a <= last
        if span is not None:  # (the elements in range: all, at the most)
            tmp_a = tmp_a[keep]
        tmp_a = tmp_a.astype(name, copy=False)
        f_indices = (ufunc("subtract")(tmp_a, first) / denominator) * int(bins)
        indices = f_indices.astype(np.intp)
        indices[indices == int(bins)] -= 1
        decrement = tmp_a < edges[indices]
        indices[decrement] -= 1
        increment = (tmp_a >= edges[indices + 1]) & (indices != int(bins) - 1)
        indices[increment] += 1
        n += made(x._trace, (int(bins),), "int64", (indices,)).astype(np.intp)
    return (_density(n, edges) if kw.get("density") else n), edges


def _density(n: ShapeArray, edges: ShapeArray) -> ShapeArray:
    """``n / db / n.sum()``: the widths (``np.diff``, copied to float64), then quotients."""
    widths = made(n._trace, n.shape, edges._name, (edges,))
    db = made(n._trace, n.shape, "float64", (widths,))
    del widths
    return n / db / n.sum()


def _histogram_sorted(flat: ShapeArray, bins: Value, density: bool) -> object:
    """Bins by their edges: each block sorted, its cumulative counts at the edges.

    ``searchsorted`` casts the sorted block to the dtype it shares with the
    edges (a uint8 block searched in float64 edges: a float64 copy), and
    the edges but the last (then the last) where they differ or are
    strided; the two searches' indices are joined, then added. The last
    block stays held until NumPy returns.
    """
    trace = flat._trace
    if isinstance(bins, ShapeArray):
        edges, strided = bins, not bins._contiguous
    elif isinstance(bins, np.ndarray):  # (np.asarray: no copy)
        edges, strided = operand(trace, bins), not bins.flags.c_contiguous
    else:  # (a list converted)
        name = np.asarray(bins).dtype.name
        edges, strided = made(trace, np.shape(bins), name, ()), False
    common = str(np.promote_types(flat._name, edges._name))
    cumulative = made(trace, edges.shape, "int64", ())
    sa: ShapeArray | None = None
    for start in range(0, min(flat.size, 2 * _BLOCK), _BLOCK):
        sa = made(trace, flat[start : start + _BLOCK].shape, flat._name, (flat,))
        left = _searched(sa, edges, edges.shape[0] - 1, common, strided)
        right = _searched(sa, edges, 1, common, strided)
        cumulative += made(trace, edges.shape, "int64", (left, right))
        del left, right
    n = made(trace, (edges.shape[0] - 1,), "int64", (cumulative,))
    result = _density(n, edges) if density else n
    del sa, cumulative
    return result, edges


def _searched(
    sa: ShapeArray, edges: ShapeArray, count: int, common: str, strided: bool
) -> ShapeArray:
    """``sa.searchsorted(v)`` of ``count`` edges: both cast to ``common`` while it runs."""
    trace = sa._trace
    cast = made(trace, sa.shape, common, (sa,)) if common != sa._name else None
    copied = common != edges._name or strided
    values = made(trace, (count,), common, (edges,)) if copied else None
    result = made(trace, (count,), "int64", (sa,))
    del cast, values
    return result


#: NumPy function name -> its handler on shape-only arrays.
FUNCTIONS: dict[str, Callable[..., object]] = {
    "median": _median,
    "quantile": _quantile,
    "percentile": _quantile,
    "nansum": _nan_reduction("sum"),
    "nanprod": _nan_reduction("sum"),
    "nanmean": _nan_reduction("mean", extra_masks=1, counted=True),
    "nanvar": _nan_spread,
    "nanstd": _nan_spread,
    "nanmax": _nan_extreme,
    "nanmin": _nan_extreme,
    "nanargmax": _nan_arg,
    "nanargmin": _nan_arg,
    "nancumsum": _nan_accumulation,
    "nancumprod": _nan_accumulation,
    "nan_to_num": _nan_to_num,
    "partition": _partition,
    "searchsorted": _searchsorted,
    "histogram": _histogram,
}
