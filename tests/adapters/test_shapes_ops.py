"""Shape-only arrays tell the truth: reductions, manipulation, indexing, sorting.

As `test_shapes.py`: each case runs on the backend's real arrays and on
shape-only arrays impersonating it (`shape_twins`), and the shapes and
dtypes must be equal wherever the library answers.
"""

from __future__ import annotations

import itertools

import pytest
from shape_twins import assert_twins

#: Dtypes of the reductions' cases.
REDUCED = (
    "bool",
    "int8",
    "int32",
    "uint8",
    "float16",
    "float32",
    "float64",
    "complex64",
)
AXES = (None, 0, -1, (0, 2))
CUBE = (2, 3, 4)


def _reductions(name, dtypes=REDUCED, axes=AXES):
    cases = []
    for a, axis, keepdims in itertools.product(dtypes, axes, (False, True)):
        cases.append(
            (
                f"{name}({a}, axis={axis}, keepdims={keepdims})",
                [(CUBE, a)],
                lambda xp, x, name=name, axis=axis, k=keepdims: getattr(xp, name)(
                    x, axis=axis, keepdims=k
                ),
            )
        )
    return cases


@pytest.mark.parametrize(
    "name", ["sum", "prod", "mean", "max", "min", "std", "var", "all", "any"]
)
def test_reductions(xpkit_backend, xp, name):
    assert_twins(xpkit_backend, xp, _reductions(name))


@pytest.mark.parametrize("name", ["argmax", "argmin", "count_nonzero"])
def test_index_reductions(xpkit_backend, xp, name):
    axes = (None, 0, -1) if name != "count_nonzero" else AXES
    assert_twins(xpkit_backend, xp, _reductions(name, axes=axes))


def test_reductions_with_a_dtype(xpkit_backend, xp):
    cases = []
    for name, a, to in itertools.product(
        ["sum", "prod"],
        ["bool", "int8", "uint8", "int32", "float32", "float16"],
        ["int8", "int64", "uint64", "float32", "float64", "complex128"],
    ):
        cases.append(
            (
                f"{name}({a}, dtype={to})",
                [(CUBE, a)],
                lambda xp, x, name=name, to=to: getattr(xp, name)(
                    x, axis=1, dtype=getattr(xp, to)
                ),
            )
        )
    assert_twins(xpkit_backend, xp, cases)


def test_cumulative_functions(xpkit_backend, xp):
    cases = []
    for name, a in itertools.product(
        ["cumulative_sum", "cumulative_prod"],
        ["bool", "int8", "uint8", "int32", "float32"],
    ):
        f = name
        cases += [
            (f"{f}({a}) 1-d", [((5,), a)], lambda xp, x, f=f: getattr(xp, f)(x)),
            (
                f"{f}({a}, axis=1)",
                [(CUBE, a)],
                lambda xp, x, f=f: getattr(xp, f)(x, axis=1),
            ),
            (
                f"{f}({a}, axis=-1, include_initial)",
                [(CUBE, a)],
                lambda xp, x, f=f: getattr(xp, f)(x, axis=-1, include_initial=True),
            ),
            (
                f"{f}({a}, dtype=float64)",
                [((5,), a)],
                lambda xp, x, f=f: getattr(xp, f)(x, dtype=xp.float64),
            ),
            (
                f"{f}({a}, dtype=int16)",
                [((2, 5), a)],
                lambda xp, x, f=f: getattr(xp, f)(x, axis=0, dtype=xp.int16),
            ),
        ]
    assert_twins(xpkit_backend, xp, cases)


def _products():
    shapes = [
        ((3, 4), (4, 2)),
        ((4,), (4,)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((5, 3, 4), (4, 2)),
    ]
    cases = []
    for (sa, sb), (a, b) in itertools.product(
        shapes, [("float32", "float32"), ("float32", "float64"), ("int32", "float32")]
    ):
        cases.append(
            (
                f"matmul({sa}{a}, {sb}{b})",
                [(sa, a), (sb, b)],
                lambda xp, x, y: xp.matmul(x, y),
            )
        )
    for axes in (0, 1, 2, ([1], [0]), ((0, 1), (1, 0)), ([-1], [0])):
        cases.append(
            (
                f"tensordot(axes={axes})",
                [((3, 4), "float32"), ((4, 3), "float64")],
                lambda xp, x, y, axes=axes: xp.tensordot(x, y, axes=axes),
            )
        )
    for (sa, sb), axis in [
        (((2, 3), (2, 3)), -1),
        (((4, 1, 3), (2, 3)), -1),
        (((3, 2), (3, 2)), 0),
    ]:
        cases.append(
            (
                f"vecdot({sa}, {sb}, axis={axis})",
                [(sa, "float32"), (sb, "float64")],
                lambda xp, x, y, axis=axis: xp.vecdot(x, y, axis=axis),
            )
        )
    return cases


def test_products(xpkit_backend, xp):
    assert_twins(xpkit_backend, xp, _products())


def _one(label, shape, fn, dtypes=("float32", "int8", "bool")):
    return [(f"{label} of {a}", [(shape, a)], fn) for a in dtypes]


MANIPULATION = [
    *_one("reshape(-1)", CUBE, lambda xp, x: xp.reshape(x, (-1,))),
    *_one("reshape((4, -1))", CUBE, lambda xp, x: xp.reshape(x, (4, -1))),
    *_one(
        "reshape of a transpose",
        CUBE,
        lambda xp, x: xp.reshape(xp.permute_dims(x, (2, 0, 1)), (8, 3)),
    ),
    *_one("reshape to 0-d", (1, 1), lambda xp, x: xp.reshape(x, ())),
    *_one("permute_dims", CUBE, lambda xp, x: xp.permute_dims(x, (2, 0, 1))),
    *_one("matrix_transpose", CUBE, lambda xp, x: xp.matrix_transpose(x)),
    *_one(".T", (3, 4), lambda xp, x: x.T),
    *_one(".mT", CUBE, lambda xp, x: x.mT),
    *_one("expand_dims(0)", CUBE, lambda xp, x: xp.expand_dims(x, axis=0)),
    *_one("expand_dims(-1)", CUBE, lambda xp, x: xp.expand_dims(x, axis=-1)),
    *_one("expand_dims((0, 3))", CUBE, lambda xp, x: xp.expand_dims(x, axis=(0, 3))),
    *_one("squeeze(1)", (2, 1, 4), lambda xp, x: xp.squeeze(x, axis=1)),
    *_one("squeeze((0, 2))", (1, 3, 1), lambda xp, x: xp.squeeze(x, axis=(0, 2))),
    *_one("flip", CUBE, lambda xp, x: xp.flip(x)),
    *_one("flip(1)", CUBE, lambda xp, x: xp.flip(x, axis=1)),
    *_one("roll(1)", CUBE, lambda xp, x: xp.roll(x, 1)),
    *_one("roll(2, axis=0)", CUBE, lambda xp, x: xp.roll(x, 2, axis=0)),
    *_one("roll((1, 2), (0, 2))", CUBE, lambda xp, x: xp.roll(x, (1, 2), axis=(0, 2))),
    *_one("broadcast_to", (3, 1), lambda xp, x: xp.broadcast_to(x, (2, 3, 4))),
    *_one("moveaxis(0, -1)", CUBE, lambda xp, x: xp.moveaxis(x, 0, -1)),
    *_one(
        "moveaxis((0, 1), (2, 0))", CUBE, lambda xp, x: xp.moveaxis(x, (0, 1), (2, 0))
    ),
    *_one("tile((2, 1))", CUBE, lambda xp, x: xp.tile(x, (2, 1))),
    *_one("tile((2, 1, 1, 3))", (3, 4), lambda xp, x: xp.tile(x, (2, 1, 1, 3))),
    *_one("repeat(2)", CUBE, lambda xp, x: xp.repeat(x, 2)),
    *_one("repeat(3, axis=1)", CUBE, lambda xp, x: xp.repeat(x, 3, axis=1)),
    *_one("unstack", CUBE, lambda xp, x: xp.unstack(x)),
    *_one("unstack(axis=-1)", CUBE, lambda xp, x: xp.unstack(x, axis=-1)),
    *_one("tril", (3, 4), lambda xp, x: xp.tril(x)),
]


def test_manipulation(xpkit_backend, xp):
    assert_twins(xpkit_backend, xp, MANIPULATION)


def _joined():
    cases = []
    for a, b in [
        ("float32", "float32"),
        ("int8", "int64"),
        ("float32", "float64"),
        ("int32", "float32"),
        ("bool", "int8"),
    ]:
        two = [((2, 3), a), ((2, 3), b)]
        cases += [
            (f"concat({a}, {b})", two, lambda xp, x, y: xp.concat([x, y])),
            (
                f"concat({a}, {b}, axis=-1)",
                two,
                lambda xp, x, y: xp.concat((x, y), axis=-1),
            ),
            (
                f"concat({a}, {b}, axis=None)",
                [((2, 3), a), ((4,), b)],
                lambda xp, x, y: xp.concat([x, y], axis=None),
            ),
            (f"stack({a}, {b})", two, lambda xp, x, y: xp.stack([x, y])),
            (
                f"stack({a}, {b}, axis=-1)",
                two,
                lambda xp, x, y: xp.stack((x, y), axis=-1),
            ),
            (
                f"broadcast_arrays({a}, {b})",
                [((3, 1), a), ((4,), b)],
                lambda xp, x, y: xp.broadcast_arrays(x, y),
            ),
        ]
    return cases


def test_joining(xpkit_backend, xp):
    assert_twins(xpkit_backend, xp, _joined())


def _taken():
    cases = []
    for a, i in [("float32", "int64"), ("int8", "int32"), ("float64", "uint8")]:
        cases += [
            (
                f"take({a}, {i}, axis=1)",
                [(CUBE, a), ((5,), i)],
                lambda xp, x, j: xp.take(x, j, axis=1),
            ),
            (
                f"take({a}, {i}, axis=-1)",
                [(CUBE, a), ((2,), i)],
                lambda xp, x, j: xp.take(x, j, axis=-1),
            ),
            (
                f"take({a}, {i}) 1-d",
                [((6,), a), ((3,), i)],
                lambda xp, x, j: xp.take(x, j),
            ),
            (
                f"take_along_axis({a}, {i})",
                [(CUBE, a), ((2, 3, 2), i)],
                lambda xp, x, j: xp.take_along_axis(x, j, axis=-1),
            ),
            (
                f"take_along_axis({a}, {i}, axis=0)",
                [(CUBE, a), ((5, 3, 4), i)],
                lambda xp, x, j: xp.take_along_axis(x, j, axis=0),
            ),
        ]
    return cases


def test_take(xpkit_backend, xp):
    assert_twins(xpkit_backend, xp, _taken())


#: Basic indices of a (2, 3, 4) array.
BASIC = [
    0,
    -1,
    slice(1, None),
    slice(None, None, 2),
    slice(None, None, -1),
    slice(5, 9),
    (slice(None), None),
    (Ellipsis, 0),
    (None, Ellipsis, None),
    (0, slice(None), 1),
    (1, 2, 3),
    (),
    (Ellipsis,),
    (slice(0, 1), None, slice(None), Ellipsis, -2),
]


def test_basic_indexing(xpkit_backend, xp):
    cases = [
        (f"x[{key!r}] of {a}", [(CUBE, a)], lambda xp, x, key=key: x[key])
        for key, a in itertools.product(BASIC, ["float32", "int16"])
    ]
    assert_twins(xpkit_backend, xp, cases)


#: Integer-array indices of a (2, 3, 4) array: the index arrays' shapes at their places.
ADVANCED = [
    ((5,),),
    (slice(None), (2, 2)),
    (Ellipsis, (3,)),
    ((2,), (2,)),
    ((2, 1), (3,)),
    ((2,), slice(None), (2,)),
    (0, (2,)),
    (0, slice(None), (2,)),
    ((2,), slice(None), 1),
    (None, (3,)),
    (slice(None), (2,), (2,)),
    ((2,), (2,), (2,)),
    ((2, 1), 0, (3,)),
    (1, (2, 2), 0),
]


def _key(xp, items, arrays):
    arrays = iter(arrays)
    return tuple(next(arrays) if isinstance(i, tuple) else i for i in items)


def test_integer_array_indexing(xpkit_backend, xp):
    cases = []
    for items in ADVANCED:
        specs = [
            (CUBE, "float32"),
            *((i, "int64") for i in items if isinstance(i, tuple)),
        ]
        cases.append(
            (
                f"x[{items}]",
                specs,
                lambda xp, x, *idx, items=items: x[_key(xp, items, idx)],
            )
        )
    assert_twins(xpkit_backend, xp, cases)


def test_sorting_and_searching(xpkit_backend, xp):
    cases = []
    for a in ["float32", "int8", "uint8", "bool"]:
        one = [(CUBE, a)]
        cases += [
            (f"sort({a})", one, lambda xp, x: xp.sort(x)),
            (
                f"sort({a}, axis=0, descending)",
                one,
                lambda xp, x: xp.sort(x, axis=0, descending=True),
            ),
            (f"argsort({a})", one, lambda xp, x: xp.argsort(x)),
            (
                f"argsort({a}, axis=1)",
                one,
                lambda xp, x: xp.argsort(x, axis=1, stable=False),
            ),
            (
                f"searchsorted({a})",
                [((5,), a), ((2, 3), a)],
                lambda xp, s, v: xp.searchsorted(s, v),
            ),
            (
                f"searchsorted({a}, right)",
                [((5,), a), ((3,), a)],
                lambda xp, s, v: xp.searchsorted(s, v, side="right"),
            ),
            (f"top_k({a}, 2)", one, lambda xp, x: xp.top_k(x, 2)),
            (f"top_k({a}, 1, axis=0)", one, lambda xp, x: xp.top_k(x, 1, axis=0)),
            (f"diff({a})", one, lambda xp, x: xp.diff(x)),
            (
                f"diff({a}, axis=0, n=2)",
                [((4, 3), a)],
                lambda xp, x: xp.diff(x, axis=0, n=2),
            ),
        ]
    assert_twins(xpkit_backend, xp, cases)
