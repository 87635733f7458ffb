"""Creation on the device: ``b.create``, and the checked ``full`` and ``*_like``.

`Creation` is the namespace's own creation functions with ``device=``
bound once (`creation_for`); `full`, `full_like`, `ones_like` and
`zeros_like` hold the work of `Backend`'s checked versions (NumPy's dtype
rules, fill values that fit) beyond their fast paths, as functions of the
`Facts` it bound.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, NamedTuple

import numpy as np

from ._args import (
    check_scalar,
    check_shape,
    shape_of,
)
from ._cast_checks import check_fill_fits, fill_dtype_name, rounded_to_finite
from ._convert import dtype_source, ref, refuse_lossy_data
from ._dtypes import dtype_name
from ._facts import ArrayT
from ._shown import shown

if TYPE_CHECKING:
    from ._facts import Facts, Source
    from ._typing import Array, Device, DType, NativeDevice, Value

__all__ = [
    "Creation",
    "creation_for",
    "full",
    "full_like",
    "like_args",
    "ones_like",
    "python_number",
    "zeros_like",
]


class Creation(NamedTuple, Generic[ArrayT]):
    """``b.create``: the standard's creation functions on ``b``'s device.

    Each is the namespace's own function (``b.xp.zeros``, ...) with
    ``device=b.native_device`` bound: the library's signatures, defaults
    (torch's float32 default dtype included) and dtype objects, and the
    array lands on the backend's device without repeating ``device=``. An
    explicit ``device=`` still wins; ``asarray`` refuses a NumPy masked
    array (TypeError), whose mask the namespace's own dropped. `Backend.asarray` and `Backend.full`
    are the checked versions (NumPy's dtype rules, values kept by casts);
    these cost what the library's own call costs.

    Each returns the backend's array type (``b.create.zeros(3)`` is a
    ``torch.Tensor`` on a ``Backend[torch.Tensor]``); the parameters are
    the library's own, so they are not typed here.

    Examples
    --------
    >>> import xpkit
    >>> b = xpkit.Backend("numpy")
    >>> b.create.arange(3)
    array([0, 1, 2])
    >>> b.create.zeros((2, 2)).shape
    (2, 2)
    """

    asarray: Callable[..., ArrayT]
    zeros: Callable[..., ArrayT]
    ones: Callable[..., ArrayT]
    empty: Callable[..., ArrayT]
    full: Callable[..., ArrayT]
    arange: Callable[..., ArrayT]
    linspace: Callable[..., ArrayT]
    eye: Callable[..., ArrayT]


def creation_for(f: Facts[ArrayT]) -> Creation[ArrayT]:
    """`Creation` for the bound namespace, with ``device=`` its device bound.

    Where the device is not on this host (`Facts.unusable`), each function
    raises `RuntimeError` saying why.
    """
    xp: Array = f.xp  # the namespace's functions are its own, not Namespace's
    if f.unusable is not None:
        return Creation(*[xp.refuse] * len(Creation._fields))
    made: list[Callable[..., Array]] = [
        functools.partial(getattr(xp, name), device=f.native)
        for name in Creation._fields
    ]
    at = Creation._fields.index("asarray")
    asarray = functools.partial(xp.asarray, device=f.native)
    made[at] = _keeping_masks(asarray, f.adapter.asarray_keeps_mask)
    return Creation(*made)


def _keeping_masks(
    asarray: functools.partial[Array], keeps: Callable[[DType | None], bool]
) -> Callable[..., Array]:
    """``asarray`` that refuses a NumPy masked array, alone or as a list's item.

    As `Backend.asarray` does: the namespace's own (``np.asarray``,
    ``torch.asarray``) returned the data without its mask, silently.
    ``keeps(dtype)``: the namespace's own keeps the mask of one given alone
    into ``dtype`` (None: not given; ndonnx's nullable dtypes; not of those
    in a list). The object and the dtype are found where the namespace's
    ``asarray`` takes them (JAX's: ``a`` and ``dtype`` by position too).
    """
    first, dtype_at = _parameters(asarray.func)

    def create_asarray(*args: Value, **kwargs: Value) -> Array:
        obj: Value = args[0] if args else kwargs.get(first)
        if type(obj) in (list, tuple) and _holds_masked(obj):
            refuse_lossy_data(obj, first)  # (names it, and where)
        if isinstance(obj, np.ma.MaskedArray):
            dtype = args[dtype_at] if 0 < dtype_at < len(args) else kwargs.get("dtype")
            if not keeps(dtype):
                refuse_lossy_data(obj, first)
        return asarray(*args, **kwargs)

    create_asarray.__wrapped__ = asarray  # type: ignore[attr-defined]  # (its signature)
    create_asarray.__doc__ = getattr(asarray.func, "__doc__", None)
    return create_asarray


def _parameters(func: Callable[..., object]) -> tuple[str, int]:
    """The name of ``func``'s first parameter, and ``dtype``'s place (0: by keyword only)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):  # (no signature to read)
        return "obj", 0
    first = params[0].name if params else "obj"
    for i, p in enumerate(params):
        if p.name == "dtype":
            return first, i if p.kind is p.POSITIONAL_OR_KEYWORD else 0
    return first, 0


def _holds_masked(items: list[Value] | tuple[Value, ...]) -> bool:
    """Whether a NumPy masked array is one of ``items``.

    Not deeper: the namespace's own cost is kept (`Backend.asarray` looks
    at every depth).
    """
    masked = np.ma.MaskedArray
    return any(isinstance(v, masked) for v in items)


def full(f: Facts[ArrayT], shape: Value, fill_value: Value, dtype: DType) -> ArrayT:
    """`Backend.full`: dtype from NumPy's rules, or ``dtype``; the value must fit."""
    shape = check_shape(shape)
    check_scalar(fill_value)
    source: Source
    if dtype is None:
        name = fill_dtype_name(fill_value)
        source = f"the dtype of fill_value={shown(fill_value)}"
    else:
        asked = dtype_name(dtype)
        assert asked is not None
        name, source = asked, dtype_source(dtype, "")
    target, xp_dtype = f.dtype_pair(name, None, source)
    check_fill_fits(fill_value, target, f.adapter.float64_narrowing(on_host=True))
    number = python_number(fill_value, xp_dtype)
    options = f.adapter.creation_options(shape)
    return f.xp.full(shape, number, dtype=xp_dtype, device=f.native, **options)


def like_args(
    f: Facts[ArrayT], array: Value, shape: Value, dtype: DType, device: Device
) -> tuple[tuple[int, ...], DType, NativeDevice]:
    """Shape, dtype object and native device of a ``*_like`` call's slow path."""
    _, xp_dtype, native = ref(f, array, dtype, device)
    out_shape = shape_of(array) if shape is None else check_shape(shape)
    return out_shape, xp_dtype, native


def full_like(
    f: Facts[ArrayT],
    array: Value,
    fill_value: Value,
    shape: Value,
    dtype: DType,
    device: Device,
) -> ArrayT:
    """`Backend.full_like`'s slow path: another shape, dtype or device, or host data."""
    out_shape, xp_dtype, native = like_args(f, array, shape, dtype, device)
    check_fill_fits(fill_value, xp_dtype, f.adapter.float64_narrowing(on_host=True))
    number = python_number(fill_value, xp_dtype)
    options = f.adapter.creation_options(out_shape)
    return f.xp.full(out_shape, number, dtype=xp_dtype, device=native, **options)


_INT64_LOW, _INT64_HIGH = -(2**63), 2**63 - 1


def python_number(fill_value: Value, dtype: DType) -> Value:
    """A NumPy number as the Python number it holds (checked to fit ``dtype``).

    array-api-strict takes Python scalars only, torch no ``np.uint64``; a
    complex number (checked: its imaginary part is 0) for a real ``dtype``
    is its real part as that dtype's kind (JAX and ndonnx refused ``1+0j``).
    """
    value = fill_value.item() if isinstance(fill_value, np.generic) else fill_value
    if isinstance(value, np.complexfloating):  # (a clongdouble's item() is itself)
        name = dtype_name(dtype)
        if name is not None and name.startswith("complex"):  # (torch took its
            return complex(float(value.real), float(value.imag))  # real part)
        value = value.real  # (checked: its imaginary part is 0)
    if type(value) is int and not _INT64_LOW <= value <= _INT64_HIGH:
        name = dtype_name(dtype)  # (torch's full: "int too big to convert")
        if name is not None and name.startswith(("float", "complex", "bfloat")):
            return float(value)  # (checked: it does not overflow)
    if isinstance(value, np.floating):  # (a longdouble's item() is itself)
        name = dtype_name(dtype)
        if name is not None and name.startswith(("int", "uint")):
            return value.as_integer_ratio()[0]  # (checked: whole, exactly)
        return float(value)
    if isinstance(value, complex):
        name = dtype_name(dtype)
        if name is not None and not name.startswith("complex"):
            real = value.real
            if name == "bool":
                return bool(real)
            value = int(real) if name.startswith(("int", "uint")) else real
    if isinstance(
        value, (float, complex)
    ):  # (float32's 3.4028235e38: torch refused it)
        name = dtype_name(dtype)
        return value if name is None else rounded_to_finite(value, name)
    return value


def ones_like(
    f: Facts[ArrayT], array: Value, shape: Value, dtype: DType, device: Device
) -> ArrayT:
    """`Backend.ones_like`'s slow path."""
    out_shape, xp_dtype, native = like_args(f, array, shape, dtype, device)
    options = f.adapter.creation_options(out_shape)
    return f.xp.ones(out_shape, dtype=xp_dtype, device=native, **options)


def zeros_like(
    f: Facts[ArrayT], array: Value, shape: Value, dtype: DType, device: Device
) -> ArrayT:
    """`Backend.zeros_like`'s slow path."""
    out_shape, xp_dtype, native = like_args(f, array, shape, dtype, device)
    options = f.adapter.creation_options(out_shape)
    return f.xp.zeros(out_shape, dtype=xp_dtype, device=native, **options)
