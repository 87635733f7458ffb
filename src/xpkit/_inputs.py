"""`Backend.check_arrays`: a caller's inputs, in the first array's dtype and device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias, cast, overload

import numpy as np

from ._adapters import ADAPTERS, adapter_for_array
from ._args import host_dtype_name, is_array_list
from ._convert import ArrayT
from ._operations import Operations

__all__ = ["HostData", "Inputs"]

#: What the facade converts from the host: NumPy arrays and scalars, Python
#: numbers and (nested) sequences of them.
HostData: TypeAlias = "np.ndarray[Any, Any] | np.generic | complex | Sequence[HostData]"


class Inputs(Operations[ArrayT]):
    """`Backend.check_arrays` (its attributes are set by `Backend`)."""

    __slots__ = ()

    @overload
    def check_arrays(
        self, *inputs: ArrayT | HostData, convert: bool = False
    ) -> list[ArrayT]: ...
    @overload
    def check_arrays(
        self, *inputs: ArrayT | HostData | None, convert: bool = False
    ) -> list[ArrayT | None]: ...
    @overload
    def check_arrays(
        self, *inputs: Any, convert: bool = False
    ) -> list[ArrayT | list[ArrayT] | None]: ...
    def check_arrays(self, *inputs: Any, convert: bool = False) -> list[Any]:
        """Coerce all inputs to the same dtype (and device) as the first.

        None values are passed through. Lists of arrays are converted
        element-wise. Host data (NumPy arrays, lists, scalars) is moved to the
        first array's device; arrays of this backend's library on another
        device raise `ValueError`, arrays of another library `TypeError`.
        A cast that would change a value (a float ``y`` of 0.5 to an integer
        first input's dtype) raises `ValueError` naming the input.

        Parameters
        ----------
        *inputs : array, list, scalar or None
            The arrays to coerce; the first array sets dtype and device.
        convert : bool, default False
            Follow the first array: arrays of other libraries, and of this
            one on other devices, are moved there (as `move` moves them:
            DLPack first) instead of refused. Off by default, so that mixed
            inputs never convert silently.

        Returns
        -------
        list
            Converted arrays in the same order as inputs. Type checkers see
            ``list[ArrayT]`` when every input is an array of this backend or
            host data, ``list[ArrayT | None]`` when some may be None, and
            ``list[ArrayT | list[ArrayT] | None]`` otherwise (lists of arrays,
            other libraries' arrays).

        Examples
        --------
        >>> import numpy as np
        >>> import xpkit
        >>> b = xpkit.Backend("numpy")
        >>> X, y = b.check_arrays(np.ones((2, 2), dtype=np.float32), [1, 2])
        >>> y.dtype
        dtype('float32')
        """
        if not isinstance(convert, bool):
            msg = f"convert must be a bool, got {convert!r}"
            raise TypeError(msg)
        ref: list[Any] = []  # [xp dtype, native device, device string, dtype name]
        out: list[Any] = []
        for i, item in enumerate(inputs):
            if item is None:
                out.append(None)
            elif is_array_list(item):
                out.append(
                    [
                        self._check_one(v, f"inputs[{i}][{j}]", ref, convert)
                        for j, v in enumerate(item)
                    ]
                )
            else:
                out.append(self._check_one(item, f"inputs[{i}]", ref, convert))
        return out

    def _check_one(self, x: Any, param: str, ref: list[Any], convert: bool) -> ArrayT:
        x = self._traced(x)
        adapter = adapter_for_array(x)
        host_lib = ADAPTERS["numpy"]
        if (
            adapter is not None
            and adapter is not self._adapter
            and adapter is not host_lib
        ):
            if not convert:
                msg = (
                    f"{param} is a {adapter.label} array but this backend is "
                    f"{self.name!r}; convert it explicitly with Backend.move, or "
                    f"pass convert=True"
                )
                raise TypeError(msg)
            dev, native = (ref[2], ref[1]) if ref else (self.device, self._native)
            x = self._move(x, adapter, dev, native, None, param)
            adapter = self._adapter
        if adapter is self._adapter:
            self._refuse_lossy(adapter, x, param)
            dev = self._adapter.device_str(self._adapter.device_of(x))
            if (
                convert
                and ref
                and self._adapter.canonical_device(dev)
                != self._adapter.canonical_device(ref[2])
            ):
                x = self._move(x, adapter, ref[2], ref[1], None, param)
                dev = ref[2]
            if ref and self._adapter.canonical_device(
                dev
            ) != self._adapter.canonical_device(ref[2]):
                msg = (
                    f"{param} is on device {dev!r} but the first input is on {ref[2]!r}"
                )
                raise ValueError(msg)
            own = self._own_dtype(x, param)
            if not ref:
                target, xp_dtype = self._dtype_pair(
                    own, dev, f"{param} has dtype {own}"
                )
                ref += [xp_dtype, self._adapter.device_of(x), dev, target]
            x = self._castable(x, own, ref[3], param, host=False)
            return self.xp.asarray(x, dtype=ref[0], device=ref[1])
        host = self._host(x, param)
        own = host_dtype_name(host)
        if not ref:
            target, xp_dtype = self._dtype_pair(own, None, f"{param} has dtype {own}")
            ref += [xp_dtype, self._native, self.device, target]
        host = self._castable(host, own, ref[3], param, host=True)
        return cast("ArrayT", self._adapter.from_host(self.xp, host, ref[0], ref[1]))
