"""What an update's index means: NumPy's rules, checked and kept on every library.

`xpkit._at.At` takes the index through these, in order: `plain_index`
(NumPy integers as Python's; a bool, a float, None or a masked array
refused by name), `check_index` (integers in range, one ``...``),
`as_positions` (a narrow integer array as the library's index dtype),
`completed` (a trailing ``...``: the axes left out are whole), `forward`
(a slice that steps back as the forward one of the same elements, and the
result's axes that run backwards) and `placement` (where a library whose
integers are basic indices, torch's and Dask's, places the result's axes
otherwise than NumPy: the value is moved to match). `xpkit._at_shape`
says what shape the index selects and whether a value fits it.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from array_api_compat import array_namespace

from ._adapters._registry import adapter_for_array
from ._dtypes import dtype_name
from ._shown import shown

if TYPE_CHECKING:
    from ._typing import Array, HostArray, Value

__all__ = [
    "Placement",
    "as_positions",
    "check_index",
    "completed",
    "forward",
    "is_basic_index",
    "is_basic_part",
    "is_mask_part",
    "is_positions",
    "part_width",
    "placement",
    "plain_index",
]


def plain_index(idx: Value) -> Value:
    """``idx`` with NumPy integers as Python's (every library takes those).

    A bool or a float is no index: TypeError (NumPy reads a bool as a new
    axis, ndonnx as 0 or 1; Dask took a float); so is a masked array, and
    None: the standard's ``__setitem__`` takes no new axis (Dask raised
    AttributeError, array-api-strict IndexError).
    """
    if type(idx) is tuple:
        return tuple(_plain_part(p, f"idx[{k}]") for k, p in enumerate(idx))
    return _plain_part(idx, "idx")


def is_basic_index(idx: Value) -> bool:
    """Whether ``idx`` (after `plain_index`) holds only integers, slices and ``...``.

    Such an index selects the same elements, its axes in the same places,
    on every library: none of the steps for arrays in an index applies.
    """
    parts = idx if type(idx) is tuple else (idx,)
    return all(type(p) in _BASIC for p in parts)


#: The types of a basic index's parts, as `plain_index` leaves them.
_BASIC = frozenset({int, slice, type(Ellipsis)})


def _list_index(part: list[Value], name: str) -> HostArray:
    """A list in an index as the NumPy array NumPy reads it as (``[]``: no positions).

    torch, Dask and NumPy took a list each their own way (torch updated a
    1-d array through ``[[True, False, True, False]]``, which NumPy
    refuses), JAX, ndonnx and array-api-strict refused it.
    """
    try:
        array = np.asarray(part) if part else np.zeros(0, dtype=np.intp)
    except ValueError as exc:  # (ragged)
        msg = f"{name}={shown(part)} is not an index: {exc}"
        raise TypeError(msg) from None
    return array


def _plain_part(part: Value, name: str) -> Value:
    if part is None:
        msg = (
            f"{name}=None adds an axis, which an update's index cannot take "
            "(the standard's __setitem__ takes none): leave it out"
        )
        raise TypeError(msg)
    if isinstance(part, (bool, np.bool_, float, np.floating)):
        msg = (
            f"{name}={part!r} is not an index: give an integer, a slice, "
            "..., an integer array or a boolean mask array"
        )
        raise TypeError(msg)
    if isinstance(part, np.integer):
        return operator.index(part)
    if isinstance(part, slice):  # (its bounds: ints, as every library's)
        return slice(
            *(_slice_bound(b, name) for b in (part.start, part.stop, part.step))
        )
    if isinstance(part, (str, bytes)):
        msg = (
            f"{name}={shown(part)} is not an index: give an integer, a slice, "
            "..., an integer array or a boolean mask array"
        )
        raise TypeError(msg)
    if type(part) is list:  # (NumPy's array of it, as NumPy reads a list)
        part = _list_index(part, name)
    adapter = adapter_for_array(part)  # (an array its library's functions misread)
    refused = None if adapter is None else adapter.refused_operand(part)
    if refused is not None:
        msg = f"{name} is {refused}"
        raise TypeError(msg)
    if adapter is not None:  # (Dask read a float array as a mask, a NumPy one
        # as positions; the others refuse it)
        try:
            kind = dtype_name(part.dtype)
        except (AttributeError, TypeError):
            kind = None
        if kind is not None and not kind.startswith(("int", "uint", "bool")):
            msg = (
                f"{name} is an array of {kind}, which is not an index: give an "
                "integer array or a boolean mask array"
            )
            raise TypeError(msg)
    return part


def _slice_bound(bound: Value, name: str) -> int | None:
    """A slice's start, stop or step as an int (or None); a TypeError naming it else."""
    if bound is None or type(bound) is int:
        return bound
    if not isinstance(bound, (bool, np.bool_)):
        try:
            return operator.index(bound)
        except TypeError:
            pass
    msg = f"{name} is a slice of {shown(bound)}: its bounds and step must be integers"
    raise TypeError(msg)


#: Integer index dtypes every library takes as positions.
_POSITIONS = frozenset({"int64", "int32"})


def as_positions(part: Value) -> Value:
    """An integer index array of a narrower dtype as the library's index dtype.

    torch read a uint8 array as a mask (``[0, 1, 1, 0]`` updated position
    2, which it does not hold) and refused int8 and int16 ones.
    """
    if adapter_for_array(part) is None:
        return part
    try:
        name = dtype_name(part.dtype)
    except (AttributeError, TypeError):
        return part
    if name is None or name in _POSITIONS or not name.startswith(("int", "uint")):
        return part
    ns = array_namespace(part)
    try:  # (the standard's: int32 for JAX without 64-bit types)
        indexing = ns.__array_namespace_info__().default_dtypes()["indexing"]
    except (AttributeError, KeyError, TypeError):
        indexing = ns.int64
    return ns.astype(part, indexing)


def check_index(x: Array, idx: Value) -> None:
    """IndexError where an integer in ``idx`` is out of range for ``x``'s shape.

    The same check on every library, where the shape is static (JAX under
    ``jit`` included); an axis of unknown size (Dask's unknown chunks, a
    symbolic size) and an index of a kind not known here are not checked.
    """
    parts = idx if type(idx) is tuple else (idx,)
    shape = tuple(x.shape)
    widths = [part_width(p) for p in parts]
    if sum(p is Ellipsis for p in parts) > 1:  # (torch and ndonnx took it)
        msg = f"idx={idx!r:.80} holds more than one ...: an index takes one at most"
        raise IndexError(msg)
    counted = [w for w in widths if w is not None]
    if len(counted) < len(widths):
        return
    if sum(counted) > len(shape):
        msg = f"idx indexes {sum(counted)} axes, but x has {len(shape)} (shape {shape})"
        raise IndexError(msg)
    ellipsis = next((k for k, p in enumerate(parts) if p is Ellipsis), len(parts))
    axis = 0
    for k, (part, width) in enumerate(zip(parts, counted, strict=True)):
        if k == ellipsis:
            axis = len(shape) - sum(counted[k + 1 :])
            continue
        name = "idx" if type(idx) is not tuple else f"idx[{k}]"
        if is_mask_part(part):
            _check_mask_shape(part, name, axis, shape[axis : axis + width])
        elif width == 1:
            _check_in_range(part, name, axis, shape[axis])
        axis += width


def _check_mask_shape(mask: Array, name: str, axis: int, axes: tuple[int, ...]) -> None:
    """IndexError where a boolean mask's shape is not that of the axes it indexes.

    NumPy's rule (ndonnx broadcast a (1, 3) mask over (2, 3): every row
    updated). Axes of unknown size are not compared.
    """
    for k, (size, own) in enumerate(zip(axes, tuple(mask.shape), strict=True)):
        if isinstance(size, int) and isinstance(own, int) and size != own:
            msg = (
                f"{name} is a boolean mask of shape {tuple(mask.shape)}, but the "
                f"axes of x it indexes have shape {axes}: axis {axis + k} has "
                f"{size} elements, the mask {own}"
            )
            raise IndexError(msg)


def completed(x: Array, idx: Value) -> Value:
    """``idx`` with a trailing ``...`` where it indexes fewer axes than ``x`` has.

    NumPy's rule, which the standard leaves unspecified and array-api-strict
    and ndonnx refuse: ``at(x, 0)`` on a matrix updates its first row on
    every library. An index whose width is not known here is left alone.
    """
    parts = idx if type(idx) is tuple else (idx,)
    if any(p is Ellipsis or is_mask_part(p) for p in parts):
        return idx  # (the standard takes a boolean mask only as the whole index)
    widths = [part_width(p) for p in parts]
    if None in widths or sum(w for w in widths if w is not None) >= len(x.shape):
        return idx
    return (*parts, Ellipsis)


def part_width(part: Value) -> int | None:
    """How many axes of ``x`` an index part uses; None where not known here."""
    if part is None or part is Ellipsis:
        return 0
    if isinstance(part, (int, np.integer, slice)):
        return 1
    adapter = adapter_for_array(part)
    if adapter is None:
        return None  # a list, or an object with __index__: the library judges
    try:
        name = dtype_name(part.dtype)
    except (AttributeError, TypeError):
        return None
    if name == "bool":
        return len(tuple(part.shape))
    return 1 if name is not None and name.startswith(("int", "uint")) else None


def is_mask_part(part: Value) -> bool:
    """Whether the index part ``part`` is a boolean mask array (it holds no positions)."""
    if isinstance(part, (int, np.integer, slice)) or adapter_for_array(part) is None:
        return False
    try:
        return dtype_name(part.dtype) == "bool"
    except (AttributeError, TypeError):
        return False


def _check_in_range(part: Value, name: str, axis: int, size: object) -> None:
    """IndexError where the integer (or integer array) ``part`` misses the axis."""
    if isinstance(size, bool) or not isinstance(size, int):
        return  # an unknown (None, NaN) or symbolic size
    if isinstance(part, slice):
        return
    if isinstance(part, (int, np.integer)):
        i = operator.index(part)
        if not -size <= i < size:
            msg = f"{name}={i} is out of range for axis {axis} of x, which has size {size}"
            raise IndexError(msg)
        return
    adapter = adapter_for_array(part)
    if adapter is None or not adapter.values_at_hand(part):
        return  # traced (jax.jit) or lazy (Dask) values: not at hand
    if math.prod(part.shape) == 0:
        return
    # The extremes, computed where the index lives: two numbers travel
    # (the whole index, where the library has no min of its dtype: torch's
    # uint16, uint32 and uint64).
    ixp = array_namespace(part)
    try:
        low = int(adapter.to_numpy(ixp.min(part)))
        high = int(adapter.to_numpy(ixp.max(part)))
    except (NotImplementedError, RuntimeError, TypeError):
        on_host = adapter.to_numpy(part)
        low, high = int(on_host.min()), int(on_host.max())
    for value in (low, high):
        if not -size <= value < size:
            msg = (
                f"{name} holds {value}, out of range for axis {axis} of x, "
                f"which has size {size}"
            )
            raise IndexError(msg)


def forward(x: Array, idx: Value) -> tuple[Value, tuple[int, ...]]:
    """``idx`` with each negative-step slice as the forward one of the same elements.

    ``x[8:2:-2]`` is ``x[4:9:2]`` read backwards, on every library (see the
    module's docstring for why). Returns the index and the axes of
    ``x[idx]`` that run backwards, counted from its last (-1): an update's
    array value is reversed along them (`_reversed`). The axes follow
    NumPy's rule, which torch keeps: a slice or ``...`` keeps its axes in
    order; the axes of integer arrays (a mask: one) and, beside them,
    integers stand where the first of them does if they are adjacent, else
    before all others. An index whose widths are not known here is left to
    the library.
    """
    parts = idx if type(idx) is tuple else (idx,)
    if not any(_steps_back(p) for p in parts):
        return idx, ()
    widths = [part_width(p) for p in parts]
    if None in widths or sum(p is Ellipsis for p in parts) > 1:
        return idx, ()
    counted = [w for w in widths if w is not None]
    shape = tuple(x.shape)
    rest = len(shape) - sum(counted)  # the axes ``...`` (or the end) stands for
    advanced = [k for k, p in enumerate(parts) if not is_basic_part(p)]
    block = _advanced_ndim(parts, advanced)
    together = (
        advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    )
    out: list[int | None] = (
        [] if together else [None] * block
    )  # result axes: a slice's k
    axis, forward = 0, list(parts)
    for k, (part, width) in enumerate(zip(parts, counted, strict=True)):
        if part is Ellipsis:
            out += [None] * rest
            axis += rest
            continue
        if isinstance(part, slice):
            out.append(k)
            forward[k] = _forward_slice(part, shape[axis])
        elif advanced and together and k == advanced[0]:
            out += [None] * block
        axis += width
    if not any(p is Ellipsis for p in parts):
        out += [None] * rest
    if any(f is None for f in forward):
        return idx, ()  # (a size not known here)
    backwards = tuple(
        r - len(out)
        for r, k in enumerate(out)
        if k is not None and _steps_back(parts[k])
    )
    return (tuple(forward) if type(idx) is tuple else forward[0]), backwards


def _steps_back(part: Value) -> bool:
    """Whether ``part`` is a slice with a negative step."""
    if not isinstance(part, slice) or part.step is None:
        return False
    try:
        return operator.index(part.step) < 0
    except TypeError:
        return False


def ints_as_slices(x: Array, idx: Value) -> tuple[Value, ...] | None:
    """``idx`` with each integer a one-element slice, where one stands beside an integer array.

    For a library whose ``x[idx] = y`` goes wrong there
    (`Adapter.sets_ints_beside_arrays`); the update's value then gets a
    one-element axis for each (`At`). A 0-d integer array (which Dask does
    not assign at) becomes one of one element, its axis kept the same way.
    None where ``idx`` holds neither an integer beside an integer array nor
    a 0-d one, or a size is not known here.
    """
    parts = idx if type(idx) is tuple else (idx,)
    zero_d = [is_positions(p) and not tuple(p.shape) for p in parts]
    if any(zero_d):
        parts = tuple(p[None] if z else p for p, z in zip(parts, zero_d, strict=True))
    if not any(type(p) is int for p in parts) or not any(map(is_positions, parts)):
        return parts if any(zero_d) else None
    widths = [part_width(p) for p in parts]
    shape = tuple(x.shape)
    if None in widths or not all(isinstance(d, int) for d in shape):
        return None
    rest = len(shape) - sum(w for w in widths if w is not None)
    out: list[Value] = []
    axis = 0
    for part, width in zip(parts, widths, strict=True):
        if part is Ellipsis:
            axis += rest
        if type(part) is int:  # (in range: `check_index` said so)
            start = part % shape[axis]
            out.append(slice(start, start + 1))
        else:
            out.append(part)
        axis += width or 0
    return tuple(out)


def is_positions(part: Value) -> bool:
    """Whether ``part`` is an integer index array (not a mask, not an integer)."""
    if isinstance(part, (int, np.integer, slice)) or part is None or part is Ellipsis:
        return False
    width = part_width(part)
    return width == 1 and not is_mask_part(part)


def is_basic_part(part: Value) -> bool:
    """Whether ``part`` is a slice or ``...`` (an integer joins the arrays' block if any)."""
    return isinstance(part, slice) or part is Ellipsis


def _advanced_ndim(parts: tuple[Value, ...], advanced: list[int]) -> int:
    """How many axes the integer arrays and masks of ``parts`` make, broadcast together.

    Integers alone make none (an integer drops its axis); a mask makes one.
    """
    ndims = [
        1 if is_mask_part(parts[k]) else len(tuple(parts[k].shape))
        for k in advanced
        if not isinstance(parts[k], int)
    ]
    return max(ndims, default=0)


def _forward_slice(part: slice, size: object) -> slice | None:
    """The slice with a positive step that selects ``part``'s elements (None: size unknown)."""
    if not _steps_back(part):
        return part
    if isinstance(size, bool) or not isinstance(size, int):
        return None
    chosen = range(*part.indices(size))
    if not chosen:
        return slice(0, 0)
    return slice(chosen[-1], chosen[0] + 1, -chosen.step)


class Placement(NamedTuple):
    """How to lay a value out for a library that places ``x[idx]``'s axes otherwise.

    ``shape``: ``x[idx]``'s shape by NumPy's rules (the value is broadcast
    to it); ``order``: its axes in the library's order (``permute_dims``).
    """

    shape: tuple[int, ...]
    order: tuple[int, ...]


#: A result axis: ("s", k) slice k's, ("e", j) the j-th that ``...`` or the
#: end leaves whole, ("b", j) the j-th of the integer arrays' block.
_Label = tuple[str, int]


def placement(x: Array, idx: Value) -> Placement | None:
    """Where a library whose integers are basic indices places ``x[idx]``'s axes.

    NumPy's rule: the integers and integer arrays are one block, whose axes
    stand where the first of them does if they are adjacent in the index
    (a ``...`` between them, even of no axes, parts them), else first.
    torch and Dask read an integer, and a 0-d array, as a basic index: only
    the arrays make the block, adjacent once the integers are gone and
    ``...`` is spread. ``x[0, :, arange(4)]`` then put the block last, and
    a square value was written transposed. None where both place the axes
    alike, or where a size is not known here (a mask's block).
    """
    parts = idx if type(idx) is tuple else (idx,)
    widths = [part_width(p) for p in parts]
    if None in widths or sum(p is Ellipsis for p in parts) > 1:
        return None
    shape = tuple(x.shape)
    rest = len(shape) - sum(w for w in widths if w is not None)
    if any(is_mask_part(p) for p in parts) or not all(
        isinstance(d, int) for d in shape
    ):
        return None
    arrays = [
        k
        for k, p in enumerate(parts)
        if not is_basic_part(p) and not isinstance(p, int)
    ]
    shaped = [k for k in arrays if tuple(parts[k].shape)]
    if not shaped:
        return None
    try:
        block = tuple(np.broadcast_shapes(*(tuple(parts[k].shape) for k in arrays)))
    except ValueError:
        return None  # (the library's error says so)
    theirs = _labels(parts, rest, shaped, len(block), _adjacent(parts, rest, shaped))
    advanced = [k for k, p in enumerate(parts) if not is_basic_part(p)]
    ours = _labels(parts, rest, advanced, len(block), _contiguous(advanced))
    if theirs == ours:
        return None
    sizes = _sizes(parts, shape, rest, block)
    return Placement(
        tuple(sizes[label] for label in ours), tuple(map(ours.index, theirs))
    )


def _contiguous(positions: list[int]) -> bool:
    return positions == list(range(positions[0], positions[-1] + 1))


def _adjacent(parts: tuple[Value, ...], rest: int, arrays: list[int]) -> bool:
    """Whether ``arrays`` stand side by side once integers are gone and ``...`` spread."""
    at, positions = 0, []
    for k, part in enumerate(parts):
        if part is Ellipsis:
            at += rest
        elif k in arrays:
            positions.append(at)
            at += 1
        elif isinstance(part, slice):
            at += 1
    return _contiguous(positions)


def _labels(
    parts: tuple[Value, ...],
    rest: int,
    block_parts: list[int],
    block: int,
    together: bool,
) -> list[_Label]:
    """The result's axes in order, the block made of ``block_parts``."""
    blocked = [("b", j) for j in range(block)]
    out: list[_Label] = [] if together else list(blocked)
    whole = [("e", j) for j in range(rest)]
    for k, part in enumerate(parts):
        if part is Ellipsis:
            out += whole
        elif isinstance(part, slice):
            out.append(("s", k))
        elif together and k == block_parts[0]:
            out += blocked
    if not any(p is Ellipsis for p in parts):
        out += whole
    return out


def _sizes(
    parts: tuple[Value, ...], shape: tuple[int, ...], rest: int, block: tuple[int, ...]
) -> dict[_Label, int]:
    """The size of each result axis."""
    sizes: dict[_Label, int] = {("b", j): d for j, d in enumerate(block)}
    axis, whole_from = 0, len(shape) - rest
    for k, part in enumerate(parts):
        if part is Ellipsis:
            whole_from = axis
            axis += rest
            continue
        if isinstance(part, slice):
            sizes[("s", k)] = len(range(*part.indices(shape[axis])))
        width = part_width(part)
        axis += 1 if width is None else width
    sizes.update({("e", j): shape[whole_from + j] for j in range(rest)})
    return sizes
