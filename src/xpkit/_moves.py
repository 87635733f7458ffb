"""Bringing an array of any library, on any device, to a `Backend`.

DLPack first (zero-copy where the two libraries and devices allow it), a
copy through the host only where no DLPack path exists, ``copy=``
honoured as the standard's ``from_dlpack`` does, and an explicit error
where the array cannot arrive as asked.
"""

from __future__ import annotations

from typing import Any, cast

from ._adapters import Adapter, adapter_for_array
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
        """``x`` of library ``source`` onto ``native`` (named ``dev_str``)."""
        self._refuse_lossy(source, x, param)
        own = dtype_name(x.dtype)
        assert own is not None
        target, xp_dtype = self._dtype_pair(own, dev_str, f"{param} has dtype {own}")
        adapter = self._adapter
        moved: Any  # an array of this library (its dtype is read below)
        if source is adapter:
            here = adapter.device_key(x) == adapter.native_device_key(native)
            if here and not copy:
                moved = x
            elif copy is False:
                msg = (
                    f"{param} is on device {adapter.device_str(adapter.device_of(x))!r}, "
                    f"not {dev_str!r}: it cannot move there with copy=False"
                )
                raise ValueError(msg)
            else:
                moved = self.xp.asarray(x, device=native, copy=True)
        else:
            moved = self._import(x, source, (dev_str, native, xp_dtype), copy, param)
        if dtype_name(moved.dtype) != target:  # narrowed for this device
            moved = self.xp.astype(moved, xp_dtype)
        result: ArrayT = moved
        return result

    def _import(
        self,
        x: Any,
        source: Adapter,
        target: tuple[str, Any, Any],
        copy: bool | None,
        param: str,
    ) -> ArrayT:
        """Another library's array: DLPack, else (copies allowed) the host.

        ``target`` is the device string, the native device and the dtype
        object the host copy is made in.
        """
        dev_str, native, xp_dtype = target
        adapter = self._adapter
        why = f"{source.label} arrays do not export DLPack"
        if source.dlpack_export and adapter.dlpack_import:
            try:
                return self.xp.from_dlpack(x, device=native, copy=copy)
            except _NO_DLPACK as exc:
                why = f"DLPack refused it: {type(exc).__name__}: {exc}"
        elif source.dlpack_export:
            why = f"{adapter.label} does not import DLPack"
        if copy is False:
            msg = (
                f"{param} (a {source.label} array) cannot become a "
                f"{adapter.label} array on {dev_str!r} without a copy ({why})"
            )
            raise ValueError(msg)
        host = source.to_numpy(x)
        if copy and not host.flags.owndata:
            host = host.copy()  # from_host may keep the host buffer
        return cast("ArrayT", adapter.from_host(self.xp, host, xp_dtype, native))
