"""NumPy's padding, grids, products and selections, on shape-only arrays.

``np.pad`` makes the padded array, copies ``x`` in and fills the borders:
in ``edge``, ``reflect``, ``symmetric`` and ``wrap`` mode the border is
assigned from the padded array itself, which NumPy copies first (its
source overlaps its destination): one border's worth, measured. Modes that
compute statistics or ramps, ``reflect_type="odd"`` and a callable mode are
refused. ``np.kron`` is one broadcast ``multiply`` reshaped (a view);
``np.meshgrid`` copies each broadcast grid; ``np.select`` fills its result
and copies each choice in where its condition holds; ``np.where`` of two
Python scalars makes the result only. ``np.isin`` takes the path NumPy
takes for ``x``'s size and the test values (which ``fn`` holds): a table
of their range for integers, each value compared for a few, else ``x``'s
unique values sorted with theirs; what depends on ``x``'s values (how many
are in the table's range, how many are unique) is taken at its most.
``np.lexsort`` makes its indices, and
copies each key to a buffer with one of indices when a key is strided.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from . import _manipulation as manipulation
from . import _rules as rules
from . import _sets as sets
from ._array import ShapeArray, made, view_of
from ._elementwise import where
from ._numpy_composites import ufunc
from ._operands import operand, trace_of

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = ["FUNCTIONS"]

#: Modes of ``np.pad`` that fill the border from the padded array itself.
_SELF_FILLED = frozenset({"edge", "reflect", "symmetric", "wrap"})


def _pad(
    array: Value, pad_width: Value, mode: Value = "constant", **kw: Value
) -> object:
    """``np.pad``: the padded array, and one border copied (an overlapping source)."""
    trace = trace_of(array)
    x = operand(trace, array)
    if not isinstance(mode, str) or mode not in (_SELF_FILLED | {"constant", "empty"}):
        msg = f"numpy.pad in mode {mode!r} (statistics, ramps or a function)"
        raise trace.refuse(msg)
    if kw.get("reflect_type", "even") != "even" or isinstance(pad_width, dict):
        msg = "numpy.pad with reflect_type='odd' or widths by axis"
        raise trace.refuse(msg)
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (x.ndim, 2))
    shape = tuple(int(b + d + a) for d, (b, a) in zip(x.shape, widths, strict=True))
    padded = made(trace, shape, x._name, (x,))
    if mode in _SELF_FILLED and x.size:  # (NumPy copies a border's overlapping source)
        sides = [
            (*shape[:i], int(max(w)), *shape[i + 1 :]) for i, w in enumerate(widths)
        ]
        border = made(trace, max(sides, key=np.prod), x._name, (padded,))
        del border
    return padded


def _kron(a: Value, b: Value) -> object:
    """``np.kron``: ``a`` and ``b`` on interleaved axes, multiplied, then a reshape."""
    trace = trace_of(a, b)
    x, y = operand(trace, a), operand(trace, b)
    if x.ndim == 0 or y.ndim == 0:
        return ufunc("multiply")(x, y)
    nd = max(x.ndim, y.ndim)
    xs = manipulation.expand_dims(x, axis=tuple(range(nd - x.ndim)))  # (views)
    ys = manipulation.expand_dims(y, axis=tuple(range(nd - y.ndim)))
    xe = manipulation.expand_dims(xs, axis=tuple(range(1, nd * 2, 2)))
    ye = manipulation.expand_dims(ys, axis=tuple(range(0, nd * 2, 2)))
    result = ufunc("multiply")(xe, ye)
    return manipulation.reshape(
        result, tuple(p * q for p, q in zip(xs.shape, ys.shape, strict=True))
    )


def _meshgrid(
    *xi: Value, copy: bool = True, sparse: bool = False, indexing: str = "xy"
) -> object:
    """``np.meshgrid``: each vector as a view on its axis, broadcast, each copied."""
    trace = trace_of(*xi)
    ones = (1,) * len(xi)
    shapes = [(*ones[:i], -1, *ones[i + 1 :]) for i in range(len(xi))]
    if indexing == "xy" and len(xi) > 1:
        shapes[0], shapes[1] = (1, -1, *ones[2:]), (-1, 1, *ones[2:])
    output = [
        manipulation.reshape(operand(trace, v).ravel(), s)
        for v, s in zip(xi, shapes, strict=True)
    ]
    if not sparse:
        output = list(manipulation.broadcast_arrays(*output))
    if copy:
        return tuple(made(trace, v.shape, v._name, (v,)) for v in output)
    return tuple(output)


def _select(condlist: Value, choicelist: Value, default: Value = 0) -> ShapeArray:
    """``np.select``: a result filled with ``default``, each choice copied in."""
    trace = trace_of(*condlist, *choicelist, default)
    conds = [operand(trace, c) for c in condlist]
    choices = [
        c if type(c) in (int, float, complex) else operand(trace, c)
        for c in [*choicelist, default]
    ]
    dtypes = [np.dtype(c._name) if isinstance(c, ShapeArray) else c for c in choices]
    name = str(np.result_type(*dtypes))
    shapes = [c.shape for c in (*conds, *choices) if isinstance(c, ShapeArray)]
    return made(trace, rules.broadcast(*shapes), name, tuple(conds))


def _where(condition: Value, *values: Value) -> ShapeArray:
    """``np.where(c, x, y)``; of two Python scalars, NumPy's dtype of the pair."""
    trace = trace_of(condition, *values)
    if len(values) != 2:
        msg = "where() with one argument (it finds indices)"
        raise trace.refuse(msg)
    scalars = (bool, int, float, complex)
    if all(type(v) in scalars for v in values):
        c = operand(trace, condition)
        return made(trace, c.shape, str(np.result_type(*values)), (c,))
    return where(condition, *values)


def _isin(
    element: Value,
    test_elements: Value,
    assume_unique: bool = False,
    invert: bool = False,
    *,
    kind: Value = None,
) -> ShapeArray:
    """``np.isin`` by the path NumPy takes for ``x``'s shape and the test values.

    Integers (and bools) in a table of the test values' range where it is
    small enough; a few test values compared one by one; else ``x``'s unique
    values sorted with the tests'. Every element in range, every element
    unique: the most each path holds.
    """
    trace = trace_of(element)
    x = operand(trace, element)
    if isinstance(test_elements, ShapeArray):
        msg = "numpy.isin of shape-only test values (it reads them)"
        raise trace.refuse(msg)
    tests = np.asarray(test_elements).ravel()
    listed = not isinstance(test_elements, np.ndarray)  # (NumPy converts a list)
    converted = made(trace, tests.shape, tests.dtype.name, ()) if listed else None
    result = _isin_path(x.ravel(), tests, kind, bool(assume_unique), bool(invert))
    del converted
    return manipulation.reshape(result, x.shape)


def _isin_path(
    flat: ShapeArray, tests: np.ndarray, kind: Value, assume_unique: bool, invert: bool
) -> ShapeArray:
    """``np.isin``'s mask of ``flat``, by NumPy's choice of its path.

    A few test values: ``flat == v`` for each (a NumPy scalar of the tests'
    dtype), by the ufunc's rule: an int or float32 ``flat`` compared with a
    float64 value is read through a float64 buffer.
    """
    trace, n = flat._trace, flat.size
    ints = all(np.dtype(name).kind in "biu" for name in (flat._name, tests.dtype.name))
    if ints and kind in (None, "table"):
        if not tests.size:
            return made(trace, (n,), "bool", (flat,))
        tests = tests.astype(np.uint8) if tests.dtype == bool else tests
        span = int(tests.max()) - int(tests.min())
        if span <= np.iinfo(tests.dtype).max and (
            span <= 6 * (n + tests.size) or kind == "table"
        ):
            return _isin_table(flat, tests)
    if kind == "table":
        msg = "numpy.isin by a table of values NumPy refuses it for"
        raise trace.refuse(msg)
    if len(tests) < 10 * n**0.145:
        mask = made(trace, (n,), "bool", (flat,))
        if tests.size:  # (each comparison a mask, or-ed in, then dropped)
            ufunc("not_equal" if invert else "equal")(flat, tests[0])
        return mask
    return _isin_sorted(flat, tests, assume_unique)


def _isin_table(flat: ShapeArray, tests: np.ndarray) -> ShapeArray:
    """NumPy's table: a mask of the values in its range, their indices looked up."""
    trace = flat._trace
    if flat._name == "bool":
        flat = flat.astype("uint8")
    low, high = int(tests.min()), int(tests.max())
    result = made(trace, flat.shape, "bool", (flat,))
    table = made(trace, (high - low + 1,), "bool", ())
    made(trace, tests.shape, tests.dtype.name, ())  # (tests - low: dropped)
    inside = ufunc("logical_and")(flat <= high, flat >= low)
    selected = flat[inside]  # (every element, at the most)
    indices = made(trace, selected.shape, "int64", (selected,))
    looked_up = made(trace, selected.shape, "bool", (table, indices))
    del looked_up, indices, selected, inside, table
    return result


def _isin_sorted(
    flat: ShapeArray, tests: np.ndarray, assume_unique: bool
) -> ShapeArray:
    """``x``'s unique values and the tests' joined, stably sorted, neighbours compared."""
    trace = flat._trace
    held: list[ShapeArray] = [flat]
    if not assume_unique:  # (x's unique values and its inverse; the tests')
        held = list(sets.unique_inverse(flat))
        tests = np.unique(tests)
        held.append(made(trace, tests.shape, tests.dtype.name, ()))
    size = flat.size + tests.size
    name = str(np.result_type(flat._name, tests.dtype))
    joined = made(trace, (size,), name, (flat,))
    order = made(trace, (size,), "int64", (joined,))
    ordered = made(trace, (size,), name, (joined, order))
    equal = made(trace, (size - 1,), "bool", (ordered,))
    flag = made(trace, (size,), "bool", (equal,))
    placed = made(trace, (size,), "bool", (flag, order))
    if assume_unique:  # (ret[:len(x)]: a view)
        return view_of(placed, flat.shape, contiguous=True)
    result = made(trace, flat.shape, "bool", (placed,))
    del held, joined, order, ordered, equal, flag, placed
    return result


def _lexsort(keys: Value, axis: int = -1) -> ShapeArray:
    """``np.lexsort``: the indices; a strided key: a copy buffer and an index buffer."""
    trace = trace_of(*keys) if isinstance(keys, tuple | list) else trace_of(keys)
    parts = [operand(trace, k) for k in keys]
    shape = rules.broadcast(*(p.shape for p in parts))
    (ax,) = rules.axes_of(axis, len(shape))
    result = made(trace, shape, "int64", tuple(parts))
    if any(not p._contiguous for p in parts):
        n = shape[ax]
        size = max(rules.nbytes((n,), p._name) for p in parts)
        buffers = [made(trace, (size,), "uint8", ()), made(trace, (n,), "int64", ())]
        del buffers
    return result


FUNCTIONS: dict[str, Callable[..., object]] = {
    "pad": _pad,
    "kron": _kron,
    "meshgrid": _meshgrid,
    "select": _select,
    "where": _where,
    "isin": _isin,
    "lexsort": _lexsort,
}
