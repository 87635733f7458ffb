"""Shape-only arrays tell the truth through a library's own functions.

``fn`` written with NumPy's functions (``np.tanh(x)``, ``np.add.reduce``)
reaches the shape-only arrays through ``__array_ufunc__`` and
``__array_function__``; written with torch's (``torch.sum(x, dim=1)``),
through ``__torch_function__``. Each case runs on the library's real arrays
and on shape-only arrays impersonating it (`shape_twins`), as in
`test_shapes.py`.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools

import numpy as np
import pytest
from shape_twins import assert_twins

import xpkit
from xpkit._adapters._registry import get_adapter
from xpkit._adapters._shapes._array import given
from xpkit._adapters._trace import Trace, tracing
from xpkit._dtypes import dtype_name

torch = importlib.import_module("torch") if importlib.util.find_spec("torch") else None


def _cases(table, dtypes):
    """``[(label, specs, fn)]``: each ``(label, shapes, fn)`` of ``table`` in each dtype."""
    return [
        (f"{label} of {names}", list(zip(shapes, names, strict=True)), fn)
        for (label, shapes, fn), names in itertools.product(table, dtypes)
        if len(names) == len(shapes)
    ]


CUBE = (2, 3, 4)
ONE = [("float32",), ("int8",), ("int16",), ("bool",), ("uint8",), ("complex64",)]
TWO = [
    ("float32", "float32"),
    ("int8", "float32"),
    ("int32", "float64"),
    ("bool", "bool"),
    ("uint8", "int8"),
]

NUMPY_UFUNCS = [
    ("np.tanh", [CUBE], lambda xp, x: np.tanh(x)),
    ("np.sqrt", [CUBE], lambda xp, x: np.sqrt(x)),
    ("np.negative", [CUBE], lambda xp, x: np.negative(x)),
    ("np.add(x, 3)", [CUBE], lambda xp, x: np.add(x, 3)),
    ("np.add(x, 1.5)", [CUBE], lambda xp, x: np.add(x, 1.5)),
    ("np.multiply(x, True)", [CUBE], lambda xp, x: np.multiply(x, True)),
    ("np.add(x, 2j)", [CUBE], lambda xp, x: np.add(x, 2j)),
    (
        "np.add(x, x, dtype=float64)",
        [CUBE],
        lambda xp, x: np.add(x, x, dtype=np.float64),
    ),
    ("np.add.reduce", [CUBE], lambda xp, x: np.add.reduce(x)),
    ("np.add.reduce(axis=1)", [CUBE], lambda xp, x: np.add.reduce(x, axis=1)),
    (
        "np.multiply.reduce(keepdims)",
        [CUBE],
        lambda xp, x: np.multiply.reduce(x, axis=-1, keepdims=True),
    ),
    ("np.maximum.reduce", [CUBE], lambda xp, x: np.maximum.reduce(x, axis=2)),
    ("np.add.accumulate", [CUBE], lambda xp, x: np.add.accumulate(x, axis=1)),
    ("np.add.outer", [(3,), (2, 2)], lambda xp, x, y: np.add.outer(x, y)),
    ("np.add", [(3, 1), (4,)], lambda xp, x, y: np.add(x, y)),
    ("np.true_divide", [(3, 1), (4,)], lambda xp, x, y: np.true_divide(x, y)),
    ("np.floor_divide", [(3, 1), (4,)], lambda xp, x, y: np.floor_divide(x, y)),
    ("np.maximum", [(3, 1), (4,)], lambda xp, x, y: np.maximum(x, y)),
    ("np.less", [(3, 1), (4,)], lambda xp, x, y: np.less(x, y)),
    ("np.matmul", [(2, 3, 4), (4, 5)], lambda xp, x, y: np.matmul(x, y)),
    ("np.matmul 1-d", [(4,), (2, 4, 5)], lambda xp, x, y: np.matmul(x, y)),
    ("np.divmod", [(3, 1), (4,)], lambda xp, x, y: np.divmod(x, y)),
]

NUMPY_FUNCTIONS = [
    ("np.sum", [CUBE], lambda xp, x: np.sum(x)),
    (
        "np.sum(axis=1, dtype=float32)",
        [CUBE],
        lambda xp, x: np.sum(x, axis=1, dtype=np.float32),
    ),
    ("np.prod(keepdims)", [CUBE], lambda xp, x: np.prod(x, axis=(0, 2), keepdims=True)),
    ("np.mean", [CUBE], lambda xp, x: np.mean(x, axis=0)),
    ("np.std", [CUBE], lambda xp, x: np.std(x)),
    ("np.var", [CUBE], lambda xp, x: np.var(x, axis=-1)),
    ("np.max", [CUBE], lambda xp, x: np.max(x, axis=1)),
    ("np.argmax", [CUBE], lambda xp, x: np.argmax(x, axis=1)),
    ("np.any", [CUBE], lambda xp, x: np.any(x, axis=0)),
    ("np.cumsum", [CUBE], lambda xp, x: np.cumsum(x)),
    ("np.cumsum(axis=1)", [CUBE], lambda xp, x: np.cumsum(x, axis=1)),
    ("np.cumprod(axis=0)", [CUBE], lambda xp, x: np.cumprod(x, axis=0)),
    ("np.median", [CUBE], lambda xp, x: np.median(x, axis=0)),
    ("np.quantile", [CUBE], lambda xp, x: np.quantile(x, 0.5, axis=1)),
    ("np.average", [CUBE], lambda xp, x: np.average(x, axis=0)),
    ("np.reshape", [CUBE], lambda xp, x: np.reshape(x, (-1, 2))),
    ("np.transpose", [CUBE], lambda xp, x: np.transpose(x)),
    ("np.transpose(axes)", [CUBE], lambda xp, x: np.transpose(x, (1, 0, 2))),
    ("np.swapaxes", [CUBE], lambda xp, x: np.swapaxes(x, 0, 2)),
    ("np.moveaxis", [CUBE], lambda xp, x: np.moveaxis(x, 0, -1)),
    ("np.expand_dims", [CUBE], lambda xp, x: np.expand_dims(x, 1)),
    ("np.squeeze", [(1, 3, 1)], lambda xp, x: np.squeeze(x)),
    ("np.broadcast_to", [(3, 1)], lambda xp, x: np.broadcast_to(x, (2, 3, 4))),
    ("np.ravel", [CUBE], lambda xp, x: np.ravel(x)),
    ("np.flip", [CUBE], lambda xp, x: np.flip(x, 1)),
    ("np.roll", [CUBE], lambda xp, x: np.roll(x, 1, axis=0)),
    ("np.tile", [(3, 4)], lambda xp, x: np.tile(x, (2, 1, 2))),
    ("np.repeat", [CUBE], lambda xp, x: np.repeat(x, 2, axis=1)),
    ("np.diff", [CUBE], lambda xp, x: np.diff(x, axis=0)),
    ("np.sort(axis=None)", [CUBE], lambda xp, x: np.sort(x, axis=None)),
    ("np.argsort", [CUBE], lambda xp, x: np.argsort(x, axis=1)),
    ("np.argpartition", [CUBE], lambda xp, x: np.argpartition(x, 1, axis=1)),
    ("np.argpartition(axis=None)", [CUBE], lambda xp, x: np.argpartition(x, 2, None)),
    ("np.clip", [CUBE], lambda xp, x: np.clip(x, 0, 1)),
    ("np.round", [CUBE], lambda xp, x: np.round(x)),
    ("np.zeros_like", [CUBE], lambda xp, x: np.zeros_like(x)),
    ("np.full_like(2.5)", [CUBE], lambda xp, x: np.full_like(x, 2.5)),
    ("np.ones_like(float32)", [CUBE], lambda xp, x: np.ones_like(x, dtype=np.float32)),
    ("np.copy", [CUBE], lambda xp, x: np.copy(x)),
    ("np.atleast_2d", [(3,)], lambda xp, x: np.atleast_2d(x)),
    ("np.tril", [(3, 4)], lambda xp, x: np.tril(x)),
    ("np.diagonal", [(3, 4)], lambda xp, x: np.diagonal(x)),
    ("np.trace", [(3, 4)], lambda xp, x: np.trace(x)),
    ("np.concatenate", [(2, 3), (4, 3)], lambda xp, x, y: np.concatenate([x, y])),
    (
        "np.concatenate(axis=None)",
        [(2, 3), (4,)],
        lambda xp, x, y: np.concatenate([x, y], axis=None),
    ),
    ("np.stack", [(2, 3), (2, 3)], lambda xp, x, y: np.stack([x, y], axis=1)),
    ("np.vstack", [(3,), (2, 3)], lambda xp, x, y: np.vstack([x, y])),
    ("np.hstack", [(2, 3), (2, 1)], lambda xp, x, y: np.hstack([x, y])),
    ("np.where", [(3, 1), (4,)], lambda xp, x, y: np.where(x > y, x, y)),
    ("np.dot", [(3, 4), (4, 2)], lambda xp, x, y: np.dot(x, y)),
    ("np.outer", [(3,), (4,)], lambda xp, x, y: np.outer(x, y)),
    ("np.tensordot", [(3, 4), (4, 2)], lambda xp, x, y: np.tensordot(x, y, axes=1)),
    (
        "np.einsum ij,jk",
        [(3, 4), (4, 2)],
        lambda xp, x, y: np.einsum("ij,jk->ik", x, y),
    ),
    ("np.einsum implicit", [(3, 4), (4, 2)], lambda xp, x, y: np.einsum("ij,jk", x, y)),
    (
        "np.einsum ...",
        [(5, 3, 4), (4, 2)],
        lambda xp, x, y: np.einsum("...ij,jk->...ik", x, y),
    ),
    (
        "np.take",
        [(3, 4), (2,)],
        lambda xp, x, i: np.take(x, np.zeros(2, dtype=np.int64), axis=1),
    ),
    ("np.isclose", [(3, 1), (4,)], lambda xp, x, y: np.isclose(x, y)),
]

NUMPY_LINALG = [
    ("np.linalg.inv", [(3, 3)], lambda xp, x: np.linalg.inv(x)),
    ("np.linalg.det", [(2, 3, 3)], lambda xp, x: np.linalg.det(x)),
    ("np.linalg.solve", [(3, 3), (3, 2)], lambda xp, x, y: np.linalg.solve(x, y)),
    ("np.linalg.svd", [(4, 3)], lambda xp, x: np.linalg.svd(x)),
    (
        "np.linalg.svd(full_matrices=False)",
        [(4, 3)],
        lambda xp, x: np.linalg.svd(x, full_matrices=False),
    ),
    ("np.linalg.qr", [(4, 3)], lambda xp, x: np.linalg.qr(x)),
    ("np.linalg.eigh", [(3, 3)], lambda xp, x: np.linalg.eigh(x)),
    ("np.linalg.norm", [(3, 4)], lambda xp, x: np.linalg.norm(x)),
    ("np.linalg.norm(axis)", [(3, 4)], lambda xp, x: np.linalg.norm(x, axis=1)),
    ("np.linalg.pinv", [(4, 3)], lambda xp, x: np.linalg.pinv(x)),
    ("np.linalg.cholesky", [(3, 3)], lambda xp, x: np.linalg.cholesky(x)),
]


@pytest.fixture(scope="module")
def numpy_backend():
    return xpkit.Backend("numpy")


@pytest.mark.parametrize(
    ("table", "dtypes"),
    [
        (NUMPY_UFUNCS, ONE + TWO),
        (NUMPY_FUNCTIONS, ONE + TWO),
        (
            NUMPY_LINALG,
            [("float32",), ("float64",), ("int32",), ("float32", "float64")],
        ),
    ],
    ids=["ufuncs", "functions", "linalg"],
)
def test_numpy_functions(numpy_backend, table, dtypes):
    assert_twins(numpy_backend, np, _cases(table, dtypes))


TORCH_FUNCTIONS = [
    ("torch.tanh", [CUBE], lambda _, x: torch.tanh(x)),
    ("torch.sqrt", [CUBE], lambda _, x: torch.sqrt(x)),
    ("torch.abs", [CUBE], lambda _, x: torch.abs(x)),
    ("torch.sum", [CUBE], lambda _, x: torch.sum(x)),
    ("torch.sum(dim=1)", [CUBE], lambda _, x: torch.sum(x, dim=1)),
    ("torch.sum(1, keepdim)", [CUBE], lambda _, x: torch.sum(x, 1, keepdim=True)),
    ("torch.mean(dim=0)", [CUBE], lambda _, x: torch.mean(x, dim=0)),
    ("torch.amax(dim=-1)", [CUBE], lambda _, x: torch.amax(x, dim=-1)),
    ("torch.argmax(dim=1)", [CUBE], lambda _, x: torch.argmax(x, dim=1)),
    ("torch.permute", [CUBE], lambda _, x: torch.permute(x, (2, 0, 1))),
    ("torch.unsqueeze", [CUBE], lambda _, x: torch.unsqueeze(x, 1)),
    ("torch.flip", [CUBE], lambda _, x: torch.flip(x, (0,))),
    ("torch.clamp", [CUBE], lambda _, x: torch.clamp(x, 0, 1)),
    ("torch.add(x, 2)", [CUBE], lambda _, x: torch.add(x, 2)),
    ("torch.mul(x, 1.5)", [CUBE], lambda _, x: torch.mul(x, 1.5)),
    ("torch.topk", [CUBE], lambda _, x: tuple(torch.topk(x, 2))),
    ("torch.topk(k, 0, False)", [CUBE], lambda _, x: tuple(torch.topk(x, 2, 0, False))),
    (
        "torch.topk(dim=1, largest=False, sorted=False)",
        [CUBE],
        lambda _, x: tuple(torch.topk(x, 2, dim=1, largest=False, sorted=False)),
    ),
    ("torch.sort", [CUBE], lambda _, x: tuple(torch.sort(x, dim=1))),
    ("torch.cat", [(2, 3), (2, 5)], lambda _, x, y: torch.cat([x, y], dim=1)),
    ("torch.stack", [(2, 3), (2, 3)], lambda _, x, y: torch.stack([x, y], 1)),
    ("torch.matmul", [(2, 3, 4), (4, 5)], lambda _, x, y: torch.matmul(x, y)),
    ("torch.mm", [(3, 4), (4, 5)], lambda _, x, y: torch.mm(x, y)),
    ("torch.where", [(3, 1), (4,)], lambda _, x, y: torch.where(x > y, x, y)),
    ("torch.maximum", [(3, 1), (4,)], lambda _, x, y: torch.maximum(x, y)),
    ("torch.add", [(3, 1), (4,)], lambda _, x, y: torch.add(x, y)),
    ("torch.eq", [(3, 1), (4,)], lambda _, x, y: torch.eq(x, y)),
    ("tensor + x", [(3, 4)], lambda _, x: torch.ones(4, dtype=torch.float64) + x),
    ("x * tensor", [(3, 4)], lambda _, x: x * torch.ones(4, dtype=torch.int8)),
    ("torch.max(dim=1)", [CUBE], lambda _, x: tuple(torch.max(x, dim=1))),
    (
        "torch.min(0, keepdim)",
        [CUBE],
        lambda _, x: tuple(torch.min(x, 0, keepdim=True)),
    ),
    ("torch.max", [CUBE], lambda _, x: torch.max(x)),
    ("torch.max(a, b)", [(3, 1), (4,)], lambda _, x, y: torch.max(x, y)),
    (
        "torch.sort(descending)",
        [CUBE],
        lambda _, x: tuple(torch.sort(x, descending=True)),
    ),
    ("x[tensor]", [(5, 3)], lambda _, x: x[torch.zeros(2, dtype=torch.int64)]),
]


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_torch_functions():
    backend = xpkit.Backend("torch", device="cpu")
    dtypes = [
        ("float32",),
        ("int8",),
        ("bool",),
        ("float32", "float32"),
        ("int8", "float64"),
    ]
    dtypes += [("int64",), ("float16", "float32"), ("float64",)]
    assert_twins(backend, torch, _cases(TORCH_FUNCTIONS, dtypes))


def _zero_d_cases():
    """torch's own functions and array-api-compat's, of a tensor and a 0-d tensor."""
    import array_api_compat.torch as compat

    own = [
        ("torch.add", lambda x, s: torch.add(x, s)),
        ("torch.mul", lambda x, s: torch.mul(x, s)),
        ("torch.sub(s, x)", lambda x, s: torch.sub(s, x)),
        ("torch.maximum", lambda x, s: torch.maximum(x, s)),
        ("torch.minimum(s, x)", lambda x, s: torch.minimum(s, x)),
        ("torch.atan2", lambda x, s: torch.atan2(x, s)),
        ("torch.remainder", lambda x, s: torch.remainder(x, s)),
        ("torch.where(c, x, s)", lambda x, s: torch.where(x > 0, x, s)),
        ("torch.where(c, s, x)", lambda x, s: torch.where(x > 0, s, x)),
        ("torch.clamp(x, s)", lambda x, s: torch.clamp(x, s)),
        ("torch.clamp(x, None, s)", lambda x, s: torch.clamp(x, None, s)),
        ("compat.add", lambda x, s: compat.add(x, s)),
        ("compat.multiply", lambda x, s: compat.multiply(x, s)),
        ("compat.maximum", lambda x, s: compat.maximum(x, s)),
        ("compat.where", lambda x, s: compat.where(x > 0, x, s)),
    ]
    pairs = itertools.product(
        ["float32", "float16", "int8", "uint8", "int32"],
        ["float64", "float32", "int64", "int8", "bool", "complex64", "complex128"],
    )
    return [
        (
            f"{label} of {a}, 0-d {b}",
            [((2, 3), a), ((), b)],
            lambda _, x, s, f=f: f(x, s),
        )
        for (a, b), (label, f) in itertools.product(pairs, own)
    ]


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_torch_functions_take_a_0d_tensor_as_torch_does():
    # torch's own functions take a 0-d tensor of no higher kind than the other
    # operand as a scalar (`torch.maximum(x32, tensor(2.0, float64))` is
    # float32); array-api-compat's promote as the standard does. The trace
    # counted torch's as the standard's: 3-4x over.
    backend = xpkit.Backend("torch", device="cpu")
    assert_twins(backend, torch, _zero_d_cases())


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_a_tensor_indexed_by_a_shape_only_array_warns_but_answers():
    """torch takes a non-tensor index for a sequence of indices (and warns so).

    It finds the shape-only array only after its NumPy-style heuristic has
    warned; the result is right. (torch 2.9 announces it will convert such an
    index to a tensor instead: that reads values, which a trace refuses.)
    """
    profile = get_adapter("torch").shape_profile("cpu")

    def run(trace):
        index = given(trace, (2,), "int64")
        with pytest.warns(UserWarning, match="non-tuple sequence"):
            found = torch.ones(5, 3)[index]
        return found.shape, dtype_name(found.dtype)

    trace = Trace(profile)
    assert tracing(trace, lambda: run(trace)) == ((2, 3), "float32")


def _facade_cases(b):
    """The facade's own methods, which ``fn`` calls on its rows."""
    two = (slice(None), slice(0, 2))
    return [
        ("b.matmul", [(3, 4), (4, 5)], lambda _, x, y: b.matmul(x, y)),
        ("b.top_k", [(3, 6)], lambda _, x: b.top_k(x, 2)),
        (
            "b.top_k(axis=0, smallest)",
            [(5, 3)],
            lambda _, x: b.top_k(x, 2, axis=0, mode="smallest"),
        ),
        ("b.sort", [(3, 4)], lambda _, x: b.sort(x, axis=0)),
        ("b.concat", [(2, 3), (2, 5)], lambda _, x, y: b.concat([x, y], axis=1)),
        ("b.expand_dims", [CUBE], lambda _, x: b.expand_dims(x, 1)),
        ("b.at().set(number)", [(3, 4)], lambda _, x: b.at(x, two).set(0)),
        ("b.at().set(array)", [(3, 4), (3, 2)], lambda _, x, y: b.at(x, two).set(y)),
        ("b.at().add(array)", [(3, 4), (3, 2)], lambda _, x, y: b.at(x, two).add(y)),
    ]


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_the_facade_s_methods_follow_shape_only_arrays(library):
    """#28: ``fn`` written with ``b.matmul``, ``b.top_k``, ``b.at`` (as the
    docs' examples are) is traced, where the library's functions reach
    shape-only arrays (NumPy's and torch's protocols)."""
    if library == "torch" and torch is None:
        pytest.skip("needs torch")
    b = xpkit.Backend(library)
    dtypes = [("float32",), ("float64",), ("int32",), ("float32", "float32")]
    dtypes += [("float64", "float64"), ("int32", "int32")]
    assert_twins(b, b.xp, _cases(_facade_cases(b), dtypes))


def test_a_shape_only_array_of_another_library_s_trace_is_refused():
    """A trace impersonating torch hands NumPy's facade nothing it takes."""
    if torch is None:
        pytest.skip("needs torch")
    profile = get_adapter("torch").shape_profile("cpu")
    b = xpkit.Backend("numpy")

    def run(trace):
        x = given(trace, (3, 3), "float64")
        with pytest.raises(TypeError, match="A is an array of shape-only arrays but"):
            b.matmul(x, x)
        with pytest.raises(TypeError, match="x is an array of shape-only arrays but"):
            b.top_k(x, 1)
        return True

    trace = Trace(profile)
    assert tracing(trace, lambda: run(trace)) is True
