"""Argument checks and small conversions shared by the `Backend` methods."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._adapters import adapter_for_array
from ._dtypes import dtype_name

__all__ = [
    "PY_SCALARS",
    "check_axis",
    "check_scalar",
    "check_shape",
    "host_dtype_name",
    "is_array_list",
    "shape_of",
]

PY_SCALARS = (bool, int, float, complex)


def host_dtype_name(host: np.ndarray[Any, Any]) -> str:
    name = dtype_name(host.dtype)
    assert name is not None
    return name


def is_array_list(item: Any) -> bool:
    return (
        isinstance(item, (list, tuple))
        and len(item) > 0
        and all(adapter_for_array(v) is not None for v in item)
    )


def check_shape(shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if isinstance(dims, (str, bytes)) or not isinstance(dims, (tuple, list)):
        msg = f"shape must be an int or a tuple of ints, got {shape!r}"
        raise TypeError(msg)
    out: list[int] = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            msg = f"shape must be an int or a tuple of ints, got {shape!r}"
            raise TypeError(msg)
        if d < 0:
            msg = f"shape must not have negative sizes, got {shape!r}"
            raise ValueError(msg)
        out.append(int(d))
    return tuple(out)


def shape_of(array: Any) -> tuple[int, ...]:
    shape = getattr(array, "shape", None)
    if shape is None:
        return tuple(np.shape(array))
    return tuple(shape)


def check_scalar(fill_value: Any) -> None:
    if not isinstance(fill_value, (*PY_SCALARS, np.generic)):
        msg = f"fill_value must be a Python or NumPy scalar, got {fill_value!r}"
        raise TypeError(msg)


def check_axis(axis: Any) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        msg = f"axis must be an int, got {axis!r}"
        raise TypeError(msg)
    return int(axis)
