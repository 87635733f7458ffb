"""Shape-only arrays tell the truth: elementwise functions and operators of two arrays.

Each test runs its cases on the backend's real arrays and on shape-only
arrays impersonating the backend (`shape_twins`): the shapes and dtypes
must be equal wherever the library answers, the library's own promotion
quirks included (the shape-only array stands in for the library, not for
the standard). The other files: `test_shapes_unary.py` (one argument,
Python scalars, ``astype``, ``where``, ``clip``), `test_shapes_creation.py`,
`test_shapes_ops.py` (reductions, manipulation, indexing, sorting),
`test_shapes_linalg.py`, `test_shapes_protocols.py` (NumPy's and torch's
own functions) and `test_shapes_trace.py` (refusals, views and charges, the
namespace, threads).
"""

from __future__ import annotations

import itertools
import operator

import pytest
from shape_twins import PAIRED, SOME_PAIRS, assert_twins

PAIRS = list(itertools.product(PAIRED, PAIRED))
#: Broadcasting shapes of the pairwise cases.
LEFT, RIGHT = (3, 1), (4,)


def _function_cases(name, pairs=PAIRS):
    return [
        (
            f"{name}({a}, {b})",
            [(LEFT, a), (RIGHT, b)],
            lambda xp, x, y, name=name: getattr(xp, name)(x, y),
        )
        for a, b in pairs
    ]


@pytest.mark.parametrize(
    "name",
    ["add", "divide", "equal", "bitwise_and", "pow", "maximum", "atan2"],
)
def test_binary_functions_promote_as_the_library(xpkit_backend, xp, name):
    assert_twins(xpkit_backend, xp, _function_cases(name))


@pytest.mark.parametrize(
    "name",
    [
        "subtract",
        "multiply",
        "floor_divide",
        "remainder",
        "minimum",
        "hypot",
        "logaddexp",
        "copysign",
        "nextafter",
        "not_equal",
        "less",
        "greater_equal",
        "logical_and",
        "logical_or",
        "logical_xor",
        "bitwise_or",
        "bitwise_xor",
        "bitwise_left_shift",
        "bitwise_right_shift",
    ],
)
def test_more_binary_functions(xpkit_backend, xp, name):
    assert_twins(xpkit_backend, xp, _function_cases(name, SOME_PAIRS))


@pytest.mark.parametrize(
    "op",
    [
        operator.add,
        operator.sub,
        operator.mul,
        operator.truediv,
        operator.floordiv,
        operator.mod,
        operator.pow,
        operator.lt,
        operator.eq,
        operator.and_,
        operator.or_,
        operator.xor,
        operator.lshift,
        operator.matmul,
    ],
    ids=lambda op: op.__name__,
)
def test_operators_promote_as_the_library(xpkit_backend, xp, op):
    pairs = PAIRS if op in (operator.add, operator.truediv, operator.lt) else SOME_PAIRS
    if op is operator.matmul:  # (ndonnx takes a second for each)
        pairs = [("float32", "float32"), ("int8", "int64"), ("int32", "float64")]
    shapes = ((3, 4), (4, 2)) if op is operator.matmul else (LEFT, RIGHT)
    cases = [
        (
            f"{a} {op.__name__} {b}",
            [(shapes[0], a), (shapes[1], b)],
            lambda xp, x, y: op(x, y),
        )
        for a, b in pairs
    ]
    assert_twins(xpkit_backend, xp, cases)


def test_zero_d_operands(xpkit_backend, xp):
    """A 0-d array beside a dimensioned one: torch's operators take it as a scalar."""
    pairs = [("int32", "int64"), ("float32", "float64"), ("int8", "float64")]
    pairs += [("float16", "float32"), ("complex64", "float64"), ("uint8", "int8")]
    cases = []
    for (a, b), (sa, sb) in itertools.product(
        pairs, [((3,), ()), ((), (3,)), ((), ())]
    ):
        specs = [(sa, a), (sb, b)]
        cases += [
            (f"{sa}{a} + {sb}{b}", specs, lambda xp, x, y: x + y),
            (f"{sb}{b} * {sa}{a}", specs, lambda xp, x, y: y * x),
            (f"add({sa}{a}, {sb}{b})", specs, lambda xp, x, y: xp.add(x, y)),
        ]
    assert_twins(xpkit_backend, xp, cases)
