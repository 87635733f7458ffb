"""What an update selects: ``x[idx]``'s shape, and the value made to fit it.

`xpkit._at.At` asks these once the index is checked (`xpkit._at_index`):
`basic_selection` (the shape an index of integers, slices and ``...``
selects, computed without the library), `selection_shape` (``x[idx]``'s,
by NumPy's rules where the library places the axes otherwise),
`refuse_shape` / `check_fits` (a value that does not broadcast to the
selection, by NumPy's rule: a ValueError naming ``y``), and the value
laid out as each library takes it: `to_selection`, `with_sliced_axes`,
`reversed_along`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._typing import Array, Namespace, Value

__all__ = [
    "basic_selection",
    "check_fits",
    "refuse_shape",
    "reversed_along",
    "selection_shape",
    "to_selection",
    "with_sliced_axes",
]


def basic_selection(shape: tuple[Value, ...], idx: Value) -> tuple[int, ...] | None:
    """The shape of ``x[idx]`` for a basic index (`is_basic_index`, checked).

    None where a size is not known here (Dask's unknown chunks, a symbolic
    size) or ``idx`` indexes more axes than ``shape`` has.
    """
    parts = idx if type(idx) is tuple else (idx,)
    sizes = [d for d in shape if isinstance(d, int) and not isinstance(d, bool)]
    if len(sizes) < len(shape):
        return None
    named = sum(p is not Ellipsis for p in parts)
    if named > len(sizes):
        return None
    out: list[int] = []
    axis = 0
    for part in parts:
        if part is Ellipsis:
            rest = len(sizes) - named
            out += sizes[axis : axis + rest]
            axis += rest
        elif isinstance(part, slice):
            out.append(len(range(*part.indices(sizes[axis]))))
            axis += 1
        else:
            axis += 1  # (an integer: its axis dropped)
    return (*out, *sizes[axis:])


def refuse_shape(
    adapter: Adapter,
    x: Array,
    idx: Value,
    numpy_shape: tuple[int, ...] | None,
    y: Value,
    error: Exception,
) -> None:
    """ValueError naming ``y`` where its shape does not broadcast to ``x[idx]``'s.

    Asked once the library's update has failed (torch's RuntimeError names
    neither ``y`` nor the selection), so that a good update pays nothing
    for it. Else the library's error stands. ``numpy_shape``: ``x[idx]``'s
    shape by NumPy's rules where the library places its axes otherwise
    (`xpkit._at_index.placement`), else None.
    """
    if not adapter.owns(y):
        return
    selected = selection_shape(x, idx, numpy_shape)
    if selected is None:
        return  # (the library's own error is the one to see)
    shape = tuple(y.shape)
    if all(isinstance(d, int) for d in shape):  # (else Dask's, masked)
        check_fits(shape, selected, error)


def selection_shape(
    x: Array, idx: Value, numpy_shape: tuple[int, ...] | None
) -> tuple[int, ...] | None:
    """The shape of ``x[idx]`` by NumPy's rules; None where not known here.

    ``numpy_shape``: that shape, where the library places the axes
    otherwise (`refuse_shape`).
    """
    try:
        selected = tuple(x[idx].shape) if numpy_shape is None else numpy_shape
    except Exception:  # noqa: BLE001 - the library's own error is the one to see
        return None
    return selected if all(isinstance(d, int) for d in selected) else None


def check_fits(
    shape: tuple[int, ...], selected: tuple[int, ...], error: Exception | None = None
) -> None:
    """ValueError naming ``y`` where its ``shape`` does not broadcast to ``selected``.

    By NumPy's rule for ``x[idx] = y``: leading axes of one element beyond
    ``selected``'s are dropped.
    """
    extra = max(len(shape) - len(selected), 0)
    trailing = zip(reversed(shape), reversed(selected), strict=False)
    if all(d == 1 for d in shape[:extra]) and all(a in (1, b) for a, b in trailing):
        return
    msg = (
        f"y has shape {shape}, which does not broadcast to the shape {selected} "
        "of the elements x[idx] selects"
    )
    raise ValueError(msg) from error


def with_sliced_axes(
    y: Array, x: Array, idx: Value, sliced: Value, xp: Namespace
) -> Array:
    """``y`` for ``x[sliced] = y``, where it was for ``x[idx] = y`` (`ints_as_slices`).

    The selections hold the same elements in the same order, ``sliced``'s
    with an axis of one element for each integer: a reshape.
    """
    selected, target = tuple(x[idx].shape), tuple(x[sliced].shape)
    if not all(isinstance(d, int) for d in (*selected, *target)):
        return y
    return xp.reshape(xp.broadcast_to(y, selected), target)


def to_selection(
    y: Array,
    x: Array,
    idx: Value,
    xp: Namespace,
    *,
    broadcast: bool,
    numpy_shape: tuple[int, ...] | None = None,
) -> Array:
    """``y`` as NumPy's ``x[idx] = y`` takes it.

    Its leading axes of one element are dropped where it has more axes than
    ``x[idx]`` (JAX refused them), and with ``broadcast`` (for ndonnx, whose
    update did not) it is broadcast to that shape. Left as it is where a
    size is not known (a symbolic axis); refused where it does not
    broadcast (ValueError: ndonnx's would say so only once it is read), to
    ``x[idx]``'s shape by NumPy's rules (``numpy_shape``, where the library
    places the axes otherwise: `placement`).
    """
    selected = tuple(x[idx].shape)
    shape = tuple(y.shape)
    if not all(isinstance(d, int) for d in (*selected, *shape)):
        return y
    check_fits(shape, selected if numpy_shape is None else numpy_shape)
    extra = len(shape) - len(selected)
    if extra > 0 and all(d == 1 for d in shape[:extra]):
        y, shape = xp.reshape(y, shape[extra:]), shape[extra:]
    if not broadcast or shape == selected or len(shape) > len(selected):
        return y
    return xp.broadcast_to(y, selected)


def reversed_along(y: Array, axes: tuple[int, ...], xp: Namespace) -> Array:
    """``y`` reversed along each of ``axes`` (from its last) where it has more than one element."""
    for axis in axes:
        shape = tuple(y.shape)
        if len(shape) >= -axis and shape[axis] != 1:
            y = xp.flip(y, axis=axis)
    return y
