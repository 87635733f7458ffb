"""The rules of shape-only arrays: result shapes and dtypes, without arrays.

Shapes are tuples of ints; dtypes are the standard's names, with their rules
in `xpkit._adapters._shapes._dtypes` (read through this module too). A shape
that does not fit raises `CannotFollow` (the real run raises the library's
own error). Also here: how the interpreter tells a temporary operand
(`TEMP_REFS`), and the buffers NumPy's ufuncs hold (`buffer_operands`).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._trace import CannotFollow
from ._dtypes import (
    BOOL,
    COMMUTATIVE,
    COMPARE,
    COMPLEX,
    FLOAT,
    INT,
    REAL,
    REDUCED_DTYPES,
    UINT,
    dtype_name_of,
    float_of,
    itemsize,
    kind,
    loop_dtypes,
    nbytes,
    numpy_operands,
    numpy_scalar,
    numpy_table,
    promote,
    result_dtype,
    scalar_dtype,
    sum_dtype,
    unary_dtype,
    weak_dtype,
    zero_d_dtype,
)

if TYPE_CHECKING:
    from .._trace import Profile, Trace
    from ._array import ShapeArray

__all__ = [
    "BOOL",
    "BUFFER_ELEMENTS",
    "COMMUTATIVE",
    "COMPARE",
    "COMPLEX",
    "FLOAT",
    "INT",
    "ITERATOR_BYTES",
    "OTHER_TEMP_REFS",
    "REAL",
    "REDUCED_DTYPES",
    "TEMP_REFS",
    "UINT",
    "Shape",
    "as_shape",
    "axes_of",
    "broadcast",
    "buffer_operands",
    "buffer_together",
    "concat_shape",
    "dtype_name_of",
    "einsum_shape",
    "float_of",
    "gufunc_shape",
    "hold_in_place",
    "hold_workspace",
    "indexed",
    "ints_advanced",
    "itemsize",
    "kind",
    "loop_dtypes",
    "matmul_shape",
    "nbytes",
    "numpy_operands",
    "numpy_scalar",
    "numpy_table",
    "promote",
    "reduced",
    "reshaped",
    "result_dtype",
    "scalar_dtype",
    "sum_dtype",
    "tensordot_shape",
    "unary_dtype",
    "weak_dtype",
    "zero_d_dtype",
]

#: A shape: one int per axis.
Shape = tuple[int, ...]


# -- shapes --------------------------------------------------------------------
def _dim(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        msg = f"a shape holds {value!r}, not an int"
        raise CannotFollow(msg)
    return int(value)


def as_shape(shape: object) -> Shape:
    """``shape`` (an int or a sequence of ints) as a tuple of ints."""
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        return (int(shape),)
    if isinstance(shape, Sequence) and not isinstance(shape, str):
        return tuple(_dim(d) for d in shape)
    msg = f"{shape!r} is not a shape"
    raise CannotFollow(msg)


def broadcast(*shapes: Shape) -> Shape:
    """The broadcast of ``shapes`` (the standard's rules)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(-ndim, 0):
        size = 1
        for s in shapes:
            d = s[axis] if -axis <= len(s) else 1
            if d != 1:
                if size not in (1, d):
                    msg = f"shapes {list(shapes)} do not broadcast"
                    raise CannotFollow(msg)
                size = d
        out.append(size)
    for s in shapes:  # (an operand's own shape where it is the result's: no new tuple)
        if len(s) == ndim and all(a == b for a, b in zip(s, out, strict=True)):
            return s
    return tuple(out)


def axes_of(axis: object, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or ints, possibly negative) as sorted axes."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple | list) else (axis,)
    found = []
    for item in items:
        a = _dim(item)
        if not -ndim <= a < max(ndim, 1):
            msg = f"axis {a} is out of bounds for {ndim} dimensions"
            raise CannotFollow(msg)
        found.append(a % ndim if ndim else 0)
    return tuple(sorted(set(found)))


def reduced(shape: Shape, axis: object, keepdims: bool) -> Shape:
    """The shape of a reduction of ``shape`` over ``axis``."""
    axes = axes_of(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reshaped(shape: Shape, new: object) -> Shape:
    """``new`` (one -1 allowed) for an array of ``shape``."""
    target = list(as_shape(new))
    size = math.prod(shape)
    if target.count(-1) > 1:
        msg = f"reshape to {tuple(target)}: at most one -1"
        raise CannotFollow(msg)
    if -1 in target:
        rest = math.prod(d for d in target if d != -1)
        if rest == 0 or size % rest:
            msg = f"cannot reshape {shape} to {tuple(target)}"
            raise CannotFollow(msg)
        target[target.index(-1)] = size // rest
    if math.prod(target) != size:
        msg = f"cannot reshape {shape} to {tuple(target)}"
        raise CannotFollow(msg)
    return tuple(target)


def concat_shape(shapes: Sequence[Shape], axis: int | None) -> Shape:
    """The shape of ``concat`` of ``shapes`` along ``axis`` (None: flattened)."""
    if not shapes:
        msg = "concat of no arrays"
        raise CannotFollow(msg)
    if axis is None:
        return (sum(math.prod(s) for s in shapes),)
    first = shapes[0]
    (ax,) = axes_of(axis, len(first))
    for s in shapes[1:]:
        if len(s) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(s, first, strict=True)) if i != ax
        ):
            msg = f"shapes {list(shapes)} do not concatenate along axis {axis}"
            raise CannotFollow(msg)
    return (*first[:ax], sum(s[ax] for s in shapes), *first[ax + 1 :])


def matmul_shape(a: Shape, b: Shape) -> Shape:
    """The shape of ``a @ b`` (1-D operands promoted and their axis dropped)."""
    if not a or not b:
        msg = "matmul of a 0-d array"
        raise CannotFollow(msg)
    left = (1, *a) if len(a) == 1 else a
    right = (*b, 1) if len(b) == 1 else b
    if left[-1] != right[-2]:
        msg = f"matmul of shapes {a} and {b}"
        raise CannotFollow(msg)
    out = (*broadcast(left[:-2], right[:-2]), left[-2], right[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def tensordot_shape(a: Shape, b: Shape, axes: object) -> Shape:
    """The shape of ``tensordot(a, b, axes=axes)``."""
    if isinstance(axes, int | np.integer):
        n = int(axes)
        ax_a, ax_b = list(range(len(a) - n, len(a))), list(range(n))
    else:
        pair = list(axes)  # type: ignore[call-overload]
        ax_a = [pair[0]] if isinstance(pair[0], int) else list(pair[0])
        ax_b = [pair[1]] if isinstance(pair[1], int) else list(pair[1])
        ax_a = [x % len(a) for x in ax_a]
        ax_b = [x % len(b) for x in ax_b]
    if [a[i] for i in ax_a] != [b[i] for i in ax_b]:
        msg = f"tensordot of shapes {a} and {b} over {axes}"
        raise CannotFollow(msg)
    keep_a = [d for i, d in enumerate(a) if i not in ax_a]
    keep_b = [d for i, d in enumerate(b) if i not in ax_b]
    return (*keep_a, *keep_b)


def einsum_shape(subscripts: str, shapes: Sequence[Shape]) -> Shape:
    """The output shape of ``einsum(subscripts, *operands)`` (ellipses included)."""
    text = subscripts.replace(" ", "")
    inputs, arrow, wanted = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        msg = f"einsum {subscripts!r} names {len(terms)} operands, got {len(shapes)}"
        raise CannotFollow(msg)
    sizes: dict[str, int] = {}
    ellipsis: list[Shape] = []
    for term, shape in zip(terms, shapes, strict=True):
        letters = term.replace("...", "")
        extra = len(shape) - len(letters)
        if "..." in term:
            at = term.index("...")
            ellipsis.append(shape[at : at + extra])
            dims = shape[:at] + shape[at + extra :]
        elif extra:
            msg = f"einsum term {term!r} for a {len(shape)}-d operand"
            raise CannotFollow(msg)
        else:
            dims = shape
        for letter, d in zip(letters, dims, strict=True):
            if sizes.get(letter, d) not in (d, 1) and d != 1:
                msg = f"einsum {subscripts!r}: {letter} is {sizes[letter]} and {d}"
                raise CannotFollow(msg)
            sizes[letter] = max(sizes.get(letter, 1), d)
    lead = broadcast(*ellipsis) if ellipsis else ()
    if not arrow:
        once = sorted(c for c in sizes if inputs.count(c) == 1)
        wanted = ("..." if ellipsis else "") + "".join(once)
    if not re.fullmatch(r"[A-Za-z]*(\.\.\.)?[A-Za-z]*", wanted):
        msg = f"einsum output {wanted!r}"
        raise CannotFollow(msg)
    head, dots, tail = wanted.partition("...")
    out = [sizes[c] for c in head]
    if dots:
        out += list(lead)
    out += [sizes[c] for c in tail]
    return tuple(out)


def gufunc_shape(signature: str, shapes: Sequence[Shape]) -> tuple[Shape, ...]:
    """The output shapes of a generalised ufunc of ``signature`` (NumPy's form).

    ``"(n?,k),(k,m?)->(n?,m?)"`` (matmul): core dimensions by name, ``?``
    marking a dimension an operand may lack.
    """
    ins, _, outs = signature.replace(" ", "").partition("->")
    in_cores = re.findall(r"\(([^)]*)\)", ins)
    out_cores = re.findall(r"\(([^)]*)\)", outs)
    if len(in_cores) != len(shapes):
        msg = f"a gufunc {signature!r} of {len(shapes)} operands"
        raise CannotFollow(msg)
    sizes: dict[str, int] = {}
    missing: set[str] = set()
    loops = []
    for core, shape in zip(in_cores, shapes, strict=True):
        names = [n for n in core.split(",") if n]
        optional = [n for n in names if n.endswith("?")]
        take = len(names) if len(shape) >= len(names) else len(names) - len(optional)
        if take < len(names):  # an operand without its optional dimensions
            missing.update(n.rstrip("?") for n in optional)
            names = [n for n in names if not n.endswith("?")]
        core_dims = shape[len(shape) - len(names) :] if names else ()
        for name, d in zip(names, core_dims, strict=True):
            sizes.setdefault(name.rstrip("?"), d)
        loops.append(shape[: len(shape) - len(names)])
    lead = broadcast(*loops)
    result = []
    for core in out_cores:
        names = [n.rstrip("?") for n in core.split(",") if n]
        result.append((*lead, *(sizes[n] for n in names if n not in missing)))
    return tuple(result)


def ints_advanced(profile: Profile) -> bool:
    """Whether an int beside an integer index array is an advanced index too.

    NumPy's rule (NumPy, CuPy, JAX; array-api-strict refuses the mix):
    ``x[0, :, i]`` puts ``i``'s axes first. torch and Dask take the int as
    a basic index.
    """
    return profile.dtype_rules.ints_advanced


def expanded_index(shape: Shape, items: Sequence[object]) -> list[object]:
    """``items`` with the Ellipsis (or the end) filled with whole slices.

    One item per axis of ``shape``, and the Nones (new axes) where they
    stand.
    """
    consumed = sum(1 for i in items if i is not None and i is not Ellipsis)
    if consumed > len(shape):
        msg = f"too many indices ({consumed}) for shape {shape}"
        raise CannotFollow(msg)
    if sum(1 for i in items if i is Ellipsis) > 1:
        msg = "an index may hold one Ellipsis"
        raise CannotFollow(msg)
    fill = [slice(None)] * (len(shape) - consumed)
    expanded: list[object] = []
    for item in items:
        expanded += fill if item is Ellipsis else [item]
    if not any(item is Ellipsis for item in items):
        expanded += fill
    return expanded


def indexed(
    shape: Shape, items: Sequence[object], ints_advanced: bool = True
) -> tuple[Shape, bool, bool]:
    """``(result shape, whether it copies, whether it stays contiguous)``.

    ``items`` are ints, slices, None, Ellipsis, and the shapes (tuples) of
    integer index arrays: NumPy's basic and advanced indexing (advanced
    indices next to each other keep their place, else they go first).
    ``ints_advanced``: beside an index array an int is an advanced index
    (a 0-d one), as NumPy has it (`ints_advanced`).
    """
    expanded = expanded_index(shape, items)
    out: list[object] = []
    advanced: list[Shape] = []
    places: list[int] = []
    axis = 0
    contiguous, sliced = True, False
    arrays = any(isinstance(item, tuple) for item in expanded)
    for item in expanded:
        if item is None:
            out.append(1)
            continue
        if axis >= len(shape):
            break
        d = shape[axis]
        axis += 1
        if isinstance(item, tuple):
            advanced.append(item)
            places.append(len(out))
            out.append(None)
        elif isinstance(item, slice):
            size = len(range(*item.indices(d)))
            # C order holds while every slice after the first is whole.
            whole = size == d if sliced else item.step in (None, 1) or size <= 1
            contiguous, sliced = contiguous and whole, True
            out.append(size)
        else:
            if not -d <= int(item) < d:  # type: ignore[call-overload]
                msg = f"index {item} is out of bounds for an axis of size {d}"
                raise CannotFollow(msg)
            contiguous = contiguous and not sliced
            if ints_advanced and arrays:
                advanced.append(())
                places.append(len(out))
                out.append(None)
    if not advanced:
        return tuple(d for d in out if d is not None), False, contiguous  # type: ignore[misc]
    lead = broadcast(*advanced)
    adjacent = places == list(range(places[0], places[0] + len(places)))
    basic = [d for d in out if d is not None]
    if adjacent:
        before = [d for d in out[: places[0]] if d is not None]
        after = [d for d in out[places[-1] + 1 :] if d is not None]
        return (*before, *lead, *after), True, True  # type: ignore[arg-type]
    return (*lead, *basic), True, True  # type: ignore[arg-type]


# -- the interpreter, NumPy's machinery, reductions --------------------------
def _calibrate(position: int) -> int:
    """The reference count an operator's operand has when it is a temporary.

    Measured by an operator made as ``_array``'s are (``refs =
    sys.getrefcount(self), sys.getrefcount(other)`` first), for its
    ``self`` (``position`` 0) or its ``other`` (1): an operand named by a
    variable has one reference more. 0 (elision never modelled) where the
    interpreter does not tell them apart.
    """
    seen: list[int] = []

    def operator(self: object, other: object) -> object:
        refs = sys.getrefcount(self), sys.getrefcount(other)
        seen.append(refs[position])
        return self

    probe = type("Probe", (), {"__add__": operator})
    named = probe()
    probe() + probe()
    named + named
    return seen[0] if seen[0] < seen[1] else 0


#: An operator's ``self`` with at most this many references is a temporary.
TEMP_REFS = _calibrate(0)
#: An operator's ``other`` with at most this many references is a temporary.
OTHER_TEMP_REFS = _calibrate(1)

#: Elements in one of NumPy's ufunc buffers (``np.getbufsize()``).
BUFFER_ELEMENTS = 8192
#: Bytes of NumPy's iterator for a buffered, broadcast or reducing operation.
ITERATOR_BYTES = 1024


def buffer_operands(
    trace: Trace,
    shape: Shape,
    name: str,
    operands: tuple[tuple[Shape, str | None], ...],
    values: tuple[object, ...] = (),
    loops: Sequence[str] | None = None,
) -> None:
    """The buffers NumPy's ufunc machinery holds while it computes ``shape``.

    One buffer of ``min(8192, size)`` elements for each array operand (not
    0-d) it broadcasts, casts to its loop's dtype (``loops``, one for each
    operand: `loop_dtypes`; by default ``name``, the result's), or whose
    rows lie apart while its elements along the last axis do not, or that
    runs backwards (``values``, the operands themselves: ``p[:, :-16] +
    p[:, 16:]`` after ``np.pad`` held two, 1.89 times a 100 kB budget while
    they were not counted); each in its loop's dtype (a float32 operand of
    a float64 product: a float64 buffer). Counted in the peak only (freed
    at once).
    """
    elements = min(BUFFER_ELEMENTS, math.prod(shape))
    held = 0
    for i, (s, n) in enumerate(operands):
        loop = name if loops is None else loops[i]
        apart = i < len(values) and rows_apart(values[i])
        if n is not None and s and (s != shape or n != loop or apart):
            held += elements * itemsize(loop)
    if held:
        trace.release(trace.hold(ITERATOR_BYTES + held))


def buffer_together(
    result: ShapeArray, operands: Sequence[ShapeArray], condition: bool = False
) -> None:
    """NumPy's buffers of ``operands`` as one iterator computes ``result`` from them.

    ``where`` and ``clip`` iterate their operands together, as a ufunc
    does: a bound or a branch broadcast to the rows, or in another dtype
    than the result, is buffered in the result's dtype (`buffer_operands`);
    the first operand, where it is a ``condition``, in bool.
    """
    trace = result._trace
    if trace.profile.numpy_internals:
        pairs = tuple((o.shape, o._name) for o in operands)
        loops = [result._name] * len(operands)
        if condition:
            loops[0] = "bool"
        buffer_operands(
            trace, result.shape, result._name, pairs, tuple(operands), loops
        )


def rows_apart(value: object) -> bool:
    """Whether ``value`` is a view with an axis of unit stride and gaps.

    (``p[:, :-16]``, ``p[:, :-16].T``, ``p.T[:10]``: NumPy's ufunc buffers
    such an operand to run longer inner loops; ``x[:, ::2]``, which has no
    axis of unit stride, and ``x.T``, dense, it does not: `_strides`.)
    """
    shape: Shape = getattr(value, "shape", ())
    unit: int = getattr(value, "_unit", 0)
    if len(shape) < 2 or not 1 <= -unit <= len(shape):
        return False
    return math.prod(shape) > shape[unit] > 0  # (more than one run of it)


def hold_in_place(
    trace: Trace, shape: Shape, name: str, common: str, other: tuple[Shape, str | None]
) -> None:
    """What ``x <op>= other`` holds where it computes in ``common``, wider than ``name``.

    torch computes ``y_f32 *= w_f64`` in float64: ``y`` cast whole and a
    float64 result, then cast back (5 times a budget uncounted); NumPy's
    iterator buffers ``y`` in and out, and ``other`` (its shape and dtype)
    where it broadcasts or is cast. In the peak only.
    """
    if common == name or not shape:
        return
    size, wide = math.prod(shape), itemsize(common)
    if trace.profile.casts_whole:
        trace.spike(2 * size * wide)
    elif trace.profile.numpy_internals:
        s, n = other
        buffered = 2 + int(bool(s) and n is not None and (s != shape or n != common))
        trace.spike(ITERATOR_BYTES + buffered * min(BUFFER_ELEMENTS, size) * wide)


def hold_workspace(
    func: str,
    inputs: Sequence[ShapeArray],
    results: Sequence[ShapeArray],
    **options: object,
) -> None:
    """Count the workspace the library's kernel of ``func`` holds beside its results.

    As the profile gives it (`Profile.workspace`: torch's CPU ``abs`` of a
    complex array, JAX's CPU ``searchsorted``), by the standard's name of
    the function (an adapter's table keyed by its library's own names maps
    them: torch's ``repeat`` is the standard's ``tile``), its array
    operands and its ``options``; in the peak only, while the operation
    runs.
    """
    if not results:
        return
    trace = results[0]._trace
    workspace = trace.profile.workspace
    if workspace is not None:
        ins = tuple((a.shape, a._name) for a in inputs)
        outs = tuple((r.shape, r._name) for r in results)
        trace.spike(workspace(func, ins, outs, options))
