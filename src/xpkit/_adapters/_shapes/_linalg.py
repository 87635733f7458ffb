"""The standard's linear algebra on shape-only arrays, and its ``linalg`` extension.

This module is the namespace's ``linalg`` attribute. A decomposition or a
solve makes its outputs and holds a copy of its input while it runs (LAPACK
works on a copy in its own layout); products make their result only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .._kernel_scratch import packed_operands
from .._trace import active_trace, missing_name
from . import _rules as rules
from . import _strides as strides
from ._array import (
    ShapeArray,
    binary,
    copy_of,
    lift,
    made,
    permuted,
    reshape,
    unowned,
    view_of,
)
from ._manipulation import matrix_transpose
from ._norms import matrix_norm, vector_norm
from ._results import EighResult, QRResult, SlogdetResult, SVDResult
from ._statistics import reduction

if TYPE_CHECKING:
    from ..._typing import Value
    from .._trace import Trace

__all__ = [
    "METHODS",
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "einsum",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
]


def _array(x: Value) -> ShapeArray:
    return lift(active_trace(x), x)


def _square(x: Value) -> ShapeArray:
    a = _array(x)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        msg = f"a square matrix was expected, got shape {a.shape}"
        raise a._trace.refuse(msg)
    return a


def _inexact(a: ShapeArray) -> str:
    """The dtype LAPACK computes ``a`` in: an integer array's becomes floating."""
    return rules.float_of(a._trace.profile, a._name)


#: The dtype NumPy's ``linalg`` computes each single-precision dtype in
#: (``_commonType``: LAPACK in double precision, the results cast back).
_DOUBLE = {"float32": "float64", "complex64": "complex128"}


def _held(trace: Trace, shape: tuple[int, ...], name: str) -> ShapeArray:
    """An array NumPy's ``linalg`` holds inside, whatever dtypes the device offers.

    (array-api-strict's device without float64 computes in NumPy's float64.)
    """
    charged, node = trace.charge(rules.nbytes(shape, name), len(shape), ())
    return ShapeArray(trace, shape, name, charged, node)


def _decomposed(
    a: ShapeArray,
    shapes: list[tuple[tuple[int, ...], str]],
    *,
    gufunc: bool = True,
    in_double: bool = True,
) -> list[ShapeArray]:
    """The outputs of a LAPACK routine on ``a``, with its working copy held meanwhile.

    NumPy's ``umath_linalg`` gufuncs (``gufunc``: solve, inv, det, slogdet,
    cholesky, eig, eigh, svd) copy one matrix at a time into a buffer they
    ``malloc`` (LAPACK's workspace beside it): no copy of ``a`` whole, and
    nothing tracemalloc sees. NumPy itself and array-api-strict compute so;
    elsewhere (torch's LU, Dask's graph) ``a`` is copied whole. NumPy's
    ``linalg`` computes in double precision (``in_double``): an input of
    another dtype (float32, complex64, an integer) is cast whole to float64
    or complex128 first, the outputs are made in double precision and each
    is cast to the result's dtype after (``astype(result_t, copy=False)``);
    a float32 ``det`` held 129 times its result while only that counted.
    """
    trace, profile = a._trace, a._trace.profile
    numpy = profile.numpy_internals and not profile.lazy
    double = numpy and in_double
    work = _DOUBLE.get(_inexact(a), _inexact(a)) if double else a._name
    copied = not (gufunc and numpy) or work != a._name
    working = _held(trace, a.shape, work) if copied else None
    outputs = [
        _held(trace, shape, _DOUBLE.get(name, name))
        if double
        else made(trace, shape, name, (a,))
        for shape, name in shapes
    ]
    if gufunc:  # (a gufunc's cast freed as it returns; qr's copy held to its end)
        del working
    for i, (shape, name) in enumerate(shapes):
        if outputs[i]._name != name:  # (each cast in turn, its double freed)
            outputs[i] = made(trace, shape, name, (outputs[i],))
    return outputs


def matmul(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 @ x2``.

    Its result, and a copy of each operand the library copies first for
    its layout (`_strides`), or the blocks it packs them into
    (`Profile.matmul_packing`), held while it runs.
    """
    x = x1 if isinstance(x1, ShapeArray) else _array(x1)
    trace = x._trace
    y = lift(trace, x2)
    shape = rules.matmul_shape(x.shape, y.shape)
    held = strides.copied_operands(x, y) if trace.profile.strided_matmul_copies else []
    name = rules.promote(trace.profile, x._name, y._name)
    casts = cast_operands((x, y), name)
    copies = [copy_of(a) for a in held if a._name == name]  # (a cast is laid out)
    result = made(trace, shape, name, (x, y, *copies, *casts))
    trace.spike(packed_operands(x.nbytes, y.nbytes, trace.profile.matmul_packing))
    return result


def cast_operands(operands: tuple[ShapeArray, ...], name: str) -> list[ShapeArray]:
    """Each operand of a product in a dtype other than its result's, cast whole first.

    Held while the product runs: NumPy's ``matmul``, ``vecdot`` and ``dot``,
    and array-api-compat's promotion for torch, cast the operand whole (a
    float32 batch against float64 weights held 2,112 bytes a row of 256
    where the result's 64 were counted: 8 times its budget).
    """
    return [made(a._trace, a.shape, name, (a,)) for a in operands if a._name != name]


def _matmul_method(self: ShapeArray, other: Value) -> ShapeArray:
    """``self @ other`` (and ``self.dot(other)``)."""
    return matmul(self, other)


def _rmatmul_method(self: ShapeArray, other: Value) -> ShapeArray:
    return matmul(other, self)


#: `ShapeArray`'s products, which it takes where the package registers its modules.
METHODS = {
    "__matmul__": _matmul_method,
    "__rmatmul__": _rmatmul_method,
    "dot": _matmul_method,
}


def tensordot(x1: Value, x2: Value, /, *, axes: Value = 2) -> ShapeArray:
    """Contraction of ``x1`` and ``x2`` over ``axes``."""
    a, b = _array(x1), _array(x2)
    shape = rules.tensordot_shape(a.shape, b.shape, axes)
    name = rules.promote(a._trace.profile, a._name, b._name)
    casts = cast_operands((a, b), name)
    return unowned(made(a._trace, shape, name, (a, b, *casts)))  # (a reshaped dot)


def vecdot(x1: Value, x2: Value, /, *, axis: int = -1) -> ShapeArray:
    """Dot products of vectors along ``axis``.

    JAX's on the CPU (``jnp.vecdot``: a vectorized ``vdot``, eagerly) holds
    two copies of each operand, broadcast, while it runs: 4.2-4.4 times the
    operands' bytes beside its result at 1,000 and 4,000 rows of 64 float64,
    where the result alone was counted (0.00 of the true peak), and 70 to
    180 kB more whatever the rows, which is not counted. (The same
    ``dot_general`` from ``jnp.einsum`` or ``lax.dot_general`` holds no
    copy: `_jax_memory` counts it as a product.)
    """
    a, b = _array(x1), _array(x2)
    shape = rules.broadcast(a.shape, b.shape)
    (ax,) = rules.axes_of(axis, len(shape))
    out = tuple(d for i, d in enumerate(shape) if i != ax)
    name = rules.promote(a._trace.profile, a._name, b._name)
    casts = cast_operands((a, b), name)
    result = made(a._trace, out, name, (a, b, *casts))
    del casts
    copies = a._trace.profile.vecdot_copies  # (`Profile.vecdot_copies`: JAX's)
    both = rules.itemsize(a._name) + rules.itemsize(b._name)
    a._trace.spike(copies * math.prod(shape) * both)
    return result


def einsum(
    subscripts: str, /, *operands: Value, optimize: Value = False, **_: Value
) -> ShapeArray:
    """Einstein summation (NumPy's ``einsum``).

    Without ``optimize``, NumPy's C einsum: its result only. With it,
    NumPy's own path of pairwise contractions (``einsum_path``), each run
    as NumPy runs it (`_contracted`), each intermediate held until a later
    one reads it: ``np.einsum("ni,nj,ij->n", x, x, a, optimize=True)``
    holds an (n, 64) product, and was planned at 65 times a budget while
    only its (n,) result counted.
    """
    parts = [_array(o) for o in operands]
    if optimize is False or len(parts) < 2:
        return _c_einsum(subscripts, parts)
    held = list(parts)
    for taken_at, step in _path(subscripts, parts, optimize):
        taken = [held.pop(i) for i in taken_at]
        held.append(_contracted(step, taken))
        del taken
    if len(held) != 1:
        msg = f"einsum {subscripts!r}: its path left {len(held)} operands"
        raise parts[0]._trace.refuse(msg)
    return held[0]


def _c_einsum(subscripts: str, parts: list[ShapeArray]) -> ShapeArray:
    """NumPy's C ``einsum`` of ``parts``: its result only."""
    shape = rules.einsum_shape(subscripts, [p.shape for p in parts])
    name = parts[0]._name
    for p in parts[1:]:
        name = rules.promote(p._trace.profile, name, p._name)
    # (not owned: optimized, NumPy's einsum returns a reshaped product)
    return unowned(made(parts[0]._trace, shape, name, tuple(parts)))


def _path(
    subscripts: str, parts: list[ShapeArray], optimize: Value
) -> list[tuple[tuple[int, ...], str]]:
    """NumPy's contractions of ``parts``: (the operands each takes, its subscripts).

    From ``np.einsum_path`` over stand-ins of their shapes that hold no
    data (zero strides), as ``np.einsum`` asks for it.
    """
    trace = parts[0]._trace
    stand_ins = [
        np.lib.stride_tricks.as_strided(np.zeros(1), p.shape, (0,) * p.ndim)
        for p in parts
    ]
    path = cast(Callable[..., tuple[object, list[tuple[Any, ...]]]], np.einsum_path)
    try:  # (einsum_call: the contractions, as np.einsum asks for them)
        _, contractions = path(
            subscripts, *stand_ins, optimize=optimize, einsum_call=True
        )
        return [
            (tuple(c[0]), next(x for x in c if isinstance(x, str) and "->" in x))
            for c in contractions
        ]
    except (TypeError, ValueError, KeyError, StopIteration) as exc:
        msg = f"einsum_path of {subscripts!r} ({type(exc).__name__}: {exc})"
        raise trace.refuse(msg) from None


def _contracted(step: str, taken: list[ShapeArray]) -> ShapeArray:
    """One contraction of an optimised ``einsum``, as NumPy runs it.

    Two operands: NumPy 2.4's ``bmm_einsum``, each operand transposed (a
    view) or reduced (a new array) by its own single-term einsum, reshaped
    (a copy where its layout needs one), then a batched ``matmul`` (or a
    broadcast ``multiply`` where nothing is contracted), reshaped and
    transposed; earlier NumPy's ``tensordot`` is counted with a copy of
    each operand. More operands: the C einsum.
    """
    if len(taken) != 2:
        return _c_einsum(step, taken)
    parse = _batch_matmul_parser()
    if parse is None:  # (tensordot: each operand transposed and reshaped)
        copies = [copy_of(t) for t in taken]
        result = _c_einsum(step, taken)
        del copies
        return result
    a, b = taken
    eq_a, eq_b, shape_a, shape_b, shape_ab, perm_ab, pure = parse(
        step, a.shape, b.shape
    )
    a, b = _prepared(a, eq_a, shape_a), _prepared(b, eq_b, shape_b)
    if pure:
        return binary("multiply", a, b)
    product = matmul(a, b)
    if shape_ab is not None:
        product = reshape(product, tuple(shape_ab))
    if perm_ab is not None:
        product = permuted(product, tuple(perm_ab))
    return product


def _prepared(x: ShapeArray, eq: str | None, shape: Value) -> ShapeArray:
    """An operand of ``bmm_einsum``: its single-term einsum ``eq``, then reshaped.

    A transpose of a contiguous operand whose axes to be fused stay in
    order in memory reshapes to a view, as NumPy reshapes it (``jk,Jij``:
    ``x`` as (j, J i) fuses J and i, adjacent in ``x``).
    """
    if eq is not None:
        before, after = eq.split("->")
        if len(set(before)) == len(before) and sorted(before) == sorted(after):
            order = tuple(before.index(c) for c in after)
            moved = permuted(x, order)
            if shape is not None and x._contiguous:
                steps = _c_strides(x.shape)
                new = tuple(shape)
                if _fuses_in_place(moved.shape, tuple(steps[i] for i in order), new):
                    return view_of(moved, new, contiguous=False)
            x = moved
        else:  # (a letter summed, or a diagonal)
            x = _c_einsum(eq, [x])
    return x if shape is None else reshape(x, tuple(shape))


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    """The strides, in elements, of a C-contiguous array of ``shape``."""
    steps, step = [], 1
    for d in reversed(shape):
        steps.append(step)
        step *= d
    return steps[::-1]


def _fuses_in_place(
    shape: tuple[int, ...], steps: tuple[int, ...], new: tuple[int, ...]
) -> bool:
    """Whether ``shape`` with these strides reshapes to ``new`` without a copy.

    NumPy's ``_attempt_nocopy_reshape`` (C order): each group of axes
    fused into one must be laid out one after the other in memory.
    """
    dims = [(d, st) for d, st in zip(shape, steps, strict=True) if d != 1]
    wanted = [d for d in new if d != 1]
    i = j = 0
    while i < len(dims) and j < len(wanted):
        old_i, new_j = i + 1, j + 1
        have, want = dims[i][0], wanted[j]
        while have != want:
            if want < have and new_j < len(wanted):
                want *= wanted[new_j]
                new_j += 1
            elif old_i < len(dims):
                have *= dims[old_i][0]
                old_i += 1
            else:
                return False
        for k in range(i, old_i - 1):
            if dims[k][1] != dims[k + 1][0] * dims[k + 1][1]:
                return False
        i, j = old_i, new_j
    return True


@functools.cache
def _batch_matmul_parser() -> Callable[..., tuple[Any, ...]] | None:
    """NumPy's parser of a pairwise contraction into a batched matmul (NumPy >= 2.4)."""
    try:
        from numpy._core import einsumfunc
    except ImportError:  # (NumPy 1: tensordot)
        return None
    if not hasattr(einsumfunc, "bmm_einsum"):
        return None
    parse: Callable[..., tuple[Any, ...]] | None = getattr(
        einsumfunc, "_parse_eq_to_batch_matmul", None
    )
    return parse


def outer(x1: Value, x2: Value, /) -> ShapeArray:
    """The outer product of two vectors."""
    a, b = _array(x1), _array(x2)
    trace = a._trace
    name = rules.promote(trace.profile, a._name, b._name)
    shape = (a.size, b.size)
    result = made(trace, shape, name, (a, b))
    if trace.profile.numpy_internals:  # a column times a row, broadcast
        rules.buffer_operands(
            trace, shape, name, (((a.size, 1), a._name), ((1, b.size), b._name))
        )
    return result


def cross(x1: Value, x2: Value, /, *, axis: int = -1) -> ShapeArray:
    """The cross product of 3-vectors."""
    a, b = _array(x1), _array(x2)
    name = rules.promote(a._trace.profile, a._name, b._name)
    return made(a._trace, rules.broadcast(a.shape, b.shape), name, (a, b))


def cholesky(x: Value, /, *, upper: bool = False) -> ShapeArray:
    """The Cholesky factor."""
    a = _square(x)
    return _decomposed(a, [(a.shape, _inexact(a))])[0]


def det(x: Value, /) -> ShapeArray:
    """Determinants of the matrices."""
    a = _square(x)
    return _decomposed(a, [(a.shape[:-2], _inexact(a))])[0]


def slogdet(x: Value, /) -> SlogdetResult:
    """Signs and log-determinants of the matrices."""
    a = _square(x)
    name = _inexact(a)  # (the sign complex, the logarithm real)
    sign, log = _decomposed(a, [(a.shape[:-2], name), (a.shape[:-2], _real(name))])
    return SlogdetResult(sign, log)


def diagonal(x: Value, /, *, offset: int = 0) -> ShapeArray:
    """The diagonals of the matrices (a view where the library makes views)."""
    a = _array(x)
    size = max(min(a.shape[-2] - max(-offset, 0), a.shape[-1] - max(offset, 0)), 0)
    return view_of(a, (*a.shape[:-2], size), contiguous=False)


def trace(x: Value, /, *, offset: int = 0, dtype: Value = None) -> ShapeArray:
    """Sums of the diagonals."""
    a = _array(x)
    return reduction(a, "sum", (-2, -1), False, None)


def eigh(x: Value, /) -> EighResult:
    """Eigenvalues and eigenvectors of symmetric matrices."""
    a = _square(x)
    name = _inexact(a)
    values, vectors = _decomposed(a, [(a.shape[:-1], _real(name)), (a.shape, name)])
    return EighResult(values, vectors)


def eigvalsh(x: Value, /) -> ShapeArray:
    """Eigenvalues of symmetric matrices."""
    a = _square(x)
    return _decomposed(a, [(a.shape[:-1], _real(_inexact(a)))])[0]


def _real(name: str) -> str:
    return rules.REAL.get(name, name)


def inv(x: Value, /) -> ShapeArray:
    """Inverses of the matrices (Dask's solve against a float64 identity)."""
    a = _square(x)
    name = _inexact(a)
    profile = a._trace.profile
    if profile.dtype_rules.inverse_float64 and "float64" in profile.dtypes:
        name = rules.promote(a._trace.profile, name, "float64")
    return _decomposed(a, [(a.shape, name)])[0]


def pinv(x: Value, /, *, rtol: Value = None) -> ShapeArray:
    """Pseudo-inverses of the matrices.

    From the SVD ``u, s, vh`` (all held), as ``vh.T @ (s[..., None] *
    u.T)``: the scaled ``u.T`` is held beside the product, and ``vh.T`` is
    copied where the library's product copies a strided operand (NumPy's
    ``pinv``; torch scales ``vh.T`` alike). 1.39 times a budget while the
    scaled ``u.T`` was not counted (8 x 8 matrices).
    """
    a = _array(x)
    m, n = a.shape[-2:]
    k = min(m, n)
    u, s, vh = svd(a, full_matrices=False)
    scaled = made(a._trace, (*a.shape[:-2], k, m), u._name, (u, s))
    result = matmul(matrix_transpose(vh), scaled)
    del u, s, vh, scaled
    return result


def matrix_power(x: Value, n: int, /) -> ShapeArray:
    """The ``n``-th power of square matrices."""
    a = _square(x)  # (matrix products in its own dtype)
    return _decomposed(a, [(a.shape, a._name)], gufunc=False, in_double=False)[0]


def matrix_rank(x: Value, /, *, rtol: Value = None) -> ShapeArray:
    """Ranks of the matrices."""
    a = _array(x)
    return _decomposed(a, [(a.shape[:-2], a._trace.profile.default_int)], gufunc=False)[
        0
    ]


def solve(x1: Value, x2: Value, /) -> ShapeArray:
    """Solutions of ``x1 @ x = x2`` (NumPy casts ``x2`` whole too, as ``x1``)."""
    a, b = _square(x1), _array(x2)
    profile = a._trace.profile
    name = rules.float_of(profile, rules.promote(profile, a._name, b._name))
    double = _DOUBLE.get(name, name)
    numpy = profile.numpy_internals and not profile.lazy
    cast = None
    if numpy and b._name != double:  # (the gufunc's cast of b)
        cast = _held(a._trace, b.shape, double)
    result = _decomposed(a, [(b.shape, name)])[0]
    del cast
    return result


def qr(x: Value, /, *, mode: str = "reduced") -> Any:
    """The QR decomposition, in ``mode`` (NumPy's ``"r"``: R alone; ``"raw"``).

    NumPy's copies ``a`` whole (``astype(copy=True)``), holds LAPACK's
    ``tau`` to the end, and takes R by ``triu``'s ``where`` of a view of the
    copy, whose iterator buffers the mask, a zero and the view where its
    rows lie apart (uncounted: 0.73 of tracemalloc's peak). torch's ``"r"``
    gives an empty Q.
    """
    a = _array(x)
    (m, n), lead, name = a.shape[-2:], a.shape[:-2], _inexact(a)
    numpy = a._trace.profile.numpy_internals and not a._trace.profile.lazy
    k = min(m, n)
    cols = m if mode == "complete" else k
    if mode == "raw":  # (NumPy's h: its copy, transposed)
        (tau,) = _decomposed(a, [((*lead, k), name)], gufunc=False)
        return made(a._trace, (*lead, n, m), name, (a,)), tau
    shapes = [((*lead, k), name)] if numpy else []  # (tau)
    shapes += [((*lead, m, cols), name)] if mode != "r" else []
    made_ = _decomposed(a, [*shapes, ((*lead, cols, n), name)], gufunc=False)
    q, r = (made_[-2] if mode != "r" else None), made_[-1]  # (tau held in made_)
    if numpy:  # (the copy, held to its end, and where's buffers)
        copy = math.prod(a.shape) * rules.itemsize(_DOUBLE.get(name, name))
        each = min(rules.BUFFER_ELEMENTS, math.prod(r.shape))
        r._trace.spike(copy + rules.ITERATOR_BYTES + each * (1 + rules.itemsize(name)))
        if mode == "r":
            return r
    return QRResult(made(a._trace, (0,), name) if q is None else q, r)


def svd(x: Value, /, *, full_matrices: bool = True) -> SVDResult:
    """The singular value decomposition."""
    a = _array(x)
    m, n = a.shape[-2:]
    k = min(m, n)
    lead = a.shape[:-2]
    u_cols, v_rows = (m, n) if full_matrices else (k, k)
    name = _inexact(a)
    u, s, vh = _decomposed(
        a,
        [
            ((*lead, m, u_cols), name),
            ((*lead, k), _real(name)),
            ((*lead, v_rows, n), name),
        ],
    )
    return SVDResult(u, s, vh)


def eig(x: Value, /) -> tuple[ShapeArray, ShapeArray]:
    """``np.linalg.eig``: complex eigenvalues and vectors (a real view where all real).

    NumPy checks ``isfinite(a)`` whole first, and reads ``w.imag == 0``
    beside its results; where every eigenvalue is real it returns views of
    the complex buffers, which stay what is held (their dtype is the values'
    to decide: the trace keeps the complex one).
    """
    return _eig(x, vectors=True)


def eigvals(x: Value, /) -> ShapeArray:
    """``np.linalg.eigvals``: as `eig`, the eigenvalues only."""
    return _eig(x, vectors=False)[0]


def _eig(x: Value, *, vectors: bool) -> tuple[ShapeArray, ShapeArray]:
    a = _square(x)
    trace = a._trace
    if trace.profile.numpy_internals:  # (NumPy's _assert_finite)
        made(trace, a.shape, "bool", (a,))
    name = rules.promote(trace.profile, _inexact(a), "complex64")
    shapes = [(a.shape[:-1], name)] + ([(a.shape, name)] if vectors else [])
    outputs = _decomposed(a, shapes)
    made(trace, a.shape[:-1], "bool", tuple(outputs))  # (w.imag == 0.0)
    return outputs[0], outputs[-1]


def svdvals(x: Value, /) -> ShapeArray:
    """The singular values."""
    a = _array(x)
    shape = (*a.shape[:-2], min(a.shape[-2:]))
    (result,) = _decomposed(a, [(shape, _real(_inexact(a)))])
    rules.hold_workspace("svdvals", (a,), (result,))
    return result


def __getattr__(name: str) -> object:
    """A name the library's ``linalg`` has and this one has no rule for: refused."""
    raise missing_name(name, "linalg")
