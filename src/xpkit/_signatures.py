"""What a call is keyed by in the plan memory: its signature.

The same function (its code, and the values it closes over, binds or takes
by default), the same row shape, dtype and layout of every input, the same
``whole`` operands, the same backend, device and library modes
(`xpkit._plan_memory` says what a signature keeps). What a function holds
is keyed so that the memory keeps nothing of the caller's alive: numbers of
every type by type and value (Python's, NumPy scalars by their dtype too, a
0-d array in host memory by library, dtype and value; ``np.int64(8)``,
``8`` and ``np.int32(8)`` are three keys, NaN is one and -0.0 is not 0.0), strings by
value, other arrays by library, shape, dtype and layout, modules by
themselves, a builtin bound method (``tensor.mul``, ``ndarray.sum``) by its
name and its owner's key, and classes and any other object by identity
through a weak reference: an entry holds only while it lives. A container
whose contents may change (a list, a dict, a set...) has no key, nor has
anything that cannot be keyed: such a call has no signature.
"""

from __future__ import annotations

import array
import collections.abc
import functools
import math
import types
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from ._adapters._registry import adapter_for_array
from ._dtypes import DTYPE_KINDS, dtype_name

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._plan_memory import Signature
    from ._typing import Array, UserFunction, Value

__all__ = ["exact_signature", "signature"]


class _Unkeyable(Exception):
    """A value that cannot be part of a signature (nothing is remembered)."""


def signature(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[Array, ...] | Mapping[str, Array],
    where: Hashable,
) -> tuple[Signature | None, tuple[Callable[[], object], ...]]:
    """``(key, weak references)`` of a call, or ``(None, ())`` when it has none.

    ``where`` names the backend and device. The weak references are to the
    objects the key names by identity.
    """
    refs: list[Callable[[], object]] = []
    try:
        key: Signature = (
            _callable_key(fn, refs, 0),
            tuple([_row_key(a) for a in arrays]),
            _operands_key(whole, refs) if whole else (),
            where,
        )
        hash(key)
    except Exception:  # noqa: BLE001 - any object that cannot be keyed: no key
        return None, ()
    return key, tuple(refs)


def exact_signature(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[Array, ...] | Mapping[str, Array],
    where: Hashable,
) -> tuple[Signature | None, tuple[Callable[[], object], ...]]:
    """`signature`, with every input also by device, library settings and shape.

    Two calls with one exact key have the same inputs but for their values
    (their rows too, not only their row shape): ``fn``'s key, ``where``,
    the whole operands' key, then each input's `Adapter.input_key`, in one
    tuple.
    """
    refs: list[Callable[[], object]] = []
    try:
        parts = [
            _callable_key(fn, refs, 0),
            where,
            _operands_key(whole, refs) if whole else (),
        ]
        for a in arrays:
            adapter = adapter_for_array(a)
            if adapter is None:
                return None, ()
            key = adapter.input_key(a)
            parts.append((key, adapter.cost_mode()) if adapter.has_cost_mode else key)
        key = tuple(parts)
        hash(key)
    except Exception:  # noqa: BLE001 - any object that cannot be keyed: no key
        return None, ()
    return key, tuple(refs)


def _operands_key(
    whole: tuple[Array, ...] | Mapping[str, Array], refs: list[Callable[[], object]]
) -> Hashable:
    named = (
        enumerate(whole)
        if isinstance(whole, (tuple, list))
        else sorted(whole.items())  # keyword operands, by name
    )
    return tuple([(k, _value_key(v, refs, 0)) for k, v in named])


def _row_key(a: Array) -> Hashable:
    """An input by library, row shape, dtype, layout and the library's modes.

    The modes are those that change a call's cost (`Adapter.cost_mode`).
    The dtype is the library's own object (hashable on every library, and
    never compared with another library's: the library's key comes first).
    The layout is what of its storage changes the cost (`Adapter.layout_key`):
    contiguous rows are traced, others measured (`xpkit._cost`), so a
    Fortran-order input's cost is not a C-order one's; a chunked library's
    chunks.
    """
    adapter = adapter_for_array(a)
    if adapter is None:
        raise _Unkeyable
    return (
        adapter.key,
        tuple(a.shape[1:]),
        a.dtype,
        adapter.layout_key(a),
        adapter.cost_mode() if adapter.has_cost_mode else None,
    )


#: The types whose values are their own keys (each equal only to itself).
_PLAIN = (type(None), bool, int, str, bytes)
#: Python's number and text types, whose subclasses are keyed by plain value.
_BASES = (int, float, complex, str, bytes)
#: What a NaN is keyed by: ``nan != nan``, and a tuple holding two NaN
#: objects made apart compares unequal (the same object compares equal).
_NAN = "nan"
#: What a negative zero is keyed by: ``-0.0 == 0.0`` and they hash alike, but
#: a function may tell them apart (``copysign``, ``1 / x``).
_NEGATIVE_ZERO = "-0.0"
#: Containers whose contents may change while they live: no identity key
#: (their cost would outlive a change), so no signature.
_MUTABLE = (
    list,
    dict,
    bytearray,
    array.array,
    collections.abc.MutableSequence,
    collections.abc.MutableSet,
    collections.abc.MutableMapping,
)
#: How deep a closure over closures is followed before giving up.
_DEPTH = 4


def _value_key(v: Value, refs: list[Callable[[], object]], depth: int) -> Hashable:
    """``v`` as part of a signature (see the module docstring).

    Numbers and strings by type and value; NumPy scalars by type, dtype and
    value; arrays by library, shape, dtype and layout (a 0-d array in host memory
    by its value too); tuples by their items; classes and modules by
    themselves; functions by their code and what they hold; other objects by
    identity, through a weak reference appended to ``refs``.
    """
    cls = type(v)
    if cls in _PLAIN:
        return (cls.__name__, v)
    if cls is float:
        return ("float", _number(v))
    if cls is complex:
        return ("complex", _number(v))
    if isinstance(v, np.generic):
        return _scalar_key(v)
    if isinstance(v, _BASES):  # a subclass: an IntEnum member, a str subclass
        return (_class_key(cls, refs), _subclass_key(v))
    adapter = adapter_for_array(v)
    if adapter is not None:
        shape = tuple(v.shape)
        if shape:  # (its layout: one that is not contiguous is measured)
            return ("array", adapter.key, shape, v.dtype, adapter.layout_key(v))
        return _scalar_array_key(adapter, v)
    if isinstance(v, tuple):  # (a named tuple by its class too)
        items = tuple(_value_key(i, refs, depth + 1) for i in v)
        return ("tuple", items) if cls is tuple else (_class_key(cls, refs), items)
    if isinstance(v, _MUTABLE):  # (a list subclass, a set, a deque: it may change)
        raise _Unkeyable
    if isinstance(v, types.ModuleType):
        return ("named", v)
    if isinstance(v, type):
        return _class_key(v, refs)
    if callable(v):
        return _callable_key(v, refs, depth + 1)
    return _identity(v, refs)


def _number(v: Hashable) -> Hashable:
    """A Python value as a key: itself, but NaN as `_NAN` and -0.0 as `_NEGATIVE_ZERO`.

    (Of a float, and of each part of a complex.)
    """
    if isinstance(v, float):
        if math.isnan(v):
            return _NAN
        return _NEGATIVE_ZERO if v == 0.0 and math.copysign(1.0, v) < 0 else v
    if isinstance(v, complex):
        parts = (_number(v.real), _number(v.imag))
        if any(isinstance(part, str) for part in parts):  # (a marker)
            return ("complex", *parts)
    return v


def _item(value: np.generic) -> Hashable:
    """A NumPy scalar's value as a key: its Python number, or its exact ratio.

    The ratio of each part where Python has no number for its dtype (a long
    double's digits beyond a float's: two that round to one float are two
    keys).
    """
    item = value.item()
    if not isinstance(item, np.generic):
        return _number(item)
    parts = (item.real, item.imag) if isinstance(item, np.complexfloating) else (item,)
    return ("exact", *(_exact(part) for part in parts))


def _exact(part: np.generic) -> Hashable:
    """A finite non-zero long double as its ratio of ints; other values as a float's."""
    if np.isfinite(part) and part != 0:
        return part.as_integer_ratio()  # type: ignore[attr-defined,no-any-return]
    return _number(float(part))


def _scalar_key(v: np.generic) -> Hashable:
    """A NumPy scalar by its type, dtype and value (``np.int64(8)`` is not 8).

    The value is the Python one (`numpy.generic.item`), or its bytes where
    Python has none (a long double, which ``item`` keeps: `_item`): the key
    holds no NumPy object but the dtype. A value that cannot be hashed
    makes the signature unknown.
    """
    if v.dtype.hasobject:  # (a structured scalar's objects: kept alive by a key)
        raise _Unkeyable
    return ("numpy", type(v), v.dtype, _item(v))


def _subclass_key(v: complex | str | bytes) -> Hashable:
    """The plain value of an instance of a subclass of a number or text type.

    The key holds it (with the class, `_class_key`), not the instance
    (which may carry attributes of its own).
    """
    plain: complex | str | bytes
    try:  # (a subclass may convert itself by a method of its own)
        if isinstance(v, int):  # (bool has no subclasses)
            plain = int(v)
        elif isinstance(v, float):
            plain = float(v)
        elif isinstance(v, complex):
            plain = complex(v)
        elif isinstance(v, str):
            plain = str(v)
        else:
            plain = bytes(v)
    except (TypeError, ValueError, OverflowError):
        raise _Unkeyable from None
    return _number(plain)


def _scalar_array_key(adapter: Adapter, v: Array) -> Hashable:
    """A 0-d array by library and dtype, and by value where that is cheap.

    A 0-d array closed over may be a size (``np.ones((n, k))``): its value is
    read where that is cheap and has no side effects: from its host memory
    (`Adapter.host_view`: NumPy, a CPU tensor, array-api-strict), or as the
    standard's Python number of it (``float(v)``) where the array is not on
    a GPU (a bfloat16 or conjugate CPU tensor, JAX's CPU, ndonnx). One on a
    GPU (reading it would wait for the device), lazy, traced or without a
    number (a JAX PRNG key) is keyed by its dtype only, as other arrays
    are. One that holds Python objects is not keyed at all: the key would
    keep them alive.
    """
    if not adapter.values_at_hand(v):
        return ("array", adapter.key, (), v.dtype)
    host = adapter.host_view(v)
    if host is not None:
        if host.dtype.hasobject:
            raise _Unkeyable
        return ("array", adapter.key, (), v.dtype, _item(host.flat[0]))
    number = None if _on_gpu(adapter, v) else _python_number(v)
    if number is None:
        return ("array", adapter.key, (), v.dtype)
    return ("array", adapter.key, (), v.dtype, _number(number))


#: (library, device key) -> whether that device is a GPU (`_on_gpu`).
_GPU: dict[tuple[str, Hashable], bool] = {}


def _on_gpu(adapter: Adapter, v: Array) -> bool:
    """Whether ``v`` is on a GPU, remembered per library and device."""
    where = (adapter.key, adapter.device_key(v))
    try:
        return _GPU[where]
    except KeyError:
        pass
    except TypeError:  # (a device key that cannot be hashed: ask each time)
        return adapter.is_gpu(adapter.device_str(adapter.device_of(v)))
    on_gpu = _GPU[where] = adapter.is_gpu(adapter.device_str(adapter.device_of(v)))
    return on_gpu


#: The standard's conversion of a 0-d array of each kind to a Python number.
_TO_PYTHON: dict[str, Callable[[Array], bool | int | float | complex]] = {
    **dict.fromkeys(DTYPE_KINDS["bool"], bool),
    **dict.fromkeys(DTYPE_KINDS["integral"], int),
    **dict.fromkeys((*DTYPE_KINDS["real floating"], "float16", "bfloat16"), float),
    **dict.fromkeys(DTYPE_KINDS["complex floating"], complex),
}


def _python_number(v: Array) -> bool | int | float | complex | None:
    """``v``'s value as a Python number, or None where it has none to give."""
    try:
        return _TO_PYTHON[dtype_name(v.dtype) or ""](v)
    except Exception:  # noqa: BLE001 - (a PRNG key, a deleted array: by dtype)
        return None


def _callable_key(fn: object, refs: list[Callable[[], object]], depth: int) -> Hashable:
    if fn.__class__ is types.FunctionType and not (
        fn.__closure__ or fn.__defaults__ or fn.__kwdefaults__
    ):  # a plain function, the common case, by its code and file at once
        code = fn.__code__
        return (code, code.co_filename)  # (equal code of two files is equal)
    if depth > _DEPTH:
        raise _Unkeyable
    if isinstance(fn, types.FunctionType):
        closure, given, named = fn.__closure__, fn.__defaults__, fn.__kwdefaults__
        try:
            cells = (
                ()
                if closure is None
                else tuple([_value_key(c.cell_contents, refs, depth) for c in closure])
            )
        except ValueError:  # an empty cell (a name not bound yet)
            raise _Unkeyable from None
        defaults = (
            () if given is None else tuple([_value_key(d, refs, depth) for d in given])
        )
        keywords = (
            ()
            if not named
            else tuple(
                [(k, _value_key(v, refs, depth)) for k, v in sorted(named.items())]
            )
        )
        code = fn.__code__
        return ("function", code, code.co_filename, cells, defaults, keywords)
    if isinstance(fn, types.MethodType):
        return (
            "method",
            _callable_key(fn.__func__, refs, depth + 1),
            _value_key(fn.__self__, refs, depth + 1),
        )
    if isinstance(fn, functools.partial):
        return (
            "partial",
            _callable_key(fn.func, refs, depth + 1),
            tuple(_value_key(a, refs, depth + 1) for a in fn.args),
            tuple(
                (k, _value_key(v, refs, depth + 1))
                for k, v in sorted(fn.keywords.items())
            ),
        )
    if isinstance(fn, _BUILTIN_METHODS):
        return _builtin_method_key(fn, refs, depth)
    if isinstance(fn, type):
        return _class_key(fn, refs)
    if isinstance(fn, _DESCRIPTORS):
        return ("named", fn)
    return _identity(fn, refs)


#: Functions written in C, bound to what their ``__self__`` is: ``len`` and
#: ``math.sqrt`` (a module), ``tensor.mul`` and ``ndarray.sum`` (an array),
#: ``ndarray.__mul__`` (a method-wrapper).
_BUILTIN_METHODS = (types.BuiltinFunctionType, types.MethodWrapperType)
#: A class's own functions written in C, bound to nothing (``ndarray.sum``,
#: ``torch.Tensor.mul``): each holds only its class.
_DESCRIPTORS = (
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.ClassMethodDescriptorType,
)


def _builtin_method_key(
    fn: types.BuiltinFunctionType | types.MethodWrapperType,
    refs: list[Callable[[], object]],
    depth: int,
) -> Hashable:
    """A function written in C: by itself where a module holds it, else by its owner.

    ``w.mul`` holds the tensor ``w``: its key is its type, its name and
    ``w``'s key (an array by library, shape, dtype and layout; an object by weak
    identity), never the bound method, which would keep ``w`` alive.
    """
    owner = fn.__self__
    if owner is None or isinstance(owner, types.ModuleType):
        return ("named", fn)
    return (
        "builtin method",
        fn.__class__,
        fn.__qualname__,
        _value_key(owner, refs, depth + 1),
    )


def _identity(v: object, refs: list[Callable[[], object]]) -> Hashable:
    """``v`` by identity, while it lives (a weak reference checks that).

    Its class by ``id`` too, never the class itself: a class made per call
    (a factory's, a test's) would hold what its methods close over; while
    ``v`` lives, so does its class.
    """
    try:
        refs.append(weakref.ref(v))
    except TypeError:
        raise _Unkeyable from None
    return ("object", id(type(v)), id(v))


def _class_key(cls: type, refs: list[Callable[[], object]]) -> Hashable:
    """A class by identity, while it lives (a weak reference checks that).

    A key holding a class made per call kept it, and all its methods close
    over, alive (240 MB of 30 folds' weights). A class that cannot be
    weakly referenced is held (a C type).
    """
    try:
        refs.append(weakref.ref(cls))
    except TypeError:
        return ("named", cls)
    return ("class", id(cls))
