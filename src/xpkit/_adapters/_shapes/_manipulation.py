"""The standard's manipulation and indexing functions on shape-only arrays.

Where the library makes views (`Profile.views`), a reshape of a contiguous
array, a transpose, ``expand_dims``, ``squeeze`` and ``broadcast_to`` share
their input's memory; concatenating, stacking, tiling, repeating and taking
make new arrays.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .._trace import active_trace
from . import _rules as rules
from ._array import ShapeArray, lift, made, permuted, unowned, view_of
from ._array import reshape as _reshape
from ._strides import unit_after_flip

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..._typing import Value

__all__ = [
    "TRANSPOSES",
    "broadcast_arrays",
    "broadcast_to",
    "concat",
    "expand_dims",
    "flip",
    "matrix_transpose",
    "moveaxis",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "squeeze",
    "stack",
    "take",
    "take_along_axis",
    "tile",
    "unstack",
]


def _array(x: Value) -> ShapeArray:
    return lift(active_trace(x), x)


def reshape(x: Value, /, shape: Value, *, copy: Value = None) -> ShapeArray:
    """``x`` with ``shape``."""
    return _reshape(_array(x), shape)


def permute_dims(x: Value, /, axes: Sequence[int]) -> ShapeArray:
    """``x`` with its axes in ``axes`` order."""
    a = _array(x)
    return permuted(a, tuple(rules.axes_of(i, a.ndim)[0] for i in axes))


def matrix_transpose(x: Value, /) -> ShapeArray:
    """The last two axes swapped (`permuted` refuses it under 2 axes): ``x.mT``."""
    a = _array(x)
    return permuted(a, (*range(a.ndim - 2), a.ndim - 1, a.ndim - 2))


def _transposed(x: ShapeArray) -> ShapeArray:
    """``x.T``: the axes reversed."""
    return permuted(x, tuple(reversed(range(x.ndim))))


#: `ShapeArray`'s transposes, which it takes where the package registers its modules.
TRANSPOSES = {"T": property(_transposed), "mT": property(matrix_transpose)}


def expand_dims(x: Value, /, axis: Value = 0) -> ShapeArray:
    """A new axis of length 1 at ``axis``."""
    a = _array(x)
    axes = axis if isinstance(axis, tuple | list) else (axis,)
    shape = list(a.shape)
    for ax in sorted(i % (a.ndim + len(axes)) for i in axes):
        shape.insert(ax, 1)
    return view_of(a, tuple(shape), contiguous=a._contiguous)


def squeeze(x: Value, /, axis: Value) -> ShapeArray:
    """Without the axes ``axis`` (of length 1)."""
    return _array(x).squeeze(axis)


def flip(x: Value, /, *, axis: Value = None) -> ShapeArray:
    """Reversed along ``axis`` (a view where the library makes one)."""
    a = _array(x)
    if a._trace.profile.flip_views:
        every = len(rules.axes_of(axis, a.ndim)) == a.ndim
        return view_of(a, a.shape, contiguous=False, unit=unit_after_flip(a, every))
    return made(a._trace, a.shape, a._name, (a,))


def roll(x: Value, /, shift: Value, *, axis: Value = None) -> ShapeArray:
    """Rolled along ``axis`` (a new array)."""
    a = _array(x)
    return made(a._trace, a.shape, a._name, (a,))


def _promoted(arrays: Sequence[ShapeArray]) -> str:
    name = arrays[0]._name
    for a in arrays[1:]:
        name = rules.promote(a._trace.profile, name, a._name)
    return name


def concat(
    arrays: Sequence[Value], /, *, axis: int | None = 0, **_: Value
) -> ShapeArray:
    """``arrays`` joined along ``axis`` (None: flattened)."""
    parts = [_array(a) for a in arrays]
    shape = rules.concat_shape([a.shape for a in parts], axis)
    return made(parts[0]._trace, shape, _promoted(parts), tuple(parts))


def stack(arrays: Sequence[Value], /, *, axis: int = 0, **_: Value) -> ShapeArray:
    """``arrays`` stacked along a new axis."""
    parts = [_array(a) for a in arrays]
    first = parts[0].shape
    if any(a.shape != first for a in parts):
        msg = "stack() of arrays of different shapes"
        raise parts[0]._trace.refuse(msg)
    shape = list(first)
    shape.insert(axis % (len(first) + 1), len(parts))
    trace = parts[0]._trace
    profile = trace.profile
    views = 0
    if profile.numpy_internals:  # NumPy's stack expands each input to a view first
        each = profile.view_bytes + profile.dim_bytes * len(shape) + _POINTER
        views = trace.hold(len(parts) * each)
    result = made(trace, tuple(shape), _promoted(parts), tuple(parts))
    trace.release(views)
    return result


#: Bytes of one reference in a list (NumPy's stack holds a list of views).
_POINTER = 8


def broadcast_to(x: Value, /, shape: Value) -> ShapeArray:
    """``x`` broadcast to ``shape`` (a view where the library makes one)."""
    a = _array(x)
    target = rules.as_shape(shape)
    if rules.broadcast(a.shape, target) != target:
        msg = f"cannot broadcast {a.shape} to {target}"
        raise a._trace.refuse(msg)
    return view_of(a, target, contiguous=False)


def broadcast_arrays(*arrays: Value) -> list[ShapeArray]:
    """``arrays`` broadcast to one shape."""
    parts = [_array(a) for a in arrays]
    shape = rules.broadcast(*(a.shape for a in parts))
    return [broadcast_to(a, shape) for a in parts]


def moveaxis(x: Value, source: Value, destination: Value, /) -> ShapeArray:
    """``x`` with axes ``source`` moved to ``destination``."""
    a = _array(x)
    src = [
        rules.axes_of(s, a.ndim)[0]
        for s in (source if isinstance(source, tuple | list) else (source,))
    ]
    dst = [
        rules.axes_of(d, a.ndim)[0]
        for d in (
            destination if isinstance(destination, tuple | list) else (destination,)
        )
    ]
    order = [i for i in range(a.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return permuted(a, tuple(order))


def tile(x: Value, repetitions: Value, /) -> ShapeArray:
    """``x`` repeated ``repetitions`` times along each axis."""
    a = _array(x)
    reps = rules.as_shape(repetitions)
    ndim = max(a.ndim, len(reps))
    shape = (1,) * (ndim - a.ndim) + a.shape
    reps = (1,) * (ndim - len(reps)) + reps
    tiled = tuple(d * r for d, r in zip(shape, reps, strict=True))
    laid = _contiguous_first(a)
    result = unowned(made(a._trace, tiled, a._name, (a, laid)))  # (a reshaped repeat)
    del laid
    return result


def _contiguous_first(a: ShapeArray) -> ShapeArray | None:
    """The contiguous copy NumPy's ``tile`` and ``repeat`` make of a strided view first.

    (``np.tile(x[:, ::2], (1, 2))`` held it beside the result: 1.5 times
    what the result alone counted.)
    """
    if a._contiguous or not a._trace.profile.numpy_internals:
        return None
    return made(a._trace, a.shape, a._name, (a,))


def repeat(x: Value, repeats: Value, /, *, axis: int | None = None) -> ShapeArray:
    """Each element repeated ``repeats`` times (an int: known in advance)."""
    a = _array(x)
    if not isinstance(repeats, int):
        msg = "repeat() by an array of counts (its shape depends on values)"
        raise a._trace.refuse(msg)
    if axis is None:
        return made(a._trace, (math.prod(a.shape) * repeats,), a._name, (a,))
    (ax,) = rules.axes_of(axis, a.ndim)
    shape = tuple(d * repeats if i == ax else d for i, d in enumerate(a.shape))
    laid = _contiguous_first(a)
    result = made(a._trace, shape, a._name, (a, laid))
    rules.hold_workspace("repeat", (a,), (result,), axis=ax)
    del laid
    return result


def unstack(x: Value, /, *, axis: int = 0) -> tuple[ShapeArray, ...]:
    """Views of ``x`` along ``axis``."""
    a = _array(x)
    (ax,) = rules.axes_of(axis, a.ndim)
    shape = tuple(d for i, d in enumerate(a.shape) if i != ax)
    return tuple(view_of(a, shape, contiguous=ax == 0) for _ in range(a.shape[ax]))


def take(x: Value, indices: Value, /, *, axis: int | None = None) -> ShapeArray:
    """Elements of ``x`` at ``indices`` along ``axis`` (a new array)."""
    a, i = _array(x), _array(indices)
    if axis is None:
        return made(a._trace, i.shape, a._name, (a, i))
    (ax,) = rules.axes_of(axis, a.ndim)
    shape = (*a.shape[:ax], *i.shape, *a.shape[ax + 1 :])
    result = made(a._trace, shape, a._name, (a, i))
    rules.hold_workspace("take", (a, i), (result,), axis=ax)
    return result


def take_along_axis(x: Value, indices: Value, /, *, axis: int = -1) -> ShapeArray:
    """Elements of ``x`` at ``indices`` along ``axis``, shaped like ``indices``."""
    a, i = _array(x), _array(indices)
    (ax,) = rules.axes_of(axis, a.ndim)
    shape = rules.broadcast(
        tuple(1 if k == ax else d for k, d in enumerate(a.shape)),
        tuple(1 if k == ax else d for k, d in enumerate(i.shape)),
    )
    shape = tuple(i.shape[ax] if k == ax else d for k, d in enumerate(shape))
    result = made(a._trace, shape, a._name, (a, i))
    if a._trace.profile.numpy_internals:  # (NumPy's fancy index: its buffers)
        size = min(math.prod(shape), rules.BUFFER_ELEMENTS)
        held = 2 * size * rules.itemsize("int64")  # (the indices and the arange)
        a._trace.release(a._trace.hold(rules.ITERATOR_BYTES + held))
    return result
