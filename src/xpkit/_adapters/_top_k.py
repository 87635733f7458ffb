"""The paths behind `Adapter.top_k` that more than one library shares.

`sorted_top_k` needs only the standard (``argsort`` with ``descending`` and
``stable``, ``take_along_axis``): the path of a namespace with no ``top_k``
and no partial sort. `partitioned_top_k` is NumPy's (and CuPy's): an
``argpartition`` finds the k in linear time, and only those k are sorted.
"""

from __future__ import annotations

from types import EllipsisType, ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._typing import Array, Namespace

    #: What a top-k gives: the values, sorted, and their indices.
    TopK = tuple[Array, Array]

__all__ = ["along", "partitioned_top_k", "sorted_top_k"]


def along(axis: int, part: slice) -> tuple[slice | EllipsisType, ...]:
    """The index that takes ``part`` along ``axis`` (a non-negative axis).

    Every axis is named (the standard takes no index shorter than the
    array's dimensions without a trailing ``...``).
    """
    return (*(slice(None),) * axis, part, ...)


def sorted_top_k(xp: Namespace, x: Array, k: int, axis: int, *, largest: bool) -> TopK:
    """A stable sort of the whole axis, its first ``k`` taken (O(n log n))."""
    order = xp.argsort(x, axis=axis, descending=largest, stable=True)
    indices = order[along(axis, slice(0, k))]
    return xp.take_along_axis(x, indices, axis=axis), indices


def partitioned_top_k(
    module: ModuleType, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
) -> TopK:
    """``module.argpartition`` to find the k, then a sort of those k only.

    NaN takes part as the largest value (as the partition places it).
    """
    n = x.shape[axis]
    if k in (0, n):
        return sorted_top_k(xp, x, k, axis, largest=largest)
    kth = n - k if largest else k - 1
    part = module.argpartition(x, kth, axis=axis)
    chosen = part[along(axis, slice(n - k, None) if largest else slice(0, k))]
    values = xp.take_along_axis(x, chosen, axis=axis)
    order = xp.argsort(values, axis=axis, descending=largest, stable=True)
    return (
        xp.take_along_axis(values, order, axis=axis),
        xp.take_along_axis(chosen, order, axis=axis),
    )
