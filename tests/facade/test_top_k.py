"""`Backend.top_k`: the k largest or smallest values and their indices, on every backend.

The reference is NumPy's stable argsort of the same host data: the values
must be its first k exactly; the indices must be k distinct positions
holding those values (which of several equal values come is the
library's, as the standard allows).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpkit
from xpkit.testing import strategies

#: Few distinct values: ties in most draws.
TIED = st.integers(-3, 3)


def reference(a: np.ndarray, k: int, axis: int, mode: str) -> np.ndarray:
    """The k largest (descending) or smallest (ascending) of ``a`` along ``axis``.

    Integers are ordered as integers (``~a`` reverses them without overflow:
    float64 would tie 2**63 - 1 with 2**63), floats as float64.
    """
    if a.dtype.kind in "iu":
        key = ~a if mode == "largest" else a
    else:
        wide = a.astype(np.float64)
        key = -wide if mode == "largest" else wide
    order = np.argsort(key, axis=axis, kind="stable")
    first = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(a, first, axis=axis)


def check(b: xpkit.Backend, a: np.ndarray, k: int, axis: int, mode: str) -> None:
    values, indices = b.top_k(b.asarray(a), k, axis=axis, mode=mode)
    assert xpkit.Backend.from_arrays(values, indices) == b
    got, where = b.to_numpy(values), b.to_numpy(indices)
    assert got.dtype == a.dtype
    assert where.dtype.kind == "i"
    holds(a, got, where, reference(a, k, axis, mode), axis)


def holds(
    a: np.ndarray, got: np.ndarray, where: np.ndarray, expected: np.ndarray, axis: int
) -> None:
    """``got`` is ``expected`` (NaN where NaN), found at k distinct positions ``where``."""
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.take_along_axis(a, where, axis=axis), expected)
    ordered = np.sort(where, axis=axis)  # k distinct positions along the axis
    assert (np.diff(ordered, axis=axis) > 0).all()


@given(data=st.data())
def test_top_k_agrees_with_a_stable_sort(xpkit_backend, data):
    b = xpkit_backend
    name = data.draw(
        st.sampled_from(["int32", *strategies.dtype_names(b, "real floating")])
    )
    a = data.draw(
        hnp.arrays(
            np.dtype(name),
            hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
            elements=TIED,
        )
    )
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    k = data.draw(st.integers(0, a.shape[axis]))
    mode = data.draw(st.sampled_from(["largest", "smallest"]))
    check(b, a, k, axis, mode)


@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_top_k_on_a_row_of_ties_and_the_whole_axis(xpkit_backend, mode):
    b = xpkit_backend
    a = np.array([[2, 2, 2, 2], [4, 1, 4, 1]], dtype=np.int32)
    for k in (0, 1, 3, 4):
        check(b, a, k, -1, mode)
    check(b, a, 2, 0, mode)


def test_unsigned_and_narrow_integers(xpkit_backend):
    """``~x`` orders unsigned integers as well as signed ones (JAX's path)."""
    b = xpkit_backend
    for name in ("uint8", "int8", "uint16", "uint32", "uint64", "int64"):
        if name not in b.dtypes:
            continue
        info = np.iinfo(name)
        a = np.array([info.max, info.min, 0, 1, info.max], dtype=name)
        for mode in ("largest", "smallest"):
            check(b, a, 3, 0, mode)
        if info.bits == 64:  # (either side of the top bit: ndonnx sorted 2**63 first)
            a = np.array([2**63 - 1, 5, -(2**63) if info.min else 2**63, 0], dtype=name)
            for mode in ("largest", "smallest"):
                check(b, a, 2, 0, mode)
                np.testing.assert_array_equal(
                    b.to_numpy(b.sort(b.asarray(a))), np.sort(a, kind="stable")
                )


@pytest.mark.xpkit_only(["numpy", "torch", "jax", "dask"], reason="stated for them")
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_nan_counts_as_the_largest(xpkit_backend, mode):
    b = xpkit_backend
    values, _ = b.top_k(b.asarray([1.0, float("nan"), 3.0, 2.0]), 2, mode=mode)
    got = b.to_numpy(values).tolist()
    if mode == "largest":
        assert np.isnan(got[0])
        assert got[1] == 3.0
    else:
        assert got == [1.0, 2.0]


@pytest.mark.xpkit_only(["numpy", "torch", "jax", "dask"], reason="stated for them")
def test_a_nan_with_its_sign_bit_set_is_the_largest_too(xpkit_backend):
    """``inf - inf`` is such a NaN on x86; JAX's ``lax.top_k`` ranked it below -inf."""
    b = xpkit_backend
    a = np.array([np.copysign(np.nan, -1.0), 1.0, 2.0, -np.inf])
    x = b.asarray(a)
    assert np.signbit(b.to_numpy(x)[0])  # (the sign bit arrived)
    values, indices = b.top_k(x, 2)
    assert np.isnan(b.to_numpy(values)[0])
    assert b.to_numpy(indices).tolist() == [0, 2]
    values, indices = b.top_k(x, 2, mode="smallest")
    assert b.to_numpy(indices).tolist() == [3, 1]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"k": 5}, ValueError, "k=5 is out of range: x has 4 elements along axis 1"),
        ({"k": -1}, ValueError, "k must be a non-negative int, got -1"),
        ({"k": True}, TypeError, "k must be an int, got True"),
        ({"k": 1.0}, TypeError, "k must be an int, got 1.0"),
        ({"k": 1, "axis": 2}, ValueError, "axis=2 is out of range for x of shape"),
        ({"k": 1, "axis": 1.0}, TypeError, "axis must be an int, got 1.0"),
        (
            {"k": 1, "mode": "max"},
            ValueError,
            "mode must be 'largest' or 'smallest', got 'max'",
        ),
        (
            {"k": 1, "mode": np.array(["smallest"])},
            TypeError,
            "mode must be a str, 'largest' or 'smallest', got array(['smallest']",
        ),
    ],
)
def test_bad_arguments_are_named(xpkit_backend, kwargs, error, message):
    b = xpkit_backend
    x = b.asarray(np.zeros((2, 4), dtype=np.float32))
    rest = {name: v for name, v in kwargs.items() if name != "k"}
    with pytest.raises(error, match=re.escape(message)):
        b.top_k(x, kwargs["k"], **rest)


def test_what_top_k_does_not_order_is_refused(xpkit_backend):
    b = xpkit_backend
    with pytest.raises(
        TypeError, match="x has dtype bool, but top_k takes the standard.s real numeric"
    ):
        b.top_k(b.asarray([True, False]), 1)
    with pytest.raises(ValueError, match="a 0-dimensional array has no axes"):
        b.top_k(b.asarray(1.0), 1)
    with pytest.raises(TypeError, match="x"):
        b.top_k([3, 1, 2], 1)
    if "complex64" in b.dtypes:
        with pytest.raises(TypeError, match="x has dtype complex64"):
            b.top_k(b.asarray(np.ones(3, dtype=np.complex64)), 1)


def test_k_may_be_a_numpy_integer(xpkit_backend):
    b = xpkit_backend
    check(b, np.array([4, 1, 3], dtype=np.int32), np.int64(2), 0, "largest")


def test_k_may_be_an_integer_of_no_axes_not_one_with_axes(xpkit_backend):
    """A 0-d integer array is a count; one of shape (1,) is refused on every
    backend (torch's ``__index__`` took ``tensor([2])``, NumPy's refuses)."""
    b = xpkit_backend
    x = b.asarray(np.array([4, 1, 3], dtype=np.int32))
    k = b.asarray(np.array([2], dtype=np.int32))
    with pytest.raises(TypeError, match=r"k must be an int, got "):
        b.top_k(x, k)
    values, _ = b.top_k(x, k[0])
    assert b.to_numpy(values).tolist() == [4, 3]


def test_torch_takes_topk_and_a_sort_where_topk_has_no_kernel(monkeypatch):
    """torch 2.13's CPU ``topk`` and ``gather`` have no uint16/32/64 kernels."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch")
    calls = []
    real = torch.topk
    monkeypatch.setattr(
        torch, "topk", lambda *a, **kw: calls.append(a) or real(*a, **kw)
    )
    check(b, np.array([[3, 1, 2], [0, 5, 4]], dtype=np.int32), 2, 1, "largest")
    assert len(calls) == 1
    a = np.array([[7, 1, 9, 3], [2**15, 0, 2**15 - 1, 9]])
    for name in ("uint16", "uint32", "uint64"):
        x = torch.from_numpy(a.astype(name))  # (outside the backend's dtypes)
        for mode in ("largest", "smallest"):
            values, indices = b.top_k(x, 2, mode=mode)
            expected = reference(a.astype(name), 2, -1, mode)
            np.testing.assert_array_equal(values.numpy(), expected)
            np.testing.assert_array_equal(
                np.take_along_axis(a, indices.numpy(), axis=-1), expected
            )


@pytest.mark.parametrize("chunks", [1, 2, 3])
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_dask_takes_the_whole_axis_over_several_chunks(chunks, mode):
    """``da.argtopk`` failed where k is the whole axis of several chunks."""
    da = pytest.importorskip("dask.array")
    b = xpkit.Backend("dask")
    a = np.random.default_rng(3).integers(0, 4, size=(3, 5)).astype(np.float64)
    for axis in (0, 1):
        x = da.from_array(a, chunks=chunks)
        values, indices = b.top_k(x, a.shape[axis], axis=axis, mode=mode)
        expected = reference(a, a.shape[axis], axis, mode)
        np.testing.assert_array_equal(values.compute(), expected)
        np.testing.assert_array_equal(
            np.take_along_axis(a, indices.compute(), axis=axis), expected
        )


def test_dask_refuses_an_axis_of_unknown_size_by_name():
    da = pytest.importorskip("dask.array")
    b = xpkit.Backend("dask")
    x = da.from_array(np.array([3.0, 1.0, 2.0, 5.0]), chunks=2)
    masked = x[x > 1]  # (chunks of unknown size)
    with pytest.raises(ValueError, match=r"^x has an unknown size along axis 0"):
        b.top_k(masked, 2)
    values, _ = b.top_k(masked.compute_chunk_sizes(), 2)
    assert values.compute().tolist() == [5.0, 3.0]


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "int64"])
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_indices_are_of_the_index_dtype_argsort_gives(xpkit_backend, dtype, mode):
    """JAX's lax.top_k path gave int32 indices where argsort gives int64."""
    b = xpkit_backend
    if dtype not in b.dtypes:
        pytest.skip(f"{b.name} holds no {dtype}")
    x = b.asarray(np.array([[3, 1, 2], [0, 5, 4]], dtype=dtype))
    _, indices = b.top_k(x, 2, mode=mode)
    assert indices.dtype == b.xp.argsort(x, axis=-1).dtype


# -- NumPy's long rows: the k among a threshold's candidates -------------------


def _long_rows(name: str) -> np.ndarray:
    """(rows, 8192) inputs whose order, ties and extremes each stress the filter."""
    rng = np.random.default_rng(7)
    n = 8192
    if name == "normal":
        return rng.standard_normal((5, n))
    if name == "float32":
        return rng.standard_normal((3, n)).astype(np.float32)
    if name == "ascending":  # (a sample of the smallest: its threshold is low)
        return np.sort(rng.standard_normal((3, n)), axis=1)
    if name == "descending":
        return np.ascontiguousarray(
            np.sort(rng.standard_normal((3, n)), axis=1)[:, ::-1]
        )
    if name == "few values":  # ties: a threshold every tie of it passes
        return rng.integers(-3, 3, (4, n)).astype(np.float64)
    if name == "one value":
        return np.zeros((2, n))
    if name == "signed zeros":
        return np.where(rng.random((3, n)) < 0.5, -0.0, 0.0) - (
            rng.random((3, n)) < 1e-3
        )
    if name == "int64":
        return rng.integers(-(2**63), 2**63 - 1, (3, n), dtype=np.int64)
    if name == "int64 extremes":  # (the fill value itself, in the row)
        info = np.iinfo(np.int64)
        x = rng.integers(0, 2, (3, n)).astype(np.int64) * info.max
        x[1] = info.min
        x[2, ::9] = info.min
        return x
    if name == "uint8":
        return rng.integers(0, 255, (3, n), dtype=np.uint8)
    if name == "infinities":
        x = rng.standard_normal((2, n))
        x[0, ::5] = np.inf
        x[1, ::5] = -np.inf
        return x
    if name == "3-d":
        return rng.standard_normal((2, 3, n))
    if name == "1-d":
        return rng.standard_normal(5 * n)
    raise AssertionError(name)


LONG_ROWS = [
    "normal",
    "float32",
    "ascending",
    "descending",
    "few values",
    "one value",
    "signed zeros",
    "int64",
    "int64 extremes",
    "uint8",
    "infinities",
    "3-d",
    "1-d",
]


@pytest.mark.parametrize("k", [1, 7, 32])
@pytest.mark.parametrize("mode", ["largest", "smallest"])
@pytest.mark.parametrize("name", LONG_ROWS)
def test_numpy_long_rows_agree_with_a_stable_sort(name, mode, k):
    """Every order, tie and extreme gives the stable sort's first k (filtered or not)."""
    a = _long_rows(name)
    check(xpkit.Backend("numpy"), a, k, a.ndim - 1, mode)


def _partitions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The calls of the whole-array partition from now on (their k)."""
    from xpkit._adapters import _top_k

    calls: list[int] = []
    whole = _top_k.partitioned_top_k

    def counted(module, xp, x, k, axis, *, largest):
        calls.append(k)
        return whole(module, xp, x, k, axis, largest=largest)

    monkeypatch.setattr(_top_k, "partitioned_top_k", counted)
    return calls


def _filtered(a: np.ndarray, k: int, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """NumPy's threshold path itself (the adapter takes NumPy's own top_k first)."""
    from xpkit._adapters._top_k import filtered_top_k

    xp = xpkit.Backend("numpy").xp
    return filtered_top_k(np, xp, a, k, a.ndim - 1, largest=mode == "largest")


def _check_filtered(a: np.ndarray, k: int, mode: str) -> None:
    """`check`'s contract, of `_filtered`."""
    values, where = _filtered(a, k, mode)
    assert values.dtype == a.dtype
    assert where.dtype == np.argsort(a[..., :2], axis=-1).dtype
    holds(a, values, where, reference(a, k, a.ndim - 1, mode), a.ndim - 1)


@pytest.mark.parametrize(
    ("where", "mode", "filtered"),
    [
        ("a few in each row", "largest", True),  # (each NaN a candidate)
        ("a few in each row", "smallest", True),
        ("every third", "smallest", True),  # (no NaN is a candidate)
        ("every third", "largest", False),  # (too many candidates)
        ("the sample", "smallest", False),  # (a NaN threshold: none pass)
        ("the sample", "largest", False),
        ("a whole row", "smallest", False),
        ("a whole row", "largest", False),
    ],
)
def test_numpy_long_rows_with_nan_agree_with_the_partition(
    monkeypatch, where, mode, filtered
):
    """NaN is the largest value, as NumPy's partition places it; the values are its."""
    from xpkit._adapters._top_k import partitioned_top_k

    a = np.random.default_rng(3).standard_normal((4, 8192))
    rows = {
        "a few in each row": np.s_[:, 5::1000],
        "every third": np.s_[0, ::3],
        "the sample": np.s_[3, ::8],  # (every 8th: the sample's step here)
        "a whole row": np.s_[1],
    }
    a[rows[where]] = np.nan
    xp = xpkit.Backend("numpy").xp
    calls = _partitions(monkeypatch)  # (partitioned_top_k above: not counted)
    for k in (1, 5, 12):
        calls.clear()
        values, indices = _filtered(a, k, mode)
        assert calls == ([] if filtered else [k])
        expected, _ = partitioned_top_k(np, xp, a, k, 1, largest=mode == "largest")
        holds(a, values, indices, expected, 1)


@pytest.mark.parametrize(
    "name",
    ["normal", "float32", "ascending", "descending", "int64", "uint8", "3-d", "1-d"],
)
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_numpy_long_rows_are_filtered_without_a_whole_partition(
    monkeypatch, name, mode
):
    """Rows in any order find their k among the candidates: nothing is partitioned whole."""
    calls = _partitions(monkeypatch)
    _check_filtered(_long_rows(name), 5, mode)
    assert calls == []


@pytest.mark.parametrize(
    "name", ["few values", "one value", "int64 extremes", "short", "strided", "axis 0"]
)
@pytest.mark.parametrize("mode", ["largest", "smallest"])
def test_numpy_partitions_whole_where_the_filter_saves_nothing(monkeypatch, name, mode):
    """Too many candidates (ties, extremes), or short, strided or other-axis rows."""
    from xpkit._adapters._top_k import filtered_top_k

    calls = _partitions(monkeypatch)
    axis = 1
    if name == "short":
        a = np.random.default_rng(0).standard_normal((4, 4095))
    elif name == "strided":
        a = np.random.default_rng(0).standard_normal((8192, 4)).T
    elif name == "axis 0":
        a, axis = np.random.default_rng(0).standard_normal((8192, 4)), 0
    else:
        a = _long_rows(name)
    xp = xpkit.Backend("numpy").xp
    values, _ = filtered_top_k(np, xp, a, 3, axis, largest=mode == "largest")
    assert calls == [3]
    np.testing.assert_array_equal(values, reference(a, 3, axis, mode))


_FILTER_PEAK = """
import json, sys, tracemalloc
import numpy as np
import xpkit

b = xpkit.Backend("numpy")
rng = np.random.default_rng(0)
x = rng.standard_normal((600, 20000))
x[300:] = np.sort(x[300:], axis=1)  # (ascending rows: filtered too)
x[500:] = 0.0  # (a row of one value: partitioned whole)


def fn(rows):
    return b.top_k(rows, 5, mode="smallest")[1]


plan = xpkit.plan_batches(fn, x, budget_gb=8e6 / 2**30, remember=False)
batch = plan.batch_size
# (the most candidates the filter takes: 1,240 a row, past its threshold,
# none of them in the sample, every 19th element)
crowded = rng.standard_normal((batch, 20000))
crowded[:, 1 : 1 + 19 * 1240 : 19] += 10.0
runs = [
    (fn, x[:batch]),  # (random)
    (fn, x[300 : 300 + batch]),  # (ascending)
    (fn, x[500 : 500 + batch]),  # (one value)
    (lambda rows: b.top_k(rows, 1)[1], crowded),
]
peaks = []
for f, rows in runs:
    f(rows)
    tracemalloc.start()
    f(rows)
    peaks.append(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
print(json.dumps([plan.source, batch, plan.batch_peak_bytes, peaks]))
"""


@pytest.mark.skipif(hasattr(np, "top_k"), reason="NumPy's own top_k is taken")
def test_numpy_s_filter_holds_less_than_the_partition_the_trace_counts():
    """The trace counts the whole partition's indices: a bound of both paths' peaks.

    Measured by tracemalloc in a child at the planned batch: filtered rows,
    rows partitioned whole, and rows with the most candidates the filter
    takes.
    """
    from tests.helpers import run_python

    done = run_python(_FILTER_PEAK, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    source, batch, estimate, peaks = json.loads(done.stdout.splitlines()[-1])
    normal, ascending, one_value, crowded = peaks
    assert source.startswith("traced"), source
    indices = batch * 20000 * 8  # (argpartition's, which the trace counts)
    assert indices <= estimate <= 1.05 * indices + 65536
    assert normal <= estimate / 4  # (the filter: a mask and a few candidates)
    assert ascending <= estimate / 4
    assert 0.9 * estimate <= one_value <= estimate * 1.05  # (partitioned whole)
    assert estimate / 4 <= crowded <= estimate * 3 / 8  # (its most: 3/8)
