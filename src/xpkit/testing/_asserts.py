"""Precision-aware assertions over arrays of any supported library."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from .._adapters._registry import ADAPTERS, adapter_for_array
from .._backend import Backend
from .._dtypes import PrecisionWarning, dtype_name, narrowed
from ._close_values import complex_nans_match, host_copy, rounds_in_float64
from ._running import note_loosened, running_variant

if TYPE_CHECKING:
    from .._typing import Array, HostArray

__all__ = ["assert_array_almost_equal"]

#: The finest ``decimal`` NumPy's test can hold: ``1.5 * 10.0**-323`` is
#: float64's smallest subnormal; from 324 on the bound is 0.
FINEST_DECIMAL = 323

#: The strictest ``decimal`` that float32-only devices (MPS) are held to.
FLOAT32_DEVICE_DECIMAL = 2

#: The dtypes whose narrowing (to float32, complex64) loosens the comparison.
_WIDE = ("float64", "complex128")


def assert_array_almost_equal(
    x: Array,
    y: Array,
    decimal: int = 6,
    err_msg: str = "",
    verbose: bool = True,
    backend: Backend | None = None,
) -> None:
    """Test array equality with automatic precision adjustment for MPS.

    Arrays of any supported library are compared on the host, as
    ``numpy.testing.assert_array_almost_equal`` does, with two
    exceptions where NumPy's test passes arrays that differ: two integer
    arrays are subtracted exactly (NumPy wraps an int8 difference and rounds
    uint64 beyond 2**53 to float64), and a complex NaN equals only a NaN in
    the same parts whose other parts are within ``decimal`` (NumPy's takes
    ``nan+1j`` as ``1+nanj`` and as ``nan+5j``). A scalar broadcasts
    against an array, as in NumPy's. On a device without
    float64 (Apple MPS, JAX without x64, array-api-strict's ``no_float64``),
    where one array is a float64 (or complex128) expectation and the other
    is of the float32 (complex64) the device narrowed it to, the requested
    ``decimal`` is reduced to at most ``2``, with a `PrecisionWarning`
    saying so, since float32 cannot meet float64 expectations. Anything
    else (two float32 arrays, two float64 ones) is compared at ``decimal``
    as asked, on every device. Inside a test of the xpkit pytest plugin the
    warning is left out (filterwarnings = error would fail the test): the
    session's summary names the devices where a comparison was loosened.

    Parameters
    ----------
    x, y : array_like
        Arrays to compare.
    decimal : int, default 6
        Desired decimal precision. One past 323 (where
        ``1.5 * 10**-decimal`` is float64's smallest subnormal) compares as
        323: NumPy's own failed equal arrays from 324 on (the bound
        underflows to 0) and raised OverflowError past float's range.
    err_msg : str, default ""
        Error message prefix.
    verbose : bool, default True
        Whether the failure message shows the conflicting values.
    backend : Backend, optional
        Backend whose device sets the precision; detected from ``x``/``y``
        (the first non-NumPy array) when None.

    Raises
    ------
    AssertionError
        The arrays differ by more than the precision allows.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from xpkit.testing import assert_array_almost_equal
    >>> assert_array_almost_equal(np.array([1.0, 2.0]), np.array([1.0, 2.0000001]))
    """
    __tracebackhide__ = True
    if isinstance(decimal, bool) or not isinstance(decimal, (int, np.integer)):
        msg = f"decimal must be an int, got {decimal!r}"
        raise TypeError(msg)
    if decimal < 0:
        msg = f"decimal must be a non-negative int, got {decimal!r}"
        raise ValueError(msg)
    if not isinstance(err_msg, str):
        msg = f"err_msg must be a string, got {err_msg!r}"
        raise TypeError(msg)
    if not isinstance(verbose, bool):
        msg = f"verbose must be a bool, got {verbose!r}"
        raise TypeError(msg)
    if backend is not None and not isinstance(backend, Backend):
        msg = f"backend must be a Backend or None, got {backend!r}"
        raise TypeError(msg)
    where = _narrowed_on(x, y, backend)
    if where is not None and decimal > FLOAT32_DEVICE_DECIMAL:
        if running_variant() is None:
            warnings.warn(
                f"comparing at decimal={FLOAT32_DEVICE_DECIMAL} instead of "
                f"{decimal}: {where} has no float64, and one array is a "
                "float64 the other is the float32 of",
                PrecisionWarning,
                stacklevel=2,
            )
        else:  # the plugin's tests: its summary says it
            note_loosened(where, int(decimal), FLOAT32_DEVICE_DECIMAL)
        decimal = FLOAT32_DEVICE_DECIMAL
    hx, hy = _exact_integers(host_copy(x, "x"), host_copy(y, "y"))
    _same_nan_parts(hx, hy, min(int(decimal), FINEST_DECIMAL), err_msg)
    np.testing.assert_array_almost_equal(
        hx,
        hy,
        decimal=min(int(decimal), FINEST_DECIMAL),
        err_msg=err_msg,
        verbose=verbose,
    )


def _exact_integers(x: HostArray, y: HostArray) -> tuple[HostArray, HostArray]:
    """Two integer arrays as NumPy can subtract them exactly.

    NumPy subtracts in their dtype: int8 ``127 - -128`` wrapped to 1 (the
    message said a difference of 1), and two uint64 beyond 2**53 rounded
    to one float64 (``2**64 - 1`` passed as ``2**64 - 2``). As int64 where
    every value lies within 2**53 (their differences, within 2**54, fit);
    else as Python ints, two 0-d ones as 1-d (NumPy's test reads the
    ``dtype`` of their difference, which two 0-d object arrays give as a
    Python int). Any other pair as it is.
    """
    if x.dtype.kind not in "iu" or y.dtype.kind not in "iu":
        return x, y
    if not (rounds_in_float64(x) or rounds_in_float64(y)):
        return x.astype(np.int64), y.astype(np.int64)
    if x.ndim == 0 and y.ndim == 0:  # (one 0-d side broadcasts as a scalar)
        x, y = x.reshape(1), y.reshape(1)
    return x.astype(object), y.astype(object)


def _same_nan_parts(x: HostArray, y: HostArray, decimal: int, err_msg: str) -> None:
    """AssertionError where complex NaNs differ: NaN in other parts, or the others far.

    NumPy's test takes any two NaNs as equal: ``nan+1j`` passed as
    ``1+nanj``, and as ``nan+5j``. Where both are NaN in the same parts,
    the other parts are held to ``decimal`` as the values are. Arrays of
    two shapes (a scalar aside) are left to NumPy's message.
    """
    __tracebackhide__ = True
    if "c" not in x.dtype.kind + y.dtype.kind:
        return
    if x.shape != y.shape and x.ndim and y.ndim:
        return
    bx, by = np.broadcast_arrays(x, y)
    bound = 1.5 * 10.0 ** (-decimal)
    with np.errstate(invalid="ignore", over="ignore"):  # (a NaN pair: part by part)
        matched = complex_nans_match(bx, by, 0.0, bound)
    differ = (np.isnan(bx) | np.isnan(by)) & ~matched
    if not differ.any():
        return
    index = tuple(int(i) for i in np.argwhere(differ)[0])
    msg = (
        f"{err_msg}\nArrays are not almost equal: {int(differ.sum())} of "
        f"{differ.size} elements are NaN in different parts (or their other "
        f"parts differ); first at index {index}: x {bx[index]!r}, y {by[index]!r}"
    ).lstrip("\n")
    raise AssertionError(msg)


def _narrowed_on(x: Array, y: Array, backend: Backend | None) -> str | None:
    """The device (its variant's name) that narrowed a float64 ``x`` or ``y`` to the other.

    None unless the device lacks float64 and one array is a float64 (or
    complex128) whose narrowing is the other's dtype: two float32 arrays,
    or two float64 ones, are compared at the ``decimal`` asked for.
    """
    if backend is not None:
        adapter, device = ADAPTERS[backend.library], backend.device
    else:
        numpy_adapter = ADAPTERS["numpy"]
        for a in (x, y):
            found = adapter_for_array(a)
            if found is not None and found is not numpy_adapter:
                adapter, device = found, found.device_str(found.device_of(a))
                break
        else:
            return None
    if adapter.supports_float64(device):
        return None
    held = adapter.held_dtypes(device)
    dx, dy = _dtype_of(x), _dtype_of(y)
    for wide, other in ((dx, dy), (dy, dx)):
        if wide in _WIDE and other is not None and narrowed(wide, held) == other:
            return adapter.variant_name(device)
    return None


def _dtype_of(a: Array) -> str | None:
    """The dtype name of an array of any library (a list's: NumPy's for it)."""
    try:
        return dtype_name(a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype)
    except (TypeError, ValueError):
        return None
