"""Dtypes of shape-only arrays: sizes, kinds, promotion and the names of dtypes.

Arrays carry the standard's dtype names; they become the library's own
dtype objects only where ``fn`` can see them (``x.dtype``). Promotion
follows the standard's tables within a kind; between kinds, where the
standard says nothing, it follows the library (`Profile.mixed_kinds`).
Python scalars are weak: they take the array's dtype, or the library's
default of their kind when the kinds differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .._trace import CannotFollow, Profile

if TYPE_CHECKING:
    from .._trace import Trace

__all__ = [
    "BOOL",
    "BOOLEAN",
    "COMMUTATIVE",
    "COMPARE",
    "COMPLEX",
    "FLOAT",
    "FLOATING",
    "INT",
    "NUMERIC",
    "OPERATORS",
    "REAL",
    "REDUCED_DTYPES",
    "UINT",
    "dtype_name_of",
    "float_of",
    "itemsize",
    "kind",
    "loop_dtypes",
    "nbytes",
    "numpy_operands",
    "numpy_scalar",
    "numpy_table",
    "promote",
    "result_dtype",
    "scalar_dtype",
    "sum_dtype",
    "unary_dtype",
    "weak_dtype",
    "zero_d_dtype",
]

BOOL = "b"
INT = "i"
UINT = "u"
FLOAT = "f"
COMPLEX = "c"

_SIZES = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "complex64": 8,
    "complex128": 16,
}


#: The name of each NumPy dtype, one string each: a trace's arrays share
#: them (a dtype's ``name`` is a new string each time; a loop of small
#: arrays would hold thousands).
_NAMES = {np.dtype(name): name for name in _SIZES if name != "bfloat16"}


def itemsize(name: str) -> int:
    """Bytes of one element of dtype ``name``."""
    return _SIZES[name]


def nbytes(shape: tuple[int, ...], name: str) -> int:
    """Bytes of the data of an array of ``shape`` and dtype ``name``."""
    return math.prod(shape) * _SIZES[name]


def kind(name: str) -> str:
    """``BOOL``, ``INT``, ``UINT``, ``FLOAT`` or ``COMPLEX``."""
    if name == "bool":
        return BOOL
    if name.startswith("uint"):
        return UINT
    if name.startswith("int"):
        return INT
    if name.startswith("complex"):
        return COMPLEX
    return FLOAT


_RANK = {BOOL: 0, INT: 1, UINT: 1, FLOAT: 2, COMPLEX: 3}

#: The standard's function of each operator.
OPERATORS = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "divide",
    "//": "floor_divide",
    "%": "remainder",
    "**": "pow",
    "&": "bitwise_and",
    "|": "bitwise_or",
    "^": "bitwise_xor",
    "<<": "bitwise_left_shift",
    ">>": "bitwise_right_shift",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
    "==": "equal",
    "!=": "not_equal",
}
#: Operators whose result is bool.
COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})
#: Operators NumPy may elide into either operand.
COMMUTATIVE = frozenset({"+", "*", "&", "|", "^"})
#: Functions whose result is bool.
BOOLEAN = frozenset(
    {*(OPERATORS[op] for op in COMPARE), "isfinite", "isinf", "isnan", "signbit"}
    | {"logical_and", "logical_not", "logical_or", "logical_xor"}
)
#: Functions whose result is floating: an integer operand becomes a float.
FLOATING = frozenset(
    {"divide", "atan2", "hypot", "logaddexp", "copysign", "nextafter", "reciprocal"}
    | {"acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp"}
    | {"expm1", "log", "log1p", "log2", "log10", "sin", "sinh", "sqrt", "tan"}
    | {"tanh"}
)
#: Arithmetic without a bool form: a bool operand becomes an integer.
NUMERIC = frozenset(
    {"floor_divide", "remainder", "pow", "square"}
    | {"bitwise_left_shift", "bitwise_right_shift"}
)
#: NumPy's ufunc of each of the standard's functions named otherwise.
_UFUNCS = {
    "divide": "true_divide",
    "pow": "power",
    "atan2": "arctan2",
    "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
    "bitwise_invert": "invert",
    "abs": "absolute",
    "conj": "conjugate",
    **{f"a{f}": f"arc{f}" for f in ("cos", "cosh", "sin", "sinh", "tan", "tanh")},
}
#: The real dtype of a complex one.
REAL = {"complex64": "float32", "complex128": "float64"}


def numpy_table(profile: Profile) -> bool:
    """Whether the library types its elementwise functions by NumPy's own tables.

    NumPy and the libraries that compute with it (Dask; array-api-strict,
    which refuses what the standard leaves open): ``sqrt(int8)`` is float16,
    ``bool // bool`` int8 (`DtypeRules.numpy_tables`).
    """
    return profile.dtype_rules.numpy_tables


def promote(profile: Profile, a: str, b: str) -> str:
    """The dtype of an operation on arrays of dtypes ``a`` and ``b``."""
    if a == b:
        return a
    ka, kb = kind(a), kind(b)
    if profile.mixed_kinds == "float" and _RANK[ka] != _RANK[kb]:
        # torch and JAX: the operand of the higher kind wins, at its width
        # (a complex one as wide as the float needs).
        high, low = (a, b) if _RANK[ka] > _RANK[kb] else (b, a)
        if kind(high) == COMPLEX and kind(low) == FLOAT:
            return high if itemsize(high) >= 2 * itemsize(low) else "complex128"
        return high
    if {a, b} == {"float16", "bfloat16"}:  # torch, JAX
        return "float32"
    if "bfloat16" in (a, b):  # (NumPy has none: the other one's kind decides)
        other = b if a == "bfloat16" else a
        return "bfloat16" if _RANK[kind(other)] < _RANK[FLOAT] else other
    small = b if a == "float16" else a if b == "float16" else None
    eight_bits = profile.dtype_rules.int8_with_float16
    if eight_bits is not None and small in ("int8", "uint8"):
        return eight_bits  # (ndonnx: float32)
    return str(np.promote_types(a, b).name)


def scalar_dtype(profile: Profile, array: str, scalar: object) -> str:
    """The dtype of an operation between an array of ``array`` and a Python scalar."""
    k = kind(array)
    if isinstance(scalar, bool):
        return array
    if isinstance(scalar, int):
        return profile.default_int if k == BOOL else array
    if isinstance(scalar, float):
        return profile.default_float if _RANK[k] < _RANK[FLOAT] else array
    if isinstance(scalar, complex):
        if k == COMPLEX:
            return array
        if k == FLOAT:
            return "complex64" if itemsize(array) <= 4 else "complex128"
        return profile.default_complex
    msg = f"an operand of type {type(scalar).__name__} has no dtype rule"
    raise CannotFollow(msg)


def float_of(profile: Profile, name: str) -> str:
    """The dtype of a floating function (``sqrt``, ``mean``) of dtype ``name``.

    An integer or bool becomes the library's default float; on JAX a float
    as wide as the integer, at least float32 (`DtypeRules.float_as_wide_as_int`).
    """
    if _RANK[kind(name)] >= _RANK[FLOAT]:
        return name
    if profile.dtype_rules.float_as_wide_as_int:
        wide = itemsize(name) == 8 and "float64" in profile.dtypes
        return "float64" if wide else "float32"
    return profile.default_float


def _integer_of_bool(profile: Profile) -> str:
    """What a bool operand of `NUMERIC` arithmetic becomes (JAX: int32)."""
    made = profile.dtype_rules.bool_arithmetic
    return profile.default_int if made in (None, "bool") else made


def sum_dtype(profile: Profile, name: str) -> str:
    """The dtype of ``sum`` / ``prod`` of dtype ``name`` (integers widen)."""
    k = kind(name)
    if k in (BOOL, INT):
        return profile.default_int
    if k == UINT and "uint64" in profile.dtypes and profile.dtype_rules.uint_sum_widens:
        return "uint64"
    if k == UINT:
        return profile.default_int
    return name


def numpy_scalar(trace: Trace, scalar: np.generic) -> object:
    """A NumPy scalar operand as the library takes it (`DtypeRules.numpy_scalars`).

    A 0-d NumPy array of its dtype, or a Python number.
    """
    taken = trace.profile.dtype_rules.numpy_scalars
    if taken == "array":
        return np.asarray(scalar)
    if taken != "python":
        msg = f"a NumPy scalar operand ({type(scalar).__name__}) on {trace.profile.library}"
        raise trace.refuse(msg)
    if isinstance(scalar, float | complex):
        return scalar.item()  # (np.float64, np.complex128: Python numbers)
    if isinstance(scalar, np.integer):
        if not -(2**63) <= int(scalar) < 2**63:  # (torch leaves it to NumPy)
            msg = f"a NumPy integer operand beyond int64 ({type(scalar).__name__})"
            raise trace.refuse(msg)
        return int(scalar)
    if not isinstance(scalar, np.number | np.bool_):
        msg = f"a NumPy scalar operand of no number ({type(scalar).__name__})"
        raise trace.refuse(msg)
    return float(np.real(scalar))  # (a bool, float32, complex64: as torch)


def numpy_operands(
    trace: Trace, op: str, a: object, b: object
) -> tuple[object, object]:
    """``a`` and ``b`` of ``a <op> b``, a NumPy scalar as the library takes it (`numpy_scalar`).

    JAX raises a base to a NumPy integer as to a Python int
    (`DtypeRules.int_power_keeps_base`).
    """
    if isinstance(a, np.generic):
        a = numpy_scalar(trace, a)
    keeps = trace.profile.dtype_rules.int_power_keeps_base
    if keeps and isinstance(b, np.integer) and op in ("**", "pow"):
        return a, int(b)
    if isinstance(b, np.generic):
        b = numpy_scalar(trace, b)
    return a, b


def weak_dtype(operand: object) -> object:
    """What NumPy's type resolution takes for an operand: a dtype, or a weak scalar type.

    ``operand``: a dtype name, or a Python scalar's type (a bool is NumPy's
    bool: it promotes as one). A NumPy scalar's type (``np.float64`` is a
    Python float too) is its dtype: NumPy promotes it as an array of it.
    """
    if isinstance(operand, str) or operand is bool:
        return np.dtype(operand if operand is not bool else "bool")
    if isinstance(operand, type) and issubclass(operand, np.generic):
        return np.dtype(operand)
    return operand


def _ufunc_dtype(trace: Trace, func: str, operands: tuple[object, ...]) -> str:
    """NumPy's own type resolution of ``func`` (operands: dtype names or Python types)."""
    ufunc = getattr(np, _UFUNCS.get(func, func))
    dtypes = tuple(weak_dtype(o) for o in operands)
    try:
        resolved = ufunc.resolve_dtypes((*dtypes, None))
    except (TypeError, ValueError) as exc:
        msg = f"{func} of {operands}: {exc}"
        raise trace.refuse(msg) from None
    dtype = resolved[-1]
    return _NAMES.get(dtype) or str(dtype.name)


def loop_dtypes(
    func: str, a: str | None, b: str | None, av: object, bv: object
) -> tuple[str, str] | None:
    """The dtypes NumPy's loop of ``func(a, b)`` reads its operands in.

    An operand of another dtype is cast into its loop's dtype in the ufunc's
    buffer: a comparison of float32 with float64 reads both as float64, a
    product of int32 and float32 as float64. ``a``/``b`` dtype names, None
    for the scalars ``av``/``bv``; None where NumPy has no such ufunc.
    """
    name = OPERATORS.get(func, func)
    ufunc = getattr(np, _UFUNCS.get(name, name), np)
    if getattr(ufunc, "nin", None) != 2 or "bfloat16" in (a, b):  # (not a ufunc of two)
        return None
    operands = (weak_dtype(a or type(av)), weak_dtype(b or type(bv)))
    try:
        resolved = ufunc.resolve_dtypes((*operands, None))
    except (TypeError, ValueError):
        return None
    first, second = (_NAMES.get(d) or str(d.name) for d in resolved[:2])
    return first, second


def unary_dtype(trace: Trace, func: str, name: str) -> str:
    """The dtype of the standard's one-argument function ``func`` of dtype ``name``."""
    profile = trace.profile
    if func in BOOLEAN:
        return "bool"
    if func in ("real", "imag"):
        return REAL.get(name, name)
    keeps = profile.dtype_rules.keeps_dtype
    if numpy_table(profile) and name != "bfloat16":
        if func in keeps:
            return name  # (Dask's round and positive: a bool stays one)
        if func == "round":  # NumPy rounds a bool by rint
            return "float16" if name == "bool" else name
        return _ufunc_dtype(trace, func, (name,))
    if func == "abs":
        return REAL.get(name, name)
    if func in NUMERIC and name == "bool":
        return _integer_of_bool(profile)
    if func in FLOATING and func not in keeps:
        return float_of(profile, name)  # (ndonnx's sqrt keeps an integer's dtype)
    return name


def zero_d_dtype(
    trace: Trace, op: str, a: str, b: str, zero_d: tuple[bool, bool]
) -> str:
    """``a`` and ``b`` promoted; on torch a 0-d one beside a dimensioned one is a scalar.

    So for torch's operators and its own functions (``torch.maximum``,
    ``torch.where``: `Trace.native`), unless the 0-d operand is of a higher
    kind, and for array-api-compat's functions where it leaves torch's rule
    be (float16 and bfloat16 are not on its list).
    """
    name = promote(trace.profile, a, b)
    if trace.profile.dtype_rules.zero_d_as_scalar and zero_d[0] != zero_d[1]:
        return _zero_d_scalar(op, a, b, name, zero_d, trace.native)
    return name


def _zero_d_scalar(
    op: str, a: str, b: str, name: str, zero_d: tuple[bool, bool], native: bool
) -> str:
    """A 0-d operand beside a dimensioned one on torch: a scalar, unless of a higher kind.

    Of a higher kind it decides the kind, at its own width beside integers
    and at the floats' beside floats (float32 times a complex128 0-d tensor
    is complex64; float16's complex32 is not counted: complex64 stands in).
    """
    if op not in OPERATORS and not native and not {a, b} & {"float16", "bfloat16"}:
        return name
    dim, scalar = (b, a) if zero_d[0] else (a, b)
    if _RANK[kind(scalar)] <= _RANK[kind(dim)]:
        return dim
    if kind(dim) == FLOAT and kind(scalar) == COMPLEX:
        return "complex128" if dim == "float64" else "complex64"
    return name


def result_dtype(
    trace: Trace,
    op: str,
    a: str | None,
    b: str | None,
    av: object,
    bv: object,
    zero_d: tuple[bool, bool] = (False, False),
) -> str:
    """The dtype of ``a <op> b``: ``a``/``b`` dtype names, None for the scalars ``av``/``bv``.

    ``op`` is an operator (`OPERATORS`) or the standard's function.
    ``zero_d``: which operand is a 0-d array (torch's operators take a 0-d
    operand of the other's kind as a scalar).
    """
    profile = trace.profile
    rules = profile.dtype_rules
    func = OPERATORS.get(op, op)
    if func in BOOLEAN:
        return "bool"
    if a is None and b is None:
        msg = "an operation of two scalars"
        raise trace.refuse(msg)
    if numpy_table(profile) and "bfloat16" not in (a, b):
        return _ufunc_dtype(trace, func, (a or type(av), b or type(bv)))
    if a is None:
        name = scalar_dtype(profile, b, av)  # type: ignore[arg-type]
    elif b is None:
        name = scalar_dtype(profile, a, bv)
    else:
        name = zero_d_dtype(trace, op, a, b, zero_d)
    if func == "pow" and rules.int_power_keeps_base and type(bv) is int and a:
        name = a  # (JAX raises to a Python int power in the base's dtype)
    if func in NUMERIC and name == "bool" and rules.bool_arithmetic != "bool":
        return _integer_of_bool(profile)  # (torch keeps a bool, or raises)
    if func == "divide" and rules.int_dividend_float and a and kind(a) in "iu":
        return profile.default_float  # ndonnx: an integer dividend becomes float64
    return float_of(profile, name) if func in FLOATING else name


#: A reduction's rule -> its dtype, of the profile and the input's dtype.
REDUCED_DTYPES: dict[str, Callable[[Profile, str], str]] = {
    "sum": sum_dtype,
    "mean": float_of,
    "spread": lambda profile, name: REAL.get(name, float_of(profile, name)),
    "max": lambda profile, name: name,
    "any": lambda profile, name: "bool",
    "arg": lambda profile, name: profile.default_int,
}


def dtype_name_of(trace: Trace, dtype: object) -> str | None:
    """The standard's name of any library's dtype (None stays None)."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype in trace.profile.dtypes:
        return dtype
    for name, obj in trace.profile.dtypes.items():
        if dtype is obj:
            return name
    try:
        return str(np.dtype(dtype).name)  # type: ignore[call-overload]
    except TypeError:
        text = str(dtype).rpartition(".")[2]
        if text in trace.profile.dtypes:
            return text
        msg = f"dtype {dtype!r} has no standard name"
        raise trace.refuse(msg) from None
