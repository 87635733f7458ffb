"""Shape-only arrays tell the truth: creation functions.

As `test_shapes.py`: each case runs on the backend (on the device of a
reference array) and on shape-only arrays impersonating it (`shape_twins`).
"""

from __future__ import annotations

import itertools

from shape_twins import PAIRED, assert_twins


def _create(label, fn):
    """A creation case: ``fn(xp, device)``, on the device of a reference array.

    (None where the reference has no device: JAX traces the case.)
    """
    return (
        label,
        [((1,), "bool")],
        lambda xp, ref: fn(xp, getattr(ref, "device", None)),
    )


CREATION = [
    _create("zeros((2, 3))", lambda xp, d: xp.zeros((2, 3), device=d)),
    _create("zeros(4, int8)", lambda xp, d: xp.zeros(4, dtype=xp.int8, device=d)),
    _create("ones((2,), bool)", lambda xp, d: xp.ones((2,), dtype=xp.bool, device=d)),
    _create("ones(())", lambda xp, d: xp.ones((), device=d)),
    _create(
        "empty((0, 3), float32)",
        lambda xp, d: xp.empty((0, 3), dtype=xp.float32, device=d),
    ),
    _create("full(3, 2)", lambda xp, d: xp.full(3, 2, device=d)),
    _create("full(3, 2.5)", lambda xp, d: xp.full(3, 2.5, device=d)),
    _create("full(3, True)", lambda xp, d: xp.full(3, True, device=d)),
    _create("full(3, 1j)", lambda xp, d: xp.full(3, 1j, device=d)),
    _create(
        "full(3, 2, float32)", lambda xp, d: xp.full(3, 2, dtype=xp.float32, device=d)
    ),
    _create("arange(5)", lambda xp, d: xp.arange(5, device=d)),
    _create("arange(1, 7, 2)", lambda xp, d: xp.arange(1, 7, 2, device=d)),
    _create("arange(0.0, 2.0, 0.5)", lambda xp, d: xp.arange(0.0, 2.0, 0.5, device=d)),
    _create("arange(5.0)", lambda xp, d: xp.arange(5.0, device=d)),
    _create("arange(2, 0, -1)", lambda xp, d: xp.arange(2, 0, -1, device=d)),
    _create("arange(5, int16)", lambda xp, d: xp.arange(5, dtype=xp.int16, device=d)),
    _create(
        "arange(4, float32)", lambda xp, d: xp.arange(4, dtype=xp.float32, device=d)
    ),
    _create("linspace(0, 1, 5)", lambda xp, d: xp.linspace(0, 1, num=5, device=d)),
    _create(
        "linspace(0, 1, 5, float32)",
        lambda xp, d: xp.linspace(0, 1, 5, dtype=xp.float32, device=d),
    ),
    _create(
        "linspace(0, 1, 4, endpoint=False)",
        lambda xp, d: xp.linspace(0, 1, 4, endpoint=False, device=d),
    ),
    _create("eye(3)", lambda xp, d: xp.eye(3, device=d)),
    _create("eye(2, 4, int32)", lambda xp, d: xp.eye(2, 4, dtype=xp.int32, device=d)),
    _create("asarray([1, 2, 3])", lambda xp, d: xp.asarray([1, 2, 3], device=d)),
    _create(
        "asarray([[1.0], [2.0]])", lambda xp, d: xp.asarray([[1.0], [2.0]], device=d)
    ),
    _create(
        "asarray([True, False])", lambda xp, d: xp.asarray([True, False], device=d)
    ),
    _create("asarray(3)", lambda xp, d: xp.asarray(3, device=d)),
    _create("asarray(2.5)", lambda xp, d: xp.asarray(2.5, device=d)),
    _create("asarray([1j])", lambda xp, d: xp.asarray([1j], device=d)),
    _create(
        "asarray([1, 2], float32)",
        lambda xp, d: xp.asarray([1, 2], dtype=xp.float32, device=d),
    ),
]


def test_creation_functions(xpkit_backend, xp):
    assert_twins(xpkit_backend, xp, CREATION)


def _like(label, fn, name):
    return (f"{label} of {name}", [((2, 3), name)], fn)


def test_creation_like_an_array(xpkit_backend, xp):
    cases = []
    for a in PAIRED:
        cases += [
            _like("zeros_like", lambda xp, x: xp.zeros_like(x), a),
            _like("ones_like(int8)", lambda xp, x: xp.ones_like(x, dtype=xp.int8), a),
            _like("empty_like", lambda xp, x: xp.empty_like(x), a),
            _like("full_like(2.5)", lambda xp, x: xp.full_like(x, 2.5), a),
            _like(
                "full_like(1, float32)",
                lambda xp, x: xp.full_like(x, 1, dtype=xp.float32),
                a,
            ),
            _like("asarray", lambda xp, x: xp.asarray(x), a),
            _like("asarray(copy)", lambda xp, x: xp.asarray(x, copy=True), a),
            _like("asarray(float64)", lambda xp, x: xp.asarray(x, dtype=xp.float64), a),
            _like("tril", lambda xp, x: xp.tril(x), a),
            _like("triu(k=1)", lambda xp, x: xp.triu(x, k=1), a),
        ]
    assert_twins(xpkit_backend, xp, cases)


def test_meshgrid(xpkit_backend, xp):
    cases = [
        (
            f"meshgrid({a}, {b}, {indexing})",
            [((3,), a), ((4,), b), ((2,), a)],
            lambda xp, x, y, z, i=indexing: xp.meshgrid(x, y, z, indexing=i),
        )
        for (a, b), indexing in itertools.product(
            [("float32", "float32"), ("int8", "int8"), ("int32", "float64")],
            ["xy", "ij"],
        )
    ]
    assert_twins(xpkit_backend, xp, cases)
