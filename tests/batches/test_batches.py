"""map_batches, the memory_budget context, and a real OOM under an address-space limit."""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import textwrap
import threading
import time
import warnings

import array_api_compat
import numpy as np
import pytest
from helpers import run_python
from ooms import assert_no_failed_size_again

import xpkit
from xpkit import _cost, _memory
from xpkit._adapters import _peak, get_adapter
from xpkit._adapters._shapes import ShapeArray
from xpkit._plan_memory import GROW_AFTER
from xpkit.testing import assert_equal

GB = 1024**3


def row_norms(x):
    return x * x


class CountingFn:
    """Row-wise fn that records its batch sizes and fails above ``capacity`` rows.

    What it records are the batches it ran on real rows: the plan's calls
    on shape-only arrays (the trace) are not batches.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity
        self.sizes: list[int] = []

    def __call__(self, x, y):
        n = int(x.shape[0])
        if isinstance(x, ShapeArray):
            return x * 2.0 - y
        self.sizes.append(n)
        if self.capacity is not None and n > self.capacity:
            raise MemoryError
        return x * 2.0 - y


def test_map_batches_matches_unbatched_on_every_backend(xpkit_backend):
    b = xpkit_backend
    a = np.arange(200.0).reshape(100, 2)
    c = np.ones((100, 2))
    fn = CountingFn()
    per_row = 2 * 2 * 8  # two float64 inputs of two columns
    got = xpkit.map_batches(
        fn,
        b.asarray(a),
        b.asarray(c),
        bytes_per_item=per_row,
        budget_gb=10 * per_row / GB,
    )
    assert_equal(got, a * 2.0 - c, check_namespace=False)
    assert fn.sizes == [10] * 10


class LazyWeights:
    """A model that builds its weight on its first call, from its input's namespace."""

    def __init__(self) -> None:
        self.w = None

    def __call__(self, x):
        xp = array_api_compat.array_namespace(x)
        if self.w is None:
            self.w = xp.ones(
                (x.shape[1], 3), dtype=x.dtype, device=array_api_compat.device(x)
            )
        return x @ self.w


def test_a_weight_fn_builds_on_its_first_call_is_named_not_computed(xpkit_backend):
    """The trace's call builds it as a shape-only array: the real batches met
    xpkit's internal CannotFollow, and fn(x) afterwards gave a shape-only
    array silently. Given bytes_per_item (no trace), fn builds a real one."""
    b = xpkit_backend
    x = b.asarray(np.arange(40.0).reshape(20, 2))
    model = LazyWeights()
    own_check = "strict" in b.name  # (its operators check the operand first)
    refused = (TypeError, ValueError) if own_check else TypeError
    with pytest.raises(refused) as info:
        xpkit.map_batches(model, x)
    if not own_check:
        assert "fn kept an array (or the namespace) of xpkit's shape-only" in str(
            info.value
        )
    assert "xpkit's stand-in, without values" in repr(model.w)
    with pytest.raises(refused):
        model(x)
    model = LazyWeights()
    got = xpkit.map_batches(model, x, bytes_per_item=2 * 8)
    expected = np.arange(40.0).reshape(20, 2).sum(axis=1, keepdims=True)
    assert_equal(got, np.repeat(expected, 3, axis=1), check_namespace=False)


@pytest.mark.parametrize("direction", ["numpy inputs", "inputs of the backend"])
def test_a_backend_of_another_library_moves_the_inputs_and_traces_fn(
    xpkit_backend, direction
):
    """backend= naming another library than the inputs' (the README's call).

    The cost is traced (no bytes_per_item): the trace once asked the target
    library's adapter about the source library's arrays (AttributeError).
    """
    b = xpkit_backend
    a = np.arange(200.0).reshape(100, 2)
    if direction == "numpy inputs":
        x, target = a, b
    else:
        x, target = b.asarray(a), xpkit.Backend("numpy")
    got = xpkit.map_batches(lambda r: r * 2.0, x, backend=target, remember=False)
    np.testing.assert_array_equal(np.asarray(target.to_numpy(got)), a * 2.0)
    plan = xpkit.plan_batches(lambda r: r * 2.0, x, backend=target, remember=False)
    assert plan.batch_size >= 1


def test_map_batches_overhead_multiplies_the_per_item_bytes():
    a = np.zeros((64, 128))  # 1 KiB per row
    fn = CountingFn()
    xpkit.map_batches(
        fn, a, a, bytes_per_item=2048, budget_gb=16 * 2048 / GB, overhead=2.0
    )
    assert fn.sizes == [8] * 8  # 2 KiB per item * 2.0 overhead -> 8 per 16 KiB batch


def test_map_batches_explicit_bytes_per_item():
    a = np.zeros((30, 1))
    fn = CountingFn()
    xpkit.map_batches(fn, a, a, bytes_per_item=1000.0, budget_gb=10_000 / GB)
    assert fn.sizes == [10, 10, 10]


def test_map_batches_shrinks_after_an_oom(caplog):
    a = np.arange(100.0)[:, None]
    fn = CountingFn(capacity=12)
    with caplog.at_level(logging.INFO, logger="xpkit"):
        got = xpkit.map_batches(fn, a, a, bytes_per_item=16, budget_gb=50 * 16 / GB)
    assert_equal(got, a)
    # 50 -> 25 -> 12 + 13 -> 13 fails -> 6 + 7; nothing of 13 rows or more is
    # tried again, and later batches start at the 12 rows that fitted
    assert fn.sizes[:5] == [50, 25, 12, 13, 6]
    assert max(fn.sizes[fn.sizes.index(13) + 1 :]) <= 12
    assert fn.sizes.count(13) == 1
    assert any("batch size 50 -> 12" in r.getMessage() for r in caplog.records)


def test_batches_never_grow_back_to_a_size_that_failed_in_the_call():
    """An OOM at 1000 rows, then many batches of what fitted: none of 500 or more."""
    a = np.arange(40_000.0)[:, None]
    fn = CountingFn(capacity=300)
    got = xpkit.map_batches(fn, a, a, bytes_per_item=16, budget_gb=1000 * 16 / GB)
    assert_equal(got, a)
    assert fn.sizes[:3] == [1000, 500, 250]
    assert len(fn.sizes) > 2 * GROW_AFTER  # (enough batches to grow, before)
    assert_no_failed_size_again(fn.sizes, 300)  # (it grew back to 500, which failed)


def test_batches_grow_back_after_an_earlier_call_s_oom():
    """What an earlier call taught is tried again after GROW_AFTER batches."""
    a = np.arange(40_000.0)[:, None]
    fn = CountingFn(capacity=300)
    options = {"bytes_per_item": 16, "budget_gb": 1000 * 16 / GB}
    xpkit.map_batches(fn, a, a, **options)  # teaches 250
    fn.capacity, fn.sizes = None, []  # the memory is back
    xpkit.map_batches(fn, a, a, **options)
    assert fn.sizes[0] == 250
    assert fn.sizes[GROW_AFTER] == 500
    assert max(fn.sizes) == 1000


class _RowsMeter(_peak.PeakMeter):
    """A meter that reports 64 bytes for each row of the last call of ``fn``."""

    name = "rows"

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def _measure(self, run):
        result = run()
        return result, 64 * self.sizes[-1]


def test_batches_never_grow_back_to_a_size_the_probe_found_too_large(monkeypatch):
    """The probe runs out of memory at 1024 and 512 rows: no batch of 512 after."""
    a = np.arange(100_000.0)[:, None]
    fn = CountingFn(capacity=300)
    meter = _RowsMeter(fn.sizes)
    numpy = type(get_adapter("numpy"))
    monkeypatch.setattr(numpy, "shape_traits", lambda self, device: None)  # no trace
    monkeypatch.setattr(_cost, "_PROFILES", {})
    monkeypatch.setattr(numpy, "peak_meters", lambda self, device: (meter,))
    got = xpkit.map_batches(fn, a, a, budget_gb=1.0)
    assert_equal(got, a)
    assert fn.sizes[:7] == [4, 16, 64, 256, 1024, 512, 256]  # the probe
    assert len(fn.sizes) > 2 * GROW_AFTER
    assert_no_failed_size_again(fn.sizes, 300)  # (it grew back to 512, which failed)


def test_compute_oom_safe_never_runs_a_failed_size_again():
    a = np.arange(1001.0)[:, None]
    fn = CountingFn(capacity=100)
    assert_equal(xpkit.compute_oom_safe(fn, a, a), a)
    assert fn.sizes[:2] == [1001, 500]
    assert_no_failed_size_again(fn.sizes, 100)


def test_map_batches_min_batch_is_the_floor_for_recovery():
    """At min_batch the MemoryError names the rows and what they needed, as
    on an executor (the user's bare error came back here), from fn's own.
    Ten rows that fail split into min_batch=8 rows and the rest: the 8 rows
    are tried (it gave up at ten, naming min_batch, which it never tried)."""
    a = np.arange(40.0)[:, None]
    with pytest.raises(
        MemoryError,
        match=r"^map_batches: rows 0:8 \(8 rows, about .* MiB with the overhead\) "
        r"could not run on numpy even at min_batch=8: out of memory \(MemoryError",
    ) as info:
        xpkit.map_batches(CountingFn(capacity=3), a, a, budget_gb=1.0, min_batch=8)
    assert type(info.value.__cause__) is MemoryError  # fn's own, chained


@pytest.mark.parametrize("caller", ["map_batches", "plan_batches"])
def test_a_min_batch_over_the_budget_of_a_given_cost_says_so(caplog, caller):
    """50 rows of 1 MB under a 1 MB budget ran without a word (a measured or
    traced cost said it)."""
    a = np.arange(200.0).reshape(100, 2)
    with caplog.at_level(logging.WARNING, logger="xpkit"):
        got = getattr(xpkit, caller)(
            lambda r: r * 2, a, bytes_per_item=1e6, budget_gb=0.001, min_batch=50
        )
    if caller == "map_batches":
        assert_equal(got, a * 2)
    else:
        assert got.batch_size == 50
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    need = f"{50 * 1e6 / 2**30:.3g}"  # (GB of 2**30 bytes, as budget_gb)
    assert said[0].startswith(
        f"{caller}: fn needs {need} GB for 50 rows (min_batch=50;"
    )
    assert said[0].endswith("more than the 0.001 GB budget; running batches of 50 rows")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="xpkit"):
        xpkit.map_batches(lambda r: r * 2, a, bytes_per_item=1e4, budget_gb=0.001)
        xpkit.map_batches(lambda r: r * 2, a, bytes_per_item=1e4, budget_gb=1.0)
    assert caplog.records == []  # (batches within the budget: nothing to say)


def test_a_min_batch_beyond_the_rows_runs_them_all_and_says_so(caplog):
    """It warned of 1.49e+22 GB "for min_batch=10**30 rows ... running
    batches of 10**30 rows" for an input of 6 rows."""
    a = np.arange(12.0).reshape(6, 2)
    with caplog.at_level(logging.WARNING, logger="xpkit"):
        got = xpkit.map_batches(lambda r: r * 2, a, min_batch=10**30, budget_gb=1e-12)
    assert_equal(got, a * 2)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1
    assert "for 6 rows (min_batch=10000" in said[0]
    assert said[0].endswith("running batches of 6 rows")
    need = float(said[0].split("fn needs ")[1].split(" GB")[0])
    assert need < 1e-3  # (6 rows of two float64 and a result: bytes, not 1e22 GB)


def test_iter_batches_names_itself_at_min_batch():
    a = np.arange(40.0)[:, None]
    batches = xpkit.iter_batches(
        CountingFn(capacity=3), a, a, bytes_per_item=8.0, budget_gb=1.0, min_batch=8
    )
    with pytest.raises(MemoryError, match=r"^iter_batches: rows 0:8 \(8 rows"):
        list(batches)


def test_map_batches_progress_bar(capsys):
    pytest.importorskip("tqdm")
    a = np.arange(10.0)[:, None]
    got = xpkit.map_batches(lambda x: x + 1, a, budget_gb=2 * 8 / GB, progress=True)
    assert_equal(got, a + 1)


def test_map_batches_uses_the_memory_budget_block():
    a = np.zeros((40, 1))  # 8 bytes per row
    fn = CountingFn()
    with xpkit.memory_budget(80 / GB):
        xpkit.map_batches(fn, a, a, bytes_per_item=16)
    assert fn.sizes == [5] * 8


def test_map_batches_reads_the_environment(monkeypatch):
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", str(160 / GB))
    fn = CountingFn()
    xpkit.map_batches(fn, np.zeros((40, 1)), np.zeros((40, 1)), bytes_per_item=16)
    assert fn.sizes == [10] * 4


@pytest.mark.parametrize("plan", [False, True], ids=["map_batches", "plan_batches"])
def test_an_item_over_the_budget_names_where_the_budget_came_from(plan, monkeypatch):
    """A budget of a memory_budget block or the environment variable was
    blamed on budget_gb=, which the call did not give."""
    call = xpkit.plan_batches if plan else xpkit.map_batches
    a = np.zeros((10, 2))
    over = r"^one item requires 9\.31e-07 GB \(bytes_per_item \* overhead\) but "
    in_force = r"the budget is 1e-07 GB \(the memory_budget\(1e-07\) in force\)$"
    with xpkit.memory_budget(1e-7), pytest.raises(ValueError, match=over + in_force):
        call(lambda r: r, a, bytes_per_item=1000)
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", "1e-7")
    env = r"the budget is 1e-07 GB \(XPKIT_MEMORY_BUDGET_GB='1e-7'\)$"
    with pytest.raises(ValueError, match=over + env):
        call(lambda r: r, a, bytes_per_item=1000)
    with pytest.raises(ValueError, match=over + r"budget_gb=1e-07$"):
        call(lambda r: r, a, bytes_per_item=1000, budget_gb=1e-7)  # (given wins)
    monkeypatch.delenv("XPKIT_MEMORY_BUDGET_GB")
    with pytest.raises(ValueError, match=r"but the budget is .* GB \(measured on "):
        call(lambda r: r, a, bytes_per_item=2.0**80)


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        ((42, np.ones(3)), {}, TypeError, "fn must be callable"),
        ((abs,), {}, ValueError, "arrays must hold at least one array"),
        ((abs, np.ones(3), np.ones(2)), {}, ValueError, "share their axis-0 length"),
        (
            (abs, np.ones(3)),
            {"budget_gb": 0},
            ValueError,
            "budget_gb must be a finite positive",
        ),
        (
            (abs, np.ones(3)),
            {"bytes_per_item": -5},
            ValueError,
            "bytes_per_item must be a finite positive",
        ),
        (
            (abs, np.ones(3)),
            {"overhead": float("nan")},
            ValueError,
            "overhead must be a finite positive",
        ),
        (
            (abs, np.ones(3)),
            {"min_batch": 0},
            ValueError,
            "min_batch must be a positive int",
        ),
        ((abs, np.ones(3)), {"progress": "yes"}, TypeError, "progress must be a bool"),
        ((abs, np.ones(3)), {"backend": "tpu"}, ValueError, "backend='tpu'"),
        (
            (abs, np.ones(3)),
            {"budget_gb": 1e-12, "bytes_per_item": 1e6},
            ValueError,
            "one item requires",
        ),
    ],
)
def test_map_batches_rejects(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        xpkit.map_batches(*args, **kwargs)


def test_memory_budget_nests_and_restores(host_memory):
    host_memory(10)
    measured = xpkit.device_memory_budget()
    with xpkit.memory_budget(3.0):
        assert xpkit.device_memory_budget() == 3.0
        with xpkit.memory_budget(1.0):
            assert xpkit.device_memory_budget(cap_for_batching=True) == 1.0
            assert xpkit.device_memory_budget(None, 7.0) == 7.0  # explicit still wins
        assert xpkit.device_memory_budget() == 3.0
    assert xpkit.device_memory_budget() == measured


def test_memory_budget_as_decorator_is_reentrant():
    @xpkit.memory_budget(2.0)
    def inner(depth: int) -> list[float]:
        got = [xpkit.device_memory_budget()]
        return got + inner(depth - 1) if depth else got

    assert inner(2) == [2.0, 2.0, 2.0]
    assert _memory.configured_budget_gb() is None


def test_memory_budget_is_per_thread_and_per_task():
    seen: dict[str, float | None] = {}
    barrier = threading.Barrier(2)

    def worker(name: str, gb: float) -> None:
        with xpkit.memory_budget(gb):
            barrier.wait()
            seen[name] = _memory.configured_budget_gb()

    threads = [
        threading.Thread(target=worker, args=(f"t{i}", float(i + 1))) for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"t0": 1.0, "t1": 2.0}

    async def task(gb: float) -> float | None:
        with xpkit.memory_budget(gb):
            await asyncio.sleep(0)
            return _memory.configured_budget_gb()

    async def both() -> list[float | None]:
        return list(await asyncio.gather(task(4.0), task(5.0)))

    assert asyncio.run(both()) == [4.0, 5.0]


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "2"])
def test_memory_budget_rejects(bad):
    with pytest.raises((ValueError, TypeError), match="gb must be"):
        xpkit.memory_budget(bad)


@pytest.mark.parametrize("raw", ["abc", "-1", "0", "nan"])
def test_env_budget_rejects(monkeypatch, raw):
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", raw)
    with pytest.raises(
        ValueError, match="XPKIT_MEMORY_BUDGET_GB must be a finite positive"
    ):
        xpkit.device_memory_budget()


REAL_OOM_SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    import xpkit

    def vm_size() -> int:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
        raise SystemExit("no VmSize")

    limit = vm_size() + 256 * 1024**2          # 256 MiB more address space
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cols = 1024**2 // 8                         # one MiB per row of scratch

    def fn(w):
        scratch = np.ones((w.shape[0], cols)) * w[:, None]
        return scratch.sum(axis=1)

    w = np.arange(1, 513, dtype=np.float64)      # 512 rows: 512 MiB of scratch
    try:
        fn(w)
    except MemoryError:
        print("unsplit call: MemoryError")
    else:
        raise SystemExit("the unsplit call fitted: the limit did not bite")
    got = xpkit.compute_oom_safe(fn, w)
    assert np.array_equal(got, w * cols), "recovered result differs"
    print("recovered", got.shape[0], "rows exactly")
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's")
def test_real_oom_recovered_under_address_space_limit():
    out = run_python(REAL_OOM_SCRIPT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "unsplit call: MemoryError" in out.stdout
    assert "recovered 512 rows exactly" in out.stdout


def test_map_batches_caps_measured_cpu_batches_for_throughput(host_memory):
    from xpkit._adapters import HOST_BATCH_WORKING_SET_BYTES

    host_memory(64)
    fn = CountingFn()
    a = np.zeros((200, 1))
    xpkit.map_batches(fn, a, a, bytes_per_item=2**20)  # 1 MiB per item, measured budget
    per_batch = HOST_BATCH_WORKING_SET_BYTES // 2**20
    assert fn.sizes[0] == per_batch
    assert sum(fn.sizes) == 200
    fn_explicit = CountingFn()
    xpkit.map_batches(
        fn_explicit, a, a, bytes_per_item=2**20, budget_gb=1.0
    )  # explicit wins
    assert fn_explicit.sizes == [200]


def test_map_batches_ceiling_never_refuses_one_big_item(host_memory):
    host_memory(64)
    seen: list[int] = []

    def fn(x):
        seen.append(x.shape[0])
        return x

    got = xpkit.map_batches(
        fn, np.zeros((4, 1)), bytes_per_item=100 * 2**20, overhead=2.0
    )
    assert got.shape == (4, 1)
    assert seen == [
        1,
        1,
        1,
        1,
    ]  # one 200 MiB item per batch: over the CPU ceiling, allowed


# -- one call when everything fits; outputs that cannot fit (issue #20) ----------
def test_one_call_covers_every_row_and_its_result_is_kept():
    x = np.arange(400.0).reshape(100, 4)
    made = []

    def fn(rows):
        made.append(rows * 2.0)
        return made[-1]

    got = xpkit.map_batches(fn, x, bytes_per_item=64.0, budget_gb=1.0)
    assert len(made) == 1  # one call for all 100 rows
    assert got is made[0]  # fn's own fresh result: not copied again
    assert_equal(got, x * 2.0)


@pytest.mark.parametrize(
    "view",
    [
        lambda rows, w: rows,  # the input itself
        lambda rows, w: rows[:, ::-1],  # a view of it
        lambda rows, w: w,  # a whole operand
    ],
    ids=["input", "input view", "whole operand"],
)
def test_a_result_that_shares_memory_with_what_fn_reads_is_copied(view):
    x, w = np.arange(400.0).reshape(100, 4), np.ones((100, 4))
    got = xpkit.map_batches(view, x, whole=(w,), bytes_per_item=64.0, budget_gb=1.0)
    assert not np.shares_memory(got, x)
    assert not np.shares_memory(got, w)
    assert_equal(got, view(x, w))


def test_two_outputs_sharing_memory_are_both_copied():
    x = np.arange(40.0).reshape(10, 4)

    def fn(rows):
        out = rows * 2.0
        return out, out[:, :2]

    a, b = xpkit.map_batches(fn, x, bytes_per_item=64.0, budget_gb=1.0)
    assert not np.shares_memory(a, b)
    assert_equal(a, x * 2.0)
    assert_equal(b, (x * 2.0)[:, :2])


def test_outputs_that_cannot_fit_are_refused_before_any_batch(monkeypatch):
    from xpkit import _outputs, _plan

    x = np.ones((1000, 4))
    fn = CountingFn()  # (an object: remembered while it lives)
    calls = fn.sizes
    y = np.zeros((1000, 4))

    xpkit.map_batches(fn, x, y)  # learns fn's output: 32 bytes per row
    remembered = xpkit.plan_batches(fn, x, y)
    if not remembered.remembered:
        pytest.skip(f"nothing measures here: {remembered.source}")
    assert remembered.output_bytes == 32_000
    assert remembered.outputs_fit
    small = lambda backend=None: 31_999  # a byte too few
    monkeypatch.setattr(_plan, "available_bytes", small)
    monkeypatch.setattr(_outputs, "available_bytes", small)
    plan = xpkit.plan_batches(fn, x, y)
    assert plan.outputs_fit is False
    calls.clear()
    with pytest.raises(
        MemoryError, match=r"outputs of fn=.* need 2\.98e-05 GiB on host.*nothing ran"
    ):
        xpkit.map_batches(fn, x, y)
    assert calls == []  # nothing ran
    xpkit.plan_memory.clear()  # not remembered: the trace of fn says their size
    with pytest.raises(MemoryError, match=r"need 2\.98e-05 GiB on host.*nothing ran"):
        xpkit.map_batches(fn, x, y)
    assert calls == []  # nothing ran on real rows either


def _reads(r):
    """``r * 2``, after reading a value (the shape-only trace cannot follow it)."""
    return r * 2.0 if float(r[0, 0]) > -1e300 else r


def test_the_fallback_estimate_is_used_only_where_nothing_measures(monkeypatch):
    x = np.ones((100, 4))
    traced = xpkit.plan_batches(lambda r: r * 2.0, x, fallback_bytes_per_item=5.0)
    assert traced.source == "traced by shape-only arrays"
    measured = xpkit.plan_batches(_reads, x, fallback_bytes_per_item=5.0)
    assert measured.source.startswith("measured by") or not get_adapter(
        "numpy"
    ).peak_meters("cpu")
    monkeypatch.setattr(type(get_adapter("numpy")), "peak_meters", lambda s, d: ())
    xpkit.plan_memory.clear()
    plan = xpkit.plan_batches(_reads, x, fallback_bytes_per_item=5.0)
    assert plan.source.startswith("fallback (numpy on 'cpu' has no peak-memory meter")
    assert "shape-only arrays could not follow fn: fn read a value" in plan.source
    assert plan.bytes_per_item == 5.0
    guess = xpkit.plan_batches(lambda r: _reads(r) * 4.0, x)
    assert guess.source.startswith("input rows")
    assert guess.bytes_per_item == 32.0
    with pytest.raises(ValueError, match="fallback_bytes_per_item must be a finite"):
        xpkit.plan_batches(lambda r: r, x, fallback_bytes_per_item=-1.0)


def test_map_batches_refuses_jax_tracers_naming_jit():
    jax = pytest.importorskip("jax")

    @jax.jit
    def traced(x):
        return xpkit.map_batches(lambda r: r * 2.0, x)

    with pytest.raises(RuntimeError, match="map_batches cannot run inside jax.jit"):
        traced(jax.numpy.ones((4, 2)))


def test_map_batches_under_torch_compile_names_itself():
    """fullgraph=True: the error carries xpkit's reason; otherwise it runs eagerly."""
    torch = pytest.importorskip("torch")

    def f(x):
        return xpkit.map_batches(lambda r: r * 2.0, x, bytes_per_item=8.0)

    x = torch.ones(6, 2)
    strict = torch.compile(f, fullgraph=True, backend="eager")
    lenient = torch.compile(f, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # dynamo's notes on lru_cache
        with pytest.raises(Exception, match="is an eager loop on the host"):
            strict(x)
        got = lenient(x)  # a graph break: map_batches runs eagerly
    assert_equal(got, np.full((6, 2), 2.0, dtype=np.float32))


_DYNAMO_LATER = """
import sys, warnings
import torch
import xpkit

x = torch.ones(6, 2)
xpkit.map_batches(lambda r: r * 2.0, x, bytes_per_item=8.0)
print("dynamo imported:", "torch._dynamo" in sys.modules)


def f(x):
    return xpkit.map_batches(lambda r: r * 3.0, x, bytes_per_item=8.0)


with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    try:  # (first: dynamo's cache would keep the lenient graph for f)
        torch.compile(f, fullgraph=True, backend="eager")(x)
    except Exception as exc:
        print("fullgraph:", "is an eager loop on the host" in str(exc))
    print("compiled:", float(torch.compile(f, backend="eager")(x).sum()))
"""


def test_torch_s_compiler_is_not_imported_until_something_compiles():
    """A first torch map_batches imported dynamo (2.3 s) to mark its eager
    bodies; they are made once torch.compile is in use, and still break the
    graph (or name themselves under fullgraph=True) when that is later."""
    pytest.importorskip("torch")
    done = run_python(_DYNAMO_LATER)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "dynamo imported: False",
        "fullgraph: True",
        "compiled: 36.0",
    ]


def test_map_batches_fits_on_one_screen():
    """The public function forwards; its body reads top to bottom in 60 lines."""
    import inspect

    from xpkit import _batches

    def lines(function) -> int:
        source = inspect.getsource(function)
        if '"""' in source:  # the code after the docstring, and the signature
            head, _, rest = source.partition('"""')
            source = head + rest.split('"""', 1)[1]
        return len([line for line in source.splitlines() if line.strip()])

    assert lines(_batches._map_batches) <= 60
    assert lines(_batches.map_batches) <= 40


def test_recovery_imports_nothing_from_the_batching_modules():
    import ast
    from pathlib import Path

    import xpkit._oom as oom

    tree = ast.parse(Path(oom.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    }
    batching = {"_batches", "_plan", "_outputs", "_rows", "_request", "_executors"}
    assert not {m for m in imported if m and m.lstrip(".") in batching}, imported
    assert "_log" in {m.lstrip(".") for m in imported if m}  # the parse saw imports


# -- what a repeated call costs (issue #20) -----------------------------------------
def test_a_plan_map_batches_makes_is_the_frozen_dataclass_it_says():
    """make_plan fills BatchPlan at once: every field, equal, hashable, frozen."""
    import dataclasses
    import pickle

    plan = xpkit.plan_batches(lambda r: r * 2.0, np.ones((50, 2)), bytes_per_item=8.0)
    made = dataclasses.replace(plan)  # through BatchPlan.__init__
    assert vars(plan) == vars(made)  # every field, and nothing else
    assert plan == made
    assert hash(plan) == hash(made)
    assert pickle.loads(pickle.dumps(plan)) == plan
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.batch_size = 1  # type: ignore[misc]


def _xpkit_calls(call):
    """``call()``'s result, and the names of the functions of xpkit it called."""
    from pathlib import Path

    package = str(Path(xpkit.__file__).parent)
    calls = []

    def count(frame, event, _arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            calls.append(frame.f_code.co_name)

    sys.setprofile(count)
    try:
        got = call()
    finally:
        sys.setprofile(None)
    return got, calls


def test_a_planned_call_does_little_of_its_own(monkeypatch):
    """A remembered signature, planned: every check, the plan, one call of fn.

    Counts the Python calls in xpkit's own modules (not fn's, NumPy's or a
    compiler's): a per-call cost that creeps back (a second budget reading,
    a probe, a record built twice) shows here first.
    """
    from xpkit import _memory

    x = np.ones((100, 8))

    def fn(rows):
        return rows * 2.0

    for sizing in ({}, {"bytes_per_item": 64.0}):
        xpkit.map_batches(fn, x, **sizing)  # learns fn's cost (the probe)
        # A new host reading (of the same bytes): planned again, not repeated.
        available = _memory.recent_host_bytes()
        reading = (_memory.host_available_bytes, time.monotonic(), available)
        monkeypatch.setattr(_memory, "_host_reading", reading)
        got, calls = _xpkit_calls(functools.partial(xpkit.map_batches, fn, x, **sizing))
        assert_equal(got, x * 2.0)
        assert calls.count("fn") == 0  # (fn is not xpkit's)
        assert calls.count("make_plan") == 1
        assert calls.count("batch_budgets") == 1  # one budget reading
        assert "_probe" not in calls
        assert "learn_repeat" in calls  # (a one-batch call is kept for a repeat)
        # 96-98: one more where torch's compiler is imported (is it tracing?),
        # as in a worker that ran a torch.compile test before this one.
        assert len(calls) <= 100, (sizing, len(calls), calls)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_a_repeated_call_runs_fn_and_nothing_else_of_weight(library, host_reading_held):
    """The same call under the same state again: no checks, no plan, fn once.

    A CPU tensor's result is held as its host view, as a NumPy result is held
    as it is: no outputs are made for it (no `Outputs.put`).
    """
    if not get_adapter(library).is_installed():
        pytest.skip(f"needs {library}")
    x = xpkit.Backend(library, device="cpu").asarray(np.ones((100, 8)))

    class Runs:  # (fn, named by identity in its signature: a list has none)
        def __init__(self) -> None:
            self.rows: list[int] = []

        def __call__(self, rows):
            self.rows.append(rows.shape[0])
            return rows * 2.0

    fn = Runs()
    runs = fn.rows

    for sizing in ({}, {"bytes_per_item": 64.0}):
        xpkit.plan_memory.clear()
        xpkit.map_batches(fn, x, **sizing)  # the probe, or the plan from the cost
        xpkit.map_batches(fn, x, **sizing)  # planned from what it learned
        runs.clear()
        got, calls = _xpkit_calls(functools.partial(xpkit.map_batches, fn, x, **sizing))
        assert type(got) is np.ndarray
        assert_equal(got, np.full((100, 8), 2.0))
        assert runs == [100]  # fn once, on all rows
        assert "make_plan" not in calls
        assert "batch_request" not in calls
        assert "batch_budgets" not in calls
        assert "put" not in calls
        assert "repeat" in calls
        # (7 of them: is Runs an array?; torch: 44, its adapter's checks
        # of the input's key and of the result's host view, and whether the
        # result lies over read-only pages: a storage torch allocated says
        # so at once; 46 where torch.compile is imported)
        most = 30 if library == "numpy" else 46
        assert len(calls) <= most, " ".join(calls)


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_large_host_batches_of_a_library_that_keeps_freed_memory_hand_it_back(
    library, monkeypatch
):
    from xpkit import _local
    from xpkit._adapters import get_adapter

    if not get_adapter(library).is_installed():
        pytest.skip(f"needs {library}")
    b = xpkit.Backend(library, device="cpu")
    trims = []
    monkeypatch.setattr(_local, "release_freed_host_memory", lambda: trims.append(1))
    x = b.asarray(np.ones((64, 4)))
    per_row = 2 * _local.TRIM_ABOVE_BYTES / 16  # batches of 16 rows: 2x the line
    sixteen = {"bytes_per_item": per_row, "budget_gb": 16 * per_row / 2**30}
    xpkit.map_batches(lambda r: r * 2.0, x, **sixteen)
    small = xpkit.map_batches(lambda r: r * 3.0, x, bytes_per_item=8.0)
    assert_equal(
        b.to_numpy(small) if library != "numpy" else small, np.full((64, 4), 3.0)
    )
    keeps = get_adapter(library).keeps_freed_host_memory
    assert keeps == (library == "torch")
    assert len(trims) == (64 // 16 if keeps else 0)  # after each large batch only


def test_recovery_tries_min_batch_rows_before_it_gives_up():
    """Half of 100 rows is under min_batch=64: 64 rows and the rest are tried
    (it raised at 100 rows, "even at min_batch=64"), and a size that failed
    is not tried again."""
    sizes = []

    def fn(rows):
        sizes.append(len(rows))
        if len(rows) > 64:
            raise MemoryError("injected: more than 64 rows")
        return rows * 2.0

    a = np.arange(600.0).reshape(200, 3)
    got = xpkit.map_batches(fn, a, min_batch=64, bytes_per_item=24, budget_gb=1.0)
    assert_equal(got, a * 2.0)
    assert sizes == [200, 100, 64, 36, 64, 36]
    sizes.clear()
    assert_equal(xpkit.compute_oom_safe(fn, a, min_chunk=64), a * 2.0)
    assert sizes == [200, 100, 64, 36, 64, 36]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_an_interrupt_raised_while_an_oom_is_handled_is_not_retried(stop):
    """Its __context__ held the MemoryError: Ctrl-C was split and retried down
    to one row, then came back as a MemoryError."""
    calls = []

    def fn(rows):
        calls.append(len(rows))
        try:
            raise MemoryError
        except MemoryError:
            raise stop()  # noqa: B904 - its __context__ is the MemoryError, on purpose

    a = np.ones((100, 2))
    with pytest.raises(stop):
        xpkit.map_batches(fn, a, bytes_per_item=16, budget_gb=1.0, remember=False)
    with pytest.raises(stop):
        xpkit.compute_oom_safe(fn, a)
    assert calls == [100, 100]
    assert not xpkit.is_oom_error(BaseExceptionGroup("g", [MemoryError(), stop()]))


@pytest.mark.parametrize("executor", [None, "joblib"])
@pytest.mark.parametrize(
    "sizing",
    [{}, {"bytes_per_item": 16.0}, {"bytes_per_item": 16.0, "budget_gb": 40 / 2**30}],
    ids=["probe", "given", "batches"],
)
def test_a_stop_iteration_of_fn_propagates_as_itself(executor, sizing):
    """The loop over batches is a generator, which made it a RuntimeError (PEP 479)."""
    if executor == "joblib":
        pytest.importorskip("joblib")

    def fn(rows):
        raise StopIteration("fn's own")

    with pytest.raises(StopIteration, match="^fn's own$") as info:
        xpkit.map_batches(
            fn, np.ones((8, 2)), executor=executor, remember=False, **sizing
        )
    assert not isinstance(info.value.__context__, RuntimeError)
