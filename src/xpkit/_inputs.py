"""The inputs check: `Backend.check_arrays`, in the first array's dtype and device.

The first array sets the dtype and device (the reference); host data
follows it, arrays of this library on another device and arrays of other
libraries are refused, or, with ``convert=True``, moved there
(`_moves.move_from`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeAlias

import numpy as np

from ._adapters._registry import ADAPTERS, adapter_for_array, refuse_lossy
from ._convert import castable, exact_ints, host, traced
from ._dtypes import own_dtype
from ._moves import move_from

if TYPE_CHECKING:
    from ._facts import ArrayT, Facts
    from ._typing import DType, HostArray, NativeDevice, Value

__all__ = ["HostData", "check_inputs", "is_array_list"]

#: What the facade converts from the host: NumPy arrays and scalars, Python
#: numbers and (nested) sequences of them.
HostData: TypeAlias = "HostArray | np.generic | complex | Sequence[HostData]"


class _Ref(NamedTuple):
    """What the first array fixed: the dtype (object and name) and the device."""

    dtype: DType
    native: NativeDevice
    device: str
    name: str


def is_array_list(item: Value) -> bool:
    """Whether ``item`` is a non-empty list or tuple of arrays (of any library).

    NumPy scalars are numbers, not arrays: a list of them alone is data
    (one array), as a list of Python floats is; beside an array, each is
    converted as the arrays are.
    """
    return (
        isinstance(item, (list, tuple))
        and len(item) > 0
        and all(adapter_for_array(v) is not None for v in item)
        and not all(isinstance(v, np.generic) for v in item)
    )


def check_inputs(
    f: Facts[ArrayT], inputs: tuple[Value, ...], convert: Value
) -> list[ArrayT | list[ArrayT] | None]:
    """`Backend.check_arrays` (its docstring says what each input becomes)."""
    if not isinstance(convert, bool):
        msg = f"convert must be a bool, got {convert!r}"
        raise TypeError(msg)
    ref: list[_Ref] = []  # the first array's, once it is met
    out: list[ArrayT | list[ArrayT] | None] = []
    for i, item in enumerate(inputs):
        if item is None:
            out.append(None)
        elif is_array_list(item):
            out.append(
                [
                    _check_one(f, v, f"inputs[{i}][{j}]", ref, convert)
                    for j, v in enumerate(item)
                ]
            )
        else:
            out.append(_check_one(f, item, f"inputs[{i}]", ref, convert))
    return out


def _check_one(
    f: Facts[ArrayT], x: Value, param: str, ref: list[_Ref], convert: bool
) -> ArrayT:
    """One input, in the reference's dtype and on its device (the first sets it)."""
    x = traced(f, x)
    mine = f.adapter
    adapter = adapter_for_array(x)
    if adapter is not None and adapter is not mine and adapter is not ADAPTERS["numpy"]:
        if not convert:
            msg = (
                f"{param} is a {adapter.label} array but this backend is "
                f"{f.name!r}; convert it explicitly with Backend.move, or "
                f"pass convert=True"
            )
            raise TypeError(msg)
        dev, native = (ref[0].device, ref[0].native) if ref else (f.device, f.native)
        moved = move_from(f, x, adapter, dev, native, None, param)
        source = own_dtype(x, param)
        # Checked where its values are, where here they would not be (Dask's
        # arrays are lazy: a torch 2**40 became 0 in int32).
        lazy = not mine.values_at_hand(moved)
        if ref and source != ref[0].name and lazy and adapter.values_at_hand(x):
            values = host(x, param)
            castable(f, values, source, ref[0].name, param, on_host=True)
        x, adapter = moved, mine
    if adapter is mine:
        return _check_own(f, x, param, ref, convert)
    values = exact_ints(x, host(x, param), ref[0].name if ref else None)
    own = own_dtype(values, param)
    if not ref:
        target, xp_dtype = f.dtype_pair(own, None, f"{param} has dtype {own}")
        ref.append(_Ref(xp_dtype, f.native, f.device, target))
    values = castable(f, values, own, ref[0].name, param, on_host=True)
    return f.from_host(values, ref[0].dtype, ref[0].native)


def _check_own(
    f: Facts[ArrayT], x: Value, param: str, ref: list[_Ref], convert: bool
) -> ArrayT:
    """An input of the bound library: on the reference's device, or moved there."""
    adapter = f.adapter
    refuse_lossy(adapter, x, param)
    dev = adapter.device_str(adapter.device_of(x))
    if ref and adapter.canonical_device(dev) != adapter.canonical_device(ref[0].device):
        if not convert:
            msg = (
                f"{param} is on device {dev!r} but the first input is on "
                f"{ref[0].device!r}"
            )
            raise ValueError(msg)
        x = move_from(f, x, adapter, ref[0].device, ref[0].native, None, param)
    own = own_dtype(x, param)
    if not ref:
        target, xp_dtype = f.dtype_pair(own, dev, f"{param} has dtype {own}")
        ref.append(_Ref(xp_dtype, adapter.device_of(x), dev, target))
    x = castable(f, x, own, ref[0].name, param, on_host=False)
    return f.xp.asarray(x, dtype=ref[0].dtype, device=ref[0].native)
