"""torch's tensor methods on shape-only arrays (``x.clone()``, ``x.to(torch.float32)``).

A shape-only array that stands in for a tensor answers torch's methods as
torch's own do: `attribute` (the array's ``__getattr__``) gives a method
of this module's table, or the standard's function of its name (``x.exp()``,
``x.sum(1)``, through the package's handler of torch's functions). Where
NumPy has a method of the same name and other arguments (``transpose``
swaps two axes, ``sort`` and ``max`` along a dim return the values and their
indices, ``cumsum`` takes a dim, ``flatten`` a range of axes, ``size`` is a
method) torch's applies under a torch trace and NumPy's under any other
(`either`). The methods torch also has as functions (``torch.clone``,
``torch.transpose``, ``torch.softmax``) answer those too (`FUNCTIONS`).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from . import _namespace as namespace
from . import _rules as rules
from ._array import (
    PROTOCOLS,
    ShapeArray,
    astype,
    copy_of,
    lift,
    made,
    permuted,
    reshape,
    unary,
    view_of,
)
from ._manipulation import unstack

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = ["FUNCTIONS", "attribute", "either"]

Rule = Callable[..., "Value"]


class _Named:
    """torch's method ``name`` as the handler of torch's functions reads it."""

    __module__ = "torch.Tensor"

    def __init__(self, name: str) -> None:
        self.__name__ = name


class _Pair(NamedTuple):
    """What ``kthvalue`` returns: values, indices."""

    values: Value
    indices: Value


def _torch(x: ShapeArray) -> bool:
    return x._trace.profile.library == "torch"


def _ints(sizes: tuple[Value, ...]) -> tuple[int, ...]:
    """The sizes torch takes: one int an axis, or one sequence."""
    one = len(sizes) == 1 and isinstance(sizes[0], tuple | list)
    return rules.as_shape(sizes[0] if one else sizes)


def _axis(x: ShapeArray, dim: Value) -> int:
    return rules.axes_of(dim, x.ndim)[0]


# -- dtypes and copies ---------------------------------------------------------------
#: The methods that cast to one dtype (torch's name -> the standard's).
_CASTS = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
    "int": "int32",
    "long": "int64",
    "short": "int16",
    "char": "int8",
    "byte": "uint8",
    "bool": "bool",
    "cfloat": "complex64",
    "cdouble": "complex128",
}


def _cast(name: str) -> Rule:
    def method(x: ShapeArray, **_: Value) -> ShapeArray:
        return astype(x, name, copy=False)  # (itself where it has the dtype)

    return method


def _to(x: ShapeArray, *args: Value, **kwargs: Value) -> ShapeArray:
    """``x.to(dtype)``, ``x.to(device, dtype)``, ``x.to(other)``: itself where nothing changes.

    A move to another device is not this device's memory (as ``to_device``).
    """
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, ShapeArray) or hasattr(a, "shape"):
            dtype = a.dtype
        elif not isinstance(a, str) and type(a).__name__ != "device":
            dtype = a
    name = rules.dtype_name_of(x._trace, dtype)
    return astype(x, name, copy=bool(kwargs.get("copy", False)))


def _type(x: ShapeArray, dtype: Value = None, **_: Value) -> ShapeArray:
    if dtype is None or isinstance(dtype, str):
        msg = "x.type() read as a string"
        raise x._trace.refuse(msg)
    return astype(x, rules.dtype_name_of(x._trace, dtype), copy=False)


def _type_as(x: ShapeArray, other: Value) -> ShapeArray:
    return astype(x, lift(x._trace, other)._name, copy=False)


def _contiguous(x: ShapeArray, **_: Value) -> ShapeArray:
    return x if x._contiguous else copy_of(x)


def _alias(x: ShapeArray, *_: Value, **__: Value) -> ShapeArray:
    """A new tensor over ``x``'s storage (``detach``)."""
    return view_of(x, x.shape, contiguous=x._contiguous, unit=x._unit)


def _itself(x: ShapeArray, *_: Value, **__: Value) -> ShapeArray:
    """``x`` (``cpu()``, ``requires_grad_()``; a move is not this device's memory)."""
    return x


def _copy(x: ShapeArray, *_: Value, **__: Value) -> ShapeArray:
    """A new array of ``x``'s shape and dtype (``clone``, ``scatter``, ``index_add``)."""
    return copy_of(x)


# -- shapes and views -------------------------------------------------------------------
def _view(x: ShapeArray, *shape: Value) -> ShapeArray:
    if len(shape) == 1 and not isinstance(shape[0], int | tuple | list):
        msg = "x.view(dtype) (its bytes as another dtype)"
        raise x._trace.refuse(msg)
    return reshape(x, _ints(shape))


def _reshape(x: ShapeArray, *shape: Value) -> ShapeArray:
    return reshape(x, _ints(shape))


def _like(x: ShapeArray, other: Value) -> ShapeArray:
    return reshape(x, lift(x._trace, other).shape)


def swapped(x: ShapeArray, dim0: Value, dim1: Value) -> ShapeArray:
    """The two axes swapped (a view): torch's ``transpose(dim0, dim1)``."""
    order = list(range(x.ndim))
    a, b = _axis(x, dim0), _axis(x, dim1)
    order[a], order[b] = order[b], order[a]
    return permuted(x, tuple(order))


def _t(x: ShapeArray) -> ShapeArray:
    return x if x.ndim < 2 else swapped(x, 0, 1)


def _permute(x: ShapeArray, *dims: Value) -> ShapeArray:
    return permuted(x, tuple(_axis(x, d) for d in _ints(dims)))


def _expand(x: ShapeArray, *sizes: Value) -> ShapeArray:
    target = list(_ints(sizes))
    lead = len(target) - x.ndim
    for i, d in enumerate(x.shape):
        if target[lead + i] == -1:
            target[lead + i] = d
    return namespace.broadcast_to(x, tuple(target))


def _expand_as(x: ShapeArray, other: Value) -> ShapeArray:
    return namespace.broadcast_to(x, lift(x._trace, other).shape)


def _flatten(x: ShapeArray, start_dim: int = 0, end_dim: int = -1) -> ShapeArray:
    if not x.ndim:
        return reshape(x, (1,))
    start, end = _axis(x, start_dim), _axis(x, end_dim)
    shape = (*x.shape[:start], math.prod(x.shape[start : end + 1]), *x.shape[end + 1 :])
    return reshape(x, shape)


def _unflatten(x: ShapeArray, dim: Value, sizes: Value) -> ShapeArray:
    ax = _axis(x, dim)
    return reshape(x, (*x.shape[:ax], *rules.as_shape(sizes), *x.shape[ax + 1 :]))


def _along(x: ShapeArray, dim: Value, part: slice) -> ShapeArray:
    return x[(slice(None),) * _axis(x, dim) + (part,)]


def _narrow(x: ShapeArray, dim: Value, start: int, length: int) -> ShapeArray:
    return _along(x, dim, slice(start, start + length))


def _split(x: ShapeArray, size: Value, dim: Value = 0) -> tuple[ShapeArray, ...]:
    n = x.shape[_axis(x, dim)]
    if isinstance(size, int):
        sizes = [min(size, n - i) for i in range(0, n, max(size, 1))]
    else:
        sizes = list(size)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return tuple(
        _along(x, dim, slice(s, s + k)) for s, k in zip(starts, sizes, strict=True)
    )


def _chunk(x: ShapeArray, chunks: int, dim: Value = 0) -> tuple[ShapeArray, ...]:
    n = x.shape[_axis(x, dim)]
    return _split(x, max(-(-n // chunks), 1), dim)


def _unbind(x: ShapeArray, dim: Value = 0) -> tuple[ShapeArray, ...]:
    return unstack(x, axis=dim)


def _repeat(x: ShapeArray, *sizes: Value) -> ShapeArray:
    return namespace.tile(x, _ints(sizes))


# -- new arrays ---------------------------------------------------------------------------
def _new(fill: bool) -> Rule:
    def method(x: ShapeArray, *size: Value, **kwargs: Value) -> ShapeArray:
        if fill and size and "fill_value" not in kwargs:
            size, kwargs["fill_value"] = size[:-1], size[-1]
        if not size:
            size = (kwargs.pop("size"),)
        name = rules.dtype_name_of(x._trace, kwargs.get("dtype")) or x._name
        return made(x._trace, _ints(size), name)

    return method


# -- what a tensor says of itself -------------------------------------------------------
def _size(x: ShapeArray, dim: Value = None) -> Value:
    import torch  # (a torch trace: torch is there)

    return torch.Size(x.shape) if dim is None else x.shape[_axis(x, dim)]


def _kind(kinds: str) -> Rule:
    def method(x: ShapeArray) -> bool:
        return x._name.startswith(kinds)  # ("float", "complex")

    return method


# -- computations -------------------------------------------------------------------------
def _same(float_result: bool) -> Rule:
    """An elementwise function of one tensor the standard has not (``sigmoid``, ``relu``)."""

    def method(x: ShapeArray, *_: Value, **__: Value) -> ShapeArray:
        name = rules.unary_dtype(
            x._trace, "exp" if float_result else "negative", x._name
        )
        return unary(x, name)

    return method


def _softmax(
    x: ShapeArray, dim: Value = None, *_: Value, **kwargs: Value
) -> ShapeArray:
    """``softmax`` and ``log_softmax``: a strided input is copied contiguous first."""
    name = rules.dtype_name_of(x._trace, kwargs.get("dtype")) or x._name
    laid = None if x._contiguous else copy_of(x)
    result = made(x._trace, x.shape, name, (x, laid))
    del laid
    return result


def _masked_fill(x: ShapeArray, mask: Value, value: Value) -> ShapeArray:
    m = lift(x._trace, mask)
    return made(x._trace, rules.broadcast(x.shape, m.shape), x._name, (x, m))


def _where(x: ShapeArray, condition: Value, other: Value) -> ShapeArray:
    return namespace.where(condition, x, other)


def _index_select(x: ShapeArray, dim: Value, index: Value) -> ShapeArray:
    return namespace.take(x, index, axis=_axis(x, dim))


def _gather(x: ShapeArray, dim: Value, index: Value, **_: Value) -> ShapeArray:
    i = lift(x._trace, index)
    return made(x._trace, i.shape, x._name, (x, i))


def _cumulative(product: bool) -> Rule:
    def method(x: ShapeArray, dim: Value, **kwargs: Value) -> ShapeArray:
        rule = namespace.cumulative_prod if product else namespace.cumulative_sum
        return rule(x, axis=dim, dtype=kwargs.get("dtype"))

    return method


def _norm(
    x: ShapeArray,
    p: Value = "fro",
    dim: Value = None,
    keepdim: bool = False,
    **_: Value,
) -> ShapeArray:
    if p == "nuc":
        return namespace.linalg.matrix_norm(x, ord=p, keepdims=keepdim)
    order = 2 if p in ("fro", None) else p
    return namespace.linalg.vector_norm(x, axis=dim, keepdims=keepdim, ord=order)


def _kthvalue(x: ShapeArray, k: int, dim: Value = -1, keepdim: bool = False) -> _Pair:
    shape = rules.reduced(x.shape, _axis(x, dim), keepdim)
    values = made(x._trace, shape, x._name, (x,))
    indices = made(x._trace, shape, "int64", (x,))
    rules.hold_workspace("kthvalue", (x,), (values, indices))
    return _Pair(values, indices)


def _logsumexp(x: ShapeArray, dim: Value, keepdim: bool = False) -> ShapeArray:
    """Over ``dim``, in a floating dtype: ``exp(x - max)`` and the max beside it."""
    name = rules.unary_dtype(x._trace, "exp", x._name)
    shape = rules.reduced(x.shape, rules.axes_of(dim, x.ndim), keepdim)
    result = made(x._trace, shape, name, (x,))
    rules.hold_workspace("logsumexp", (x,), (result,))
    return result


def _lerp(x: ShapeArray, end: Value, weight: Value) -> ShapeArray:
    """``x + weight * (end - x)``, one kernel: its result alone."""
    parts = [lift(x._trace, v) for v in (end, weight) if not isinstance(v, float | int)]
    shape = rules.broadcast(x.shape, *(p.shape for p in parts))
    return made(x._trace, shape, x._name, (x, *parts))


def _outer(x: ShapeArray, other: Value) -> ShapeArray:
    o = lift(x._trace, other)
    name = rules.promote(x._trace.profile, x._name, o._name)
    return made(x._trace, (*x.shape, *o.shape), name, (x, o))


#: torch's functions and methods of one name: ``torch.clone(x)``, ``x.clone()``.
FUNCTIONS: dict[str, Rule] = {
    "clone": _copy,
    "t": _t,
    "transpose": swapped,
    "swapaxes": swapped,
    "swapdims": swapped,
    "flatten": _flatten,
    "unflatten": _unflatten,
    "narrow": _narrow,
    "split": _split,
    "chunk": _chunk,
    "unbind": _unbind,
    "softmax": _softmax,
    "log_softmax": _softmax,
    "sigmoid": _same(True),
    "rsqrt": _same(True),
    "erf": _same(True),
    "relu": _same(False),
    "nan_to_num": _same(False),
    "masked_fill": _masked_fill,
    "index_select": _index_select,
    "gather": _gather,
    "scatter": _copy,
    "scatter_add": _copy,
    "index_add": _copy,
    "index_fill": _copy,
    "cumsum": _cumulative(False),
    "cumprod": _cumulative(True),
    "norm": _norm,
    "kthvalue": _kthvalue,
    "logsumexp": _logsumexp,
    "lerp": _lerp,
    "outer": _outer,
}

#: Methods alone (``x.to(...)``, ``x.view(...)``) or whose arguments differ from
#: the function's (``x.where(condition, y)``).
_METHODS: dict[str, Rule] = {
    **{name: _cast(standard) for name, standard in _CASTS.items()},
    "to": _to,
    "type": _type,
    "type_as": _type_as,
    "contiguous": _contiguous,
    "detach": _alias,
    "cpu": _itself,
    "cuda": _itself,
    "requires_grad_": _itself,
    "view": _view,
    "reshape": _reshape,
    "view_as": _like,
    "reshape_as": _like,
    "permute": _permute,
    "expand": _expand,
    "expand_as": _expand_as,
    "repeat": _repeat,
    "where": _where,
    "new_zeros": _new(fill=False),
    "new_ones": _new(fill=False),
    "new_empty": _new(fill=False),
    "new_full": _new(fill=True),
    "size": _size,
    "dim": lambda x: x.ndim,
    "ndimension": lambda x: x.ndim,
    "numel": lambda x: math.prod(x.shape),
    "nelement": lambda x: math.prod(x.shape),
    "element_size": lambda x: x.itemsize,
    "is_contiguous": lambda x, **_: x._contiguous,
    "is_floating_point": _kind("float"),
    "is_complex": _kind("complex"),
}

#: Attributes that are values, not methods.
_VALUES: dict[str, Callable[[ShapeArray], Value]] = {
    "requires_grad": lambda x: False,
    "grad": lambda x: None,
    "data": lambda x: x,
    "is_cuda": lambda x: x._trace.profile.device.startswith("cuda"),
    "is_sparse": lambda x: False,
    "is_quantized": lambda x: False,
    "is_nested": lambda x: False,
}

#: Methods that write in place, shape and all: not followed.
_RESHAPING = frozenset(
    {
        "resize_",
        "resize_as_",
        "unsqueeze_",
        "squeeze_",
        "t_",
        "transpose_",
        "swapaxes_",
        "swapdims_",
        "as_strided_",
        "set_",
    }
)

#: Those updates in place whose operand may be of a wider dtype: as the operators.
_UPDATES = {
    "add_": "__iadd__",
    "sub_": "__isub__",
    "mul_": "__imul__",
    "div_": "__itruediv__",
    "pow_": "__ipow__",
}


def _in_place(x: ShapeArray, name: str) -> Rule:
    """``x.<name>_(...)``: written in place, nothing new (a wider operand: as ``*=``)."""
    if name in _RESHAPING:
        msg = f"x.{name}() (its shape changed in place)"
        raise x._trace.refuse(msg)
    update = _UPDATES.get(name)

    def method(*args: Value, **kwargs: Value) -> ShapeArray:
        if update is not None and args and not kwargs:
            result: ShapeArray = getattr(x, update)(args[0])
            return result
        x._written()
        for a in (*args, *kwargs.values()):
            if isinstance(a, ShapeArray) or hasattr(a, "shape"):
                lift(x._trace, a)  # (an operand it cannot read is refused)
        return x

    return method


def attribute(x: ShapeArray, name: str) -> Value:
    """``x.<name>`` that the class has not: torch's method (or value) where ``x`` is a tensor's.

    AttributeError where the trace impersonates another library, or torch's
    tensors have no such attribute, or its rule is not known.
    """
    if name.startswith("_") or not _torch(x):
        msg = f"'ShapeArray' object has no attribute {name!r}"
        raise AttributeError(msg)
    if name in _VALUES:
        return _VALUES[name](x)
    if name not in _METHODS and name not in FUNCTIONS:
        import torch  # (a torch trace: torch is there)

        if not callable(inspect.getattr_static(torch.Tensor, name, None)):
            # (none, or an attribute that is a value: ``is_sparse``, ``grad_fn``)
            msg = f"'Tensor' object has no attribute {name!r} a shape-only array knows"
            raise AttributeError(msg)
        if name.endswith("_"):
            return _in_place(x, name)
    return _torch_method(x, name)


#: ``ShapeArray``'s methods that NumPy's arrays and torch's tensors both have, with other arguments.
_BOTH = (
    "transpose",
    "sort",
    "max",
    "min",
    "cumsum",
    "flatten",
    "sum",
    "prod",
    "mean",
    "std",
    "var",
    "any",
    "all",
    "argmax",
    "argmin",
    "argsort",
)


def either(numpy: Callable[..., Value], name: str) -> Callable[..., Value]:
    """``ShapeArray``'s method ``name``: NumPy's ``numpy``, torch's under a torch trace."""

    def method(x: ShapeArray, *args: Value, **kwargs: Value) -> Value:
        if not _torch(x):
            return numpy(x, *args, **kwargs)
        return _torch_method(x, name)(*args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = numpy.__doc__
    return method


def _torch_method(x: ShapeArray, name: str) -> Callable[..., Value]:
    rule = _METHODS.get(name) or FUNCTIONS.get(name)
    if rule is not None:
        return lambda *args, **kwargs: rule(x, *args, **kwargs)
    func = _Named(name)
    return lambda *args, **kwargs: PROTOCOLS["foreign"](func, (x, *args), kwargs)


class _Count(int):
    """NumPy's ``x.size`` (the element count), which torch's ``x.size(dim=None)`` calls."""

    x: ShapeArray

    def __call__(self, dim: Value = None) -> Value:
        return _size(self.x, dim)


def size_of(x: ShapeArray) -> int:
    """``x.size``: the element count, callable as torch's method under a torch trace."""
    count = math.prod(x.shape)
    if not _torch(x):
        return count
    size = _Count(count)
    size.x = x
    return size


def methods(cls: type[ShapeArray]) -> dict[str, object]:
    """The attributes the package sets on ``cls``: `attribute` and torch's of `_BOTH`."""
    found: dict[str, object] = {"__getattr__": attribute, "size": property(size_of)}
    for name in _BOTH:
        found[name] = either(getattr(cls, name), name)
    return found
