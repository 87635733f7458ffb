"""The standard's elementwise functions on shape-only arrays.

Each makes a new array of the broadcast shape, in the dtype the
impersonated library gives (`_dtypes.unary_dtype`, `_dtypes.result_dtype`:
NumPy's own type resolution where the library types by NumPy's tables; a
comparison: bool). Called as functions, NumPy elides no temporary: only its
operators do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._trace import active_trace
from . import _rules as rules
from ._array import ShapeArray, binary, lift, made, unary

if TYPE_CHECKING:
    from ..._typing import Value
    from .._trace import Trace

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
    "where",
]


#: Python scalars (weak operands).
_SCALARS = (bool, int, float, complex)


def _array(x: Value) -> ShapeArray:
    return lift(active_trace(x), x)


def _one(func: str, x: Value) -> ShapeArray:
    """The standard's one-argument function ``func`` of ``x``.

    The kernel's workspace, where the profile has one (`Profile.workspace`),
    counts in the peak beside the result, and so does NumPy's ufunc buffer
    of an operand whose rows lie apart (`rules.buffer_operands`).
    """
    a = _array(x)
    result = unary(a, rules.unary_dtype(a._trace, func, a._name))
    if a._trace.profile.numpy_internals and rules.rows_apart(a):
        operand = ((a.shape, a._name),)
        rules.buffer_operands(a._trace, result.shape, result._name, operand, (a,))
    rules.hold_workspace(func, (a,), (result,))
    return result


def _pair(func: str, a: Value, b: Value) -> ShapeArray:
    """The standard's two-argument function ``func`` of ``a`` and ``b``."""
    if not isinstance(a, ShapeArray) and not isinstance(b, ShapeArray):
        a = _array(a)
    return binary(func, a, b)


def abs(x: Value, /) -> ShapeArray:
    """``|x|``."""
    return _one("abs", x)


def acos(x: Value, /) -> ShapeArray:
    """Elementwise ``acos``."""
    return _one("acos", x)


def acosh(x: Value, /) -> ShapeArray:
    """Elementwise ``acosh``."""
    return _one("acosh", x)


def add(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 + x2``."""
    return _pair("add", x1, x2)


def asin(x: Value, /) -> ShapeArray:
    """Elementwise ``asin``."""
    return _one("asin", x)


def asinh(x: Value, /) -> ShapeArray:
    """Elementwise ``asinh``."""
    return _one("asinh", x)


def atan(x: Value, /) -> ShapeArray:
    """Elementwise ``atan``."""
    return _one("atan", x)


def atan2(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise ``atan2``."""
    return _pair("atan2", x1, x2)


def atanh(x: Value, /) -> ShapeArray:
    """Elementwise ``atanh``."""
    return _one("atanh", x)


def bitwise_and(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 & x2``."""
    return _pair("bitwise_and", x1, x2)


def bitwise_invert(x: Value, /) -> ShapeArray:
    """``~x``."""
    return _one("bitwise_invert", x)


def bitwise_left_shift(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 << x2``."""
    return _pair("bitwise_left_shift", x1, x2)


def bitwise_or(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 | x2``."""
    return _pair("bitwise_or", x1, x2)


def bitwise_right_shift(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 >> x2``."""
    return _pair("bitwise_right_shift", x1, x2)


def bitwise_xor(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 ^ x2``."""
    return _pair("bitwise_xor", x1, x2)


def ceil(x: Value, /) -> ShapeArray:
    """Elementwise ``ceil``."""
    return _one("ceil", x)


def clip(x: Value, /, min: Value = None, max: Value = None) -> ShapeArray:
    """``x`` bounded by ``min`` and ``max`` (broadcast with them), promoted with them.

    NumPy's own ``clip`` (``x.__array_namespace__()`` of a NumPy array)
    promotes with the bounds (a NumPy scalar or an array is its dtype);
    array-api-compat's keeps ``x``'s: the larger is counted. torch casts
    ``x`` whole first where the result is of another dtype.
    """
    a = _array(x)
    trace, name = a._trace, a._name
    bounds = [
        b if b is None or isinstance(b, _SCALARS) else _array(b)
        for b in rules.numpy_operands(trace, "clip", min, max)
    ]
    for bound in bounds:
        if isinstance(bound, ShapeArray):
            zero_d = (False, not bound.shape and bool(a.shape))
            name = rules.zero_d_dtype(trace, "clip", name, bound._name, zero_d)
        elif bound is not None:
            name = rules.scalar_dtype(trace.profile, name, bound)
    arrays = [a, *(b for b in bounds if isinstance(b, ShapeArray))]
    casts = _casts(trace, name, [a])
    shape = rules.broadcast(*(o.shape for o in arrays))
    result = made(trace, shape, name, (*arrays, casts))
    rules.buffer_together(result, arrays)
    return result


def _casts(trace: Trace, name: str, operands: list[ShapeArray]) -> list[ShapeArray]:
    """The whole casts into ``name`` that torch makes of ``operands`` first."""
    if not trace.profile.casts_whole:
        return []
    return [
        made(trace, o.shape, name, (o,))
        for o in operands
        if o.shape and o._name != name
    ]


def conj(x: Value, /) -> ShapeArray:
    """The complex conjugate."""
    return _one("conj", x)


def copysign(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise ``copysign``."""
    return _pair("copysign", x1, x2)


def cos(x: Value, /) -> ShapeArray:
    """Elementwise ``cos``."""
    return _one("cos", x)


def cosh(x: Value, /) -> ShapeArray:
    """Elementwise ``cosh``."""
    return _one("cosh", x)


def divide(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 / x2``."""
    return _pair("divide", x1, x2)


def equal(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 == x2``."""
    return _pair("equal", x1, x2)


def exp(x: Value, /) -> ShapeArray:
    """Elementwise ``exp``."""
    return _one("exp", x)


def expm1(x: Value, /) -> ShapeArray:
    """Elementwise ``expm1``."""
    return _one("expm1", x)


def floor(x: Value, /) -> ShapeArray:
    """Elementwise ``floor``."""
    return _one("floor", x)


def floor_divide(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 // x2``."""
    return _pair("floor_divide", x1, x2)


def greater(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 > x2``."""
    return _pair("greater", x1, x2)


def greater_equal(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 >= x2``."""
    return _pair("greater_equal", x1, x2)


def hypot(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise ``hypot``."""
    return _pair("hypot", x1, x2)


def imag(x: Value, /) -> ShapeArray:
    """The imaginary part."""
    return _one("imag", x)


def isfinite(x: Value, /) -> ShapeArray:
    """Whether each element is finite."""
    return _one("isfinite", x)


def isinf(x: Value, /) -> ShapeArray:
    """Whether each element is infinite."""
    return _one("isinf", x)


def isnan(x: Value, /) -> ShapeArray:
    """Whether each element is NaN."""
    return _one("isnan", x)


def less(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 < x2``."""
    return _pair("less", x1, x2)


def less_equal(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 <= x2``."""
    return _pair("less_equal", x1, x2)


def log(x: Value, /) -> ShapeArray:
    """Elementwise ``log``."""
    return _one("log", x)


def log1p(x: Value, /) -> ShapeArray:
    """Elementwise ``log1p``."""
    return _one("log1p", x)


def log2(x: Value, /) -> ShapeArray:
    """Elementwise ``log2``."""
    return _one("log2", x)


def log10(x: Value, /) -> ShapeArray:
    """Elementwise ``log10``."""
    return _one("log10", x)


def logaddexp(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise ``logaddexp``."""
    return _pair("logaddexp", x1, x2)


def logical_and(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise logical and."""
    return _pair("logical_and", x1, x2)


def logical_not(x: Value, /) -> ShapeArray:
    """Elementwise logical not."""
    return _one("logical_not", x)


def logical_or(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise logical or."""
    return _pair("logical_or", x1, x2)


def logical_xor(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise logical xor."""
    return _pair("logical_xor", x1, x2)


def maximum(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise maximum."""
    return _pair("maximum", x1, x2)


def minimum(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise minimum."""
    return _pair("minimum", x1, x2)


def multiply(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 * x2``."""
    return _pair("multiply", x1, x2)


def negative(x: Value, /) -> ShapeArray:
    """``-x``."""
    return _one("negative", x)


def nextafter(x1: Value, x2: Value, /) -> ShapeArray:
    """Elementwise ``nextafter``."""
    return _pair("nextafter", x1, x2)


def not_equal(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 != x2``."""
    return _pair("not_equal", x1, x2)


def positive(x: Value, /) -> ShapeArray:
    """``+x``."""
    return _one("positive", x)


def pow(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 ** x2``."""
    return _pair("pow", x1, x2)


def real(x: Value, /) -> ShapeArray:
    """The real part."""
    return _one("real", x)


def reciprocal(x: Value, /) -> ShapeArray:
    """``1 / x``."""
    return _one("reciprocal", x)


def remainder(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 % x2``."""
    return _pair("remainder", x1, x2)


def round(x: Value, /) -> ShapeArray:
    """Elementwise rounded to the nearest integer value."""
    return _one("round", x)


def sign(x: Value, /) -> ShapeArray:
    """Elementwise sign."""
    return _one("sign", x)


def signbit(x: Value, /) -> ShapeArray:
    """Whether each element's sign bit is set."""
    return _one("signbit", x)


def sin(x: Value, /) -> ShapeArray:
    """Elementwise ``sin``."""
    return _one("sin", x)


def sinh(x: Value, /) -> ShapeArray:
    """Elementwise ``sinh``."""
    return _one("sinh", x)


def sqrt(x: Value, /) -> ShapeArray:
    """Elementwise square root."""
    return _one("sqrt", x)


def square(x: Value, /) -> ShapeArray:
    """``x * x``."""
    return _one("square", x)


def subtract(x1: Value, x2: Value, /) -> ShapeArray:
    """``x1 - x2``."""
    return _pair("subtract", x1, x2)


def tan(x: Value, /) -> ShapeArray:
    """Elementwise ``tan``."""
    return _one("tan", x)


def tanh(x: Value, /) -> ShapeArray:
    """Elementwise ``tanh``."""
    return _one("tanh", x)


def trunc(x: Value, /) -> ShapeArray:
    """Elementwise truncated."""
    return _one("trunc", x)


def where(condition: Value, x1: Value, x2: Value, /) -> ShapeArray:
    """``x1`` where ``condition``, else ``x2`` (broadcast together).

    A NumPy scalar is taken as the library takes it (`rules.numpy_operands`);
    torch casts an operand of another dtype whole first.
    """
    trace = active_trace(condition, x1, x2)
    c = lift(trace, condition)
    x1, x2 = rules.numpy_operands(trace, "where", x1, x2)
    operands = [lift(trace, v) for v in (x1, x2) if not isinstance(v, _SCALARS)]
    if not operands:
        msg = "where() of two scalars"
        raise trace.refuse(msg)
    name = operands[0]._name
    if len(operands) == 2:
        first, second = operands
        zero_d = (not first.shape, not second.shape)
        name = rules.zero_d_dtype(trace, "where", name, second._name, zero_d)
    else:
        scalar = x2 if isinstance(x1, ShapeArray) or hasattr(x1, "shape") else x1
        name = rules.scalar_dtype(trace.profile, name, scalar)
    shape = rules.broadcast(c.shape, *(o.shape for o in operands))
    result = made(trace, shape, name, (c, *operands, _casts(trace, name, operands)))
    rules.buffer_together(result, [c, *operands], condition=True)
    return result
