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

__all__ = ["along", "filtered_top_k", "partitioned_top_k", "sorted_top_k"]


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


#: Rows shorter than this are partitioned whole: a sample of one would cost
#: more than it saves.
FILTER_FROM = 4096
#: A row's sample: at least this many of its elements, evenly spaced (and at
#: least `SAMPLE_PER_K` per k), whose k-th sets the row's threshold.
SAMPLE = 1024
SAMPLE_PER_K = 64
#: The most candidates a row may have, as a share of its length (1/16): a
#: threshold that lets more through saves nothing, and the row is
#: partitioned whole.
MOST_CANDIDATES = 16


def filtered_top_k(
    module: ModuleType, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
) -> TopK:
    """The k of each row found among the few elements past a threshold.

    For a C-contiguous ``x`` along its last axis, with rows of `FILTER_FROM`
    elements or more and k small beside them (else `partitioned_top_k`):
    the k-th of an evenly spaced sample of each row is a threshold that at
    least k of the row's elements pass (the sample's own k), and every
    element of the row's top k passes it (none is beyond the k-th of a part
    of the row). One comparison with it leaves a few candidates a row,
    and only they are sorted: 2-3 times faster than ``argpartition`` on
    rows of 20,000 float64 (its SIMD partition on AVX-512 included), and
    holding a fifth of its 8 bytes an element there, 3/8 at most (a mask
    of the row and the candidates' places, then their rows and places, at
    most 1/`MOST_CANDIDATES` of it). NaN takes part as the largest value, as in
    ``argpartition``. Where a row has fewer than k candidates (a sample of
    NaNs) or too many (ties, a sample of its largest values), the whole
    array is partitioned instead, once the filter's arrays are freed. A
    shape-only trace is partitioned too: its bytes bound this path's.
    """
    n = x.shape[axis] if x.ndim else 0
    sample = max(SAMPLE, SAMPLE_PER_K * k)
    if (
        type(x) is not module.ndarray  # (a shape-only array: the bound, below)
        or axis != x.ndim - 1
        or not x.flags.c_contiguous
        or n < FILTER_FROM
        or k == 0
        or sample * 4 > n
        or x.size == 0
    ):
        return partitioned_top_k(module, xp, x, k, axis, largest=largest)
    rows = x.reshape(-1, n)  # (a view: x is C-contiguous)
    spaced = rows[:, :: n // sample]
    m = spaced.shape[1]
    kth = m - k if largest else k - 1
    # (a copy: a view would hold the partitioned sample, while a fallback runs)
    threshold = module.partition(spaced, kth, axis=1)[:, kth : kth + 1].copy()
    if largest:
        mask = rows >= threshold
        if rows.dtype.kind == "f":
            mask |= module.isnan(rows)  # (the largest: each a candidate)
    else:
        mask = rows <= threshold  # (a NaN threshold passes none: too few)
    if int(module.count_nonzero(mask)) * MOST_CANDIDATES > mask.size:
        del mask  # (too many in some row: their places are not worth making)
        return partitioned_top_k(module, xp, x, k, axis, largest=largest)
    # The candidates' places in the rows laid end to end (a 1-d nonzero: a
    # 2-d one took six times as long), each row's from where its first lies.
    flat = module.flatnonzero(mask)
    del mask
    bounds = module.searchsorted(flat, module.arange(rows.shape[0] + 1) * n)
    counts = module.diff(bounds)
    most = int(counts.max())
    if int(counts.min()) < k or most * MOST_CANDIDATES > n:
        del flat
        return partitioned_top_k(module, xp, x, k, axis, largest=largest)
    row_of, where = module.divmod(flat, n)
    del flat
    slot = module.arange(row_of.size) - bounds[:-1][row_of]
    if rows.dtype.kind == "f":
        fill = -module.inf if largest else module.inf
    else:
        limits = module.iinfo(rows.dtype)
        fill = limits.min if largest else limits.max
    values = module.full((rows.shape[0], most), fill, dtype=rows.dtype)
    positions = module.full((rows.shape[0], most), -1, dtype=where.dtype)
    values[row_of, slot] = rows[row_of, where]
    positions[row_of, slot] = where
    del row_of, where, slot
    # Each row's fill values sort behind its candidates (the dtype's extreme
    # value, in its last slots, and the sort is stable), and it has k of them.
    order = xp.argsort(values, axis=1, descending=largest, stable=True)[:, :k]
    chosen = module.take_along_axis(positions, order, axis=1)
    shape = (*x.shape[:-1], k)
    top = module.take_along_axis(values, order, axis=1).reshape(shape)
    return top, chosen.reshape(shape)
