"""map_batches pads a shorter last batch so that a compiling library compiles once."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import xpkit


def _batches_of(size: int, n: int, **kwargs: object) -> dict[str, object]:
    """Arguments that make map_batches cut ``n`` rows into batches of ``size``."""
    args: dict[str, object] = {"bytes_per_item": 1e6, **kwargs}
    plan = xpkit.plan_batches(
        lambda x: x, np.zeros((n, 1)), budget_gb=size * 1e6 / 1e9, **args
    )
    if plan.batch_size != size:  # the budget's GB -> bytes rule
        plan = xpkit.plan_batches(
            lambda x: x, np.zeros((n, 1)), budget_gb=size * 1e6 / 2**30, **args
        )
    assert plan.batch_size == size, plan
    return {"budget_gb": plan.budget_gb, **args}


def test_padding_gives_fn_one_shape_and_trims_the_result():
    shapes: list[int] = []

    def fn(x):
        shapes.append(x.shape[0])
        return {"inv": 1.0 / x, "twice": x * 2.0, "flat": x[:, 0]}  # 1/0 would raise

    x = np.arange(1.0, 38.0).reshape(37, 1)  # 37 rows: 3 batches of 10, then 7
    got = xpkit.map_batches(fn, x, pad=True, **_batches_of(10, 37))
    assert shapes == [10, 10, 10, 10]
    np.testing.assert_array_equal(got["inv"], 1.0 / x)
    np.testing.assert_array_equal(got["twice"], x * 2.0)
    np.testing.assert_array_equal(got["flat"], x[:, 0])


def test_no_padding_by_default_where_nothing_compiles():
    shapes: list[int] = []

    def fn(x):
        shapes.append(x.shape[0])
        return x

    xpkit.map_batches(fn, np.ones((37, 1)), **_batches_of(10, 37))
    assert shapes == [10, 10, 10, 7]


def test_pad_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="pad must be a bool or None, got 'yes'"):
        xpkit.map_batches(lambda x: x, np.ones((3, 1)), pad="yes")


def test_jax_compiles_fn_once_over_ten_batches():
    jax = pytest.importorskip("jax", reason="needs JAX: pip install 'xpkit[jax]'")
    traces: list[tuple[int, ...]] = []

    @jax.jit
    def fn(x):
        traces.append(x.shape)  # runs once per compilation, not per call
        return jax.numpy.tanh(x).sum(axis=1)

    b = xpkit.Backend("jax")
    n = 97  # 9 batches of 10, then 7 rows
    x = np.random.default_rng(0).standard_normal((n, 4))
    got = xpkit.map_batches(fn, x, backend=b, **_batches_of(10, n))
    np.testing.assert_allclose(got, np.tanh(x).sum(axis=1), rtol=1e-6)
    assert traces == [(10, 4)]
    traces.clear()
    xpkit.map_batches(fn, x, backend=b, pad=False, **_batches_of(10, n))
    assert traces == [(7, 4)]  # (10, 4) is cached: only the short tail compiles again


#: A named tuple result (module level: it travels to joblib's workers).
Pair = namedtuple("Pair", "total first")


def _pair(x):
    return Pair(x.sum(1), x[:, 0])


@pytest.mark.parametrize("executor", [None, "joblib"])
def test_a_named_tuple_result_is_trimmed_and_given_back_as_one(executor):
    """Trimming the padded last batch rebuilt it as ``Pair(generator)``: a
    TypeError (JAX pads by default); unpadded, it came back a plain tuple."""
    x = np.arange(74.0).reshape(37, 2)
    for pad in (True, False):
        got = xpkit.map_batches(
            _pair, x, pad=pad, executor=executor, **_batches_of(10, 37)
        )
        assert type(got) is Pair
        np.testing.assert_array_equal(got.total, x.sum(1))
        np.testing.assert_array_equal(got.first, x[:, 0])
    out = Pair(np.empty(37), np.empty(37))
    got = xpkit.map_batches(_pair, x, out=out, pad=True, **_batches_of(10, 37))
    assert got.total is out.total
    np.testing.assert_array_equal(out.total, x.sum(1))
    pieces = list(xpkit.iter_batches(_pair, x, pad=True, **_batches_of(10, 37)))
    assert [type(piece) for _, piece in pieces] == [Pair] * 4


@pytest.mark.parametrize(("n", "min_batch"), [(81, 1), (100, 25), (95, 1)])
def test_a_padded_last_batch_that_fails_at_min_batch_runs_its_own_rows(n, min_batch):
    """The last batch (1, 20 or 15 rows, padded to 40) ran out of memory and,
    at min_batch or under, was fatal in the local loop, though its own rows
    fit (the executors ran them unpadded); over it, it was split in halves,
    and the plan memory learned the halves' size for every later call."""
    seen: list[tuple[int, int]] = []

    def fn(x):
        rows = xpkit.current_rows()
        seen.append((len(rows), x.shape[0]))
        if x.shape[0] > len(rows):  # padded: out of memory
            raise MemoryError("the padded batch does not fit")
        return x * 2.0

    x = np.arange(float(n))[:, None]
    args = _batches_of(40, n, min_batch=min_batch)
    got = xpkit.map_batches(fn, x, pad=True, **args)
    np.testing.assert_array_equal(got, x * 2.0)
    last = n - 80
    assert seen[-2:] == [(last, 40), (last, last)]  # padded, then its own rows
    # (the rerun taught no size: it split nothing, and batches of 40 ran)
    assert xpkit.plan_batches(fn, x, **args).batch_size == 40


class _Stats(namedtuple("_Stats", "mean spread")):
    """A named tuple whose own ``__new__`` takes the rows, not the fields."""

    __slots__ = ()

    def __new__(cls, rows):
        return super().__new__(cls, rows.mean(axis=1), rows.std(axis=1))


class _Pair(tuple):
    """A tuple subclass whose constructor takes its two items apart."""

    def __new__(cls, a, b):
        return super().__new__(cls, (a, b))


def test_named_tuples_made_per_call_or_with_their_own_new_come_back_as_one():
    """A class made on each call is one structure (its name and fields); one
    whose ``__new__`` takes other arguments is built from its fields
    (``_make``); both were errors, and a tuple subclass's padded last batch
    a TypeError."""
    x = np.arange(74.0).reshape(37, 2)
    args = _batches_of(10, 37)

    def per_call(rows):
        made = namedtuple("Made", "twice plus")
        return made(rows * 2.0, rows + 1.0)

    got = xpkit.map_batches(per_call, x, pad=True, **args)
    assert type(got).__name__ == "Made"
    np.testing.assert_array_equal(got.twice, x * 2.0)
    got = xpkit.map_batches(_Stats, x, pad=True, **args)
    assert type(got) is _Stats
    np.testing.assert_array_equal(got.mean, x.mean(axis=1))
    got = xpkit.map_batches(lambda r: _Pair(r * 2.0, r + 1.0), x, pad=True, **args)
    np.testing.assert_array_equal(got[1], x + 1.0)

    def fields_change(rows):
        made = namedtuple("Made", "a b" if rows[0, 0] < 40 else "c d")
        return made(rows, rows)

    with pytest.raises(ValueError, match=r"Made\('c', 'd'\) .* Made\('a', 'b'\)"):
        xpkit.map_batches(fields_change, x, **args)
