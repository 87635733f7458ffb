"""Vector and matrix norms on shape-only arrays, as each library computes them.

A norm's cost is not its result's: the libraries differ in what they make
on the way (`Profile.norms`), measured per row of an isolated call:

- ``"numpy"``: NumPy's ``np.linalg.norm`` is Python over whole temporaries
  (``(x.conj() * x).real`` for the 2-norm and Frobenius, ``abs(x)`` and its
  partial sums for 1 and inf, the singular values for 2 and nuclear; an
  integer input cast whole to float64 first), and ``np.linalg.vector_norm``,
  ``matrix_norm``, array-api-strict's and array-api-compat's over NumPy
  call it. `numpy_norm` follows its code with NumPy's ufuncs, so the trace
  charges what NumPy makes (its temporary elision too). On (b, 4, 4)
  float64: Frobenius 136 B/row, ord=1 160, ord=2 40.
- ``"fused"``: torch's ``linalg.vector_norm`` is one kernel (4 B/row of a
  float32 (b, 64), whatever the order, dtype or strides); its
  ``matrix_norm`` reduces one axis first for 1 and inf and factors a copy
  for 2 and nuclear (on (b, 4, 4) float32: 4, 20 and 84 B/row).
- ``"eager"``: ``jax.numpy.linalg.vector_norm`` dispatches each operation
  (``real(x * conj(x))``: two arrays of ``x``'s shape, 256 B/row of a
  float32 (b, 32); 1 and inf: ``abs(x)``, 132), composed here of the
  namespace's own operations; its ``matrix_norm`` is jitted: the result for
  Frobenius, the partial sums for 1 and inf, a copy and U, S and Vh for 2
  (212 B/row of (b, 4, 4)).
- ``"squares"`` (the others): ``|x| ** ord`` whole, then its reduction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .._trace import active_trace
from . import _elementwise as elementwise
from . import _rules as rules
from ._array import ShapeArray, astype, lift, made, permuted, reshape, view_of
from ._statistics import reduction

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = [
    "matrix_norm",
    "numpy_matrix_norm",
    "numpy_norm",
    "numpy_vector_norm",
    "vector_norm",
]

_SVD_ORDERS = (2, -2, "nuc")
#: NumPy's functions ``norm`` calls, on shape-only arrays (through their protocols).
_SUM = cast("Callable[..., ShapeArray]", np.add.reduce)
_SQRT = cast("Callable[..., ShapeArray]", np.sqrt)
_SVD = cast("Callable[..., ShapeArray]", np.linalg.svd)


def _array(x: Value) -> ShapeArray:
    return lift(active_trace(x), x)


def _inexact(a: ShapeArray) -> str:
    return rules.float_of(a._trace.profile, a._name)


def _real(name: str) -> str:
    return rules.REAL.get(name, name)


def _squares(a: ShapeArray) -> ShapeArray:
    """``(x.conj() * x).real``: NumPy's methods (registered on `ShapeArray`)."""
    method: Any = a
    squares: ShapeArray = (method.conj() * a).real
    return squares


def _reduced(a: ShapeArray, axes: Value, keepdims: bool) -> ShapeArray:
    """A norm's reduction of ``a`` over ``axes``: real and floating."""
    return reduction(a, "mean", axes, keepdims, _real(_inexact(a)))


# -- NumPy's --------------------------------------------------------------------------
def numpy_norm(
    x: Value, ord: Value = None, axis: Value = None, keepdims: bool = False
) -> ShapeArray:
    """``np.linalg.norm``: NumPy's own code, on NumPy's ufuncs."""
    a = _array(x)
    if _inexact(a) != a._name:  # (x.astype(float))
        a = astype(a, "float64")
    if axis is None and (
        ord is None
        or (ord in ("f", "fro") and a.ndim == 2)
        or (ord == 2 and a.ndim == 1)
    ):  # (the dot product of x raveled: its result only)
        flat = a.ravel()
        ret = made(a._trace, (1,) * a.ndim if keepdims else (), _real(a._name), (flat,))
        del flat
        return ret
    axes = tuple(range(a.ndim)) if axis is None else axis
    axes = axes if isinstance(axes, tuple) else (int(axes),)
    if len(axes) == 1:
        return _numpy_vector(a, ord, axes, keepdims)
    if len(axes) != 2:
        msg = "numpy.linalg.norm over more than two axes"
        raise a._trace.refuse(msg)
    row, col = rules.axes_of(axes, a.ndim)
    ret = _numpy_matrix(a, ord, row, col)
    if keepdims:
        shape = list(a.shape)
        shape[row] = shape[col] = 1
        ret = reshape(ret, tuple(shape))
    return ret


def _numpy_vector(
    a: ShapeArray, ord: Value, axis: tuple[int, ...], keepdims: bool
) -> ShapeArray:
    if ord in (math.inf, -math.inf):
        return abs(a).max(axis=axis, keepdims=keepdims)
    if ord == 0:
        counted = (a != 0).astype(a._trace.profile.dtype(_real(a._name)))
        return counted.sum(axis=axis, keepdims=keepdims)
    if ord == 1:
        return _SUM(abs(a), axis=axis, keepdims=keepdims)
    if ord is None or ord == 2:
        s = _squares(a)
        return _SQRT(_SUM(s, axis=axis, keepdims=keepdims))
    absx = abs(a)
    absx **= ord
    return _SUM(absx, axis=axis, keepdims=keepdims)


def _numpy_matrix(a: ShapeArray, ord: Value, row: int, col: int) -> ShapeArray:
    if ord in _SVD_ORDERS:  # (_multi_svd_norm)
        order = (*(i for i in range(a.ndim) if i not in (row, col)), row, col)
        values = _SVD(permuted(a, order), compute_uv=False)
        return values.max(axis=-1)
    if ord in (1, -1, math.inf, -math.inf):
        first, then = (row, col) if ord in (1, -1) else (col, row)
        then -= then > first
        return _SUM(abs(a), axis=first).max(axis=then)
    if ord in (None, "fro", "f"):
        return _SQRT(_SUM(_squares(a), axis=(row, col)))
    msg = f"numpy.linalg.norm of ord={ord!r}"
    raise a._trace.refuse(msg)


def numpy_vector_norm(
    x: Value, /, *, axis: Value = None, keepdims: bool = False, ord: Value = 2
) -> ShapeArray:
    """``np.linalg.vector_norm`` (and array-api-strict's): raveled or folded, then `numpy_norm`."""
    a = _array(x)
    shape = a.shape
    if axis is None:
        a, axes = a.ravel(), tuple(range(len(shape)))
        along: Value = 0
    elif isinstance(axis, tuple):
        axes = tuple(int(i) % a.ndim for i in axis)  # (in their order)
        rest = tuple(i for i in range(a.ndim) if i not in axes)
        folded = (math.prod(shape[i] for i in axes), *(shape[i] for i in rest))
        merged = axes == tuple(range(axes[0], axes[0] + len(axes)))
        if a._contiguous and merged:  # (axes that merge in place: a view)
            a = view_of(permuted(a, axes + rest), folded, contiguous=False)
        else:
            a = reshape(permuted(a, axes + rest), folded)
        along = 0
    else:
        axes, along = rules.axes_of(axis, a.ndim), axis
    res = numpy_norm(a, ord=ord, axis=along)
    if keepdims:
        res = reshape(res, tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return res


def numpy_matrix_norm(
    x: Value, /, *, keepdims: bool = False, ord: Value = "fro"
) -> ShapeArray:
    """``np.linalg.matrix_norm`` (and array-api-strict's, array-api-compat's)."""
    return numpy_norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# -- the namespace's ------------------------------------------------------------------
def vector_norm(
    x: Value, /, *, axis: Value = None, keepdims: bool = False, ord: Value = 2
) -> ShapeArray:
    """Norms of the vectors along ``axis``, as the library computes them."""
    a = _array(x)
    how = a._trace.profile.norms
    if how == "numpy":
        return numpy_vector_norm(a, axis=axis, keepdims=keepdims, ord=ord)
    axes = tuple(range(a.ndim)) if axis is None else rules.axes_of(axis, a.ndim)
    if how == "fused":
        return _reduced(a, axes, keepdims)
    if how == "eager":
        return _eager_vector(a, axes, keepdims, ord)
    squares = made(a._trace, a.shape, _real(_inexact(a)), (a,))  # |x| ** ord, summed
    result = _reduced(squares, axis, keepdims)
    del squares
    return result


def _eager_vector(
    a: ShapeArray, axes: tuple[int, ...], keepdims: bool, ord: Value
) -> ShapeArray:
    """``jax.numpy.linalg.vector_norm``: one array an operation."""
    if ord is None or ord == 2:
        squares = elementwise.real(a * elementwise.conj(a))
        return elementwise.sqrt(_reduced(squares, axes, keepdims))
    if ord == 0:
        nonzero = a != 0
        counted = astype(nonzero, _real(_inexact(a)))
        del nonzero
        return _reduced(counted, axes, keepdims)
    absolute = elementwise.abs(a)
    if ord in (1, math.inf, -math.inf):
        return _reduced(absolute, axes, keepdims)
    powers = absolute**ord
    del absolute
    return elementwise.pow(_reduced(powers, axes, keepdims), 1.0)


def matrix_norm(
    x: Value, /, *, keepdims: bool = False, ord: Value = "fro"
) -> ShapeArray:
    """Norms of the matrices, as the library computes them."""
    a = _array(x)
    how = a._trace.profile.norms
    if how == "numpy":
        return numpy_matrix_norm(a, keepdims=keepdims, ord=ord)
    name = _real(_inexact(a))
    if how in ("fused", "eager") and ord in _SVD_ORDERS:
        *lead, m, n = a.shape
        k = min(m, n)
        shapes = [(*lead, k)]
        if how == "eager":  # (XLA's SVD makes U and Vh too)
            shapes = [(*lead, m, k), *shapes, (*lead, k, n)]
        working = made(a._trace, a.shape, _inexact(a), (a,))  # (LAPACK's copy)
        outputs = [made(a._trace, s, _inexact(a), (a,)) for s in shapes]
        ret = _reduced(a, (-2, -1), keepdims)
        del working, outputs
        return ret
    if how in ("fused", "eager") and ord in (1, -1, math.inf, -math.inf):
        axis = (-2,) if ord in (1, -1) else (-1,)
        partial = [_reduced(a, axis, False) for _ in range(1 + (how == "eager"))]
        ret = _reduced(a, (-2, -1), keepdims)  # (JAX's max from 0: the sums again)
        del partial
        return ret
    if how == "squares":  # (on the safe side: not measured)
        squares = made(a._trace, a.shape, name, (a,))
        ret = _reduced(squares, (-2, -1), keepdims)
        del squares
        return ret
    return _reduced(a, (-2, -1), keepdims)
