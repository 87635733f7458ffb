"""Argument checks and small conversions shared by the facade, memory and batching.

They know no library: an array's own namespace or adapter is handed in
where a check needs one.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from typing import TYPE_CHECKING

import numpy as np

from ._shown import shown

if TYPE_CHECKING:
    from ._typing import Array, Value

__all__ = [
    "MAX_GB",
    "PY_SCALARS",
    "check_axis",
    "check_copy",
    "check_count",
    "check_gb",
    "check_overhead",
    "check_positive",
    "check_scalar",
    "check_shape",
    "concat_shape_error",
    "item_bytes",
    "matmul_shape_error",
    "raise_if_axis_out_of_range",
    "shape_of",
]

PY_SCALARS = (bool, int, float, complex)


def check_shape(shape: Value) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if isinstance(dims, (str, bytes)) or not isinstance(dims, (tuple, list)):
        msg = f"shape must be an int or a tuple of ints, got {shown(shape)}"
        raise TypeError(msg)
    out: list[int] = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            msg = f"shape must be an int or a tuple of ints, got {shown(shape)}"
            raise TypeError(msg)
        if d < 0:
            msg = f"shape must not have negative sizes, got {shown(shape)}"
            raise ValueError(msg)
        out.append(int(d))
    if math.prod(out) > _MOST_ELEMENTS:  # (JAX aborts the process on such a shape)
        msg = (
            f"shape must hold at most {_MOST_ELEMENTS} elements (2**63 bytes of "
            f"the widest dtype), got {shown(shape)}"
        )
        raise ValueError(msg)
    return tuple(out)


#: The most elements a shape may hold: 2**63 - 1 bytes of 16-byte elements.
_MOST_ELEMENTS = (2**63 - 1) // 16


def shape_of(array: Array) -> tuple[int, ...]:
    shape = getattr(array, "shape", None)
    if shape is None:
        return tuple(np.shape(array))
    return tuple(shape)


def check_scalar(fill_value: Value) -> None:
    """TypeError unless ``fill_value`` is a Python number or a NumPy one (not a date)."""
    if not isinstance(fill_value, (*PY_SCALARS, np.generic)) or (
        isinstance(fill_value, np.generic) and fill_value.dtype.kind not in "biufc"
    ):
        msg = f"fill_value must be a Python or NumPy number, got {shown(fill_value)}"
        raise TypeError(msg)


def raise_if_axis_out_of_range(array: Array, axis: int, extra: int = 0) -> None:
    """Turn a library's ``IndexError`` into a ValueError naming ``axis``.

    Raises when ``axis`` is out of range for ``array`` (with ``extra`` new
    axes, as for expand_dims); returns otherwise, for the caller to re-raise.
    """
    ndim = getattr(array, "ndim", None)
    if not isinstance(ndim, int):
        return
    n = ndim + extra
    if n == 0:
        msg = f"axis={shown(axis)} is out of range: a 0-dimensional array has no axes"
        raise ValueError(msg) from None
    if not -n <= axis < n:
        msg = (
            f"axis={shown(axis)} is out of range for an array of {ndim} dimension(s) "
            f"(valid: {-n} to {n - 1})"
        )
        raise ValueError(msg) from None


def _known(shape: tuple[object, ...]) -> tuple[int, ...] | None:
    """``shape`` where every size is known (an int); None otherwise (Dask's NaN)."""
    sizes = tuple(d for d in shape if isinstance(d, int))
    return sizes if len(sizes) == len(shape) else None


def matmul_shape_error(
    a_shape: tuple[object, ...], b_shape: tuple[object, ...]
) -> str | None:
    """Why arrays of shapes ``a_shape`` and ``b_shape`` do not multiply, or None."""
    a, b = _known(a_shape), _known(b_shape)
    if a is None or b is None:
        return None  # unknown sizes (Dask): nothing to say
    shapes = f"A has shape {a}, B has shape {b}"
    if not a or not b:
        return f"matmul needs A and B with at least one dimension: {shapes}"
    k_b, where = (b[0], "only") if len(b) == 1 else (b[-2], "second-to-last")
    if a[-1] != k_b:
        return (
            f"A's last axis ({a[-1]}) does not match B's {where} axis ({k_b}): {shapes}"
        )
    try:
        np.broadcast_shapes(a[:-2], b[:-2])
    except ValueError:
        return (
            f"the stack dimensions of A {a[:-2]} and B {b[:-2]} do not broadcast: "
            f"{shapes}"
        )
    return None


def concat_shape_error(shapes: list[tuple[object, ...]], axis: int) -> str | None:
    """Why arrays of ``shapes`` cannot be concatenated along ``axis``, or None."""
    first = shapes[0]
    if not all(isinstance(d, int) for s in shapes for d in s):
        return None  # unknown sizes (Dask): nothing to say
    for i, shape in enumerate(shapes[1:], start=1):
        if len(shape) != len(first):
            return (
                "arrays must all have the same number of dimensions: arrays[0] has "
                f"shape {first}, arrays[{i}] has shape {shape}"
            )
        if not first:
            continue
        along = axis % len(first)
        if any(
            d != e
            for k, (d, e) in enumerate(zip(first, shape, strict=True))
            if k != along
        ):
            return (
                f"arrays must have the same shape except along axis={axis}: "
                f"arrays[0] has shape {first}, arrays[{i}] has shape {shape}"
            )
    return None


def check_copy(copy: Value) -> None:
    """TypeError unless ``copy`` is True, False or None (``from_dlpack``'s)."""
    if copy is not None and not isinstance(copy, bool):
        msg = f"copy must be True, False or None, got {shown(copy)}"
        raise TypeError(msg)


def check_axis(axis: Value) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        msg = f"axis must be an int, got {shown(axis)}"
        raise TypeError(msg)
    if not -(2**62) <= axis < 2**62:  # (no array has so many axes; NumPy overflowed)
        msg = f"axis {shown(axis)} is out of range: no array has that many axes"
        raise ValueError(msg)
    return int(axis)


#: The range of ``overhead``, a multiplier of the working set: past it a
#: budget divided by it, or a cost times it, leaves float's range.
OVERHEAD_RANGE = (1e-9, 1e9)


def check_overhead(value: Value) -> float:
    """``overhead`` as a float: finite, positive and within `OVERHEAD_RANGE`."""
    overhead = check_positive("overhead", value)
    low, high = OVERHEAD_RANGE
    if not low <= overhead <= high:
        msg = (
            f"overhead must be between {low:g} and {high:g} (a multiplier of the "
            f"working set), got {shown(value)}"
        )
        raise ValueError(msg)
    return overhead


def item_bytes(param: str, bytes_per_item: float, overhead: float) -> float:
    """``bytes_per_item * overhead``, checked: a float's product may be 0 or inf.

    (``5e-324 * 0.5`` is 0: batches were sized by dividing by it.)
    """
    product = bytes_per_item * overhead
    if not 0 < product < math.inf:
        msg = (
            f"{param} * overhead must be a finite positive number of bytes, got "
            f"{shown(bytes_per_item)} * {shown(overhead)} = {shown(product)}"
        )
        raise ValueError(msg)
    return product


def check_positive(param: str, value: Value, *, allow_zero: bool = False) -> float:
    """``value`` as a float: a finite positive (or non-negative) real number."""
    cls = value.__class__
    if (cls is not float and cls is not int) and (  # (no ABC check for these)
        isinstance(value, (bool, np.timedelta64))  # (NumPy's: numbers.Integral)
        or not isinstance(value, numbers.Real)
    ):
        msg = f"{param} must be a number, got {shown(value)}"
        raise TypeError(msg)
    given = value
    try:
        value = float(value)
    except OverflowError:  # (an int or a Fraction beyond float's range)
        if given > 0:
            msg = (
                f"{param} must be at most {sys.float_info.max:.4g} (the largest "
                f"float), got {shown(given)}"
            )
            raise ValueError(msg) from None
        value = -math.inf
    except Exception as exc:  # (a number type's own __float__ failed)
        msg = f"{param} must be a number, got {shown(given)}"
        raise TypeError(msg) from exc
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        kind = "a finite non-negative" if allow_zero else "a finite positive"
        msg = f"{param} must be {kind} number, got {shown(given)}"
        raise ValueError(msg)
    return float(value)


def as_index(param: str, value: Value) -> int:
    """``operator.index(value)``, or a TypeError naming ``param``.

    An array with axes is refused though it holds one integer: torch's
    ``__index__`` takes ``tensor([2])`` (NumPy's refuses ``array([2])``).
    """
    if isinstance(value, int):
        return int(value)
    try:
        if getattr(value, "shape", None):  # (a 0-d array's shape is ())
            raise TypeError
        return operator.index(value)
    except Exception as exc:  # noqa: BLE001 - (a type's own __index__ may raise any)
        msg = f"{param} must be an int, got {shown(value)}"
        raise TypeError(msg) from (None if type(exc) is TypeError else exc)


def check_count(param: str, value: Value, minimum: int = 1) -> int:
    """``value`` as an int of at least ``minimum``, 1 or 0 (bools refused)."""
    if value.__class__ is int and value >= minimum:  # the common case, at once
        return int(value)
    if isinstance(value, bool):
        msg = f"{param} must be an int, got {shown(value)}"
        raise TypeError(msg)
    value = as_index(param, value)
    if value < minimum:
        kind = "a positive" if minimum == 1 else "a non-negative"
        msg = f"{param} must be {kind} int, got {shown(value)}"
        raise ValueError(msg)
    return int(value)


#: The largest budget a GB argument may state: 2**63 bytes (8 EiB), which
#: every byte count derived from it still fits in.
MAX_GB = float(2**33)
_MOST_GB = 2**33  # (an int: compared with any rational)


def check_gb(param: str, value: Value, *, allow_zero: bool = False) -> float:
    """A budget in GB: `check_positive`, and at most `MAX_GB`.

    An int (or a Fraction) beyond `MAX_GB` is told so, however large: not
    "a finite positive number", which it is, where float() cannot hold it.
    """
    if (
        value.__class__ is not float
        and isinstance(value, numbers.Rational)
        and not isinstance(value, bool)
        and int(value.numerator) > _MOST_GB * int(value.denominator)
    ):
        gb = math.inf  # (a rational is finite: over the limit, whatever float says)
    else:
        gb = check_positive(param, value, allow_zero=allow_zero)
    if gb > MAX_GB:
        msg = (
            f"{param} must be at most {MAX_GB:.0f} GB (2**63 bytes), got {shown(value)}"
        )
        raise ValueError(msg)
    return gb
