"""The values of `assert_close` / `assert_equal`: exact where float64 is not.

Integers beyond 2**53 (int64, uint64) are compared as integers, not as the
float64 they would round to; a long double keeps its precision; a complex
NaN matches only where the same parts are NaN and the others are close.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from .._adapters._registry import adapter_for_array, to_host
from .._convert import refuse_lossy_data

if TYPE_CHECKING:
    from .._typing import Array, HostArray, Value

__all__ = [
    "compare_values",
    "complex_nans_match",
    "host_copy",
    "rounds_in_float64",
]

#: Beyond it float64 does not hold every integer.
_EXACT = 2**53


def host_copy(x: Array | Value, param: str) -> HostArray:
    """``x`` (an array of any library, a list, a number) as NumPy, to compare.

    Refused (TypeError, naming ``param``): what the conversion would lose
    (a mask), and values that are not numbers or booleans. A list of arrays
    is converted array by array (a list of torch tensors that require grad).
    An AssertionError where an array's values are not of the shape it
    declares (`_has_declared_shape`).
    """
    refuse_lossy_data(x, param)
    if isinstance(x, (list, tuple)) and any(
        isinstance(item, (list, tuple)) or adapter_for_array(item) is not None
        for item in x
    ):
        host = np.asarray(
            [host_copy(item, f"{param}[{i}]") for i, item in enumerate(x)]
        )
    else:
        host = to_host(x, param)
        _has_declared_shape(x, host, param)
    _check_numeric(host, param)
    return host


def _has_declared_shape(x: Array | Value, host: HostArray, param: str) -> None:
    """AssertionError where ``host`` is not of the shape array ``x`` declared.

    A Dask array's shape is what its graph says; its chunks may compute to
    another (a ``map_blocks`` that drops rows, without the right
    ``chunks=``), and only the host copies were compared. Sizes a library
    does not know (Dask's NaN after a boolean mask, ndonnx's None) are not
    checked.
    """
    __tracebackhide__ = True
    if adapter_for_array(x) is None:
        return
    declared = tuple(x.shape)
    if len(declared) == host.ndim and all(
        not isinstance(size, int) or size == got
        for size, got in zip(declared, host.shape, strict=True)
    ):
        return
    shown = tuple(size if isinstance(size, int) else None for size in declared)
    msg = f"{param} declares shape {shown}, but its values have shape {host.shape}"
    raise AssertionError(msg)


def _check_numeric(x: HostArray, param: str) -> None:
    """TypeError unless ``x`` holds numbers or booleans (not strings, times, objects).

    A 16-bit or 8-bit float or 4-bit integer of a dtype NumPy registers
    (``ml_dtypes``, which JAX uses) is a number.
    """
    dtype = x.dtype
    if dtype.kind in "biufc" or registered_number(dtype):
        return
    why = " (Python ints beyond 64 bits, or other objects)" if dtype.kind == "O" else ""
    msg = (
        f"{param} holds values of dtype {dtype}{why}, which is not a numeric or "
        "boolean dtype: the asserts compare numbers"
    )
    raise TypeError(msg)


def registered_number(dtype: np.dtype[Any]) -> bool:
    """Whether a NumPy dtype of kind ``V`` is a number type a library registers.

    ``ml_dtypes``' floats and integers (float8, int4, ...), which JAX uses:
    not a plain or structured void.
    """
    return dtype.kind == "V" and dtype.type is not np.void and dtype.fields is None


def compare_values(a: HostArray, d: HostArray, rtol: float, atol: float) -> None:
    """AssertionError unless ``|a - d| <= atol + rtol * |d|`` elementwise.

    NaNs must match, as must infinities; the message names the worst element.
    """
    __tracebackhide__ = True
    if a.size == 0:
        return
    shape, a, d = a.shape, a.reshape(-1), d.reshape(-1)  # (0-d arrays too)
    kinds = a.dtype.kind + d.dtype.kind
    shown = a, d
    if kinds != "bb":  # (a bool against numbers is 0 or 1, at their tolerance)
        a, d = (x.astype(np.uint8) if x.dtype.kind == "b" else x for x in (a, d))
    if kinds == "bb":
        bad = a != d
        excess = bad.astype(np.float64)
    elif set(kinds) <= set("iu") and rtol == 0 and atol == 0:
        bad = a != d  # (NumPy compares any two integer dtypes exactly)
        with np.errstate(over="ignore"):
            excess = np.abs(a.astype(np.float64) - d.astype(np.float64))
    else:
        bad, excess = _numbers(a, d, rtol, atol)
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return
    flat = int(np.argmax(np.where(bad, excess, -np.inf)))
    index = tuple(int(i) for i in np.unravel_index(flat, shape))
    got, want = shown[0][flat].item(), shown[1][flat].item()
    msg = (
        f"{n_bad} of {a.size} elements differ (rtol={rtol:.3g}, atol={atol:.3g}); "
        f"worst at index {index}: actual {got!r}, desired {want!r}"
    )
    if kinds != "bb":
        msg += f", |difference| {_difference(a[flat], d[flat]):.6g}"
    raise AssertionError(msg)


def _numbers(
    a: HostArray, d: HostArray, rtol: float, atol: float
) -> tuple[HostArray, HostArray]:
    """Numbers in the wider of float64 and their dtype; exactly where that rounds.

    An integer beyond 2**53 (int64, uint64) rounds to float64: where the
    verdict of the rounded values could differ from the exact one (their
    margin within a few units in the last place), the pair is compared
    exactly, in Python's integers and fractions.
    """
    work = np.result_type(
        np.float64, *(x.dtype for x in (a, d) if x.dtype.kind in "fc")
    )
    af, df = a.astype(work), d.astype(work)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(af - df)
        allowed = atol + rtol * np.abs(df)
        # As numpy.isclose: a non-finite value is close only to itself (inf
        # to the same inf, a complex infinity to the same one), NaN only to
        # NaN; the tolerance applies to finite pairs alone.
        finite = np.isfinite(af) & np.isfinite(df)
        close = (finite & (diff <= allowed)) | (af == df)
        if work.kind == "c":
            close |= complex_nans_match(af, df, rtol, atol)
        else:
            close |= np.isnan(af) & np.isnan(df)
        excess = np.where(finite, diff - allowed, np.inf)
        excess[np.isnan(excess)] = np.inf  # (inf - inf: past the dtype's range)
        # (1.7e308 against -1.7e308: a difference and an allowance past the
        # dtype's range are both inf, and inf <= inf passed them)
        over = np.flatnonzero(finite & np.isinf(diff) & np.isinf(allowed))
        if rounds_in_float64(a) or rounds_in_float64(d):
            scale = np.maximum(np.abs(af), np.abs(df))
            near = np.flatnonzero(finite & (np.abs(excess) <= 8 * np.spacing(scale)))
            over = np.union1d(over, near)
    if over.size:
        close[over] = _exactly_close(a[over], d[over], rtol, atol)
    bad = ~close
    excess = np.where(bad, np.maximum(excess.real, np.nextafter(0.0, 1.0)), 0.0)
    return bad, excess


def rounds_in_float64(x: HostArray) -> bool:
    """Whether ``x`` holds integers float64 does not hold exactly (beyond 2**53)."""
    if x.dtype.kind not in "iu" or x.dtype.itemsize < 8 or x.size == 0:
        return False
    return bool(x.max() >= _EXACT or (x.dtype.kind == "i" and x.min() <= -_EXACT))


def _exactly_close(x: HostArray, y: HostArray, rtol: float, atol: float) -> HostArray:
    """``|x - y| <= atol + rtol * |y|`` of finite numbers, exact where they are real.

    With ``rtol = p/q`` and ``atol = r/s`` (floats are fractions):
    ``|x - y| * q * s <= r * q + p * s * |y|``, in Python's integers (a
    value that is not an integer, as a fraction). A complex pair: each
    part's difference exact, then ``|difference|`` and ``|y|`` rounded
    once each, halved so that neither overflows.
    """
    if x.dtype.kind != "c" and y.dtype.kind != "c":
        p, q = float(rtol).as_integer_ratio()
        r, s = float(atol).as_integer_ratio()
        ex, ey = _exact_column(x), _exact_column(y)
        return np.asarray(
            np.abs(ex - ey) * (q * s) <= r * q + p * s * np.abs(ey), dtype=bool
        )
    parts = [
        _exact_column(np.real(x)) - _exact_column(np.real(y)),
        _exact_column(np.imag(x)) - _exact_column(np.imag(y)),
    ]
    half = [np.array([float(v / 2) for v in part]) for part in parts]
    wide = np.result_type(np.float64, y.dtype)
    with np.errstate(over="ignore"):
        return np.asarray(
            np.hypot(*half) <= atol / 2 + rtol * np.abs(y.astype(wide) / 2), dtype=bool
        )


def _exact_column(x: HostArray) -> HostArray:
    """Finite real values as Python numbers: integers as ints, others as fractions."""
    if x.dtype.kind in "iu":
        return x.astype(object)
    whole = (x == np.floor(x)) & (np.abs(x) < 2.0**63)
    out = np.empty(x.shape, dtype=object)
    out[whole] = x[whole].astype(np.int64).astype(object)
    for i in np.flatnonzero(~whole):  # (fractions, and integers beyond int64)
        out[i] = Fraction(*x[i].as_integer_ratio())
    return out


def complex_nans_match(
    af: HostArray, df: HostArray, rtol: float, atol: float
) -> HostArray:
    """Complex NaNs that match: the same parts NaN, the other parts close."""
    both = np.isnan(af) & np.isnan(df)
    for part in ("real", "imag"):
        x, y = getattr(af, part), getattr(df, part)
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        # (a tolerance for finite parts only: rtol * inf allowed any part)
        finite = np.isfinite(x) & np.isfinite(y)
        near = (finite & (np.abs(x - y) <= atol + rtol * np.abs(y))) | (x == y)
        both &= (nan_x == nan_y) & (nan_x | near)
    return both


def _exact(value: Value) -> Fraction | None:
    """A finite real element's exact value."""
    if isinstance(value, np.integer):
        return Fraction(int(value))
    number = value if isinstance(value, np.floating) else np.float64(value)
    if not np.isfinite(number):
        return None
    return Fraction(*number.as_integer_ratio())


def _difference(x: Value, y: Value) -> float:
    """``|x - y|`` of two elements, each part's exact before it is rounded to print."""
    pairs = [(np.real(x), np.real(y))]
    if isinstance(x, np.complexfloating) or isinstance(y, np.complexfloating):
        pairs.append((np.imag(x), np.imag(y)))
    differences: list[Fraction] = []
    for px, py in pairs:
        ex, ey = _exact(px), _exact(py)
        if ex is None or ey is None:
            break
        differences.append(ex - ey)
    else:
        try:
            return math.hypot(*(float(part) for part in differences))
        except OverflowError:  # (1.7e308 - -1.7e308)
            return float("inf")
    work = np.result_type(np.float64, x.dtype, y.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.abs(np.asarray(x, dtype=work) - np.asarray(y, dtype=work)))
