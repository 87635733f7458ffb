"""iter_batches: map_batches' batches yielded one by one, in order (issue #32 item 2)."""

from __future__ import annotations

import gc
import json
import weakref

import numpy as np
import pytest
from fakes import HerePool
from helpers import run_python

import xpkit
from xpkit._executors import Pool
from xpkit.testing import assert_equal

GB = 1024**3
#: bytes_per_item=1 with this budget gives batches of 7 rows.
SEVEN = {"bytes_per_item": 1.0, "budget_gb": 7 / GB}


def _data(n: int, cols: int = 3) -> np.ndarray:
    a = np.arange(n * cols, dtype=np.float64).reshape(n, cols) - 5.0
    a[:, 0] = np.arange(n)  # column 0 holds the row index
    return a


def _tiles(pieces, n: int) -> bool:
    """Whether the ranges of ``pieces`` tile range(n), in order."""
    at = 0
    for rows, _ in pieces:
        if rows.start != at or rows.stop <= rows.start:
            return False
        at = rows.stop
    return at == n


def test_batches_in_order_on_every_backend(xpkit_backend):
    b = xpkit_backend
    a = _data(30)
    pieces = list(xpkit.iter_batches(lambda x: x * 2.0, b.asarray(a), **SEVEN))
    assert _tiles(pieces, 30)
    assert [len(rows) for rows, _ in pieces] == [7, 7, 7, 7, 2]
    for rows, result in pieces:
        assert isinstance(result, np.ndarray)  # (result_on="host")
        np.testing.assert_array_equal(result, a[rows.start : rows.stop] * 2.0)


def test_result_on_device_every_backend(xpkit_backend):
    b = xpkit_backend
    a = _data(20)
    pieces = xpkit.iter_batches(
        lambda x: x + 1.0, b.asarray(a), result_on="device", backend=b, **SEVEN
    )
    for rows, result in pieces:
        assert xpkit.Backend.from_arrays(result) == b
        assert_equal(result, b.asarray(a[rows.start : rows.stop] + 1.0))


def test_the_probes_rows_come_first():
    def reads(x):  # reads a value: the trace cannot follow it, a probe runs
        return x * float(x[0, 0] * 0 + 3)

    a = _data(50_000)
    plan = xpkit.plan_batches(reads, a, budget_gb=1e-6, remember=False)
    assert 0 < plan.probe_rows < 50_000
    pieces = list(xpkit.iter_batches(reads, a, budget_gb=1e-6, remember=False))
    assert _tiles(pieces, 50_000)
    assert len(pieces[0][0]) < plan.probe_rows  # (the probe's first rows)
    got = np.concatenate([result for _, result in pieces])
    np.testing.assert_array_equal(got, a * 3.0)


def test_a_batch_split_after_an_oom_comes_as_its_pieces():
    def fn(x):
        if x.shape[0] > 3:
            raise MemoryError
        return x[:, 0]

    a = _data(30)
    pieces = list(xpkit.iter_batches(fn, a, **SEVEN))
    assert _tiles(pieces, 30)
    assert max(len(rows) for rows, _ in pieces) <= 3
    for rows, result in pieces:
        np.testing.assert_array_equal(result, np.arange(rows.start, rows.stop))


class _Reusing:
    """``fn`` that writes each batch's row sums into one buffer it reuses
    and returns a view of it (``raise_above``: a MemoryError above so many
    rows)."""

    def __init__(self, n: int, raise_above: int | None = None) -> None:
        self.buf = np.empty(n)
        self.raise_above = raise_above

    def __call__(self, x):
        if self.raise_above is not None and x.shape[0] > self.raise_above:
            raise MemoryError
        out = self.buf[: x.shape[0]]
        np.sum(x, axis=1, out=out)
        return out


@pytest.mark.parametrize("how", ["probed", "split"])
def test_rows_fn_runs_past_before_they_are_handed_over_are_its_values(how):
    """The probe's pieces, and an OOM split's, wait while ``fn`` runs again:
    a ``fn`` that reuses a buffer overwrote them before they were yielded
    (rows 0:4, 4:20 and 20:36 of 40 wrong; 0:6 of a split). They are held as
    copies; ``map_batches`` with the same ``fn`` was right."""
    a = _data(40)
    if how == "probed":
        fn, kwargs = _Reusing(40), {"remember": False}
    else:
        fn, kwargs = _Reusing(40, raise_above=2), {**SEVEN, "remember": False}
    pieces = []
    for rows, result in xpkit.iter_batches(fn, a, **kwargs):
        # (checked as it comes: a result is fn's own, the next call's to reuse)
        np.testing.assert_array_equal(result, a[rows.start : rows.stop].sum(1))
        pieces.append((rows, None))
    assert _tiles(pieces, 40)
    assert len(pieces) > 1


def test_structured_results_keep_their_structure():
    a = _data(20)
    for rows, result in xpkit.iter_batches(
        lambda x: {"s": x.sum(axis=1), "t": (x * 2.0, x[:, 0] > 9)}["t"], a, **SEVEN
    ):
        assert isinstance(result, tuple)
        np.testing.assert_array_equal(result[0], a[rows.start : rows.stop] * 2.0)
    for rows, result in xpkit.iter_batches(
        lambda x: {"s": x.sum(axis=1), "i": x[:, 0]}, a, **SEVEN
    ):
        assert set(result) == {"s", "i"}
        np.testing.assert_array_equal(result["i"], np.arange(rows.start, rows.stop))


def test_a_result_that_changes_between_batches_is_refused():
    def fn(x):
        return x if x[0, 0] == 0 else x.astype(np.float32)

    pieces = xpkit.iter_batches(fn, _data(20), **SEVEN)
    assert len(next(pieces)[0]) == 7
    with pytest.raises(TypeError, match="changed the dtype"):
        next(pieces)


def test_bad_arguments_are_refused_at_the_call_before_fn_runs():
    calls = []

    def fn(x):
        calls.append(x.shape[0])
        return x

    with pytest.raises(ValueError, match="min_batch"):
        xpkit.iter_batches(fn, _data(10), min_batch=0)
    with pytest.raises(TypeError, match="fn must be callable"):
        xpkit.iter_batches(3, _data(10))
    pieces = xpkit.iter_batches(fn, _data(10), **SEVEN)  # (made: nothing ran yet)
    assert calls == []
    assert len(list(pieces)) == 2


def test_zero_rows_yield_nothing():
    calls = []
    pieces = xpkit.iter_batches(lambda x: calls.append(1) or x, np.zeros((0, 3)))
    assert list(pieces) == []
    assert calls == []


def test_a_result_is_not_kept_once_the_caller_moves_on():
    pieces = xpkit.iter_batches(lambda x: x * 2.0, _data(30), **SEVEN)
    _, first = next(pieces)
    ref = weakref.ref(first)
    del first
    next(pieces)
    gc.collect()
    assert ref() is None


def test_memory_is_one_batch_not_the_outputs():
    """64 MiB of results, summed batch by batch under a 1 MiB budget: tracemalloc's peak, in a child."""
    code = """
import json, tracemalloc, numpy as np, xpkit
a = np.ones((2**20, 8))
tracemalloc.start()
total = 0.0
for rows, r in xpkit.iter_batches(lambda x: x * 2.0, a, budget_gb=2**-10, bytes_per_item=128):
    total += float(r.sum())
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"peak": peak, "total": total}))
"""
    got = json.loads(run_python(code, check=True).stdout.strip().splitlines()[-1])
    assert got["total"] == 2.0 * 8 * 2**20
    assert got["peak"] < 8 * 2**20  # (all the results: 64 MiB)


def test_in_order_on_the_joblib_executor():
    pytest.importorskip("joblib")
    a = _data(60)
    pieces = list(xpkit.iter_batches(lambda x: x - 1.0, a, executor="joblib", **SEVEN))
    assert _tiles(pieces, 60)
    np.testing.assert_array_equal(np.concatenate([r for _, r in pieces]), a - 1.0)


class _LatePool(HerePool, Pool):
    """Hands back the task of the earliest rows last: every other finishes before it."""

    def __init__(self) -> None:
        super().__init__(2)
        self.delivered = 0

    def wait(self, futures):
        first = min(futures, key=self.starts.__getitem__)
        chosen = [f for f in futures if f is not first] or [first]
        self.delivered += len(chosen)
        return super().wait(chosen)


def test_rows_out_of_order_wait_within_the_tasks_in_flight():
    """Tasks finishing before the earliest one wait for it, and count against
    the tasks in flight: never more wait than the pool runs at once."""
    from xpkit._request import BatchCall, batch_request
    from xpkit._stream import _batches_of

    a = _data(70)
    fn = lambda x: x * 2.0
    call = BatchCall(
        fn, (a,), None, (), 1.0, 1.0, 7 / GB, 1, None, "host", None, None, False
    )
    pool = _LatePool()
    request = batch_request(call)._replace(pool=pool)
    most_waiting, pieces = 0, []
    for yielded, piece in enumerate(_batches_of(request), start=1):
        pieces.append(piece)
        most_waiting = max(most_waiting, pool.delivered - yielded)
    assert _tiles(pieces, 70)
    assert len(pieces) == 10
    np.testing.assert_array_equal(np.concatenate([r for _, r in pieces]), a * 2.0)
    assert most_waiting <= pool.slots * pool.per_slot
