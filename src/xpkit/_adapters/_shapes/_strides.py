"""Which axis of a shape-only array has unit stride: what a matrix product copies.

A BLAS matrix product takes a matrix whose elements lie next to each other
along one of its last two axes (row- or column-major, any leading
dimension). torch hands it each 2-d operand, and an operand it folds to 2-d
(``(b, n, d) @ (d, k)``), as it is where one of those axes has unit
stride, and otherwise first copies the operand whole into a contiguous
array, held while the product runs: ``x[:, ::2] @ w`` holds a copy of
``x[:, ::2]``, and so does ``x3[:, :, ::2] @ w``. A product with a
right-hand operand of 3 or more axes is batched, and copies neither
(measured on torch 2.13's CPU build, with a counting malloc). NumPy's
matmul takes any strides and copies nothing
(`Profile.strided_matmul_copies`).

A shape-only array keeps that axis as ``_unit``: 1, its last axis; 2, the
one before it; k, the k-th from the end; 0, none, or not known (a copy is
counted: the safe side). A new array is contiguous (1). Indexing and
permuting axes follow it here; any other view of an array that is not
contiguous is 0.

Its sign says whether the array is dense: positive where its elements lie
next to each other in some order of its axes (a contiguous array, and one
with its axes permuted, ``p.T``); negative where runs along that axis lie
apart (``p[:, :-16]``, ``p[:, :-16].T``, ``p.T[:10]``). NumPy's ufunc
buffers an operand of the second kind to run longer inner loops
(`rules.rows_apart`), and runs one of the first in memory order without.
Where a view's density is not known, it is counted apart (the safe side).
A view that runs backwards along an axis (``np.flip(p, 1)``, ``p[::-1]``,
``p[:, ::-2]``) is counted apart too: NumPy's ufunc buffers it, unless it is
one run backwards (a 1-d one, a contiguous array reversed along every
axis).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._rules import Shape

__all__ = [
    "copied_operands",
    "reshape_is_view",
    "unit_after_flip",
    "unit_after_index",
    "unit_after_permute",
]


class _Operand(Protocol):  # (the part of a ShapeArray read here)
    _unit: int
    _contiguous: bool
    shape: Shape

    @property
    def ndim(self) -> int: ...


_A = TypeVar("_A", bound=_Operand)


def unit_after_flip(x: _Operand, every: bool) -> int:
    """The unit-stride axis of ``x`` reversed along some axes (``every``: all), signed.

    Apart (negative: see the module), unless the view is one run backwards:
    ``x`` 1-d, or contiguous and reversed along every axis.
    """
    if x.ndim < 2 or (every and x._contiguous):
        return 0
    return -(abs(x._unit) or 1)


def unit_after_index(x: _Operand, items: Sequence[object], kept: bool) -> int:
    """The unit-stride axis of a basic index's view of ``x``, signed (see the module).

    ``items`` as `rules.expanded_index` makes them: an int or a slice for
    each axis, and the Nones (new axes) where they stand. ``kept``: whether
    the index keeps a contiguous array contiguous (`rules.indexed`). A view
    that runs backwards along an axis is apart.
    """
    unit = _unit_of_index(x, items, kept)
    return -(abs(unit) or 1) if _backwards(x.shape, items) else unit


def _backwards(shape: Shape, items: Sequence[object]) -> bool:
    """Whether an index's view runs backwards along an axis of more than one element."""
    at = 0
    for item in items:
        if item is None:
            continue
        if (
            isinstance(item, slice)
            and (item.step or 1) < 0
            and len(range(*item.indices(shape[at]))) > 1
        ):
            return True
        at += 1
    return False


def _unit_of_index(x: _Operand, items: Sequence[object], kept: bool) -> int:
    """`unit_after_index` of an index that runs forwards."""
    shape, unit = x.shape, abs(x._unit)
    ndim = len(shape)
    if not 1 <= unit <= ndim:
        return 0
    axis = ndim - unit  # (counted from the front)
    at = out = 0
    place = None
    for item in items:
        if item is None:
            out += 1
            continue
        if at == axis:
            if not isinstance(item, slice):
                return 0  # (an int takes the axis away)
            size = len(range(*item.indices(shape[at])))
            if item.step not in (None, 1) and size > 1:
                return 0
            place = out
        out += 1 if isinstance(item, slice) else 0
        at += 1
    if place is None:
        return 0
    return out - place if _dense_after_index(x, items, kept) else place - out


def _dense_after_index(x: _Operand, items: Sequence[object], kept: bool) -> bool:
    """Whether a basic index's view of a dense ``x`` is dense.

    A contiguous array's, where the index keeps it so; a transposed
    matrix's, where it takes one of its runs, or whole runs one after
    another; any other's, where the index takes every element: elsewhere
    not known (apart: the safe side).
    """
    if x._unit < 0:
        return False
    if x._contiguous:
        return kept
    if all(item is None or item == slice(None) for item in items):
        return True
    if len(x.shape) == 2 and x._unit == 2:  # (a transposed matrix: runs down axis 0)
        down, across = (item for item in items if item is not None)
        if not isinstance(across, slice):
            return True  # (one run)
        m, n = x.shape
        if len(range(*across.indices(n))) <= 1:
            return True
        whole = isinstance(down, slice) and down.indices(m) == slice(None).indices(m)
        return whole and across.step in (None, 1)
    return False


def unit_after_permute(unit: int, order: tuple[int, ...]) -> int:
    """The unit-stride axis of a view with its axes in ``order``, signed alike."""
    ndim = len(order)
    if not 1 <= abs(unit) <= ndim:
        return 0
    place = order.index(ndim - abs(unit))
    return (ndim - place) * (1 if unit > 0 else -1)


def copied_operands(x: _A, y: _A) -> list[_A]:
    """The operands of ``x @ y`` that torch copies first (see the module)."""
    if y.ndim >= 3:
        return []  # (a batched product, ``x`` broadcast to it: any strides)
    return [a for a in (x, y) if a.ndim >= 2 and abs(a._unit) not in (1, 2)]


def reshape_is_view(old: Shape, shape: Shape, contiguous: bool, lazy: bool) -> bool:
    """Whether reshaping an array of shape ``old`` to ``shape`` is a view.

    NumPy's and torch's rule, for an array that is ``contiguous`` or not,
    of a ``lazy`` library or not.

    Any array reshaped can be a view where the reshape only splits axes,
    or adds or drops axes of length 1 (strides exist for the parts of an
    axis whatever its own stride); a merge of axes is a view of a
    contiguous array only (of another, where its strides line up: not
    known here, counted as a copy: the safe side). A lazy library's
    reshape (Dask's) is a copy unless the array is contiguous.
    """
    if contiguous:
        return True
    if lazy or 0 in old or 0 in shape:
        return False
    new = [d for d in shape if d != 1]
    at = 0
    for d in (
        d for d in old if d != 1
    ):  # each axis must be the product of consecutive new ones
        product = 1
        while product < d and at < len(new):
            product *= new[at]
            at += 1
        if product != d:
            return False
    return at == len(new)
