"""``nonzero`` and the ``unique_*`` family on shape-only arrays, at their largest.

Their results' shapes depend on the values. Where NumPy computes them
(NumPy, array-api-strict: `Profile.numpy_internals`, not a graph) they are
followed as a boolean mask is (`Profile.bounded_masks`): every element
nonzero, every element unique, which is the most they can hold, with what
NumPy 2.4's ``_unique1d`` and ``nonzero`` make on the way: the input
flattened (a copy), sorted in place, a mask of the first of each run of
equal values, the values it selects; the run starts (``nonzero`` of the
mask), their ends and their differences for the counts; an ``argsort``,
the values in its order, a cumulative sum of the mask and the inverse for
the inverse indices. ``unique_values`` of an integer or complex array
takes NumPy's hash table (whose table, C++'s own, tracemalloc does not
see) instead of the sort and the mask. Random floats are all unique, and
then the figure is the peak; fewer distinct values cost less. Elsewhere
(torch's, CuPy's, JAX's own) they are refused, and a meter measures
``fn``. Before, NumPy's were refused too: the sampled host meter missed
their short peaks, and planned them at 2.3 to 4.3 times a 100 kB budget
(once 190 times). NumPy's own ``np.unique`` takes the same paths by its
flags (``return_index`` sorts the indices stably, then selects the
first of each run); along an ``axis`` of a 2-d or wider array (its rows
as structured values) it is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .._trace import active_trace
from ._array import ShapeArray, lift, made, view_of

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = [
    "nonzero",
    "numpy_unique",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
]

#: Dtype kinds NumPy's ``unique_values`` finds with a hash table (no sort).
_HASHED_KINDS = frozenset("iuc")


class UniqueAll(NamedTuple):
    """``unique_all``'s result, as the standard names its fields."""

    values: ShapeArray
    indices: ShapeArray
    inverse_indices: ShapeArray
    counts: ShapeArray


class UniqueCounts(NamedTuple):
    """``unique_counts``'s result."""

    values: ShapeArray
    counts: ShapeArray


class UniqueInverse(NamedTuple):
    """``unique_inverse``'s result."""

    values: ShapeArray
    inverse_indices: ShapeArray


def _bounded(x: Value, name: str) -> ShapeArray:
    """``x``, where NumPy computes ``name`` and a trace follows it at its largest."""
    trace = active_trace(x)
    a = lift(trace, x)
    profile = trace.profile
    if not (profile.numpy_internals and profile.bounded_masks and not profile.lazy):
        msg = f"{name}() (its result's shape depends on values)"
        raise trace.refuse(msg)
    return a


def _index(a: ShapeArray, n: int) -> ShapeArray:
    return made(a._trace, (n,), "int64", (a,))


def nonzero(x: Value, /) -> tuple[ShapeArray, ...]:
    """The indices of the nonzero elements: one (ndim, count) array, a view a row."""
    a = _bounded(x, "nonzero")
    if not a.shape:
        msg = "nonzero() of a 0-d array"
        raise a._trace.refuse(msg)
    both = made(a._trace, (a.ndim, a.size), "int64", (a,))
    return tuple(view_of(both, (a.size,), contiguous=True) for _ in range(a.ndim))


def _sorted_runs(a: ShapeArray) -> tuple[ShapeArray, ShapeArray, ShapeArray]:
    """(the flattened copy, sorted in place; the mask of run starts; the values)."""
    flat = made(a._trace, (a.size,), a._name, (a,))
    mask = made(a._trace, (a.size,), "bool", (flat,))
    return flat, mask, made(a._trace, (a.size,), a._name, (flat, mask))


def _counts(mask: ShapeArray) -> ShapeArray:
    """``np.diff(np.concatenate(np.nonzero(mask) + ([mask.size],)))``."""
    (starts,) = nonzero(mask)
    ends = _index(mask, mask.size + 1)
    del starts
    return _index(ends, mask.size)


def _inverse(a: ShapeArray) -> list[ShapeArray]:
    """[the values, the inverse indices, the argsort, the mask, what NumPy holds to its end].

    ``_unique1d`` holds each of its locals to its return: the flattened
    copy, the argsort, the values in its order, the mask, the cumulative
    sum of the mask (``- 1`` elided in place).
    """
    flat = made(a._trace, (a.size,), a._name, (a,))
    perm = _index(flat, a.size)
    ordered = made(a._trace, (a.size,), a._name, (flat, perm))
    mask = made(a._trace, (a.size,), "bool", (ordered,))
    values = made(a._trace, (a.size,), a._name, (ordered, mask))
    running = _index(mask, a.size)
    inverse = view_of(_index(perm, a.size), a.shape, contiguous=True)
    return [values, inverse, perm, mask, flat, ordered, running]


def unique_values(x: Value, /) -> ShapeArray:
    """The distinct values: every element, at the most."""
    a = _bounded(x, "unique_values")
    if np.dtype(a._name).kind in _HASHED_KINDS:  # (the hash table's own unseen)
        flat = made(a._trace, (a.size,), a._name, (a,))
        values = made(a._trace, (a.size,), a._name, (flat,))
        del flat
        return values
    flat, mask, values = _sorted_runs(a)
    del flat, mask
    return values


def unique_counts(x: Value, /) -> UniqueCounts:
    """The distinct values and how often each occurs."""
    a = _bounded(x, "unique_counts")
    flat, mask, values = _sorted_runs(a)
    counts = _counts(mask)
    del flat, mask
    return UniqueCounts(values, counts)


def unique_inverse(x: Value, /) -> UniqueInverse:
    """The distinct values and where each element's is among them."""
    values, inverse, *held = _inverse(_bounded(x, "unique_inverse"))
    del held
    return UniqueInverse(values, inverse)


def unique_all(x: Value, /) -> UniqueAll:
    """The distinct values, their first indices, the inverse and the counts."""
    a = _bounded(x, "unique_all")
    values, inverse, perm, mask, *held = _inverse(a)
    first = _index(perm, a.size)  # (perm[mask])
    counts = _counts(mask)
    del perm, mask, held
    return UniqueAll(values, first, inverse, counts)


def numpy_unique(
    ar: Value,
    return_index: bool = False,
    return_inverse: bool = False,
    return_counts: bool = False,
    axis: Value = None,
    **_: Value,
) -> object:
    """``np.unique``: NumPy's ``_unique1d`` by its flags, every element unique.

    Its locals live to its return: the flattened copy, the argsort and the
    values in its order (where it returns indices; else the copy is sorted
    in place), the mask, the cumulative sum of the mask for the inverse.
    """
    a = _bounded(ar, "numpy.unique")
    if axis is not None and a.ndim > 1:
        msg = "numpy.unique along an axis (its rows as structured values)"
        raise a._trace.refuse(msg)
    if not (return_index or return_inverse or return_counts):
        return unique_values(a)
    flat = ordered = made(a._trace, (a.size,), a._name, (a,))
    perm = held = None
    if return_index or return_inverse:
        perm = _index(flat, a.size)
        ordered = made(a._trace, (a.size,), a._name, (flat, perm))
    mask = made(a._trace, (a.size,), "bool", (ordered,))
    results = [made(a._trace, (a.size,), a._name, (ordered, mask))]
    if perm is not None and return_index:
        results.append(_index(perm, a.size))  # (perm[mask])
    if perm is not None and return_inverse:  # (the mask's cumulative sum, held)
        held = _index(mask, a.size)
        results.append(view_of(_index(perm, a.size), a.shape, contiguous=True))
    if return_counts:
        results.append(_counts(mask))
    del flat, ordered, perm, mask, held
    return tuple(results)
