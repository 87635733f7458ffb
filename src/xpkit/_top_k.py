"""`Backend.top_k`: the k largest or smallest values along an axis, and their indices.

The standard's ``top_k`` (data-apis/array-api#722) with its signature:
``top_k(x, k, /, *, axis=-1, mode="largest")``. The arguments are checked
here (``x`` by the facade, as every operand), once, the same on every
backend; each adapter then runs its
library's fastest path (`Adapter.top_k`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._args import check_axis, check_count, shape_of
from ._dtypes import DTYPE_KINDS, own_dtype
from ._shown import shown

if TYPE_CHECKING:
    from ._facts import ArrayT, Facts
    from ._typing import Value

__all__ = ["MODES", "top_k"]

#: What ``mode`` takes.
MODES = ("largest", "smallest")
#: The dtypes ``top_k`` orders: the standard's real numeric ones.
_ORDERED = frozenset(DTYPE_KINDS["real floating"]) | frozenset(DTYPE_KINDS["integral"])


def top_k(
    f: Facts[ArrayT], x: Value, k: Value, axis: Value, mode: Value
) -> tuple[ArrayT, ArrayT]:
    """`Backend.top_k`: its arguments checked, then the adapter's path.

    ``x`` is an array of ``f``'s library (the facade checked it).
    """
    name = own_dtype(x, "x")
    if name not in _ORDERED:
        msg = (
            f"x has dtype {name}, but top_k takes the standard's real numeric "
            "dtypes only (its integer dtypes, float32 and float64, as the "
            "standard's top_k); convert it with Backend.asarray(x, dtype=...)"
        )
        raise TypeError(msg)
    if not isinstance(mode, str):  # (a NumPy array of one would pass ``in``)
        msg = f"mode must be a str, 'largest' or 'smallest', got {mode!r}"
        raise TypeError(msg)
    if mode not in MODES:
        msg = f"mode must be 'largest' or 'smallest', got {mode!r}"
        raise ValueError(msg)
    shape = tuple(shape_of(x))
    axis = check_axis(axis)
    if not shape:
        msg = f"axis={axis} is out of range: a 0-dimensional array has no axes"
        raise ValueError(msg)
    if not -len(shape) <= axis < len(shape):
        msg = f"axis={axis} is out of range for x of shape {shape}"
        raise ValueError(msg)
    axis %= len(shape)
    size = shape[axis]
    k = check_count("k", k, minimum=0)
    if isinstance(size, int) and k > size:  # (a lazy size: the library checks)
        msg = f"k={shown(k)} is out of range: x has {size} elements along axis {axis}"
        raise ValueError(msg)
    values, indices = f.adapter.top_k(f.xp, x, k, axis, largest=mode == "largest")
    return values, indices
