"""`assert_close` / `assert_equal`: namespace, shape, dtype and device first, then values."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from .._adapters._registry import ADAPTERS, adapter_for_array
from .._dtypes import DTYPE_NAMES, dtype_label, dtype_name, narrowed
from ._close_values import compare_values, host_copy, registered_number
from ._running import RunningVariant, running_variant

if TYPE_CHECKING:
    from .._adapters._base import Adapter
    from .._typing import Array, DType, HostArray, Value

__all__ = ["assert_close", "assert_equal", "default_tolerance"]

_REAL_OF = {"complex64": "float32", "complex128": "float64"}

#: The relative tolerance of both 16-bit floats: float16's ``4 * sqrt(eps)``
#: (eps = 2**-10), 0.125. bfloat16's own (eps = 2**-7) would be 0.354, which
#: passes ``1.0`` against ``1.25``: looser than a third is no check at all.
_HALF_RTOL = 4 * float(np.finfo(np.float16).eps) ** 0.5


def default_tolerance(dtype: DType) -> tuple[float, float]:
    """``(rtol, atol)`` for a dtype: ``4 * sqrt(eps)`` relative for floats, exact otherwise.

    float64 → 6.0e-8, float32 → 1.4e-3, float16 → 0.125. bfloat16 takes
    float16's 0.125 too: its own ``4 * sqrt(eps)`` (eps = 2**-7) would be
    0.354, which passes ``1.0`` against ``1.25``. Complex dtypes use their
    component's tolerance; integer and boolean dtypes compare exactly. The
    narrower floats of torch and ml_dtypes (float8, float6, float4, torch's
    complex32) take float32's, as their host copies are compared: tighter
    than their own precision, never looser; 4-, 2- and 1-bit integers
    compare exactly.

    Parameters
    ----------
    dtype : dtype or str
        A dtype of any supported library, or its name.

    Returns
    -------
    tuple of float
        ``(rtol, atol)``.

    Raises
    ------
    TypeError
        ``dtype`` is not a numeric or boolean dtype.

    Examples
    --------
    >>> from xpkit.testing import default_tolerance
    >>> default_tolerance("int32")
    (0.0, 0.0)
    >>> rtol, atol = default_tolerance("float32")
    >>> round(rtol, 4), atol
    (0.0014, 0.0)
    >>> default_tolerance("float16"), default_tolerance("bfloat16")
    ((0.125, 0.0), (0.125, 0.0))
    """
    try:
        name = dtype_name(dtype)
    except TypeError:
        narrow = _NARROW.fullmatch(dtype_label(dtype))
        if narrow is not None:  # (before the long double: ml_dtypes gives
            # float8_e5m2 NumPy's kind "f", and its finfo an rtol of 2.0)
            # (compared as their host copies are: float32, complex64, integers)
            return (0.0, 0.0) if narrow["integer"] else default_tolerance("float32")
        if isinstance(dtype, type) and issubclass(dtype, np.generic):
            dtype = np.dtype(dtype)  # (np.longdouble, as np.float64 is taken)
        if isinstance(dtype, np.dtype) and dtype.kind in "fc":  # a long double
            return 4 * float(np.finfo(dtype).eps) ** 0.5, 0.0
        raise
    if name is None:
        msg = f"dtype must be a dtype or its name, got {dtype!r}"
        raise TypeError(msg)
    name = _REAL_OF.get(name, name)
    if name in ("float16", "bfloat16"):
        return _HALF_RTOL, 0.0
    if name.startswith("float"):
        return 4 * float(np.finfo(name).eps) ** 0.5, 0.0
    return 0.0, 0.0


def assert_close(
    actual: Array,
    desired: Array,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    check_dtype: bool = True,
    check_device: bool = True,
    check_namespace: bool = True,
) -> None:
    """Assert that two arrays (of any supported library) are close.

    Checks, in this order and each with its own message: the array library
    (namespace), the shape, the dtype, the device, then the values, with
    ``|actual - desired| <= atol + rtol * |desired|`` elementwise (NaNs must
    match). The default tolerance comes from ``desired``'s dtype (see
    `default_tolerance`); where that is an integer or bool dtype and
    ``actual``'s is a floating one (``check_dtype=False``), from ``actual``'s:
    a float16 result against integers is held to float16's 0.125, as a
    float32 one to 1.4e-3 (two integer arrays compare exactly). On failure the message names the worst element,
    its index and both values.

    Inside a test the xpkit pytest plugin runs on a backend variant,
    ``actual`` must be an array of that variant's library (a NumPy copy of
    the result, from ``to_numpy`` or a function that returns host arrays,
    fails unless ``check_namespace=False`` says the host copies are compared
    on purpose), and ``desired`` may be a NumPy reference for it:
    ``actual`` must then be on the variant's device (a result that
    slipped to another device fails), and where the device narrowed a
    64-bit dtype by its rule (float64 to float32 on JAX without x64, MPS,
    array-api-strict's ``no_float64``), a reference of the wider dtype is
    compared at the narrower dtype's tolerance. Any other difference in
    dtype still fails; outside such a test none of this applies.

    Parameters
    ----------
    actual, desired : array
        The arrays to compare. ``desired`` may be a NumPy array, a list or a
        scalar when ``check_namespace=False``, and a NumPy array in a test of
        the plugin (see above).
    rtol, atol : float, optional
        Relative and absolute tolerances; default from the dtype.
    check_dtype, check_device, check_namespace : bool, default True
        Turn the corresponding check off.

    Raises
    ------
    AssertionError
        Naming what differs.

    Returns
    -------
    None

    Examples
    --------
    >>> import numpy as np
    >>> from xpkit.testing import assert_close
    >>> assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]))
    >>> assert_close(np.array([np.inf]), np.array([1.0]))
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """
    __tracebackhide__ = True
    rtol = _check_tolerance("rtol", rtol)
    atol = _check_tolerance("atol", atol)
    a, d, narrow = _compare_meta(
        actual, desired, check_dtype, check_device, check_namespace
    )
    if rtol is None or atol is None:  # (both given: any numeric dtype)
        d_rtol, d_atol = default_tolerance(
            actual.dtype if narrow else _source_dtype(desired, d, actual, a)
        )
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
    compare_values(a, d, rtol, atol)


def _check_tolerance(param: str, value: Value) -> float | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.timedelta64)) or not isinstance(
        value, (int, float, np.floating, np.integer)
    ):
        msg = f"{param} must be a number, got {value!r}"
        raise TypeError(msg)
    try:
        number = float(value)
    except OverflowError:  # an int beyond float's range
        number = float("inf")
    if not np.isfinite(number) or number < 0:
        msg = f"{param} must be a finite non-negative number, got {value!r}"
        raise ValueError(msg)
    return number


def _source_dtype(desired: Array, d: HostArray, actual: Array, a: HostArray) -> DType:
    """The dtype the default tolerance comes from: desired's own (bfloat16 too).

    Where desired's is not floating (integers, bool), actual's where that
    is: a floating result is held to its own precision against integers.
    A dtype outside the standard gives its host copy's (a long double its
    own; torch's float8 and complex32 the float32 and complex64 of their
    copies: a tolerance tighter than their own precision, never looser).
    """
    for original, host in ((desired, d), (actual, a)):
        dtype = getattr(original, "dtype", host.dtype)
        try:
            name = dtype_name(dtype)
        except TypeError:
            dtype = host.dtype
            name = _dtype_text(dtype, host)
        if name is not None and (
            name.startswith(("float", "complex")) or name == "bfloat16"
        ):
            return dtype
    return d.dtype


def assert_equal(
    actual: Array,
    desired: Array,
    *,
    check_dtype: bool = True,
    check_device: bool = True,
    check_namespace: bool = True,
) -> None:
    """Assert that two arrays are equal (same checks as `assert_close`, exact values).

    Parameters
    ----------
    actual, desired : array
        The arrays to compare.
    check_dtype, check_device, check_namespace : bool, default True
        As for `assert_close`.

    Returns
    -------
    None

    Raises
    ------
    AssertionError
        The first check that differs, with its message.

    Examples
    --------
    >>> import numpy as np
    >>> from xpkit.testing import assert_equal
    >>> assert_equal(np.array([1, 2]), np.array([1, 2]))
    >>> assert_equal(np.array([1, 2]), np.array([1, 3]))
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """
    __tracebackhide__ = True
    a, d, _ = _compare_meta(actual, desired, check_dtype, check_device, check_namespace)
    compare_values(a, d, 0.0, 0.0)


def _describe(adapter: Adapter | None, x: Array) -> str:
    return type(x).__qualname__ if adapter is None else adapter.label


def _compare_meta(
    actual: Array,
    desired: Array,
    check_dtype: bool,
    check_device: bool,
    check_namespace: bool,
) -> tuple[HostArray, HostArray, bool]:
    """Both arrays on the host, and whether ``actual`` is a narrowed reference's match.

    The third value is True where the dtypes differ only as the running
    variant's device narrows them (compare at ``actual``'s tolerance).
    """
    __tracebackhide__ = True
    for name, flag in (
        ("check_dtype", check_dtype),
        ("check_device", check_device),
        ("check_namespace", check_namespace),
    ):
        if not isinstance(flag, bool):
            msg = f"{name} must be a bool, got {flag!r}"
            raise TypeError(msg)
    lib_a, lib_d = adapter_for_array(actual), adapter_for_array(desired)
    running = running_variant()
    # Inside a test of the plugin, a NumPy array may be the reference for a
    # result of the variant's library.
    own = running is not None and lib_a is ADAPTERS[running.backend.library]
    reference = own and lib_d is ADAPTERS["numpy"]
    if check_namespace and not reference and (lib_a is None or lib_a is not lib_d):
        msg = (
            f"namespaces differ: actual is {_describe(lib_a, actual)}, "
            f"desired is {_describe(lib_d, desired)}"
        )
        if lib_a is None:  # ("namespaces differ: actual is list, desired is list")
            msg = (
                f"actual is a {_describe(lib_a, actual)}, not an array of a "
                "library xpkit knows (compare it as NumPy would with "
                "check_namespace=False)"
            )
        raise AssertionError(msg)
    if check_namespace and running is not None and not own:
        library = ADAPTERS[running.backend.library]
        msg = (
            f"actual is {_describe(lib_a, actual)}, but the test runs on "
            f"{running.ident} ({library.label}): the result left the variant's "
            "library (compare host copies on purpose with check_namespace=False)"
        )
        raise AssertionError(msg)
    a, d = host_copy(actual, "actual"), host_copy(desired, "desired")
    if a.shape != d.shape:
        msg = f"shapes differ: actual {a.shape}, desired {d.shape}"
        raise AssertionError(msg)
    narrow = False
    if check_dtype:
        da = _dtype_text(actual.dtype if lib_a is not None else a.dtype, a)
        dd = _dtype_text(desired.dtype if lib_d is not None else d.dtype, d)
        _computes_declared(lib_a, da, a, "actual")
        _computes_declared(lib_d, dd, d, "desired")
        if da != dd:
            narrow = _narrowed_reference(running, da, dd, lib_d)
            if not narrow:
                msg = f"dtypes differ: actual {da}, desired {dd}"
                if running is not None and dd is not None:
                    msg += _narrowing_note(running, dd)
                raise AssertionError(msg)
    if check_device and lib_a is not None and lib_d is not None:
        dev_a = lib_a.device_str(lib_a.device_of(actual))
        if reference and running is not None:
            where = running.backend.device
            if lib_a.canonical_device(dev_a) != lib_a.canonical_device(where):
                msg = (
                    f"devices differ: actual on {dev_a!r}, but the test runs on "
                    f"{running.ident} (device {where!r}): the result left the "
                    "device its inputs are on"
                )
                raise AssertionError(msg)
        else:
            dev_d = lib_d.device_str(lib_d.device_of(desired))
            # One library's canonical names; across two, the names they print
            # ("cpu", "cuda:0"): JAX's CPU and NumPy's host are one device.
            same = (
                lib_a.canonical_device(dev_a) == lib_d.canonical_device(dev_d)
                if lib_a is lib_d
                else dev_a == dev_d
            )
            if not same:
                msg = f"devices differ: actual on {dev_a!r}, desired on {dev_d!r}"
                raise AssertionError(msg)
    return a, d, narrow


#: The labels of the narrow dtypes outside the standard (torch, ml_dtypes).
_NARROW = re.compile(r"(?:float[468]_\w+|complex32|(?P<integer>u?int[124]))")


def _dtype_text(dtype: DType, host: HostArray) -> str | None:
    """The standard's name of ``dtype``, else its label where ``host`` holds numbers.

    A dtype outside the standard (NumPy's long double, torch's float8 and
    complex32) is compared by its label (`dtype_label`): two arrays of it
    are of one dtype, and their host copies hold numbers. Anything else is
    refused, as `dtype_name` refuses it.
    """
    if host.dtype.kind not in "biufc" and not registered_number(host.dtype):
        return dtype_name(dtype)
    return dtype_label(dtype)


def _computes_declared(
    adapter: Adapter | None, declared: str | None, host: HostArray, param: str
) -> None:
    """AssertionError where ``host`` is not of the dtype its array declared.

    A Dask array's dtype is what its graph says; its chunks may compute to
    another (a ``map_blocks`` without the right ``dtype=``). A dtype outside
    the standard (`_dtype_text`), whose host copy a library may widen, is
    not checked.
    """
    __tracebackhide__ = True
    if adapter is None or declared is None or declared not in DTYPE_NAMES:
        return
    computed = dtype_name(host.dtype)
    if adapter.host_dtypes.get(declared, declared) != computed:
        msg = f"{param} declares dtype {declared}, but its values are {computed}"
        raise AssertionError(msg)


def _held(running: RunningVariant) -> frozenset[str]:
    backend = running.backend
    return ADAPTERS[backend.library].held_dtypes(backend.device)


def _narrowed_reference(
    running: RunningVariant | None,
    actual: str | None,
    desired: str | None,
    lib_d: Adapter | None,
) -> bool:
    """Whether ``actual`` is what the running variant makes of a NumPy ``desired``."""
    if running is None or actual is None or desired is None:
        return False
    if lib_d is not None and lib_d is not ADAPTERS["numpy"]:
        return False
    return desired != actual and narrowed(desired, _held(running)) == actual


def _narrowing_note(running: RunningVariant, desired: str) -> str:
    becomes = narrowed(desired, _held(running))
    if becomes == desired:
        return ""
    return (
        f" ({running.ident} narrows {desired} to {becomes}: a NumPy {desired} "
        f"reference is compared at {becomes}; this result is neither)"
    )
