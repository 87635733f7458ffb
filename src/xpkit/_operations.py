"""Operations: the checks behind `Backend`'s operations, and `Backend.svd`.

Each `Backend` operation calls the library first and checks its arguments
only when the library raises one of the adapter's "bad argument" exceptions
(or, for libraries that silently convert other libraries' arrays, when an
operand is not one of its own arrays), so the fast path pays nothing. The
functions here are those checks (``explain_*``: called with the native
exception in flight; each raises the facade's own error where it finds the
fault, and returns otherwise, for the caller to re-raise the native one),
and `svd` whole (`At`, what `Backend.at` returns, is `_at`'s). A fault the checks find
becomes one ValueError/TypeError on every backend; anything else (an OOM,
a library bug) propagates unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._adapters._registry import adapter_for_array
from ._args import (
    check_axis,
    concat_shape_error,
    matmul_shape_error,
    raise_if_axis_out_of_range,
    shape_of,
)
from ._dtypes import DTYPE_KINDS, dtype_label, dtype_name, own_dtype
from ._shown import shown

if TYPE_CHECKING:
    from ._facts import ArrayT, Facts
    from ._typing import Array, DType, Value

__all__ = [
    "check_operand",
    "check_operands",
    "check_sortable",
    "concat_args",
    "explain_concat",
    "explain_expand_dims",
    "explain_matmul",
    "explain_sort",
    "flatnonzero",
    "refuse_operand",
    "stands_in",
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
        refuse_operand(x, param)
        return
    if stands_in(f, x):
        return
    adapter = adapter_for_array(x)
    if adapter is not None:
        msg = (
            f"{param} is an array of {adapter.label} but this backend is "
            f"{shown(f.name)}: libraries do not mix; convert it with "
            "Backend.asarray"
        )
    else:
        msg = (
            f"{param} must be an array of {f.adapter.label}, got "
            f"{type(x).__qualname__}; convert it with Backend.asarray"
        )
    raise TypeError(msg)


def stands_in(f: Facts[ArrayT], x: Value) -> bool:
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


def explain_concat(
    f: Facts[ArrayT], arrays: Sequence[Value], axis: int, exc: Exception
) -> None:
    """Why the library refused to concatenate ``arrays`` (raising ``exc``), as the facade's error."""
    check_operands(f, arrays)
    raise_if_axis_out_of_range(arrays[0], axis)
    problem = concat_shape_error([_shape(a) for a in arrays], axis)
    if problem is not None:
        raise ValueError(problem) from None
    named = {f"arrays[{i}]": a for i, a in enumerate(arrays)}
    refuse_missing_kernel(f, exc, "concatenation", named)


# -- expand_dims, matmul ---------------------------------------------------------
def explain_expand_dims(f: Facts[ArrayT], array: Value, axis: int) -> None:
    """Why the library refused to insert ``axis``, as the facade's error."""
    check_operand(f, array, "array")
    raise_if_axis_out_of_range(array, axis, extra=1)


def refuse_missing_kernel(
    f: Facts[ArrayT], exc: Exception, what: str, operands: dict[str, Value]
) -> None:
    """A TypeError naming the operands' dtypes where the library has no kernel.

    What the library raised (``exc``) after the facade's own checks found
    no fault (operands and shapes): a ``NotImplementedError`` means no
    kernel for these dtypes (torch's matmul of uint16 or bool, its nonzero
    of uint32). Any other error propagates as it is (a library's own
    TypeError already says a dtype is refused; anything else may not be
    about the arguments at all).
    """
    if not f.adapter.is_missing_kernel(exc):
        return
    named = ", ".join(f"{k} of dtype {own_dtype(v, k)}" for k, v in operands.items())
    msg = f"{f.adapter.label} has no {what} of {named} ({exc})"
    raise TypeError(msg) from exc


def explain_matmul(f: Facts[ArrayT], A: Value, B: Value, exc: Exception) -> None:
    """Why the library refused ``A @ B`` (raising ``exc``), as the facade's error."""
    check_operand(f, A, "A")
    check_operand(f, B, "B")
    problem = matmul_shape_error(_shape(A), _shape(B))
    if problem is not None:
        raise ValueError(problem) from None
    refuse_missing_kernel(f, exc, "matmul", {"A": A, "B": B})


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
    except TypeError:  # not a dtype of the standard: complex by its name
        is_complex = "complex" in dtype_label(dtype)  # (NumPy's clongdouble)
    with contextlib.suppress(TypeError):  # unhashable: asked again next time
        _IS_COMPLEX.setdefault(type(array), {})[dtype] = is_complex
    return is_complex


def explain_sort(f: Facts[ArrayT], array: Value, axis: int, exc: Exception) -> None:
    """Why the library refused to sort ``array`` (raising ``exc``), as the facade's error."""
    check_operand(f, array, "array")
    raise_if_axis_out_of_range(array, axis)
    refuse_missing_kernel(f, exc, "sort", {"array": array})


def flatnonzero(f: Facts[ArrayT], array: Value) -> ArrayT:
    """`Backend.flatnonzero` of a checked operand: its library's ``nonzero``."""
    try:
        found: ArrayT = f.xp.nonzero(f.xp.reshape(array, (-1,)))[0]
    except NotImplementedError as exc:
        refuse_missing_kernel(f, exc, "nonzero", {"array": array})
        raise
    return found


# -- svd -------------------------------------------------------------------------
def svd(
    f: Facts[ArrayT], X: Value, full_matrices: Value
) -> tuple[ArrayT, ArrayT, ArrayT]:
    """`Backend.svd`: its arguments checked, then the namespace's ``linalg.svd``."""
    if not isinstance(full_matrices, bool):
        msg = f"full_matrices must be a bool, got {shown(full_matrices)}"
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
            f"{shown(f.name)} lacks (capabilities: "
            f"{', '.join(sorted(capabilities)) or 'none'})"
        )
        raise NotImplementedError(msg)
    lacks = f.adapter.svd_refusal(X, full_matrices)
    if lacks is not None:
        msg = f"Backend.svd on {f.adapter.label} cannot take {lacks}"
        raise NotImplementedError(msg)
    u, s, vt = f.xp.linalg.svd(X, full_matrices=full_matrices)
    return u, s, vt


def refuse_operand(value: Value, name: str) -> None:
    """TypeError where ``value`` is an array an operation must not take (a masked one)."""
    adapter = adapter_for_array(value)
    refused = None if adapter is None else adapter.refused_operand(value)
    if refused is not None:
        msg = f"{name} is {refused}"
        raise TypeError(msg)
