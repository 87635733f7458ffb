"""NumPy's own functions on shape-only arrays: ``__array_ufunc__`` and ``__array_function__``.

``fn`` written with NumPy directly (``np.tanh(x)``, ``np.sum(x, axis=1)``,
``np.concatenate``) reaches these handlers through NumPy's protocols. A ufunc
takes the dtypes NumPy's own type resolution gives (``ufunc.resolve_dtypes``)
and the broadcast shape; a generalised ufunc (``matmul``) the shapes of its
signature. Other functions map onto the standard's; one without a shape rule
is refused, naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import _complex_parts as complex_parts
from . import _creation as creation
from . import _fft as fft
from . import _linalg as linalg
from . import _manipulation as manipulation
from . import _norms as norms
from . import _numpy_calculus as numpy_calculus
from . import _numpy_composites as numpy_composites
from . import _numpy_layout as numpy_layout
from . import _numpy_statistics as numpy_statistics
from . import _rules as rules
from . import _sets as sets
from . import _statistics as statistics
from ._array import ShapeArray, lift, made
from ._elementwise import round as _round
from ._operands import trace_of
from ._statistics import reduction

if TYPE_CHECKING:
    from ..._typing import Value
    from .._trace import Trace

__all__ = ["FUNCTIONS", "array_function", "array_ufunc"]

#: NumPy's reductions that widen small integers to the default int.
_WIDENING = frozenset({"add", "multiply"})


def _numpy_dtype(trace: Trace, v: Value) -> object:
    if isinstance(v, bool | int | float | complex):
        return rules.weak_dtype(type(v))  # weak: NumPy's own rule for Python scalars
    try:
        return np.dtype(lift(trace, v)._name)
    except TypeError:
        msg = f"NumPy has no dtype {lift(trace, v)._name}"
        raise trace.refuse(msg) from None


def array_ufunc(
    ufunc: Value, method: str, inputs: tuple[Value, ...], kwargs: dict[str, Value]
) -> object:
    """``ufunc.<method>(*inputs, **kwargs)`` on shape-only arrays."""
    trace = trace_of(*inputs)
    if not trace.profile.dtype_rules.numpy_tables and any(
        isinstance(v, np.ndarray | np.generic) for v in inputs
    ):
        # torch's, JAX's and ndonnx's arrays take no ufunc: a NumPy operand's
        # operator defers to theirs (`np.float32(2) * x`: the library's rule),
        # a ufunc called on them converts them (NumPy's). Here the two meet.
        msg = f"numpy.{ufunc.__name__} of a NumPy operand and a {trace.profile.library} array"
        raise trace.refuse(msg)
    out = kwargs.pop("out", None)
    if out is not None and method == "__call__":  # into the caller's: nothing new
        _resolve(trace, ufunc, inputs, kwargs)  # (its dtypes, as NumPy checks them)
        outs = out if isinstance(out, tuple) else (out,)
        trace.spike(sum(v.nbytes for v in inputs if _overlaps(v, outs)))
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if method == "__call__":
        result = _call(trace, ufunc, inputs, kwargs)
    elif method in ("reduce", "accumulate"):
        result = _reduce(trace, ufunc, method, inputs, kwargs)
    elif method == "outer":
        a, b = (lift(trace, v) for v in inputs)
        resolved = _resolve(trace, ufunc, (a, b), kwargs)
        result = made(trace, (*a.shape, *b.shape), resolved[ufunc.nin], (a, b))
    elif method == "at":
        return None  # in place
    else:
        msg = f"numpy.{ufunc.__name__}.{method}"
        raise trace.refuse(msg)
    if out is not None:  # written into the caller's arrays: nothing new
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    return result


def _overlaps(v: Value, outs: tuple[Value, ...]) -> bool:
    """Whether input ``v`` shares memory with an output it is not: NumPy copies it.

    (An input that is the output itself is read in place.)
    """
    if not isinstance(v, ShapeArray) or any(v is o for o in outs):
        return False

    def owner(a: ShapeArray) -> ShapeArray:
        return a if a._base is None else a._base

    return any(isinstance(o, ShapeArray) and owner(o) is owner(v) for o in outs)


def _resolve(
    trace: Trace, ufunc: Value, inputs: tuple[Value, ...], kwargs: dict[str, Value]
) -> list[str]:
    """The dtype names of ``ufunc``'s loop: its inputs' (what it casts them to), then its outputs'."""
    dtypes = tuple(_numpy_dtype(trace, v) for v in inputs)
    wanted = kwargs.get("dtype")
    extra: dict[str, Value] = {}
    if wanted is not None:
        out = np.dtype(rules.dtype_name_of(trace, wanted))
        extra["signature"] = (None,) * ufunc.nin + (out,) * ufunc.nout
    try:
        resolved = ufunc.resolve_dtypes(dtypes + (None,) * ufunc.nout, **extra)
    except (TypeError, ValueError) as exc:
        msg = f"numpy.{ufunc.__name__} of {dtypes}: {exc}"
        raise trace.refuse(msg) from None
    return [str(d.name) for d in resolved]


def _call(
    trace: Trace, ufunc: Value, inputs: tuple[Value, ...], kwargs: dict[str, Value]
) -> object:
    resolved = _resolve(trace, ufunc, inputs, kwargs)
    names = resolved[ufunc.nin :]
    scalar = [isinstance(v, bool | int | float | complex) for v in inputs]
    arrays = [lift(trace, v) for v, s in zip(inputs, scalar, strict=True) if not s]
    loops = [n for n, s in zip(resolved, scalar, strict=False) if not s]
    if ufunc.signature:
        shapes = rules.gufunc_shape(ufunc.signature, [a.shape for a in arrays])
    else:
        shapes = (rules.broadcast(*(a.shape for a in arrays)),) * ufunc.nout
    outputs = tuple(
        made(trace, s, n, tuple(arrays)) for s, n in zip(shapes, names, strict=True)
    )
    if trace.profile.numpy_internals and not ufunc.signature:  # (with its outputs)
        operands = tuple((a.shape, a._name) for a in arrays)
        rules.buffer_operands(
            trace, shapes[0], names[0], operands, tuple(arrays), loops
        )
    return outputs[0] if len(outputs) == 1 else outputs


def _reduce(
    trace: Trace,
    ufunc: Value,
    method: str,
    inputs: tuple[Value, ...],
    kwargs: dict[str, Value],
) -> ShapeArray:
    a = lift(trace, inputs[0])
    axis = kwargs.get("axis", 0)
    dtype = rules.dtype_name_of(trace, kwargs.get("dtype"))
    if dtype is None:
        if ufunc.__name__ in _WIDENING:
            dtype = rules.sum_dtype(trace.profile, a._name)
        else:
            dtype = _resolve(trace, ufunc, (a, a), {})[ufunc.nin]
    if method == "accumulate":  # (into another dtype: the input cast whole first)
        cast = made(trace, a.shape, dtype, (a,)) if dtype != a._name else None
        result = made(trace, a.shape, dtype, (a, cast))
        del cast
        return result
    return reduction(a, "max", axis, bool(kwargs.get("keepdims", False)), dtype)


def _index_array(a: Value, indices: Value) -> Value:
    """``indices`` as NumPy takes them: a list of ints becomes an int64 array."""
    if not isinstance(indices, (list, tuple)):
        return indices
    # (NumPy converts the list: an array of its own, held while it takes)
    return made(trace_of(a), rules.as_shape(np.shape(indices)), "int64")


# -- functions ---------------------------------------------------------------
def _reduction(rule: str) -> Callable[..., ShapeArray]:
    def reduce(
        a: Value,
        axis: Value = None,
        dtype: Value = None,
        out: Value = None,
        keepdims: bool = False,
        **_: Value,
    ) -> ShapeArray:
        x = lift(trace_of(a), a)
        if out is not None:
            msg = "a reduction into out="
            raise x._trace.refuse(msg)
        return reduction(
            x, rule, axis, bool(keepdims), rules.dtype_name_of(x._trace, dtype)
        )

    return reduce


def _no_dtype(rule: str) -> Callable[..., ShapeArray]:
    def reduce(
        a: Value,
        axis: Value = None,
        out: Value = None,
        keepdims: bool = False,
        **_: Value,
    ) -> ShapeArray:
        return _reduction(rule)(a, axis, None, out, keepdims)

    return reduce


def _concatenate(
    arrays: Value, axis: Value = 0, out: Value = None, **_: Value
) -> ShapeArray:
    return manipulation.concat(list(arrays), axis=axis)


def _stack(arrays: Value, axis: int = 0, out: Value = None, **_: Value) -> ShapeArray:
    return manipulation.stack(list(arrays), axis=axis)


def _vstack(tup: Value, **_: Value) -> ShapeArray:
    parts = [_atleast_2d(a) for a in tup]
    return manipulation.concat(parts, axis=0)


def _hstack(tup: Value, **_: Value) -> ShapeArray:
    parts = [lift(trace_of(*tup), a) for a in tup]
    return manipulation.concat(parts, axis=0 if parts[0].ndim == 1 else 1)


def _atleast_2d(a: Value) -> ShapeArray:
    x = lift(trace_of(a), a)
    if x.ndim >= 2:
        return x
    return manipulation.reshape(x, (1, x.size))


def _reshape(a: Value, *args: Value, **kwargs: Value) -> ShapeArray:
    shape = args[0] if args else kwargs.get("shape", kwargs.get("newshape"))
    return manipulation.reshape(a, shape)


def _transpose(a: Value, axes: Value = None) -> ShapeArray:
    x = lift(trace_of(a), a)
    return x.T if axes is None else manipulation.permute_dims(x, axes)


def _sort(a: Value, axis: Value = -1, **_: Value) -> ShapeArray:
    if axis is None:
        return statistics.sort(manipulation.reshape(a, (-1,)))
    return statistics.sort(a, axis=axis)


def _argsort(a: Value, axis: Value = -1, **_: Value) -> ShapeArray:
    if axis is None:
        return statistics.argsort(manipulation.reshape(a, (-1,)))
    return statistics.argsort(a, axis=axis)


def _argpartition(a: Value, kth: Value, axis: Value = -1, **_: Value) -> ShapeArray:
    """``np.argpartition``: the indices of a full sort's shape (``kth`` aside)."""
    return _argsort(a, axis)


def _dot(a: Value, b: Value, out: Value = None) -> ShapeArray:
    trace = trace_of(a, b)
    if lift(trace, a).ndim > 2 or lift(trace, b).ndim > 2:
        msg = "numpy.dot of arrays of more than 2 dimensions"
        raise trace.refuse(msg)
    return linalg.matmul(a, b)


def _clip(
    a: Value, a_min: Value = None, a_max: Value = None, out: Value = None, **kw: Value
) -> ShapeArray:
    """``np.clip``: NumPy's own promotion with the bounds (array-api-compat's keeps ``a``'s)."""
    x = lift(trace_of(a), a)
    name, arrays = x._name, [x]
    for func, bound in (
        ("maximum", kw.get("min", a_min)),
        ("minimum", kw.get("max", a_max)),
    ):
        if bound is None:
            continue
        b = (
            None
            if isinstance(bound, bool | int | float | complex)
            else lift(x._trace, bound)
        )
        other = None if b is None else b._name
        name = rules.result_dtype(x._trace, func, name, other, None, bound)
        arrays += [b] if b is not None else []
    shape = rules.broadcast(*(o.shape for o in arrays))
    result = made(x._trace, shape, name, tuple(arrays))
    rules.buffer_together(result, arrays)
    return result


def _shape_of(a: Value) -> tuple[int, ...]:
    return lift(trace_of(a), a).shape


def _refuse(name: str) -> Callable[..., ShapeArray]:
    def refuse(*args: Value, **kwargs: Value) -> ShapeArray:
        msg = f"numpy.{name} (it reads values)"
        raise trace_of(*args).refuse(msg)

    return refuse


#: NumPy function name -> its handler on shape-only arrays.
FUNCTIONS: dict[str, Callable[..., object]] = {
    "sum": _reduction("sum"),
    "prod": _reduction("sum"),
    "mean": _reduction("mean"),
    "std": _reduction("spread"),
    "var": _reduction("spread"),
    "max": _no_dtype("max"),
    "amax": _no_dtype("max"),
    "min": _no_dtype("max"),
    "amin": _no_dtype("max"),
    "all": _no_dtype("any"),
    "any": _no_dtype("any"),
    "argmax": _no_dtype("arg"),
    "argmin": _no_dtype("arg"),
    "count_nonzero": lambda a, axis=None, *, keepdims=False: statistics.count_nonzero(
        a, axis=axis, keepdims=keepdims
    ),
    "cumsum": lambda a, axis=None, dtype=None, out=None: lift(trace_of(a), a).cumsum(
        axis, dtype
    ),
    "cumprod": lambda a, axis=None, dtype=None, out=None: lift(trace_of(a), a).cumsum(
        axis, dtype
    ),
    "concatenate": _concatenate,
    "stack": _stack,
    "vstack": _vstack,
    "hstack": _hstack,
    "reshape": _reshape,
    "transpose": _transpose,
    "swapaxes": lambda a, axis1, axis2: lift(trace_of(a), a).swapaxes(axis1, axis2),
    "moveaxis": manipulation.moveaxis,
    "expand_dims": lambda a, axis: manipulation.expand_dims(a, axis=axis),
    "squeeze": lambda a, axis=None: lift(trace_of(a), a).squeeze(axis),
    "broadcast_to": lambda array, shape, subok=False: manipulation.broadcast_to(
        array, shape
    ),
    "broadcast_arrays": manipulation.broadcast_arrays,
    "ravel": lambda a, order="C": lift(trace_of(a), a).ravel(),
    "flip": lambda m, axis=None: manipulation.flip(m, axis=axis),
    "roll": lambda a, shift, axis=None: manipulation.roll(a, shift, axis=axis),
    "tile": manipulation.tile,
    "repeat": lambda a, repeats, axis=None: manipulation.repeat(a, repeats, axis=axis),
    "take": lambda a, indices, axis=None, out=None, mode="raise": manipulation.take(
        a, _index_array(a, indices), axis=axis
    ),
    "take_along_axis": lambda arr, indices, axis=-1: manipulation.take_along_axis(
        arr, indices, axis=axis
    ),
    "clip": _clip,
    "dot": _dot,
    "outer": lambda a, b, out=None: linalg.outer(a, b),
    "tensordot": lambda a, b, axes=2: linalg.tensordot(a, b, axes=axes),
    "einsum": lambda *operands, **kw: linalg.einsum(
        operands[0], *operands[1:], optimize=kw.get("optimize", False)
    ),
    "sort": _sort,
    "argsort": _argsort,
    "argpartition": _argpartition,
    "diff": lambda a, n=1, axis=-1, **kw: statistics.diff(a, n=n, axis=axis),
    "zeros_like": lambda a, dtype=None, **kw: creation.zeros_like(
        a, dtype=dtype, shape=kw.get("shape")
    ),
    "ones_like": lambda a, dtype=None, **kw: creation.ones_like(
        a, dtype=dtype, shape=kw.get("shape")
    ),
    "empty_like": lambda a, dtype=None, **kw: creation.empty_like(
        a, dtype=dtype, shape=kw.get("shape")
    ),
    "full_like": lambda a, fill_value, dtype=None, **kw: creation.full_like(
        a, fill_value, dtype=dtype, shape=kw.get("shape")
    ),
    "copy": lambda a, **kw: lift(trace_of(a), a).copy(),
    "round": lambda a, decimals=0, out=None: _round(a),
    "around": lambda a, decimals=0, out=None: _round(a),
    "shape": _shape_of,
    "ndim": lambda a: len(_shape_of(a)),
    "size": lambda a, axis=None: lift(trace_of(a), a).size,
    "atleast_2d": lambda *arys: (
        _atleast_2d(arys[0]) if len(arys) == 1 else [_atleast_2d(a) for a in arys]
    ),
    "tril": lambda m, k=0: creation.tril(m),
    "triu": lambda m, k=0: creation.triu(m),
    "trace": lambda a, **kw: linalg.trace(a),
    "inv": linalg.inv,
    "det": linalg.det,
    "slogdet": linalg.slogdet,
    "solve": linalg.solve,
    "cholesky": lambda a, **kw: linalg.cholesky(a),
    "eig": linalg.eig,
    "eigvals": linalg.eigvals,
    "eigh": lambda a, UPLO="L": linalg.eigh(a),
    "eigvalsh": lambda a, UPLO="L": linalg.eigvalsh(a),
    "qr": lambda a, mode="reduced": linalg.qr(a, mode=mode),
    "svd": lambda a, full_matrices=True, compute_uv=True, **kw: (
        linalg.svd(a, full_matrices=full_matrices) if compute_uv else linalg.svdvals(a)
    ),
    "pinv": lambda a, **kw: linalg.pinv(a),
    "norm": norms.numpy_norm,
    "vector_norm": norms.numpy_vector_norm,
    "matrix_norm": norms.numpy_matrix_norm,
    "matrix_rank": lambda A, **kw: linalg.matrix_rank(A),
    "matrix_power": linalg.matrix_power,
    "nonzero": sets.nonzero,
    "unique_values": sets.unique_values,
    "unique_counts": sets.unique_counts,
    "unique_inverse": sets.unique_inverse,
    "unique_all": sets.unique_all,
    "flatnonzero": _refuse("flatnonzero"),
    "argwhere": _refuse("argwhere"),
    "unique": sets.numpy_unique,
    "allclose": _refuse("allclose"),
    "array_equal": _refuse("array_equal"),
    **numpy_statistics.FUNCTIONS,
    **fft.FUNCTIONS,
    **numpy_composites.FUNCTIONS,
    **complex_parts.FUNCTIONS,
    **numpy_calculus.FUNCTIONS,
    **numpy_layout.FUNCTIONS,
}


def array_function(
    func: Value, args: tuple[Value, ...], kwargs: dict[str, Value]
) -> object:
    """NumPy function ``func`` on shape-only arrays (through its handler)."""
    handler = FUNCTIONS.get(getattr(func, "__name__", ""))
    if handler is None:
        name = (
            f"{getattr(func, '__module__', 'numpy')}.{getattr(func, '__name__', func)}"
        )
        msg = f"{name} has no shape rule"
        raise trace_of(*args).refuse(msg)
    return handler(*args, **kwargs)
