"""The standard's data type functions and inspection API for shape-only arrays.

Dtypes are the impersonated library's own objects (`Profile.dtypes`): ``fn``
compares ``x.dtype`` with ``xp.float32`` as it would on the library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._trace import Trace, active_trace
from . import _rules as rules
from ._array import ShapeArray, lift
from ._array import astype as _astype

if TYPE_CHECKING:
    from ..._typing import DType, Value

__all__ = [
    "Info",
    "__array_namespace_info__",
    "astype",
    "can_cast",
    "finfo",
    "iinfo",
    "isdtype",
    "result_type",
]

_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "integral": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float16", "bfloat16", "float32", "float64"),
    "complex floating": ("complex64", "complex128"),
    "numeric": (
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    ),
}  # fmt: skip


def _name(trace: Trace, dtype: Value) -> str:
    if isinstance(dtype, ShapeArray):
        return dtype._name
    name = rules.dtype_name_of(trace, dtype)
    if name is None:
        msg = "a dtype of None"
        raise trace.refuse(msg)
    return name


def astype(
    x: Value, dtype: Value, /, *, copy: bool = True, device: Value = None
) -> ShapeArray:
    """``x`` in ``dtype``."""
    trace = active_trace()
    return _astype(lift(trace, x), _name(trace, dtype), copy=copy)


def can_cast(from_: Value, to: Value, /) -> bool:
    """Whether ``from_`` casts to ``to`` by the standard's rules."""
    trace = active_trace()
    a, b = _name(trace, from_), _name(trace, to)
    return a == b or rules.promote(trace.profile, a, b) == b


def finfo(type: Value, /) -> object:
    """Machine limits of a floating dtype (NumPy's ``finfo`` of its name)."""
    trace = active_trace()
    return np.finfo(_name(trace, type))


def iinfo(type: Value, /) -> object:
    """Machine limits of an integer dtype (NumPy's ``iinfo`` of its name)."""
    trace = active_trace()
    return np.iinfo(_name(trace, type))


def isdtype(dtype: Value, kind: Value) -> bool:
    """Whether ``dtype`` is of ``kind`` (a name, a dtype, or a tuple of them)."""
    trace = active_trace()
    name = _name(trace, dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str) and k in _KINDS:
            if name in _KINDS[k]:
                return True
        elif _name(trace, k) == name:
            return True
    return False


def result_type(*arrays_and_dtypes: Value) -> DType:
    """The dtype promotion gives ``arrays_and_dtypes``."""
    trace = active_trace()
    names = [
        _name(trace, v)
        for v in arrays_and_dtypes
        if not isinstance(v, bool | int | float | complex)
    ]
    if not names:
        msg = "result_type() of scalars only"
        raise trace.refuse(msg)
    name = names[0]
    for other in names[1:]:
        name = rules.promote(trace.profile, name, other)
    for v in arrays_and_dtypes:
        if isinstance(v, bool | int | float | complex):
            name = rules.scalar_dtype(trace.profile, name, v)
    return trace.profile.dtype(name)


class Info:
    """What ``__array_namespace_info__()`` answers for the impersonated library."""

    def __init__(self, trace: Trace) -> None:
        self._profile = trace.profile

    def capabilities(self) -> dict[str, object]:
        """No data-dependent shapes (they read values); ``linalg`` is there."""
        return {
            "boolean indexing": False,
            "data-dependent shapes": False,
            "max dimensions": 64,
        }

    def default_device(self) -> object:
        """The device the arrays stand on."""
        return self._profile.native_device

    def devices(self) -> list[object]:
        """The one device the arrays stand on."""
        return [self._profile.native_device]

    def default_dtypes(self, *, device: Value = None) -> dict[str, DType]:
        """The library's default dtypes (those the device holds: ndonnx has no complex)."""
        p = self._profile
        names = {
            "real floating": p.default_float,
            "complex floating": p.default_complex,
            "integral": p.default_int,
            "indexing": p.default_int,
        }
        return {k: p.dtypes[n] for k, n in names.items() if n in p.dtypes}

    def dtypes(self, *, device: Value = None, kind: Value = None) -> dict[str, DType]:
        """The dtypes the device holds (of ``kind``)."""
        names = list(self._profile.dtypes)
        if kind is not None:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            names = [n for n in names if any(n in _KINDS.get(k, (k,)) for k in kinds)]
        return {n: self._profile.dtypes[n] for n in names}


def __array_namespace_info__() -> Info:
    """The inspection API of the impersonated library."""
    return Info(active_trace())
