"""Moves between libraries: an array of any library, on any device, to a `Backend`.

DLPack first (zero-copy where the two libraries and devices allow it), a
copy through the host only where no DLPack path exists, ``copy=``
honoured as the standard's ``from_dlpack`` does, and an explicit error
where the array cannot arrive as asked. `Backend.move` is `move`;
`Backend.check_arrays` (``convert=True``) uses `move_from`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from array_api_compat import numpy as _np_xp

from ._adapters._registry import adapter_for_array, refuse_lossy, to_host
from ._args import check_copy
from ._cast_checks import check_cast_keeps_values
from ._dtypes import dtype_name, own_dtype

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._facts import ArrayT, Facts
    from ._typing import Array, DType, NativeDevice, Value

__all__ = ["move", "move_from"]

#: What a library's ``from_dlpack`` raises when it cannot take an array
#: (another device, a layout or dtype it refuses, ``copy=False`` impossible).
_NO_DLPACK = (BufferError, TypeError, ValueError, RuntimeError, NotImplementedError)


def move(f: Facts[ArrayT], x: Value, copy: bool | None) -> ArrayT:
    """`Backend.move`: ``x``, an array of any library, onto the bound device."""
    check_copy(copy)
    source = adapter_for_array(x)
    if source is None:
        msg = (
            f"x must be an array of a supported library, got "
            f"{type(x).__qualname__}; use Backend.asarray for lists and scalars"
        )
        raise TypeError(msg)
    return move_from(f, x, source, f.device, f.native, copy, "x")


def move_from(
    f: Facts[ArrayT],
    x: Array,
    source: Adapter,
    dev_str: str,
    native: NativeDevice,
    copy: bool | None,
    param: str,
) -> ArrayT:
    """``x`` of library ``source`` onto ``native`` (named ``dev_str``).

    Narrowed (float64 to float32 where the device lacks 64 bits) only
    when no value changes, as `asarray` narrows.
    """
    refuse_lossy(source, x, param)
    own = own_dtype(x, param)  # (a TypeError naming param, not dtype=)
    target, xp_dtype = f.dtype_pair(own, dev_str, f"{param} has dtype {own}")
    if target != own and copy is False:  # (JAX without x64 narrowed, copying)
        where = dev_str or f.device
        msg = (
            f"{param} has dtype {own}, which becomes {target} on {where!r} (the "
            "device holds no 64-bit floats): a cast copies, and copy=False "
            "refuses a copy"
        )
        raise ValueError(msg)
    if target != own and source.values_at_hand(x):
        # (cast where it arrives, as that library casts its own arrays)
        narrowing = f.adapter.float64_narrowing(on_host=False)
        check_cast_keeps_values(
            source.namespace(), x, own, target, param, source.to_numpy, narrowing
        )
    moved: Array  # an array of this library (ArrayT promises no dtype to read)
    if source is f.adapter:
        moved = _within(f, x, dev_str, native, xp_dtype, copy, param)
    else:
        arrival = _Arrival(dev_str, native, own, target, xp_dtype)
        moved = _import(f, x, source, arrival, copy, param)
    if dtype_name(moved.dtype) != target:  # narrowed for this device
        moved = f.xp.astype(moved, xp_dtype)
    result: ArrayT = moved
    return result


def _within(
    f: Facts[ArrayT],
    x: Array,
    dev_str: str,
    native: NativeDevice,
    xp_dtype: DType,
    copy: bool | None,
    param: str,
) -> ArrayT:
    """An array of this library onto ``native``, as a plain array in ``xp_dtype``.

    ``x`` itself where it is one already there; else the library's own
    ``asarray`` (byte-swapped NumPy arrays and subclasses become plain
    arrays, as `asarray` makes them).
    """
    adapter = f.adapter
    here = adapter.device_key(x) == adapter.native_device_key(native)
    if here and not copy and f.is_own_like(x):
        same: ArrayT = x
        return same
    if copy is False:
        where = adapter.device_str(adapter.device_of(x))
        why = (
            f"is a {type(x).__qualname__} of dtype {x.dtype}, not a plain array"
            if here
            else f"is on device {where!r}, not {dev_str!r}"
        )
        msg = f"{param} {why}: it cannot move to {dev_str!r} with copy=False"
        raise ValueError(msg)
    if here:
        return f.xp.asarray(x, dtype=xp_dtype, device=native, copy=copy)
    moved: ArrayT = adapter.onto_device(f.xp, x, native, xp_dtype, copy)
    return moved


def _import(
    f: Facts[ArrayT],
    x: Array,
    source: Adapter,
    arrival: _Arrival,
    copy: bool | None,
    param: str,
) -> ArrayT:
    """Another library's array: DLPack, else (copies allowed) the host.

    Memory is shared only where that is safe: not where the target
    cannot view the layout as it is (then the source library copies
    it first), nor a read-only source with a library whose arrays can
    always be written (then the copy is the target's).
    """
    adapter = f.adapter
    hazard = source.unshareable(x) if source.dlpack_export else None
    must_copy = hazard is not None and (not hazard.read_only or adapter.always_writable)
    if must_copy and copy is False:
        assert hazard is not None
        msg = (
            f"{param} (an array of {source.label}) {hazard.reason}: it cannot "
            f"become an array of {adapter.label} on {arrival.device!r} without "
            "a copy (copy=False)"
        )
        raise ValueError(msg)
    why = f"{source.label} arrays do not export DLPack"
    if source.dlpack_export and adapter.dlpack_import:
        shared, ask = x, copy
        if hazard is not None and not hazard.read_only:
            shared, ask = source.contiguous_copy(x), None  # new memory already
        elif must_copy:
            ask = True
        try:
            moved = f.xp.from_dlpack(shared, device=arrival.native, copy=ask)
        except _NO_DLPACK as exc:
            why = f"DLPack refused it: {type(exc).__name__}: {exc}"
        else:
            return _as_asked(f, source, shared, moved, ask, param)
        arrived = _dlpack_where_it_is(f, shared, arrival.native, ask)
        if arrived is not None:
            return _as_asked(f, source, shared, arrived, ask, param)
    elif source.dlpack_export:
        why = f"{adapter.label} does not import DLPack"
    if copy is False:
        msg = (
            f"{param} (an array of {source.label}) cannot become an array of "
            f"{adapter.label} on {arrival.device!r} without a copy ({why})"
        )
        raise ValueError(msg)
    host = to_host(x, param)
    if arrival.name != arrival.own:  # values not at hand in the source
        narrowing = f.adapter.float64_narrowing(on_host=True)
        check_cast_keeps_values(
            _np_xp, host, arrival.own, arrival.name, param, np.asarray, narrowing
        )
    if (copy or must_copy) and (host is x or not host.flags.owndata):
        host = host.copy()  # from_host may keep the host buffer
    return f.from_host(host, arrival.dtype, arrival.native)


def _as_asked(
    f: Facts[ArrayT],
    source: Adapter,
    shared: Array,
    moved: ArrayT,
    ask: bool | None,
    param: str,
) -> ArrayT:
    """``from_dlpack``'s array held to the ``copy`` it was asked for.

    JAX's ``from_dlpack`` takes ``copy=`` and ignores it: it viewed a torch
    tensor (and a NumPy array at an address it could take) asked to copy,
    so the "copy" changed with its source, and copied an offset view asked
    not to. Where both arrays' extents are known, a view asked to copy is
    copied by the target library, and a copy asked to share, in the same
    place (the host, or one GPU, named alike: `dlpack_place`), raises.
    """
    if ask is None:
        return moved
    mine, theirs = f.adapter.memory_extent(moved), source.memory_extent(shared)
    if mine is None or theirs is None or mine.low == mine.high:
        return moved
    if ask:
        if mine.overlaps(theirs):
            copied: ArrayT = f.adapter.own_copy(moved)
            return copied
        return moved
    if mine.place == theirs.place and not mine.overlaps(theirs):
        msg = (
            f"{param} (an array of {source.label}) was copied by "
            f"{f.adapter.label}'s from_dlpack, which cannot view it as it lies "
            "(copy=False)"
        )
        raise ValueError(msg)
    return moved


def _dlpack_where_it_is(
    f: Facts[ArrayT], x: Array, native: NativeDevice, copy: bool | None
) -> ArrayT | None:
    """``from_dlpack`` without ``device=``, kept only if it landed on ``native``.

    For libraries whose ``from_dlpack`` takes no ``device`` (CuPy): an
    array already on the target device arrives without one; anything
    else (None) goes through the host.
    """
    adapter = f.adapter
    for kwargs in ({"copy": copy}, {}):
        if copy and not kwargs:
            return None  # a copy was asked for and cannot be asked
        try:
            moved = f.xp.from_dlpack(x, **kwargs)
        except _NO_DLPACK as exc:
            if copy is False and kwargs and not isinstance(exc, TypeError):
                return None  # (it needs a copy: asked again, it would copy)
            continue
        if adapter.device_key(moved) == adapter.native_device_key(native):
            return moved
        return None
    return None


class _Arrival(NamedTuple):
    """Where and as what an array arrives: device, dtype names and object."""

    device: str
    native: NativeDevice
    own: str  # the dtype it has
    name: str  # the dtype it arrives in (narrowed where the device lacks it)
    dtype: DType
