"""Indexing a shape-only array: ``x[key]``, a view or a copy as the library makes it.

NumPy's rules (`_rules.indexed`): basic indices make a view, index arrays
and masks a copy; a boolean mask selects as many elements as it holds True
values, at most all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _rules as rules
from . import _strides as strides
from ._array import ShapeArray, lift, made, unowned, view_of

if TYPE_CHECKING:
    from ..._typing import Value
    from .._trace import Trace

__all__ = ["indexed"]


def indexed(x: ShapeArray, key: Value) -> ShapeArray:
    """``x[key]``: charged as the library's indexing allocates."""
    items = key if isinstance(key, tuple) else (key,)
    parsed = [_index_parts(x._trace, item) for item in items]
    parts = [p for found, _ in parsed for p in found]
    ints = rules.ints_advanced(x._trace.profile)
    expanded = rules.expanded_index(x.shape, parts)
    shape, copies, contiguous = rules.indexed(x.shape, expanded, ints)
    if copies:  # (NumPy's is a view of its buffer unless an index array leads)
        copy = made(x._trace, shape, x._name, (x,))
        if len(items) > 1 or len(parts) < x.ndim:
            # (NumPy turns a mask beside other indices into its index
            # arrays, held while the result is filled)
            x._trace.spike(sum(nbytes for _, nbytes in parsed))
        return copy if isinstance(parts[0], tuple) else unowned(copy)
    unit = strides.unit_after_index(x, expanded, contiguous)
    return view_of(x, shape, contiguous=x._contiguous and contiguous, unit=unit)


def _index_parts(trace: Trace, item: Value) -> tuple[list[object], int]:
    """One item of an index as `rules.indexed` reads it, and a mask's index bytes.

    A boolean mask selects as many elements as it holds True values: NumPy
    indexes with its ``nonzero()``, an int64 index array per axis of the
    mask. Where the profile bounds masks, each is as long as the mask's True
    values where its values are at hand (a NumPy array ``fn`` holds), else
    as the mask (every element selected: the most it can be); else the trace
    refuses it.
    """
    if item is None or item is Ellipsis or isinstance(item, slice):
        return [item], 0
    if isinstance(item, int | np.integer) and not isinstance(item, bool):
        return [int(item)], 0
    if isinstance(item, list):
        return [tuple(np.shape(item))], 0
    if isinstance(item, bool):
        msg = "an index of a Python bool"
        raise trace.refuse(msg)
    a = lift(trace, item)
    if a._name != "bool":
        return [a.shape], 0
    if not trace.profile.bounded_masks or not a.shape:
        msg = "a boolean mask (its result's shape depends on values)"
        raise trace.refuse(msg)
    # (a NumPy array fn holds is not shape-only: its True values count)
    count = int(np.count_nonzero(item)) if isinstance(item, np.ndarray) else a.size
    return [(count,)] * a.ndim, 8 * count * a.ndim
