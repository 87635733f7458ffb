"""Bringing an array of any library, on any device, to a `Backend`.

DLPack first (zero-copy where the two libraries and devices allow it), a
copy through the host only where no DLPack path exists, ``copy=``
honoured as the standard's ``from_dlpack`` does, and an explicit error
where the array cannot arrive as asked.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np
from array_api_compat import numpy as _np_xp

from ._adapters import Adapter, adapter_for_array
from ._args import check_cast_keeps_values
from ._convert import ArrayT, Conversions
from ._dtypes import dtype_name

__all__ = ["Moves"]

#: What a library's ``from_dlpack`` raises when it cannot take an array
#: (another device, a layout or dtype it refuses, ``copy=False`` impossible).
_NO_DLPACK = (BufferError, TypeError, ValueError, RuntimeError, NotImplementedError)


def _check_copy(copy: Any) -> None:
    if copy is not None and not isinstance(copy, bool):
        msg = f"copy must be True, False or None, got {copy!r}"
        raise TypeError(msg)


class Moves(Conversions[ArrayT]):
    """`Backend.move`, and the conversion `check_arrays(convert=True)` uses."""

    __slots__ = ()

    def move(self, x: Any, *, copy: bool | None = None) -> ArrayT:
        """``x``, an array of any supported library, as an array of this backend.

        On the backend's device, with ``x``'s dtype (narrowed as `asarray`
        narrows where the device lacks it). The values travel by DLPack
        where both libraries speak it (zero-copy between NumPy, torch CPU,
        array-api-strict and JAX on the CPU; between torch CUDA, CuPy and
        JAX on one GPU), else through a host (NumPy) copy.

        Parameters
        ----------
        x : array
            An array of any supported library (NumPy included), on any
            device.
        copy : bool or None, default None
            None: copy only where needed. True: always return new memory.
            False: never copy; a `ValueError` where the array cannot arrive
            without one (another device, a library without DLPack).

        Returns
        -------
        array
            An array of this backend's library on its device.

        Raises
        ------
        TypeError
            ``x`` is not an array of a supported library (use `asarray` for
            lists and scalars), or its dtype is one the device cannot hold;
            ``copy`` is not a bool or None.
        ValueError
            ``copy=False`` and no zero-copy path exists.
        """
        _check_copy(copy)
        source = adapter_for_array(x)
        if source is None:
            msg = (
                f"x must be an array of a supported library, got "
                f"{type(x).__qualname__}; use Backend.asarray for lists and scalars"
            )
            raise TypeError(msg)
        return self._move(x, source, self.device, self._native, copy, "x")

    def _move(
        self,
        x: Any,
        source: Adapter,
        dev_str: str,
        native: Any,
        copy: bool | None,
        param: str,
    ) -> ArrayT:
        """``x`` of library ``source`` onto ``native`` (named ``dev_str``).

        Narrowed (float64 to float32 where the device lacks 64 bits) only
        when no value changes, as `asarray` narrows.
        """
        self._refuse_lossy(source, x, param)
        own = dtype_name(x.dtype)
        assert own is not None
        target, xp_dtype = self._dtype_pair(own, dev_str, f"{param} has dtype {own}")
        if target != own and source.values_at_hand(x):
            check_cast_keeps_values(
                source.namespace(), x, own, target, param, source.to_numpy
            )
        adapter = self._adapter
        moved: Any  # an array of this library (its dtype is read below)
        if source is adapter:
            moved = self._within(x, dev_str, native, xp_dtype, copy, param)
        else:
            arrival = _Arrival(dev_str, native, own, target, xp_dtype)
            moved = self._import(x, source, arrival, copy, param)
        if dtype_name(moved.dtype) != target:  # narrowed for this device
            moved = self.xp.astype(moved, xp_dtype)
        result: ArrayT = moved
        return result

    def _within(
        self,
        x: Any,
        dev_str: str,
        native: Any,
        xp_dtype: Any,
        copy: bool | None,
        param: str,
    ) -> Any:
        """An array of this library onto ``native``, as a plain array in ``xp_dtype``.

        ``x`` itself where it is one already there; else the library's own
        ``asarray`` (byte-swapped NumPy arrays and subclasses become plain
        arrays, as `asarray` makes them).
        """
        adapter = self._adapter
        here = adapter.device_key(x) == adapter.native_device_key(native)
        if here and not copy and self._is_own_like(x):
            return x
        if copy is False:
            where = adapter.device_str(adapter.device_of(x))
            why = (
                f"is a {type(x).__qualname__} of dtype {x.dtype}, not a plain array"
                if here
                else f"is on device {where!r}, not {dev_str!r}"
            )
            msg = f"{param} {why}: it cannot move to {dev_str!r} with copy=False"
            raise ValueError(msg)
        return self.xp.asarray(x, dtype=xp_dtype, device=native, copy=copy)

    def _import(
        self,
        x: Any,
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
        adapter = self._adapter
        hazard = source.unshareable(x) if source.dlpack_export else None
        must_copy = hazard is not None and (
            not hazard.read_only or adapter.always_writable
        )
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
                return self.xp.from_dlpack(shared, device=arrival.native, copy=ask)
            except _NO_DLPACK as exc:
                why = f"DLPack refused it: {type(exc).__name__}: {exc}"
            arrived: ArrayT | None = self._dlpack_where_it_is(
                shared, arrival.native, ask
            )
            if arrived is not None:
                return arrived
        elif source.dlpack_export:
            why = f"{adapter.label} does not import DLPack"
        if copy is False:
            msg = (
                f"{param} (an array of {source.label}) cannot become an array of "
                f"{adapter.label} on {arrival.device!r} without a copy ({why})"
            )
            raise ValueError(msg)
        host = source.to_numpy(x)
        if arrival.name != arrival.own:  # values not at hand in the source
            check_cast_keeps_values(
                _np_xp, host, arrival.own, arrival.name, param, np.asarray
            )
        if (copy or must_copy) and (host is x or not host.flags.owndata):
            host = host.copy()  # from_host may keep the host buffer
        return cast(
            "ArrayT", adapter.from_host(self.xp, host, arrival.dtype, arrival.native)
        )

    def _dlpack_where_it_is(self, x: Any, native: Any, copy: bool | None) -> Any:
        """``from_dlpack`` without ``device=``, kept only if it landed on ``native``.

        For libraries whose ``from_dlpack`` takes no ``device`` (CuPy): an
        array already on the target device arrives without one; anything
        else (None) goes through the host.
        """
        adapter = self._adapter
        for kwargs in ({"copy": copy}, {}):
            if copy and not kwargs:
                return None  # a copy was asked for and cannot be asked
            try:
                moved = self.xp.from_dlpack(x, **kwargs)
            except _NO_DLPACK:
                continue
            if adapter.device_key(moved) == adapter.native_device_key(native):
                return moved
            return None
        return None


class _Arrival(NamedTuple):
    """Where and as what an array arrives: device, dtype names and object."""

    device: str
    native: Any
    own: str  # the dtype it has
    name: str  # the dtype it arrives in (narrowed where the device lacks it)
    dtype: Any
