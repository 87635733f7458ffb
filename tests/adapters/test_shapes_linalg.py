"""Shape-only arrays tell the truth: the linalg extension.

As `test_shapes.py`: each case runs on the backend's real arrays and on
shape-only arrays impersonating it (`shape_twins`), and the shapes and
dtypes (of every output of a decomposition) must be equal wherever the
library answers. The products of the main namespace are in
`test_shapes_ops.py`.
"""

from __future__ import annotations

import itertools

import pytest
from shape_twins import assert_twins


def _linalg(name, shapes, dtypes=("float32", "float64", "complex64"), **kw):
    return [
        (
            f"linalg.{name}({s}{a}, {kw})",
            [(s, a)],
            lambda xp, x, name=name, kw=kw: getattr(xp.linalg, name)(x, **kw),
        )
        for s, a in itertools.product(shapes, dtypes)
    ]


SQUARE = [(3, 3), (2, 4, 4)]
RECTANGLES = [(3, 3), (4, 2), (2, 3, 5)]
LINALG = [
    *_linalg("inv", SQUARE),
    *_linalg("det", SQUARE),
    *_linalg("slogdet", SQUARE),
    *_linalg("cholesky", SQUARE),
    *_linalg("cholesky", SQUARE, upper=True),
    *_linalg("eigh", SQUARE),
    *_linalg("eigvalsh", SQUARE),
    *_linalg("qr", RECTANGLES),
    *_linalg("qr", RECTANGLES, mode="complete"),
    *_linalg("svd", RECTANGLES),
    *_linalg("svd", RECTANGLES, full_matrices=False),
    *_linalg("svdvals", RECTANGLES),
    *_linalg("pinv", RECTANGLES),
    *_linalg("matrix_rank", RECTANGLES),
    *_linalg("matrix_norm", RECTANGLES),
    *_linalg("matrix_norm", RECTANGLES, keepdims=True),
    *_linalg("matrix_norm", RECTANGLES, ord=1),
    *_linalg("vector_norm", RECTANGLES),
    *_linalg("vector_norm", RECTANGLES, axis=-1),
    *_linalg("vector_norm", RECTANGLES, axis=0, keepdims=True),
    *_linalg("vector_norm", RECTANGLES, ord=1),
    *_linalg("diagonal", RECTANGLES),
    *_linalg("diagonal", RECTANGLES, offset=1),
    *_linalg("diagonal", RECTANGLES, offset=-1),
    *_linalg("trace", RECTANGLES),
    *_linalg("trace", RECTANGLES, offset=1),
    *_linalg("matrix_transpose", RECTANGLES),
    *_linalg("inv", [(3, 3)], dtypes=("int32",)),
    *_linalg("det", [(3, 3)], dtypes=("int32",)),
]


def _linalg_two(name, pairs, dtypes=(("float32", "float32"), ("float32", "float64"))):
    return [
        (
            f"linalg.{name}({sa}{a}, {sb}{b})",
            [(sa, a), (sb, b)],
            lambda xp, x, y, name=name: getattr(xp.linalg, name)(x, y),
        )
        for (sa, sb), (a, b) in itertools.product(pairs, dtypes)
    ]


LINALG += [
    *_linalg_two("solve", [((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 1)), ((4, 4), (4, 4))]),
    *_linalg_two("outer", [((3,), (4,))]),
    *_linalg_two("cross", [((3,), (3,)), ((4, 3), (3,)), ((2, 1, 3), (4, 3))]),
    *_linalg_two("matmul", [((3, 4), (4, 2)), ((4,), (4,))]),
    *_linalg_two("vecdot", [((2, 3), (2, 3))]),
    *_linalg_two("tensordot", [((3, 4), (3, 4))]),
    (
        "linalg.matrix_power(3)",
        [((3, 3), "float32")],
        lambda xp, x: xp.linalg.matrix_power(x, 3),
    ),
    (
        "linalg.matrix_power(0) of (2, 3, 3)",
        [((2, 3, 3), "float64")],
        lambda xp, x: xp.linalg.matrix_power(x, 0),
    ),
]


def test_linalg(xpkit_backend, xp):
    if not hasattr(xp, "linalg"):
        pytest.skip(f"{xpkit_backend.name} has no linalg extension")
    assert_twins(xpkit_backend, xp, LINALG)
