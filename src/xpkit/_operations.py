"""Operations: the checks behind `Backend`'s operations, `Backend.svd`, and `At`.

Each `Backend` operation calls the library first and checks its arguments
only when the library raises one of the adapter's "bad argument" exceptions
(or, for libraries that silently convert other libraries' arrays, when an
operand is not one of its own arrays), so the fast path pays nothing. The
functions here are those checks (``explain_*``: called with the native
exception in flight; each raises the facade's own error where it finds the
fault, and returns otherwise, for the caller to re-raise the native one),
`svd` whole, and `At`, what `Backend.at` returns. A fault the checks find
becomes one ValueError/TypeError on every backend; anything else (an OOM,
a library bug) propagates unchanged.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic

import numpy as np
from array_api_compat import array_namespace

from ._adapters._registry import adapter_for_array
from ._args import (
    check_axis,
    check_copy,
    concat_shape_error,
    matmul_shape_error,
    own_dtype,
    raise_if_axis_out_of_range,
    shape_of,
)
from ._dtypes import DTYPE_KINDS, dtype_name
from ._facts import ArrayT

if TYPE_CHECKING:
    from ._backend import Backend
    from ._facts import Facts
    from ._typing import Array, DType, Namespace, Value

__all__ = [
    "At",
    "check_operand",
    "check_operands",
    "check_sortable",
    "concat_args",
    "explain_concat",
    "explain_expand_dims",
    "explain_matmul",
    "explain_sort",
    "svd",
]

#: The dtypes `Backend.svd` takes: the standard's floating dtypes.
_SVD_DTYPES = ("float32", "float64", "complex64", "complex128")

#: The complex dtypes, which the standard's ``sort`` does not take.
_COMPLEX = frozenset(DTYPE_KINDS["complex floating"])

#: Array type -> dtype object -> whether the dtype is complex: what
#: `Backend.sort` checks on every call, learnt once per (type, dtype). Keyed
#: by the array's type first, so that dtype objects of two libraries (which
#: may hash alike and warn when compared) never meet in one table.
_IS_COMPLEX: dict[type, dict[DType, bool]] = {}


def _shape(x: Array) -> tuple[object, ...]:
    """``x``'s shape as a plain tuple (``torch.Size`` prints differently)."""
    return tuple(shape_of(x))


def check_operand(f: Facts[ArrayT], x: Value, param: str) -> None:
    """TypeError unless ``x`` is an array of the bound library.

    Operations take arrays, not host data: arrays of another library
    are refused (as `from_arrays` refuses mixing), and lists or scalars
    too, on every backend alike; so is an array that the library's
    functions would misread (`Adapter.refused_operand`: a NumPy masked
    array, whose mask they would ignore or drop).
    """
    if f.adapter.owns(x):
        _refuse_operand(x, param)
        return
    if _stands_in(f, x):
        return
    adapter = adapter_for_array(x)
    if adapter is not None:
        msg = (
            f"{param} is an array of {adapter.label} but this backend is "
            f"{f.name!r}: libraries do not mix; convert it with "
            "Backend.asarray"
        )
    else:
        msg = (
            f"{param} must be an array of {f.adapter.label}, got "
            f"{type(x).__qualname__}; convert it with Backend.asarray"
        )
    raise TypeError(msg)


def _stands_in(f: Facts[ArrayT], x: Value) -> bool:
    """Whether ``x`` stands in for an array of ``f``'s library and device.

    A shape-only array of a trace of ``fn`` that impersonates them: the
    operation runs on it, so that the trace follows the facade's methods.
    """
    adapter = adapter_for_array(x)
    return adapter is not None and adapter.stands_in_for(x, f.adapter.key, f.device)


def check_operands(f: Facts[ArrayT], arrays: Sequence[Value]) -> None:
    """`check_operand` of each of ``arrays`` (named ``arrays[i]``)."""
    for i, a in enumerate(arrays):
        check_operand(f, a, f"arrays[{i}]")


# -- concatenate -----------------------------------------------------------------
def concat_args(arrays: Value, axis: Value) -> tuple[list[Value], int]:
    """``concatenate``'s arguments, where they are not a non-empty list and an int.

    TypeError: ``arrays`` is not a sequence, or ``axis`` not an int;
    ValueError: ``arrays`` is empty.
    """
    if isinstance(arrays, (str, bytes)) or not isinstance(arrays, Sequence):
        msg = f"arrays must be a sequence of arrays, got {type(arrays).__qualname__}"
        raise TypeError(msg)
    if len(arrays) == 0:
        msg = "arrays must not be empty"
        raise ValueError(msg)
    return list(arrays), check_axis(axis)


def explain_concat(f: Facts[ArrayT], arrays: Sequence[Value], axis: int) -> None:
    """Why the library refused to concatenate ``arrays``, as the facade's error."""
    check_operands(f, arrays)
    raise_if_axis_out_of_range(arrays[0], axis)
    problem = concat_shape_error([_shape(a) for a in arrays], axis)
    if problem is not None:
        raise ValueError(problem) from None


# -- expand_dims, matmul ---------------------------------------------------------
def explain_expand_dims(f: Facts[ArrayT], array: Value, axis: int) -> None:
    """Why the library refused to insert ``axis``, as the facade's error."""
    check_operand(f, array, "array")
    raise_if_axis_out_of_range(array, axis, extra=1)


def explain_matmul(f: Facts[ArrayT], A: Value, B: Value) -> None:
    """Why the library refused ``A @ B``, as the facade's error."""
    check_operand(f, A, "A")
    check_operand(f, B, "B")
    problem = matmul_shape_error(_shape(A), _shape(B))
    if problem is not None:
        raise ValueError(problem) from None


# -- sort ------------------------------------------------------------------------
def check_sortable(f: Facts[ArrayT], array: Value) -> None:
    """TypeError when ``array`` has a complex dtype (the caller checks the operand).

    The standard's ``sort`` takes real dtypes only; a complex array of
    another library is refused as that first. Two dict lookups on
    the hot path, learnt on the first call with each (type, dtype).
    """
    try:
        is_complex = _IS_COMPLEX[type(array)][array.dtype]
    except (KeyError, AttributeError, TypeError):
        is_complex = _learn_complex(f, array)
    if is_complex:
        check_operand(f, array, "array")  # another library's array first
        msg = (
            f"array has dtype {own_dtype(array, 'array')}, but sort takes "
            "real dtypes only (the standard's sort does not order complex "
            "numbers); sort xp.real(array) or xp.abs(array) instead"
        )
        raise TypeError(msg)


def _learn_complex(f: Facts[ArrayT], array: Value) -> bool:
    """Whether ``array`` (an array of this library, else a TypeError) is complex.

    Remembered in `_IS_COMPLEX` for its type and dtype object, where the
    dtype object can be a dict key.
    """
    check_operand(f, array, "array")
    dtype = array.dtype
    try:
        is_complex = dtype_name(dtype) in _COMPLEX
    except TypeError:  # not a dtype of the standard: the library decides
        return False
    with contextlib.suppress(TypeError):  # unhashable: asked again next time
        _IS_COMPLEX.setdefault(type(array), {})[dtype] = is_complex
    return is_complex


def explain_sort(f: Facts[ArrayT], array: Value, axis: int) -> None:
    """Why the library refused to sort ``array``, as the facade's error."""
    check_operand(f, array, "array")
    raise_if_axis_out_of_range(array, axis)


# -- svd -------------------------------------------------------------------------
def svd(
    f: Facts[ArrayT], X: Value, full_matrices: Value
) -> tuple[ArrayT, ArrayT, ArrayT]:
    """`Backend.svd`: its arguments checked, then the namespace's ``linalg.svd``."""
    if not isinstance(full_matrices, bool):
        msg = f"full_matrices must be a bool, got {full_matrices!r}"
        raise TypeError(msg)
    check_operand(f, X, "X")
    shape = _shape(X)
    if len(shape) < 2:
        msg = (
            "X must have at least 2 dimensions (a matrix or a stack of "
            f"matrices), got shape {shape}"
        )
        raise ValueError(msg)
    name = own_dtype(X, "X")
    if name not in _SVD_DTYPES:
        msg = (
            f"X must have a floating dtype ({', '.join(_SVD_DTYPES)}), got "
            f"{name}; convert it with Backend.asarray(X, dtype=...)"
        )
        raise TypeError(msg)
    capabilities = f.adapter.capabilities_now()
    if "linalg" not in capabilities:
        msg = (
            f"Backend.svd needs the linalg extension, which backend "
            f"{f.name!r} lacks (capabilities: "
            f"{', '.join(sorted(capabilities)) or 'none'})"
        )
        raise NotImplementedError(msg)
    u, s, vt = f.xp.linalg.svd(X, full_matrices=full_matrices)
    return u, s, vt


# -- at ---------------------------------------------------------------------------
#: Python's scalar types: update values that every library takes as they are.
_PY_SCALARS = (bool, int, float, complex)


class At(Generic[ArrayT]):
    """Functional updates of ``x[idx]``: what `Backend.at` returns.

    Each method applies one update and returns the updated array: ``set``
    (``x[idx] = y``), ``add`` (``+=``), ``subtract`` (``-=``), ``multiply``
    (``*=``), ``divide`` (``/=``), ``power`` (``**=``), ``min`` and
    ``max`` (``x[idx] = minimum(x[idx], y)``, ``maximum``). They check
    ``y`` and then call array-api-extra's ``at`` (``xpx.at(x, idx)``), with
    its semantics for the two other arguments every method takes:

    - ``copy``: None (the default) may update ``x`` in place where its
      library allows it, so do not use ``x`` afterwards; True never
      touches ``x``; False updates in place or raises ValueError (JAX,
      whose arrays are immutable);
    - ``xp``: the namespace of ``x``; None infers it.

    Parameters
    ----------
    backend : Backend
        The backend whose library ``x`` belongs to.
    x : array
        The array to update.
    idx : index
        What ``x[idx]`` would select; integers in it are checked against
        ``x``'s shape (see `Backend.at`).

    Raises
    ------
    TypeError
        ``x`` is not an array of ``backend``'s library. From the methods:
        ``y`` is an array of another library (a NumPy array given to a
        torch update, say: convert it with `Backend.asarray`) or not a
        number; ``copy`` is not a bool or None. A NumPy scalar or 0-d
        NumPy array ``y`` is taken as the Python number it holds.
    ValueError
        From the methods: a number ``y`` that would change in ``x``'s dtype
        (`_fitted`).
    IndexError
        An integer in ``idx`` is out of range for its axis.
    ImportError
        array-api-extra is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> b = xpkit.Backend("numpy")
    >>> x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
    >>> update = b.at(x, (1, -1))
    >>> update.max(9.0, copy=True)
    array([[1., 2.],
           [3., 9.]])
    >>> update.multiply(np.float32(0.5), copy=True)
    array([[1., 2.],
           [3., 2.]])
    """

    __slots__ = ("_at", "_facts", "_x")

    def __init__(self, backend: Backend[ArrayT], x: ArrayT, idx: Value) -> None:
        facts = backend._facts
        check_operand(facts, x, "x")
        idx = _plain_index(idx)
        _check_index(x, idx)
        idx = _completed(x, idx)
        try:
            from array_api_extra import at
        except ImportError as exc:
            msg = (
                "Backend.at needs array-api-extra, a dependency of xpkit that "
                "is missing here: pip install array-api-extra"
            )
            raise ImportError(msg) from exc
        target: Array = x  # an array of any library, which array-api-extra takes
        self._facts = facts
        self._x = x
        self._at = at(target, idx)

    def _apply(
        self, name: str, y: Value, copy: bool | None, xp: Namespace | None
    ) -> ArrayT:
        check_copy(copy)
        update = getattr(self._at, name)
        value = self._value(y)
        adapter = self._facts.adapter
        if copy is None and adapter.is_read_only(self._x):
            copy = True  # (may update in place: where it cannot, a copy)
        if name in ("min", "max") and not adapter.owns(value):
            # array-api-extra makes a number an array without device=: on
            # the default device, which array-api-strict's device1 refuses.
            ns = self._facts.xp if xp is None else xp
            value = ns.asarray(value, device=adapter.device_of(self._x))
        result: ArrayT = update(value, copy=copy, xp=xp)
        return result

    def _value(self, y: Value) -> Value:
        """``y`` as array-api-extra takes it: this library's array or a number."""
        adapter = self._facts.adapter
        _refuse_operand(y, "y")
        numpy_value = isinstance(y, (np.generic, np.ndarray))
        if numpy_value and y.dtype.kind not in "biufc":
            msg = f"y has non-numeric dtype {y.dtype} (value {y!r:.60})"
            raise TypeError(msg)
        if (numpy_value and y.ndim == 0) or isinstance(y, _PY_SCALARS):
            # A number (a NumPy one as the Python number it holds), as x's kind.
            return _fitted(y.item() if numpy_value else y, self._x)
        if adapter.owns(y) or _stands_in(self._facts, y):
            return y
        other = adapter_for_array(y)
        if other is not None:
            msg = (
                f"y is an array of {other.label}, but x is an array of "
                f"{adapter.label} (backend {self._facts.name!r}): libraries "
                "do not mix; convert y with Backend.asarray"
            )
        else:
            msg = (
                f"y must be an array of {adapter.label} or a number, got "
                f"{type(y).__qualname__}"
            )
        raise TypeError(msg)

    def set(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] = y``, returning the updated array."""
        return self._apply("set", y, copy, xp)

    def add(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] += y``, returning the updated array."""
        return self._apply("add", y, copy, xp)

    def subtract(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] -= y``, returning the updated array."""
        return self._apply("subtract", y, copy, xp)

    def multiply(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] *= y``, returning the updated array."""
        return self._apply("multiply", y, copy, xp)

    def divide(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] /= y``, returning the updated array."""
        return self._apply("divide", y, copy, xp)

    def power(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] **= y``, returning the updated array."""
        return self._apply("power", y, copy, xp)

    def min(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] = minimum(x[idx], y)``, returning the updated array."""
        return self._apply("min", y, copy, xp)

    def max(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] = maximum(x[idx], y)``, returning the updated array."""
        return self._apply("max", y, copy, xp)


def _fitted(value: complex, x: Array) -> complex:
    """The number ``value`` as ``x``'s dtype's kind of Python number, unchanged.

    Every library casts an update's number to ``x``'s dtype, each its own
    way (300 into uint8: JAX 44, NumPy OverflowError; -1: torch 255; NaN
    into an integer: JAX 0; 0.5: 0; 1+2j into a float: 1.0), and some
    refuse a number of another kind (array-api-strict: 2.0 or True into an
    integer array). A ValueError where the value would change: an integer
    dtype takes the integers it holds, a bool dtype 0 and 1, a real dtype
    any real number that stays finite (rounded to its precision). The
    value comes back as an int, a bool, a float or a complex, as the dtype
    is.
    """
    try:
        target = np.dtype(dtype_name(x.dtype))
    except (TypeError, ValueError, AttributeError):
        return value  # (a dtype NumPy has no name for: bfloat16, say)
    if target.kind == "c":
        return complex(value)
    if isinstance(value, complex):
        if value.imag:
            msg = (
                f"y={value!r} has an imaginary part, but x has the real dtype {target}"
            )
            raise ValueError(msg)
        value = value.real
    if target.kind == "f":
        if math.isfinite(value) and abs(value) > float(np.finfo(target).max):
            msg = (
                f"y={value!r} overflows x's dtype {target} (its largest is "
                f"{np.finfo(target).max})"
            )
            raise ValueError(msg)
        return float(value)
    integral = isinstance(value, int) or (math.isfinite(value) and value == int(value))
    if target.kind == "b" and integral and value in (0, 1):
        return bool(value)
    if target.kind in "iu" and integral:
        info = np.iinfo(target)
        if info.min <= value <= info.max:
            return int(value)
    msg = f"y={value!r} does not fit x's dtype {target}: the update would change it"
    raise ValueError(msg)


def _plain_index(idx: Value) -> Value:
    """``idx`` with NumPy integers as Python's (every library takes those).

    A bool or a float is no index: TypeError (NumPy reads a bool as a new
    axis, ndonnx as 0 or 1; Dask took a float); so is a masked array, and
    None: the standard's ``__setitem__`` takes no new axis (Dask raised
    AttributeError, array-api-strict IndexError).
    """
    if type(idx) is tuple:
        return tuple(_plain_part(p, f"idx[{k}]") for k, p in enumerate(idx))
    return _plain_part(idx, "idx")


def _plain_part(part: Value, name: str) -> Value:
    if part is None:
        msg = (
            f"{name}=None adds an axis, which an update's index cannot take "
            "(the standard's __setitem__ takes none): leave it out"
        )
        raise TypeError(msg)
    if isinstance(part, (bool, np.bool_, float, np.floating)):
        msg = (
            f"{name}={part!r} is not an index: give an integer, a slice, "
            "..., an integer array or a boolean mask array"
        )
        raise TypeError(msg)
    if isinstance(part, np.integer):
        return operator.index(part)
    _refuse_operand(part, name)
    return part


def _refuse_operand(value: Value, name: str) -> None:
    """TypeError where ``value`` is an array an operation must not take (a masked one)."""
    adapter = adapter_for_array(value)
    refused = None if adapter is None else adapter.refused_operand(value)
    if refused is not None:
        msg = f"{name} is {refused}"
        raise TypeError(msg)


def _check_index(x: Array, idx: Value) -> None:
    """IndexError where an integer in ``idx`` is out of range for ``x``'s shape.

    The same check on every library, where the shape is static (JAX under
    ``jit`` included); an axis of unknown size (Dask's unknown chunks, a
    symbolic size) and an index of a kind not known here are not checked.
    """
    parts = idx if type(idx) is tuple else (idx,)
    shape = tuple(x.shape)
    widths = [_width(p) for p in parts]
    if sum(p is Ellipsis for p in parts) > 1:
        return  # an index the library must judge
    counted = [w for w in widths if w is not None]
    if len(counted) < len(widths):
        return
    if sum(counted) > len(shape):
        msg = f"idx indexes {sum(counted)} axes, but x has {len(shape)} (shape {shape})"
        raise IndexError(msg)
    ellipsis = next((k for k, p in enumerate(parts) if p is Ellipsis), len(parts))
    axis = 0
    for k, (part, width) in enumerate(zip(parts, counted, strict=True)):
        if k == ellipsis:
            axis = len(shape) - sum(counted[k + 1 :])
            continue
        if width == 1 and not _is_mask(part):
            name = "idx" if type(idx) is not tuple else f"idx[{k}]"
            _check_in_range(part, name, axis, shape[axis])
        axis += width


def _completed(x: Array, idx: Value) -> Value:
    """``idx`` with a trailing ``...`` where it indexes fewer axes than ``x`` has.

    NumPy's rule, which the standard leaves unspecified and array-api-strict
    and ndonnx refuse: ``at(x, 0)`` on a matrix updates its first row on
    every library. An index whose width is not known here is left alone.
    """
    parts = idx if type(idx) is tuple else (idx,)
    if any(p is Ellipsis or _is_mask(p) for p in parts):
        return idx  # (the standard takes a boolean mask only as the whole index)
    widths = [_width(p) for p in parts]
    if None in widths or sum(w for w in widths if w is not None) >= len(x.shape):
        return idx
    return (*parts, Ellipsis)


def _width(part: Value) -> int | None:
    """How many axes of ``x`` an index part uses; None where not known here."""
    if part is None or part is Ellipsis:
        return 0
    if isinstance(part, (int, np.integer, slice)):
        return 1
    adapter = adapter_for_array(part)
    if adapter is None:
        return None  # a list, or an object with __index__: the library judges
    try:
        name = dtype_name(part.dtype)
    except (AttributeError, TypeError):
        return None
    if name == "bool":
        return len(tuple(part.shape))
    return 1 if name is not None and name.startswith(("int", "uint")) else None


def _is_mask(part: Value) -> bool:
    """Whether the index part ``part`` is a boolean mask array (it holds no positions)."""
    if isinstance(part, (int, np.integer, slice)) or adapter_for_array(part) is None:
        return False
    try:
        return dtype_name(part.dtype) == "bool"
    except (AttributeError, TypeError):
        return False


def _check_in_range(part: Value, name: str, axis: int, size: object) -> None:
    """IndexError where the integer (or integer array) ``part`` misses the axis."""
    if isinstance(size, bool) or not isinstance(size, int):
        return  # an unknown (None, NaN) or symbolic size
    if isinstance(part, slice):
        return
    if isinstance(part, (int, np.integer)):
        i = operator.index(part)
        if not -size <= i < size:
            msg = f"{name}={i} is out of range for axis {axis} of x, which has size {size}"
            raise IndexError(msg)
        return
    adapter = adapter_for_array(part)
    if adapter is None or not adapter.values_at_hand(part):
        return  # traced (jax.jit) or lazy (Dask) values: not at hand
    if math.prod(part.shape) == 0:
        return
    # The extremes, computed where the index lives: two numbers travel.
    ixp = array_namespace(part)
    low = int(adapter.to_numpy(ixp.min(part)))
    high = int(adapter.to_numpy(ixp.max(part)))
    for value in (low, high):
        if not -size <= value < size:
            msg = (
                f"{name} holds {value}, out of range for axis {axis} of x, "
                f"which has size {size}"
            )
            raise IndexError(msg)
