"""The values of `assert_close` / `assert_equal`: exact where float64 is not.

Integers beyond 2**53 (int64, uint64) are compared as integers, not as the
float64 they would round to; a long double keeps its precision; a complex
NaN matches only where the same parts are NaN and the others are close.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from .._adapters._registry import adapter_for_array, to_host
from .._convert import refuse_lossy_data

if TYPE_CHECKING:
    from .._typing import Array, HostArray, Value

__all__ = ["compare_values", "host_copy"]

#: Beyond it float64 does not hold every integer.
_EXACT = 2**53


def host_copy(x: Array | Value, param: str) -> HostArray:
    """``x`` (an array of any library, a list, a number) as NumPy, to compare.

    Refused (TypeError, naming ``param``): what the conversion would lose
    (a mask), and values that are not numbers or booleans. A list of arrays
    is converted array by array (a list of torch tensors that require grad).
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
        host = to_host(x)
    _check_numeric(host, param)
    return host


def _check_numeric(x: HostArray, param: str) -> None:
    """TypeError unless ``x`` holds numbers or booleans (not strings, times, objects).

    A 16-bit or 8-bit float or 4-bit integer of a dtype NumPy registers
    (``ml_dtypes``, which JAX uses) is a number.
    """
    dtype = x.dtype
    registered = (
        dtype.kind == "V" and dtype.type is not np.void and dtype.fields is None
    )
    if dtype.kind in "biufc" or registered:
        return
    why = " (Python ints beyond 64 bits, or other objects)" if dtype.kind == "O" else ""
    msg = (
        f"{param} holds values of dtype {dtype}{why}, which is not a numeric or "
        "boolean dtype: the asserts compare numbers"
    )
    raise TypeError(msg)


def compare_values(a: HostArray, d: HostArray, rtol: float, atol: float) -> None:
    """AssertionError unless ``|a - d| <= atol + rtol * |d|`` elementwise.

    NaNs must match, as must infinities; the message names the worst element.
    """
    __tracebackhide__ = True
    if a.size == 0:
        return
    shape, a, d = a.shape, a.reshape(-1), d.reshape(-1)  # (0-d arrays too)
    kinds = a.dtype.kind + d.dtype.kind
    if "b" in kinds:
        bad = a != d
        excess = bad.astype(np.float64)
    elif set(kinds) <= set("iu"):
        bad, excess = _integers(a, d, rtol, atol)
    else:
        bad, excess = _numbers(a, d, rtol, atol)
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return
    flat = int(np.argmax(np.where(bad, excess, -np.inf)))
    index = tuple(int(i) for i in np.unravel_index(flat, shape))
    got, want = a[flat].item(), d[flat].item()
    msg = (
        f"{n_bad} of {a.size} elements differ (rtol={rtol:.3g}, atol={atol:.3g}); "
        f"worst at index {index}: actual {got!r}, desired {want!r}"
    )
    if "b" not in kinds:
        msg += f", |difference| {_difference(a[flat], d[flat]):.6g}"
    raise AssertionError(msg)


def _integers(
    a: HostArray, d: HostArray, rtol: float, atol: float
) -> tuple[HostArray, HostArray]:
    """Two integer arrays: NumPy's ``!=`` is exact, the rest in Python's integers."""
    bad = np.array(a != d, dtype=bool)
    where = np.flatnonzero(bad)
    gap = np.abs(a[where].astype(object) - d[where].astype(object))
    allowed = atol + rtol * np.abs(d[where].astype(object))
    bad[where[~np.array(gap > allowed, dtype=bool)]] = False
    excess = np.zeros(a.shape, dtype=np.float64)
    excess[where] = (gap - allowed).astype(np.float64)
    return bad, excess


def _numbers(
    a: HostArray, d: HostArray, rtol: float, atol: float
) -> tuple[HostArray, HostArray]:
    """Floats (or a float and an integer) in the wider of float64 and their dtype."""
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
            close |= _complex_nans(af, df, rtol, atol)
        else:
            close |= np.isnan(af) & np.isnan(df)
        excess = np.where(finite, diff - allowed, np.inf)
    _recheck_large_integers(a, d, close, rtol, atol)
    bad = ~close
    excess = np.where(bad, np.maximum(excess, np.nextafter(0.0, 1.0)), 0.0)
    return bad, excess


def _complex_nans(af: HostArray, df: HostArray, rtol: float, atol: float) -> HostArray:
    """Complex NaNs that match: the same parts NaN, the other parts close."""
    both = np.isnan(af) & np.isnan(df)
    for part in ("real", "imag"):
        x, y = getattr(af, part), getattr(df, part)
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        near = (np.abs(x - y) <= atol + rtol * np.abs(y)) | (x == y)
        both &= (nan_x == nan_y) & (nan_x | near)
    return both


def _recheck_large_integers(
    a: HostArray, d: HostArray, close: HostArray, rtol: float, atol: float
) -> None:
    """Pairs called close where an integer beyond 2**53 met a float: exactly."""
    for ints in (a, d):
        if ints.dtype.kind not in "iu" or ints.dtype.itemsize < 8:
            continue
        large = np.abs(ints.astype(np.float64)) >= _EXACT
        for i in np.flatnonzero(close & large):
            x, y = _exact(a[i]), _exact(d[i])
            if x is not None and y is not None:
                close[i] = abs(x - y) <= Fraction(atol) + Fraction(rtol) * abs(y)


def _exact(value: Value) -> Fraction | None:
    """A finite real element's exact value (a complex one's where it is real)."""
    if isinstance(value, np.complexfloating):
        if value.imag != 0:
            return None
        value = value.real
    if isinstance(value, np.integer):
        return Fraction(int(value))
    number = value if isinstance(value, np.floating) else np.float64(value)
    if not np.isfinite(number):
        return None
    return Fraction(*number.as_integer_ratio())


def _difference(x: Value, y: Value) -> float:
    """``|x - y|`` of two elements, exact before it is rounded to print."""
    ex, ey = _exact(x), _exact(y)
    if ex is not None and ey is not None:
        try:
            return float(abs(ex - ey))
        except OverflowError:  # (1.7e308 - -1.7e308)
            return float("inf")
    work = np.result_type(np.float64, x.dtype, y.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.abs(np.asarray(x, dtype=work) - np.asarray(y, dtype=work)))
