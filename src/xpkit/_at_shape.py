"""What an update selects: ``x[idx]``'s shape, and whether a value fits it.

`xpkit._at.At` asks these once the index is checked (`xpkit._at_index`):
`basic_selection` (the shape an index of integers, slices and ``...``
selects, computed without the library), `selection_shape` (``x[idx]``'s,
by NumPy's rules where the library places the axes otherwise), and
`refuse_shape` / `check_fits` (a value that does not broadcast to the
selection, by NumPy's rule: a ValueError naming ``y``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._typing import Array, Value

__all__ = [
    "basic_selection",
    "check_fits",
    "refuse_shape",
    "selection_shape",
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
