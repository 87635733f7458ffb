"""Conversion in and out: any argument as a `Backend`'s array, any array to the host.

In: an array of any library, a list or a scalar becomes an array of the
backend's library on a device in a dtype, refused where that would change
a value or lose information (`convert`, `asarray_like`, `copy`). Out: an
array of any library to NumPy (`to_numpy`) or to its library's CPU
(`to_cpu`). Each function takes the `Facts` the `Backend` bound; the
`Backend` methods are their fast paths and docstrings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from array_api_compat import numpy as _np_xp

from ._adapters._registry import adapter_for_array, refuse_lossy, to_host
from ._cast_checks import check_cast_keeps_values
from ._dtypes import DTYPE_KINDS, dtype_name, own_dtype
from ._shown import shown

if TYPE_CHECKING:
    from ._facts import ArrayT, Facts, Source
    from ._typing import Array, Device, DType, HostArray, NativeDevice, Value

__all__ = [
    "asarray",
    "asarray_like",
    "castable",
    "convert",
    "copy",
    "dtype_source",
    "exact_ints",
    "host",
    "keeps_dtype",
    "ref",
    "refuse_lossy_data",
    "to_cpu",
    "to_numpy",
    "traced",
]

_COMPLEX = frozenset(DTYPE_KINDS["complex floating"])


def keeps_dtype(x: Array, dtype: DType) -> bool:
    """Whether ``dtype`` (any library's, or a name) is the dtype ``x`` has.

    For `Backend.asarray`'s fast path, with ``x`` an array of the backend
    on its device: a conversion to its own dtype is ``x`` itself. A dtype
    that is no dtype raises `dtype_name`'s TypeError, as the slow path does.
    """
    own = x.dtype
    return dtype is own or dtype_name(dtype) == dtype_name(own)


def traced(f: Facts[ArrayT], x: Value) -> Value:
    """``x``, or, while the library compiles the caller, host data as its array.

    Inside ``torch.compile`` a NumPy array's attributes cannot be read;
    the adapter converts it (`Adapter.traced_host_array`) and the
    caller goes on as with an array of this library.
    """
    as_array = f.adapter.traced_host_array(x)
    return x if as_array is None else as_array


def host(x: Value, param: str) -> HostArray:
    """Foreign data (other libraries, lists, scalars) as a numeric host array."""
    adapter = adapter_for_array(x)
    if adapter is not None:
        refuse_lossy(adapter, x, param)
        on_host = to_host(x, param)
    else:
        if isinstance(x, (list, tuple)):
            refuse_lossy_data(x, param)  # (arrays in it, at any depth: their masks)
        try:
            on_host = _asarray_of_items(x)
        except (ValueError, TypeError) as exc:
            msg = f"{param} is not array-like (ragged or mixed nesting?): {exc}"
            raise ValueError(msg) from None
    if on_host.dtype.kind == "V" and adapter is not None and _bfloat16(on_host):
        # (an extension dtype of NumPy's, ml_dtypes' bfloat16 as JAX's host
        # copy has it: float32 holds its every value, as torch's copy has it)
        on_host = on_host.astype(np.float32)
    if on_host.dtype.kind not in "biufc":
        msg = f"{param} has non-numeric dtype {on_host.dtype} (value {shown(x):.60})"
        raise TypeError(msg)
    if not on_host.flags.writeable:  # read-only views (e.g. of JAX arrays)
        on_host = on_host.copy()
    return on_host


def _asarray_of_items(x: Value) -> HostArray:
    """``np.asarray(x)``; where an array in a list refuses NumPy, each on the host first.

    torch's ``__array__`` refuses a tensor that requires grad or has a lazy
    conjugate or negative bit (RuntimeError), which `to_host` converts.
    """
    try:
        return np.asarray(x)
    except (ValueError, TypeError):
        raise
    except Exception:  # (a library's own error from its __array__)
        if not isinstance(x, (list, tuple)):
            raise
    return np.asarray(_items_on_host(x))


def _items_on_host(x: Value) -> Value:
    """``x`` with every array in it (in lists and tuples, at any depth) on the host."""
    if isinstance(x, (list, tuple)):
        return [_items_on_host(item) for item in x]
    return x if adapter_for_array(x) is None else to_host(x, "x")


#: The first int past int64: NumPy makes a list that holds one beside
#: smaller ints float64 (int64 and uint64 have no common integer dtype).
_PAST_INT64 = 2**63


def exact_ints(x: Value, made: HostArray, target: str | None) -> HostArray:
    """A list of Python ints past int64, none negative, as uint64; else ``made``.

    For a cast to an integer dtype (``target``): NumPy makes ``[2**63 + 1, 0]`` float64,
    2**63 + 1 rounded to 2**63 (a uint64 cast then kept the rounded value).
    Where ``x`` is a list, ``made`` (NumPy's array of it) is float64 with
    whole values of at least 2**63, none negative, and every number in
    ``x`` is an int, they are made uint64, exactly; a list that holds a
    float stays as NumPy made it.
    """
    if (
        target is None
        or not target.startswith(("int", "uint"))
        or not isinstance(x, (list, tuple))
        or made.dtype != np.float64
        or not made.size
        or not (made.max() >= _PAST_INT64 and made.min() >= 0)
    ):
        return made
    todo: list[object] = [x]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(item)
        elif type(item) is not int:
            return made
    return np.asarray(x, dtype=np.uint64)


def _bfloat16(values: HostArray) -> bool:
    """Whether ``values`` has an extension bfloat16 (ml_dtypes') of NumPy's."""
    try:
        return dtype_name(values.dtype) == "bfloat16"
    except TypeError:  # (a structured dtype, say)
        return False


def refuse_lossy_data(x: Value, param: str) -> None:
    """`refuse_lossy` for an array of any library, or each array a list holds.

    A list or tuple (nested too) of arrays would go through ``np.asarray``,
    which drops a masked array's mask silently (`numpy.ma.masked` too): each
    array in it, at any depth and in any place, is checked, named by its
    place (``x[1][0]``). A level that holds numbers alone is passed over
    by the types it holds (a list of a million floats: about as long as
    ``np.asarray`` takes to convert it).
    """
    adapter = adapter_for_array(x)
    if adapter is not None:
        refuse_lossy(adapter, x, param)
    elif isinstance(x, (list, tuple)):
        _refuse_lossy_items(x, param)


def _refuse_lossy_items(items: list[Value] | tuple[Value, ...], param: str) -> None:
    if all(issubclass(kind, _NUMBERS) for kind in set(map(type, items))):
        return
    for i, item in enumerate(items):
        kind = type(item)
        if kind is list or kind is tuple:
            _refuse_lossy_items(item, f"{param}[{i}]")
        elif not isinstance(item, _NUMBERS):
            refuse_lossy_data(item, f"{param}[{i}]")


#: Python's numbers and NumPy's scalars: what holds no mask or layout.
_NUMBERS = (int, float, complex, np.generic)


def castable(
    f: Facts[ArrayT], x: Array, source: str, target: str, param: str, *, on_host: bool
) -> Array:
    """``x``, ready to cast to ``target``: a ValueError if a value would change.

    ``x`` is a host (NumPy) array with ``on_host``, else an array of this
    library, checked where it lives unless its values are not at hand.
    A complex ``x`` bound for a real dtype comes back as its real part
    (its imaginary parts are zero), which libraries cast without warning.
    """
    if source == target:
        return x
    narrowing = f.adapter.float64_narrowing(on_host=on_host)
    if on_host:
        check_cast_keeps_values(_np_xp, x, source, target, param, np.asarray, narrowing)
    elif f.adapter.values_at_hand(x):
        to_numpy = f.adapter.to_numpy
        check_cast_keeps_values(f.xp, x, source, target, param, to_numpy, narrowing)
    if source in _COMPLEX and target not in _COMPLEX:
        return x.real if on_host else f.xp.real(x)
    return x


def asarray(
    f: Facts[ArrayT], x: Value, dtype: DType, device: Device, param: str
) -> ArrayT:
    """`Backend.asarray`'s slow path: ``x`` on ``device`` (None: the bound one)."""
    dev_str, native = f.target(device)
    return convert(f, x, param, dtype, dev_str, native)


def convert(
    f: Facts[ArrayT],
    x: Value,
    param: str,
    dtype: DType,
    dev_str: str | None,
    native: NativeDevice,
) -> ArrayT:
    """``x`` (any array, list or scalar) as an array of this backend.

    The slow path of `asarray` and `copy`: the dtype is ``dtype`` (None:
    the input's own), refused when the device cannot hold it and when
    the cast would change a value.
    """
    name = dtype_name(dtype)
    x = traced(f, x)
    if f.adapter.owns(x):
        refuse_lossy(f.adapter, x, param)
        own = own_dtype(x, param)
        target, xp_dtype = f.dtype_pair(
            name or own, dev_str, dtype_source(dtype, f"{param} has dtype {own}")
        )
        x = castable(f, x, own, target, param, on_host=False)
        adapter = f.adapter
        if adapter.device_key(x) == adapter.native_device_key(native):
            return f.xp.asarray(x, dtype=xp_dtype, device=native)
        moved: ArrayT = adapter.onto_device(f.xp, x, native, xp_dtype, None)
        return moved
    values = exact_ints(x, host(x, param), name)
    own = own_dtype(values, param)
    kept = name or _source_dtype(f, x, own)
    target, xp_dtype = f.dtype_pair(
        kept, dev_str, dtype_source(dtype, f"{param} has dtype {kept}")
    )
    widened = name is None and kept != own and target == kept
    if not widened:  # (a host copy widened from ``kept`` keeps every value there)
        values = castable(f, values, own, target, param, on_host=True)
    return f.from_host(values, xp_dtype, native)


def _source_dtype(f: Facts[ArrayT], x: Value, own: str) -> str:
    """The dtype another library's ``x`` has, where this device holds it; else ``own``.

    A host copy may be wider than its source (bfloat16 comes to NumPy as
    float32): the array made from it keeps the source's dtype where it can.
    """
    adapter = adapter_for_array(x)
    if adapter is None:
        return own
    try:
        source = dtype_name(x.dtype)
    except (AttributeError, TypeError):
        return own
    return source if source is not None and source in f.held else own


def dtype_source(dtype: DType, own: str) -> Source:
    """Where a dtype comes from, for a message: ``dtype=`` if given, else ``own``."""
    if dtype is None:
        return own
    return lambda: f"dtype={dtype!r}"  # a dtype's repr costs microseconds


def ref(
    f: Facts[ArrayT], array: Value, dtype: DType, device: Device, param: str = "array"
) -> tuple[str, DType, NativeDevice]:
    """Dtype name and object, and native device, of a ``*_like`` call.

    ``array`` is the reference (named ``param`` in messages); ``dtype``
    and ``device``, where not None, replace its own.
    """
    array = traced(f, array)
    adapter = f.adapter
    if adapter.owns(array):
        refused = adapter.refused_operand(array)  # (a masked array: its mask)
        if refused is not None:
            msg = f"{param} is {refused}"
            raise TypeError(msg)
        ref_name = own_dtype(array, param)
        dev_str, native = f.target(device)
        if device is None:
            native = adapter.device_of(array)
            dev_str = adapter.device_str(native)
    else:
        ref_name = own_dtype(host(array, param), param)
        dev_str, native = f.target(device)
    name = ref_name if dtype is None else dtype_name(dtype)
    assert name is not None
    source = dtype_source(dtype, f"{param} has dtype {ref_name}")
    target, xp_dtype = f.dtype_pair(name, dev_str, source)
    return target, xp_dtype, native


def asarray_like(f: Facts[ArrayT], x: Value, like: Value) -> ArrayT:
    """`Backend.asarray_like`: ``x`` in the dtype and on the device of ``like``."""
    target, xp_dtype, native = ref(f, like, None, None, "ref")
    x = traced(f, x)
    if f.adapter.owns(x):
        refuse_lossy(f.adapter, x, "x")
        x = castable(f, x, own_dtype(x, "x"), target, "x", on_host=False)
        return f.xp.asarray(x, dtype=xp_dtype, device=native)
    values = exact_ints(x, host(x, "x"), target)
    values = castable(f, values, own_dtype(values, "x"), target, "x", on_host=True)
    return f.from_host(values, xp_dtype, native)


def copy(f: Facts[ArrayT], array: Value) -> ArrayT:
    """`Backend.copy`'s slow path: not an array of this library on a device it holds."""
    adapter = f.adapter
    if adapter.owns(array):
        refuse_lossy(adapter, array, "array")
        own = own_dtype(array, "array")
        dev = adapter.device_str(adapter.device_of(array))
        f.dtype_pair(own, dev, f"array has dtype {own}")
        return f.xp.asarray(array, copy=True)
    values = host(array, "array")
    own = _source_dtype(f, array, own_dtype(values, "array"))
    target, xp_dtype = f.dtype_pair(own, None, f"array has dtype {own}")
    if target != own:  # (narrowed where the device holds no wider: values kept)
        values = castable(f, values, own, target, "array", on_host=True)
    if not values.flags.owndata or values.base is not None or values is array:
        values = values.copy()  # the result must not share memory with the input
    return f.from_host(values, xp_dtype, f.native)


def to_numpy(x: Value, param: str) -> HostArray:
    """`Backend.to_numpy`: an array of any library (or host data) as NumPy's."""
    adapter = adapter_for_array(x)
    if adapter is not None:
        refuse_lossy(adapter, x, param)
        return to_host(x, param)
    return host(x, param)


def to_cpu(x: Value) -> Array:
    """`Backend.to_cpu`: an array on its library's CPU device (host data: NumPy)."""
    adapter = adapter_for_array(x)
    if adapter is None:
        return host(x, "array")
    return adapter.to_cpu(x)
