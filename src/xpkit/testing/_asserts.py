"""Precision-aware assertions over arrays of any supported library."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from .._adapters._registry import ADAPTERS, adapter_for_array
from .._backend import Backend
from .._dtypes import PrecisionWarning
from ._close_values import host_copy
from ._running import running_variant

if TYPE_CHECKING:
    from .._typing import Array

__all__ = ["assert_array_almost_equal"]

#: The strictest ``decimal`` that float32-only devices (MPS) are held to.
FLOAT32_DEVICE_DECIMAL = 2


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
    ``numpy.testing.assert_array_almost_equal`` does. On devices without
    float64 (Apple MPS) the requested ``decimal`` is reduced to at most
    ``2``, with a `PrecisionWarning` saying so, since float32 cannot meet
    float64 expectations. Inside a test of the xpkit pytest plugin the
    warning is left out (filterwarnings = error would fail the test): the
    session's summary names the devices that narrowed.

    Parameters
    ----------
    x, y : array_like
        Arrays to compare.
    decimal : int, default 6
        Desired decimal precision.
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
    if not _supports_float64(x, y, backend) and decimal > FLOAT32_DEVICE_DECIMAL:
        if running_variant() is None:  # the plugin's tests: its summary says it
            warnings.warn(
                f"comparing at decimal={FLOAT32_DEVICE_DECIMAL} instead of "
                f"{decimal}: the device has no float64",
                PrecisionWarning,
                stacklevel=2,
            )
        decimal = FLOAT32_DEVICE_DECIMAL
    np.testing.assert_array_almost_equal(
        host_copy(x, "x"),
        host_copy(y, "y"),
        decimal=int(decimal),
        err_msg=err_msg,
        verbose=verbose,
    )


def _supports_float64(x: Array, y: Array, backend: Backend | None) -> bool:
    if backend is not None:
        return backend.has_float64
    numpy_adapter = ADAPTERS["numpy"]
    for a in (x, y):
        adapter = adapter_for_array(a)
        if adapter is not None and adapter is not numpy_adapter:
            dev = adapter.device_str(adapter.device_of(a))
            return adapter.supports_float64(dev)
    return True
