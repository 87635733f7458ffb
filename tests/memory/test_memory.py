"""Budgets, batch sizing and worker counts (the seed's memory functions)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import os
import types
from fractions import Fraction

import numpy as np
import pytest
from fakes import fake_cuda, fake_mps
from helpers import run_python

import xpkit
from xpkit import _memory
from xpkit._adapters import ADAPTERS, MemoryInfo

GB = 1024**3


def test_gb_to_bytes():
    assert xpkit.gb_to_bytes(1) == 2**30
    assert xpkit.gb_to_bytes(0.5) == 2**29
    assert xpkit.gb_to_bytes(0) == 0


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_gb_to_bytes_rejects(bad):
    with pytest.raises(ValueError, match="gb must be"):
        xpkit.gb_to_bytes(bad)


@pytest.mark.parametrize(
    ("n_items", "bytes_per_item", "budget_gb", "overhead", "min_batch", "expected"),
    [
        (100, GB / 10, 1.0, 1.0, 1, (10, 10)),
        (100, GB / 10, 1.0, 2.0, 1, (5, 20)),
        (7, GB / 10, 1.0, 1.0, 1, (7, 1)),  # everything fits
        (100, GB / 2, 1.0, 1.0, 4, (4, 25)),  # min_batch wins over the budget
        (3, GB / 2, 1.0, 1.0, 10, (3, 1)),  # min_batch never above n_items
        (10, GB / 3, 1.0, 1.0, 1, (3, 4)),
    ],
)
def test_auto_batch_size(
    n_items, bytes_per_item, budget_gb, overhead, min_batch, expected
):
    got = xpkit.auto_batch_size(
        n_items,
        bytes_per_item,
        budget_gb=budget_gb,
        overhead=overhead,
        min_batch=min_batch,
    )
    assert got == expected
    assert got[0] * got[1] >= n_items
    assert (got[0] * (got[1] - 1)) < n_items


@pytest.mark.parametrize(
    ("bytes_per_item", "budget_gb"),
    [
        (1, 1000.0),
        (1, 2.0**32),
        (3, 2.0**33),
        (GB / 3, 1.0),
        (GB / 10, 0.3),
        (1234.567, 2.0**20),  # (a review: 1 KB over, the quotient rounded)
        (987654.321, 2.0**26),
    ],
)
def test_a_batch_never_goes_over_the_budget(bytes_per_item, budget_gb):
    """The allowance that keeps an exact fit from flooring (1 + 1e-12) added
    a whole item past 1e12 items a budget: 1 byte over 1000 GB, 4.6 MB over
    2**32 GB."""
    n = 2**80
    batch, _ = xpkit.auto_batch_size(n, bytes_per_item, budget_gb=budget_gb)
    budget = Fraction(budget_gb) * GB
    per_item = Fraction(bytes_per_item)
    assert batch * per_item <= budget + Fraction(1, 2)  # (half a byte: rounding)
    # (and not far under: within float64's precision of the quotient)
    assert (batch + 1) * per_item > budget * (1 - Fraction(1, 10**12))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"n_items": 0}, ValueError, "n_items must be a positive int, got 0"),
        ({"n_items": 2.5}, TypeError, "n_items must be an int, got 2.5"),
        (
            {"bytes_per_item": -1},
            ValueError,
            "bytes_per_item must be a finite positive",
        ),
        (
            {"bytes_per_item": math.nan},
            ValueError,
            "bytes_per_item must be a finite positive",
        ),
        ({"budget_gb": math.inf}, ValueError, "budget_gb must be a finite positive"),
        ({"budget_gb": 0}, ValueError, "budget_gb must be a finite positive"),
        ({"overhead": 0.0}, ValueError, "overhead must be a finite positive"),
        ({"min_batch": 0}, ValueError, "min_batch must be a positive int"),
        (
            {"bytes_per_item": 3 * GB},
            ValueError,
            r"one item requires 3 GB .* budget_gb=1.0",
        ),
    ],
)
def test_auto_batch_size_rejects(kwargs, exc, match):
    args = {"n_items": 10, "bytes_per_item": 100.0, "budget_gb": 1.0} | kwargs
    with pytest.raises(exc, match=match):
        xpkit.auto_batch_size(
            args.pop("n_items"),
            args.pop("bytes_per_item"),
            budget_gb=args.pop("budget_gb"),
            **args,
        )


def test_explicit_budget_wins_uncapped():
    assert xpkit.device_memory_budget(None, 123.0, cap_for_batching=True) == 123.0


@pytest.mark.parametrize("bad", [0, -2.0, math.nan, math.inf])
def test_explicit_budget_must_be_finite_positive(bad):
    with pytest.raises(ValueError, match="max_gpu_memory_gb must be a finite positive"):
        xpkit.device_memory_budget(None, bad)


def test_host_budget_is_available_ram_with_headroom(host_memory):
    host_memory(20)
    assert xpkit.device_memory_budget() == pytest.approx(20 * _memory.HEADROOM)
    capped = xpkit.device_memory_budget(cap_for_batching=True)
    # map_batches' budget: also under the CPU batch ceiling (16 MiB)
    assert capped == min(
        20 * _memory.HEADROOM,
        xpkit.BATCH_WORKING_SET_CEILING_GB,
        xpkit.HOST_BATCH_WORKING_SET_BYTES / GB,
    )


def test_budget_falls_back_when_nothing_can_be_measured(monkeypatch):
    def broken() -> int:
        raise OSError("no /proc here")

    monkeypatch.setattr(_memory, "host_available_bytes", broken)
    assert xpkit.device_memory_budget() == _memory.FALLBACK_BUDGET_GB


def test_nothing_free_gives_the_minimum_budget_not_the_fallback(host_memory):
    host_memory(0)
    assert xpkit.device_memory_budget() == _memory.MIN_BUDGET_GB
    assert _memory.MIN_BUDGET_GB < _memory.FALLBACK_BUDGET_GB


def test_cuda_budget_counts_allocator_cache(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: (6 * GB, 80 * GB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: 3 * GB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: 1 * GB)
    b = xpkit.Backend("torch", device="cuda:1")
    assert xpkit.device_memory_budget(b) == pytest.approx((6 + 2) * _memory.HEADROOM)


def test_mps_budget_is_recommended_minus_driver(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_mps(monkeypatch)
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 16 * GB)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 6 * GB)
    b = xpkit.Backend("torch")
    assert xpkit.device_memory_budget(b) == pytest.approx(10 * _memory.HEADROOM)


def test_jax_and_cupy_budgets_through_their_adapters(monkeypatch):
    for key in ("jax", "cupy"):
        adapter = ADAPTERS[key]
        monkeypatch.setattr(
            adapter, "memory_info", lambda dev: MemoryInfo(5 * GB, 16 * GB)
        )
    b = xpkit.Backend("numpy")
    monkeypatch.setattr(b, "_adapter", ADAPTERS["jax"])
    assert xpkit.device_memory_budget(b) == pytest.approx(5 * _memory.HEADROOM)


def test_auto_n_jobs_by_memory(monkeypatch):
    monkeypatch.setattr("joblib.cpu_count", lambda: 8)
    arrays = [np.zeros(1024**2 // 8), None, np.zeros(10)]  # largest: 1 MiB
    assert xpkit.auto_n_jobs_for_arrays(arrays, max_memory_gb=1.0) == 8
    with pytest.warns(
        xpkit.MemoryCapWarning, match="memory caps the worker count at 3"
    ):
        assert xpkit.auto_n_jobs_for_arrays(arrays, max_memory_gb=3 / 1024) == 3
    with pytest.warns(  # (it said "caps ... at 2": min_jobs, not what memory holds)
        xpkit.MemoryCapWarning,
        match="caps the worker count at 0 .*; min_jobs=2 runs more than the budget",
    ):
        assert (
            xpkit.auto_n_jobs_for_arrays(arrays, max_memory_gb=1 / 4096, min_jobs=2)
            == 2
        )
    assert xpkit.auto_n_jobs_for_arrays([], min_jobs=3) == 3


def test_auto_n_jobs_refuses_items_whose_bytes_cannot_be_counted():
    """A sparse tensor raised torch's RuntimeError, a Dask array of unknown
    length NumPy's "cannot convert float NaN to integer"."""
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"arrays\[0\] is a sparse tensor"):
        xpkit.auto_n_jobs_for_arrays([torch.eye(3).to_sparse()], max_memory_gb=1.0)
    da = pytest.importorskip("dask.array")
    x = da.arange(10, chunks=5)
    unknown = x[x > 3]
    with pytest.raises(ValueError, match=r"arrays\[1\] has a shape that is not known"):
        xpkit.auto_n_jobs_for_arrays([np.zeros(3), unknown], max_memory_gb=1.0)


def test_auto_n_jobs_counts_strings_of_any_library_as_numpy_s(monkeypatch):
    """An ndonnx array of strings raised "dtype=Utf8 is not a numeric or
    boolean dtype", naming no arrays[i], where NumPy's strings are counted:
    both count the bytes of their NumPy strings; a symbolic one is refused,
    named."""
    ndx = pytest.importorskip("ndonnx")
    monkeypatch.setattr("joblib.cpu_count", lambda: 64)
    words = np.array(["x" * 256] * 1024)  # 1 MiB of <U256
    budget = 10 / 1024
    for item in (words, ndx.asarray(words)):
        with pytest.warns(xpkit.MemoryCapWarning, match="at 10"):
            assert xpkit.auto_n_jobs_for_arrays([item], max_memory_gb=budget) == 10
    symbolic = ndx.argument(shape=(3,), dtype=ndx.utf8)
    with pytest.raises(TypeError, match=r"^arrays\[1\] has dtype utf8, .* no values"):
        xpkit.auto_n_jobs_for_arrays([None, symbolic], max_memory_gb=1.0)


def test_auto_n_jobs_counts_an_object_array_as_its_pickle(monkeypatch):
    """Counted as its pointers (8 bytes an element): an object array holding
    a 1 MiB array ran as many workers as CPUs, under any budget."""
    monkeypatch.setattr("joblib.cpu_count", lambda: 64)
    held = np.empty(2, dtype=object)
    held[0], held[1] = np.zeros(1024**2 // 8), "a label"
    assert held.nbytes == 16
    budget = 10 / 1024  # (10 MiB: 9 workers of a little over 1 MiB each)
    with pytest.warns(xpkit.MemoryCapWarning, match="at 9 "):
        assert xpkit.auto_n_jobs_for_arrays([held], max_memory_gb=budget) == 9
    labels = np.array(["a", "b"], dtype=object)  # (small: not capped)
    assert xpkit.auto_n_jobs_for_arrays([labels], max_memory_gb=budget) == 64


@pytest.mark.parametrize(
    "call",
    [lambda: xpkit.memory_budget(1.0)(5), lambda: xpkit.memory_budget.bind("f")],
    ids=["decorating", "bind"],
)
def test_memory_budget_refuses_what_is_not_callable(call):
    """It returned a wrapper (or the value itself) that failed only when called."""
    with pytest.raises(TypeError, match="must be callable, got"):
        call()
    assert xpkit.auto_n_jobs_for_arrays([None, None]) == 1


@pytest.mark.xpkit_requires("float64")  # sized as 1 MiB of float64
def test_auto_n_jobs_sizes_any_library(xpkit_backend, monkeypatch):
    monkeypatch.setattr("joblib.cpu_count", lambda: 64)
    x = xpkit_backend.asarray(np.zeros((256, 512)))  # 1 MiB of float64
    with pytest.warns(xpkit.MemoryCapWarning, match="at 10"):
        assert xpkit.auto_n_jobs_for_arrays([x], max_memory_gb=10 / 1024) == 10


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"arrays": 5}, TypeError, "arrays must be an iterable of arrays, got int"),
        ({"arrays": [], "min_jobs": 0}, ValueError, "min_jobs must be a positive int"),
        (
            {"arrays": [np.ones(2)], "max_memory_gb": -1},
            ValueError,
            "max_memory_gb must be",
        ),
    ],
)
def test_auto_n_jobs_rejects(kwargs, exc, match):
    arrays = kwargs.pop("arrays")
    with pytest.raises(exc, match=match):
        xpkit.auto_n_jobs_for_arrays(arrays, **kwargs)


def test_one_budget_object_in_two_asyncio_tasks_at_once():
    import asyncio

    shared = xpkit.memory_budget(7.0)

    async def task(delay: float) -> tuple[float | None, float | None]:
        with shared:
            await asyncio.sleep(delay)
            inside = _memory.configured_budget_gb()
        return inside, _memory.configured_budget_gb()

    async def both():
        return await asyncio.gather(task(0.02), task(0.0))

    assert asyncio.run(both()) == [(7.0, None), (7.0, None)]


def test_one_budget_object_in_two_threads_at_once():
    import threading

    shared = xpkit.memory_budget(6.0)
    barrier = threading.Barrier(2)
    seen: dict[int, tuple[float | None, float | None]] = {}

    def worker(i: int) -> None:
        with shared:
            barrier.wait()
            inside = _memory.configured_budget_gb()
            barrier.wait()  # both inside before either leaves
        seen[i] = (inside, _memory.configured_budget_gb())

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {0: (6.0, None), 1: (6.0, None)}


def test_a_decorated_generator_runs_under_its_budget_and_only_there():
    @xpkit.memory_budget(3.0)
    def gen():
        got = yield _memory.configured_budget_gb()
        try:
            yield (got, _memory.configured_budget_gb())
        except KeyError:
            yield ("thrown", _memory.configured_budget_gb())
        return "done"

    g = gen()
    assert next(g) == 3.0
    assert _memory.configured_budget_gb() is None  # not in the caller between yields
    assert g.send("sent") == ("sent", 3.0)
    assert g.throw(KeyError("x")) == ("thrown", 3.0)
    with pytest.raises(StopIteration) as stop:
        next(g)
    assert stop.value.value == "done"
    assert _memory.configured_budget_gb() is None


def test_a_decorated_async_generator_runs_under_its_budget_and_only_there():
    """Its budget held only while the generator object was made: it read the
    measured budget (18.3 GB) inside."""
    closed = []

    @xpkit.memory_budget(3.0)
    async def agen():
        got = yield _memory.configured_budget_gb()
        try:
            await asyncio.sleep(0)
            yield (got, _memory.configured_budget_gb())
        except KeyError:
            yield ("thrown", _memory.configured_budget_gb())
        try:
            yield "last"
        finally:
            closed.append(_memory.configured_budget_gb())

    async def main():
        g = agen()
        first = await g.asend(None)
        between = _memory.configured_budget_gb()  # (the caller's, between yields)
        sent = await g.asend("sent")
        thrown = await g.athrow(KeyError("x"))
        last = await g.asend(None)
        await g.aclose()
        return first, between, sent, thrown, last, [v async for v in agen()]

    first, between, sent, thrown, last, listed = asyncio.run(main())
    assert (first, between, sent) == (3.0, None, ("sent", 3.0))
    assert (thrown, last) == (("thrown", 3.0), "last")
    assert closed[0] == 3.0  # (its finally ran under the budget on aclose)
    assert listed == [3.0, (None, 3.0), "last"]
    assert _memory.configured_budget_gb() is None


def test_a_block_a_decorated_generator_holds_across_a_yield_is_its_own():
    """Its ``with memory_budget(3.0)`` leaked into the caller between yields,
    and at the next resumption the decorator's 0.5 lay over it."""

    @xpkit.memory_budget(0.5)
    def gen():
        yield _memory.configured_budget_gb()
        with xpkit.memory_budget(3.0):
            yield _memory.configured_budget_gb()
            yield _memory.configured_budget_gb()
        yield _memory.configured_budget_gb()

    g, seen = gen(), []
    for _ in range(4):
        seen.append(next(g))
        seen.append(_memory.configured_budget_gb())  # (the caller's, between)
    assert seen == [0.5, None, 3.0, None, 3.0, None, 0.5, None]


def test_a_block_a_decorated_async_generator_holds_is_its_own():
    @xpkit.memory_budget(0.5)
    async def agen():
        with xpkit.memory_budget(3.0):
            yield _memory.configured_budget_gb()
            yield _memory.configured_budget_gb()
        yield _memory.configured_budget_gb()

    async def main():
        return [(v, _memory.configured_budget_gb()) async for v in agen()]

    assert asyncio.run(main()) == [(3.0, None), (3.0, None), (0.5, None)]


def test_an_object_whose_call_is_a_coroutine_or_generator_runs_under_the_budget():
    """An object whose ``__call__`` is ``async def`` (or a generator): the
    budget held only while the coroutine object was made."""

    class Job:
        async def __call__(self):
            await asyncio.sleep(0)
            return _memory.configured_budget_gb()

    class Rows:
        def __call__(self):
            yield _memory.configured_budget_gb()

    assert asyncio.run(xpkit.memory_budget(0.6)(Job())()) == 0.6
    assert list(xpkit.memory_budget(0.6)(Rows())()) == [0.6]
    assert _memory.configured_budget_gb() is None


def test_a_coroutine_or_generator_behind_a_wrapper_or_partial_is_one():
    """A review: through a sync ``functools.wraps`` decorator, or a
    ``partial`` of an object with ``async def __call__``, the budget held
    only while the coroutine or generator was made."""

    def plain(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            return f(*args, **kwargs)

        return wrapper

    @xpkit.memory_budget(1.0)
    @plain
    async def job():
        await asyncio.sleep(0)
        return _memory.configured_budget_gb()

    @xpkit.memory_budget(1.0)
    @plain
    def rows():
        yield _memory.configured_budget_gb()

    class Job:
        async def __call__(self, k):
            await asyncio.sleep(0)
            return k * _memory.configured_budget_gb()

    assert asyncio.run(job()) == 1.0
    assert list(rows()) == [1.0]
    assert asyncio.run(xpkit.memory_budget(0.6)(functools.partial(Job(), 1))()) == 0.6


def test_what_a_plain_function_returns_comes_back_as_it_is():
    """A review caught a first fix that wrapped every generator or coroutine a
    plain function returned: a primed generator refused ``send``, a
    ``types.coroutine`` generator could no longer be awaited."""

    def consumer():
        got = yield
        while True:
            got = yield got * 2

    @xpkit.memory_budget(1.0)
    def primed():
        g = consumer()
        next(g)
        return g

    made = primed()
    assert inspect.getgeneratorstate(made) == inspect.GEN_SUSPENDED
    assert made.send(5) == 10

    @types.coroutine
    def legacy():
        yield
        return 42

    @xpkit.memory_budget(1.0)
    def wrapped():
        return legacy()

    async def main():
        return await wrapped()

    assert asyncio.run(main()) == 42


def test_memory_budget_refuses_to_decorate_a_class():
    """It returned a function: ``isinstance(x, K)`` then failed."""

    class K:
        pass

    with pytest.raises(TypeError, match="^func must be a function, not a class"):
        xpkit.memory_budget(1.0)(K)


def test_memory_budget_decorates_coroutines():
    @xpkit.memory_budget(2.0)
    async def job() -> float:
        await asyncio.sleep(0)
        return xpkit.device_memory_budget()

    assert asyncio.run(job()) == 2.0
    assert _memory.configured_budget_gb() is None


def test_bind_carries_the_budget_into_a_thread_pool():
    from concurrent.futures import ThreadPoolExecutor

    with xpkit.memory_budget(5.0), ThreadPoolExecutor(1) as pool:
        plain = pool.submit(_memory.configured_budget_gb).result()
        bound = pool.submit(
            xpkit.memory_budget.bind(_memory.configured_budget_gb)
        ).result()
    assert plain is None  # threads start with an empty context
    assert bound == 5.0
    assert xpkit.memory_budget.bind(len) is len  # nothing in force: fn itself


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda: xpkit.gb_to_bytes(1e300), "gb"),
        (lambda: xpkit.memory_budget(1e300), "gb"),
        (lambda: xpkit.device_memory_budget(None, 1e300), "max_gpu_memory_gb"),
        (lambda: xpkit.auto_batch_size(10, 8.0, budget_gb=1e300), "budget_gb"),
        (
            lambda: xpkit.map_batches(abs, np.ones((4, 1)), budget_gb=1e300),
            "budget_gb",
        ),
        (
            lambda: xpkit.auto_n_jobs_for_arrays([np.ones(3)], max_memory_gb=1e300),
            "max_memory_gb",
        ),
    ],
)
def test_huge_finite_budgets_are_refused_by_name(call, param):
    with pytest.raises(ValueError, match=rf"^{param} must be at most .* got 1e\+300"):
        call()


def test_huge_budget_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", "1e300")
    with pytest.raises(
        ValueError,
        match=r"XPKIT_MEMORY_BUDGET_GB must be .* \(at most \d+\), got .1e300.",
    ):
        xpkit.device_memory_budget()


def test_the_environment_reads_as_os_environ_get(monkeypatch):
    name = "XPKIT_TEST_ENVIRONMENT_READ"
    monkeypatch.delenv(name, raising=False)
    seen = [_memory.environment_variable(name)]
    monkeypatch.setenv(name, " 0.5 ")
    seen.append(_memory.environment_variable(name))
    os.environ[name] = "caf\u00e9"  # (not ASCII: decoded as os.environ does)
    seen.append(_memory.environment_variable(name))
    del os.environ[name]
    seen.append(_memory.environment_variable(name))
    assert seen == [None, " 0.5 ", "caf\u00e9", None]
    monkeypatch.setattr(os, "environ", {name: "2"})  # a mapping in its place
    assert _memory.environment_variable(name) == "2"
    assert _memory.environment_variable("HOME") is None


def test_a_mapping_in_place_of_os_environ_before_the_import_is_read_with_get():
    code = (
        "import os\n"
        "os.environ = dict(os.environ, XPKIT_MEMORY_BUDGET_GB='0.5')\n"
        "from xpkit._memory import configured_budget_gb, environment_variable\n"
        "print(configured_budget_gb(), environment_variable('XPKIT_NOT_SET'))\n"
    )
    done = run_python(code)
    assert (done.returncode, done.stdout.strip()) == (0, "0.5 None"), done.stderr


def test_a_budget_set_in_the_environment_holds_at_once(monkeypatch):
    monkeypatch.delenv("XPKIT_MEMORY_BUDGET_GB", raising=False)
    assert _memory.configured_budget_gb() is None
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", "0.25")
    assert _memory.configured_budget_gb() == 0.25
    monkeypatch.delenv("XPKIT_MEMORY_BUDGET_GB")
    assert _memory.configured_budget_gb() is None


def test_a_subnormal_item_size_fills_one_batch():
    assert xpkit.auto_batch_size(10, 1e-320, budget_gb=1) == (10, 1)
    got = xpkit.map_batches(lambda a: a + 1.0, np.ones((5, 1)), bytes_per_item=1e-320)
    np.testing.assert_array_equal(got, np.full((5, 1), 2.0))


# -- memory_budget: each exit removes its own entry (issue #19) -----------------------
def _budget() -> float | None:
    return _memory.configured_budget_gb()


def _holding(gb: float):
    """A generator that holds a budget block across its yield."""
    with xpkit.memory_budget(gb):
        yield _budget()


def test_a_generator_closed_inside_a_later_block_leaves_that_block_in_force():
    gen = _holding(1.0)
    assert next(gen) == 1.0
    with xpkit.memory_budget(5.0):
        gen.close()  # its block ends here, inside the caller's later one
        assert _budget() == 5.0
    assert _budget() is None


def test_a_generator_collected_inside_a_later_block_leaves_that_block_in_force():
    gen = _holding(1.0)
    next(gen)
    with xpkit.memory_budget(5.0):
        del gen  # refcounting closes it now
        assert _budget() == 5.0
    assert _budget() is None


def test_blocks_left_out_of_order_each_remove_their_own_budget():
    outer, middle, inner = (xpkit.memory_budget(gb) for gb in (1.0, 2.0, 3.0))
    outer.__enter__()
    middle.__enter__()
    inner.__enter__()
    middle.__exit__(None, None, None)
    assert _budget() == 3.0
    inner.__exit__(None, None, None)
    assert _budget() == 1.0  # not 2.0: middle's entry went with middle
    outer.__exit__(None, None, None)
    assert _budget() is None


def test_one_object_nested_in_itself_and_around_another():
    shared = xpkit.memory_budget(2.0)
    with shared:
        with xpkit.memory_budget(3.0):
            with shared:
                assert _budget() == 2.0
            assert _budget() == 3.0
        assert _budget() == 2.0
    assert _budget() is None


def test_one_object_held_by_a_generator_and_entered_again_by_its_caller():
    shared = xpkit.memory_budget(4.0)

    def gen():
        with shared:
            yield

    g = gen()
    next(g)
    with xpkit.memory_budget(8.0), shared:
        g.close()
        assert _budget() == 4.0
    assert _budget() is None


def test_leaving_a_block_entered_in_another_context_removes_nothing_here():
    import contextvars

    elsewhere = xpkit.memory_budget(1.0)
    contextvars.copy_context().run(elsewhere.__enter__)
    with xpkit.memory_budget(5.0):
        elsewhere.__exit__(None, None, None)
        assert _budget() == 5.0
    assert _budget() is None


def test_generators_closed_late_in_threads_each_keep_their_own_budget():
    import threading

    barrier = threading.Barrier(3)
    seen: dict[int, list[float | None]] = {}

    def worker(i: int) -> None:
        gen = _holding(10.0 + i)
        got = [next(gen)]
        barrier.wait()  # every thread holds its generator's block
        with xpkit.memory_budget(20.0 + i):
            barrier.wait()
            gen.close()
            got.append(_budget())
            barrier.wait()  # every generator closed before any block ends
        got.append(_budget())
        seen[i] = got

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {i: [10.0 + i, 20.0 + i, None] for i in range(3)}


def test_async_generators_closed_late_in_tasks_each_keep_their_own_budget():
    async def holding(gb: float):
        with xpkit.memory_budget(gb):
            yield _budget()

    async def task(i: int) -> list[float | None]:
        agen = holding(10.0 + i)
        got = [await agen.__anext__()]
        with xpkit.memory_budget(20.0 + i):
            await asyncio.sleep(0.01 * (2 - i))  # the tasks interleave here
            await agen.aclose()
            got.append(_budget())
            await asyncio.sleep(0)
        got.append(_budget())
        return got

    async def all_tasks() -> list[list[float | None]]:
        return await asyncio.gather(*(task(i) for i in range(3)))

    assert asyncio.run(all_tasks()) == [[10.0 + i, 20.0 + i, None] for i in range(3)]
    assert _budget() is None


def test_memory_budget_gb_is_read_only():
    block = xpkit.memory_budget(2.0)
    assert block.gb == 2.0
    with pytest.raises(AttributeError):
        block.gb = 3.0  # type: ignore[misc]


def test_blocks_entered_and_left_through_an_exit_stack():
    from contextlib import ExitStack

    shared = xpkit.memory_budget(2.0)
    with ExitStack() as stack:
        stack.enter_context(shared)  # entered and left from ExitStack's frames
        with shared:
            assert _budget() == 2.0
        stack.enter_context(xpkit.memory_budget(3.0))
        assert _budget() == 3.0
    assert _budget() is None
