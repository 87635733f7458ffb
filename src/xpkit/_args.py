"""Argument checks and small conversions shared by the `Backend` methods."""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy as np

from ._adapters import adapter_for_array
from ._dtypes import dtype_name

__all__ = [
    "MAX_GB",
    "PY_SCALARS",
    "check_axis",
    "check_count",
    "check_fill_fits",
    "check_gb",
    "check_positive",
    "check_scalar",
    "check_shape",
    "host_dtype_name",
    "is_array_list",
    "raise_if_axis_out_of_range",
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


def raise_if_axis_out_of_range(array: Any, axis: int, extra: int = 0) -> None:
    """Turn a library's ``IndexError`` into a ValueError naming ``axis``.

    Raises when ``axis`` is out of range for ``array`` (with ``extra`` new
    axes, as for expand_dims); returns otherwise, for the caller to re-raise.
    """
    ndim = getattr(array, "ndim", None)
    if not isinstance(ndim, int):
        return
    n = ndim + extra
    if n == 0:
        msg = f"axis={axis} is out of range: a 0-dimensional array has no axes"
        raise ValueError(msg) from None
    if not -n <= axis < n:
        msg = (
            f"axis={axis} is out of range for an array of {ndim} dimension(s) "
            f"(valid: {-n} to {n - 1})"
        )
        raise ValueError(msg) from None


def check_fill_fits(fill_value: Any, dtype: Any) -> None:
    """A numeric ``fill_value`` must fit an integer ``dtype`` (any library's).

    Libraries disagree otherwise: NumPy raises OverflowError, torch a
    RuntimeError, JAX and Dask wrap around silently.
    """
    if isinstance(fill_value, (bool, np.bool_)) or not isinstance(
        fill_value, (int, float, np.integer, np.floating)
    ):
        return
    name = dtype_name(dtype)
    if name is None or name not in _INT_NAMES:
        return
    info = np.iinfo(name)
    # A float is truncated toward zero by every library; one that is not
    # finite, or whose integer part is out of range, has no integer to become.
    if isinstance(fill_value, (float, np.floating)) and not math.isfinite(fill_value):
        fits = False
    else:
        fits = info.min <= int(fill_value) <= info.max
    if not fits:
        msg = (
            f"fill_value={fill_value!r} does not fit dtype {name} "
            f"({info.min} to {info.max})"
        )
        raise ValueError(msg)


_INT_NAMES = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)


def check_axis(axis: Any) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        msg = f"axis must be an int, got {axis!r}"
        raise TypeError(msg)
    return int(axis)


def check_positive(param: str, value: Any, *, allow_zero: bool = False) -> float:
    """``value`` as a float: a finite positive (or non-negative) real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"{param} must be a number, got {value!r}"
        raise TypeError(msg)
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        kind = "a finite non-negative" if allow_zero else "a finite positive"
        msg = f"{param} must be {kind} number, got {value!r}"
        raise ValueError(msg)
    return float(value)


def check_count(param: str, value: Any) -> int:
    """``value`` as an int of at least 1 (bools refused)."""
    if isinstance(value, bool):
        msg = f"{param} must be an int, got {value!r}"
        raise TypeError(msg)
    if not isinstance(value, int):
        try:
            value = operator.index(value)
        except TypeError:
            msg = f"{param} must be an int, got {value!r}"
            raise TypeError(msg) from None
    if value < 1:
        msg = f"{param} must be a positive int, got {value!r}"
        raise ValueError(msg)
    return int(value)


#: The largest budget a GB argument may state: 2**63 bytes (8 EiB), which
#: every byte count derived from it still fits in.
MAX_GB = float(2**33)


def check_gb(param: str, value: Any, *, allow_zero: bool = False) -> float:
    """A budget in GB: `check_positive`, and at most `MAX_GB`."""
    gb = check_positive(param, value, allow_zero=allow_zero)
    if gb > MAX_GB:
        msg = f"{param} must be at most {MAX_GB:.0f} GB (2**63 bytes), got {value!r}"
        raise ValueError(msg)
    return gb
