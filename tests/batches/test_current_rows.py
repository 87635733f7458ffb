"""`xpkit.current_rows`: the rows ``fn`` is computing, on every executor and path.

Each input's first column holds its rows' own positions, so ``fn`` checks
what `current_rows` says against the rows it was given (in the worker:
`pool_jobs.rows_and_checked_values`), and returns the positions the range
names; the result must be ``arange(n)``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pool_jobs as jobs
import pytest

import xpkit

#: Batches of 4 rows of 8 float64 columns (no probe: the cost is given).
BATCHES_OF_4 = {"bytes_per_item": 1000.0, "budget_gb": 4.5e-6}


def positions(n: int, columns: int = 8, offset: int = 0) -> np.ndarray:
    x = np.zeros((n, columns))
    x[:, 0] = np.arange(offset, offset + n)
    return x


def test_none_outside_fn():
    assert xpkit.current_rows() is None
    xpkit.map_batches(jobs.rows_and_checked_values, positions(10), **BATCHES_OF_4)
    assert xpkit.current_rows() is None


def test_each_batch_knows_its_rows_in_process():
    seen = []

    def fn(x):
        seen.append(xpkit.current_rows())
        return jobs.rows_and_checked_values(x)

    got = xpkit.map_batches(fn, positions(10), **BATCHES_OF_4)
    np.testing.assert_array_equal(got, np.arange(10))
    assert seen == [range(4), range(4, 8), range(8, 10)]


def test_the_probe_and_the_trace_see_their_rows(xpkit_backend):
    """Without a cost given, the probe (or the trace) calls fn on rows 0:m."""
    b = xpkit_backend
    seen = []

    def fn(x):
        rows = xpkit.current_rows()
        seen.append(rows)
        return x[:, 0] * 0 + rows.start  # traceable: no values read

    x = b.asarray(positions(64))
    got = b.to_numpy(xpkit.map_batches(fn, x, backend=b, budget_gb=2**-16))
    assert seen
    assert all(r is not None and r.start >= 0 and r.stop <= 64 for r in seen)
    # each row's value is the start of the batch that computed it
    starts = sorted({r.start for r in seen})
    assert set(got.tolist()) <= set(starts)
    assert got[0] == 0


def test_the_halves_of_an_oom_split_know_theirs():
    seen = []

    def fn(x):
        rows = xpkit.current_rows()
        seen.append(rows)
        if len(rows) > 2:
            raise MemoryError("injected: more than 2 rows")
        return jobs.rows_and_checked_values(x)

    got = xpkit.map_batches(fn, positions(8), bytes_per_item=8.0)
    np.testing.assert_array_equal(got, np.arange(8))
    done = [r for r in seen if len(r) <= 2]
    assert sorted(r.start for r in done) == [0, 2, 4, 6]
    assert seen[0] == range(8)


#: What `_remembered_fn` saw (module level: a closure over a list is not
#: remembered, the plan memory cannot hold a list by a weak reference).
_seen: list[range | None] = []


def _remembered_fn(x):
    _seen.append(xpkit.current_rows())
    return x[:, 0]


def test_a_repeated_one_batch_call_knows_all_rows():
    x = positions(6)
    _seen.clear()
    xpkit.map_batches(_remembered_fn, x)  # planned: traced or probed, then run
    assert _seen[-1] == range(6)
    for _ in range(2):  # each again in one batch, the plan remembered
        _seen.clear()
        xpkit.map_batches(_remembered_fn, x)
        assert _seen == [range(6)]


def test_eight_threads_each_see_their_own_rows():
    """A context variable: one thread's batches never read another's rows."""

    def run(n: int) -> np.ndarray:
        x = positions(n)
        return xpkit.map_batches(jobs.rows_and_checked_values, x, **BATCHES_OF_4)

    sizes = [20 + i for i in range(8)]
    with ThreadPoolExecutor(8) as pool:  # (a thread's failure re-raised here)
        results = list(pool.map(run, sizes))
    for n, got in zip(sizes, results, strict=True):
        np.testing.assert_array_equal(got, np.arange(n))


def test_each_batch_knows_its_rows_on_joblib():
    """In joblib's worker processes (fn checks the range there)."""
    got = xpkit.map_batches(
        jobs.rows_and_checked_values, positions(24), executor="joblib", **BATCHES_OF_4
    )
    np.testing.assert_array_equal(got, np.arange(24))


def test_padded_last_batch_names_its_real_rows():
    seen = []

    def fn(x):
        rows = xpkit.current_rows()
        seen.append((rows, x.shape[0]))
        return x[:, 0]

    xpkit.map_batches(fn, positions(10), pad=True, **BATCHES_OF_4)
    assert seen[-1] == (range(8, 10), 4)  # fn given 4 rows, 2 of them real


def test_read_under_jax_jit_is_refused():
    """jit read the rows once, when it traced fn: every batch got rows 0-2."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @jax.jit
    def compiled(x):
        rows = xpkit.current_rows()
        return x[:, 0] + rows.start

    with pytest.raises(
        RuntimeError, match=r"current_rows\(\) was read while a JAX trace \(jax.jit"
    ):
        xpkit.map_batches(compiled, jnp.zeros((10, 8)), **BATCHES_OF_4)

    @jax.jit
    def shifted(x, start):  # the rows read outside jit, passed in: right
        return x[:, 0] + start

    def fn(x):
        return shifted(x, xpkit.current_rows().start)

    got = xpkit.map_batches(fn, jnp.zeros((10, 8)), **BATCHES_OF_4)
    np.testing.assert_array_equal(np.asarray(got), [0, 0, 0, 0, 4, 4, 4, 4, 8, 8])
    plain = xpkit.map_batches(  # traced by the meter (make_jaxpr), not refused
        lambda x: x[:, 0] + xpkit.current_rows().start, jnp.zeros((10, 8))
    )
    np.testing.assert_array_equal(np.asarray(plain), np.zeros(10))
