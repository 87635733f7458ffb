"""`map_batches(executor="joblib")`, executor validation and the worker budget.

The joblib tests pin joblib's CPU count to 2, so the batches (an equal share
of the rows per worker process) are the same on every machine.
"""

from __future__ import annotations

import logging
import re
import sys

import joblib
import numpy as np
import pool_jobs as jobs
import pytest
from fakes import HerePool
from helpers import run_python
from ooms import assert_no_failed_size_again

import xpkit
from xpkit._executors import Pool, each_task_on_pool
from xpkit._executors._base import InputsLost
from xpkit._executors.dask import worker_task_budget_gb
from xpkit._outputs import Outputs
from xpkit._rows import Job, run_rows

jobs.register_by_value()


# The workers kill themselves with SIGKILL, as the kernel's OOM killer would.
SIGKILL = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture
def data():
    return jobs.make_data()


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(joblib, "cpu_count", lambda *a, **k: 2)


def test_a_task_in_the_caller_s_process_returns_rows_of_its_own():
    """A task that runs where the job was made (a Dask worker's thread in an
    in-process LocalCluster, joblib's threads) is not pickled: ``fn``'s rows
    as a view of a buffer it reuses were overwritten by its next task before
    the caller copied them (rows 8:12 and 24:28 of 64 wrong, every run)."""
    buf = np.empty(8)

    def fn(r):
        out = buf[: r.shape[0]]
        np.sum(r, axis=1, out=out)
        return out

    x = np.arange(16.0).reshape(8, 2)
    job = Job(fn)
    first = run_rows(job, 0, 4, x)
    run_rows(job, 4, 8, x)
    np.testing.assert_array_equal(first.leaves[0], x[:4].sum(1))


def test_what_a_task_s_host_widened_goes_back_only_where_it_belongs():
    """A task in this process keeps what its host widened (its copy of the
    rows dropped it: bfloat16 came back float32); an ``out=`` of a third
    library (array-api-strict, float32) takes the rows as they are (torch's
    bfloat16 dtype given to its ``astype`` raised AttributeError)."""
    torch = pytest.importorskip("torch")
    strict = pytest.importorskip("array_api_strict")
    from xpkit._into import check_out

    x = torch.arange(8.0).reshape(4, 2)

    def fn(r):
        return r.to(torch.bfloat16)

    rows = run_rows(Job(fn), 0, 4, x)
    assert [w.label for w in rows.own] == ["bfloat16"]
    on_device = Outputs(4, fn, xpkit.Backend("torch"), "device")
    on_device.put(0, 4, rows)
    assert on_device.value().dtype == torch.bfloat16
    out = strict.zeros((4, 2), dtype=strict.float32)
    into = Outputs(4, fn, xpkit.Backend("torch"), into=check_out(out, 4))
    into.put(0, 4, run_rows(Job(fn), 0, 4, x))
    assert np.asarray(out).tolist() == fn(x).float().tolist()
    ml_dtypes = pytest.importorskip("ml_dtypes")  # (NumPy's bfloat16)
    host = np.zeros((4, 2), dtype=ml_dtypes.bfloat16)  # (refused: "fn returns float32")
    Outputs(4, fn, xpkit.Backend("torch"), into=check_out(host, 4)).put(
        0, 4, run_rows(Job(fn), 0, 4, x)
    )
    assert host.astype(np.float32).tolist() == fn(x).float().tolist()


def test_a_task_s_bfloat16_comes_back_bit_for_bit():
    """torch's float32 to bfloat16 makes every NaN 0xFFFF: 0x7FC1 (a positive
    NaN with a payload) came back negative, with result_on='device' and a
    torch out= alike."""
    torch = pytest.importorskip("torch")
    bits = np.array([0x7FC1, 0xFFC3, 0x7F81, 0x8000, 0x0001, 0x7F80, 0x3F80], np.uint16)
    x = torch.from_numpy(bits.view(np.int16).copy()).view(torch.bfloat16)[:, None]

    def fn(r):
        return r.clone()

    rows = run_rows(Job(fn), 0, len(bits), x)
    assert rows.leaves[0].dtype == np.float32  # (widened on its way)
    on_device = Outputs(len(bits), fn, xpkit.Backend("torch"), "device")
    on_device.put(0, len(bits), rows)
    got = on_device.value().view(torch.int16).numpy().view(np.uint16)
    assert got.ravel().tolist() == bits.tolist()
    from xpkit._into import check_out

    out = torch.zeros_like(x)
    into = Outputs(
        len(bits), fn, xpkit.Backend("torch"), into=check_out(out, len(bits))
    )
    into.put(0, len(bits), run_rows(Job(fn), 0, len(bits), x))
    assert (
        out.view(torch.int16).numpy().view(np.uint16).ravel().tolist() == bits.tolist()
    )


@pytest.mark.parametrize("where", ["input", "whole operand"])
def test_an_array_no_worker_can_unpickle_is_refused_before_a_task_runs(where):
    """torch's uint16 tensors unpickle nowhere: every joblib worker died as it
    started, read as deaths for memory, split down to one row (23 s)."""
    torch = pytest.importorskip("torch")
    u16 = torch.arange(6).reshape(3, 2).to(torch.uint16)
    x = torch.arange(6.0).reshape(3, 2)
    if where == "input":
        call, label = (
            (lambda: xpkit.map_batches(np.negative, u16, executor="joblib")),
            "arrays[0]",
        )
    else:
        call = lambda: xpkit.map_batches(
            lambda r, w: r * 2, x, whole=(u16,), executor="joblib"
        )
        label = "whole operand 0"
    with pytest.raises(
        TypeError,
        match=rf"^{re.escape(label)} \(torch.Tensor of dtype torch.uint16\) cannot "
        r"be sent to joblib's \d+ worker processes \(AttributeError: .*\); convert",
    ):
        call()


def test_a_job_pickled_by_an_older_xpkit_loads_away_from_home():
    """A state without ``home`` (six slots) loads, as a job not made here."""
    job = Job(np.negative)
    restored = Job.__new__(Job)
    restored.__setstate__(job.__getstate__()[:-1])
    assert restored.home == -1
    assert restored.fn is np.negative


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_a_device_result_keeps_the_dtype_a_task_s_host_widened(dtype, two_cpus):
    """A task brings ``fn``'s rows to the host, where torch's bfloat16 and
    8-bit floats become float32: with ``result_on="device"`` they came back
    float32, silently, and a bfloat16 ``out=`` refused them ("fn returns
    float32"). They go back to ``fn``'s dtype on the device, exactly."""
    torch = pytest.importorskip("torch")
    own = getattr(torch, dtype)
    x = torch.arange(48.0).reshape(24, 2)

    def fn(r):
        return r.to(own)

    sizing = {"bytes_per_item": 16, "budget_gb": 64 / 2**30}  # batches of 4 rows
    got = xpkit.map_batches(fn, x, result_on="device", executor="joblib", **sizing)
    assert got.dtype == own
    assert torch.equal(got.float(), fn(x).float())
    out = torch.zeros(24, 2, dtype=own)
    xpkit.map_batches(fn, x, out=out, executor="joblib", **sizing)
    assert torch.equal(out.float(), fn(x).float())
    host = xpkit.map_batches(fn, x, executor="joblib", **sizing)
    assert host.dtype == np.float32  # (on the host: widened, as documented)


def test_joblib_executor_equals_the_local_result(data, tmp_path, caplog, two_cpus):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    fn = jobs.memory_error_above(40, tmp_path / "attempts")
    got = xpkit.map_batches(fn, x, y, executor="joblib", **jobs.BATCHES_OF_64)
    np.testing.assert_array_equal(got, jobs.work(x, y))
    assert len(jobs.split_logs(caplog.records)) == 4


@SIGKILL
def test_joblib_worker_killed_is_split_and_resubmitted(
    data, tmp_path, caplog, two_cpus
):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    marker = tmp_path / "killed"
    got = xpkit.map_batches(
        jobs.exit_first_batch(marker, above=64),
        x,
        y,
        executor="joblib",
        bytes_per_item=8.0,  # no probe: it would run fn here
    )
    assert marker.exists()
    np.testing.assert_array_equal(got, jobs.work(x, y))
    splits = jobs.split_logs(caplog.records)
    # The killed batch is split; a batch in flight on the broken pool may be too.
    assert any("rows 0:128" in m for m in splits)
    assert 1 <= len(splits) <= 2


def test_worker_budget_follows_memory_limits_threads_and_inputs():
    mib = 2**20
    workers = {
        "a": {
            "memory_limit": 1024 * mib,
            "nthreads": 2,
            "metrics": {"memory": 100 * mib},
        },
        "b": {"memory_limit": 2048 * mib, "nthreads": 1, "metrics": {"memory": 0}},
    }
    got = worker_task_budget_gb(workers, input_bytes=50 * mib)
    # a: (0.8 * 1024 - 100 - 50) / 2 = 334.6 MiB; b: 0.8 * 2048 - 50 = 1588.4 MiB.
    assert got == pytest.approx(334.6 / 1024)


@pytest.mark.parametrize(
    ("executor", "error", "match"),
    [
        ("spark", ValueError, "executor must be None, 'dask', 'joblib'"),
        (4, TypeError, r"executor must be None, 'dask', 'joblib'.*got 4 of type int$"),
    ],
)
def test_bad_executor_is_rejected(executor, error, match):
    with pytest.raises(error, match=match):
        xpkit.map_batches(jobs.work, np.ones((4, 8)), np.ones(4), executor=executor)


def test_dask_without_a_client_says_how_to_get_one():
    pytest.importorskip("distributed")
    code = (
        "import numpy as np, xpkit\n"
        "xpkit.map_batches(lambda x: x, np.ones((4, 2)), executor='dask')\n"
    )
    run = run_python(code)
    assert run.returncode != 0
    assert "ValueError: executor='dask' needs an active dask.distributed Client" in (
        run.stderr
    )


@SIGKILL
def test_joblib_worker_that_always_dies_ends_in_a_named_error(two_cpus, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    # 8 bytes a row, far under the workers' budget: not memory, a RuntimeError.
    with pytest.raises(
        RuntimeError, match=r"rows [01]:[12] \(1 rows.*its worker died.*not memory"
    ):
        xpkit.map_batches(
            jobs.always_exit, np.zeros((2, 1)), executor="joblib", bytes_per_item=8.0
        )
    retried = [
        m
        for m in jobs.split_logs(caplog.records)
        if "once more at min_batch, alone" in m
    ]
    assert retried  # a task at min_batch got one more chance before the error


@SIGKILL
def test_joblib_worker_dying_near_the_budget_is_a_memory_error(two_cpus):
    with pytest.raises(MemoryError, match=r"rows [01]:[12] \(1 rows.*its worker died"):
        xpkit.map_batches(
            jobs.always_exit,
            np.zeros((2, 1)),
            executor="joblib",
            bytes_per_item=2**20,  # one row is the whole 1 MiB budget
            budget_gb=2**-10,
        )


@SIGKILL
def test_workers_dying_too_often_stop_the_run(two_cpus, monkeypatch):
    from xpkit._executors import _driver

    monkeypatch.setattr(_driver, "_MAX_DEATHS", 2)
    with pytest.raises(RuntimeError, match="died 3 times"):
        xpkit.map_batches(
            jobs.always_exit, np.zeros((8, 1)), executor="joblib", bytes_per_item=8.0
        )


def test_joblib_refuses_a_function_it_cannot_send():
    import threading

    lock = threading.Lock()
    with pytest.raises(
        TypeError, match=r"cannot be sent to joblib's \d+ worker processes"
    ):
        xpkit.map_batches(
            lambda x: x + lock.locked(), np.zeros((4, 1)), executor="joblib"
        )


class _RebuiltNowhere:
    """Pickles, but cannot be unpickled (on a worker, it would die starting)."""

    def __reduce__(self):
        return (_cannot_rebuild, ())


def _cannot_rebuild():
    msg = "cannot rebuild on the worker"
    raise RuntimeError(msg)


@pytest.mark.parametrize(
    ("operand", "why"),
    [
        (__import__("threading").Lock(), r"TypeError: cannot pickle '_thread.lock'"),
        (_RebuiltNowhere(), "RuntimeError: cannot rebuild on the worker"),
    ],
    ids=["unpicklable", "not rebuilt"],
)
def test_joblib_refuses_a_whole_operand_it_cannot_send(operand, why):
    """It failed unnamed (TypeError from pickle), or the workers died at
    start-up, read as deaths for memory (RuntimeError after 6 s)."""
    with pytest.raises(
        TypeError,
        match=rf"whole operand 1 \({type(operand).__qualname__}\) cannot be sent "
        rf"to joblib's \d+ worker processes \({why}",
    ):
        xpkit.map_batches(
            lambda r, w, extra: r * 2.0,
            np.zeros((4, 1)),
            whole=(np.ones(2), operand),
            executor="joblib",
            bytes_per_item=8.0,
        )


class _SizedPool:
    """Stands in for a pool's two sizing answers (threads, per-task memory)."""

    def __init__(self, slots, budget_gb):
        self.slots, self._budget = slots, budget_gb
        self.asked_for: list[int] = []

    def task_budget_gb(self, input_bytes):
        self.asked_for.append(input_bytes)
        return self._budget


@pytest.mark.parametrize(
    ("budget_gb", "explicit", "expected"),
    [
        # 1 GiB per task: memory allows 10,737 rows of 100 kB, the cache
        # ceiling (16 MiB) 167; 4 tasks per thread of 2 threads take 2,500.
        (1.0, None, 2500),
        # 0.1 GiB: memory is the hard cap, 1,073 rows.
        (0.1, None, 1073),
        # An explicit 1 MiB budget sets the batch: 10 rows.
        (1.0, 2**-10, 10),
    ],
)
def test_pool_batches_memory_caps_cache_ceiling_yields(budget_gb, explicit, expected):
    from xpkit._adapters import HOST_BATCH_WORKING_SET_BYTES
    from xpkit._cost_model import Cost
    from xpkit._plan import _pool_budgets, _pool_rows
    from xpkit._request import BatchCall, batch_request

    assert HOST_BATCH_WORKING_SET_BYTES == 16 * 2**20
    x = np.zeros((20_000, 1))
    pool = _SizedPool(slots=2, budget_gb=budget_gb)
    request = batch_request(
        BatchCall(
            lambda r: r,
            (x,),
            backend=None,
            whole=(),
            bytes_per_item=1e5,
            overhead=1.0,
            budget_gb=explicit,
            min_batch=1,
            executor=None,
            result_on="host",
            pad=None,
            fallback_bytes_per_item=None,
            remember=False,
        )
    )._replace(pool=pool)
    hard, soft = _pool_budgets(pool, request)
    batch = _pool_rows(pool, request, Cost(1e5, 0.0, "given"), hard, soft)
    assert batch == expected
    # The workers' budget is asked for with what each receives: all the inputs.
    assert pool.asked_for == ([] if explicit else [x.nbytes])


def test_joblib_worker_count_follows_memory(two_cpus, caplog):
    """Each worker process holds all the inputs: a budget for one caps it at one."""
    caplog.set_level(logging.INFO, logger="xpkit")
    x = np.zeros((1_000_000, 1))  # 8 MB of inputs
    with (
        xpkit.memory_budget(1.5 * x.nbytes / 2**30),
        pytest.warns(xpkit.MemoryCapWarning, match="worker count at 1"),
    ):
        got = xpkit.map_batches(lambda r: r * 2, x, executor="joblib")
    assert got.shape == x.shape
    assert any("joblib's 1 worker processes" in r.getMessage() for r in caplog.records)
    caplog.clear()
    got = xpkit.map_batches(lambda r: r * 2, x[:10], executor="joblib")
    assert any("joblib's 2 worker processes" in r.getMessage() for r in caplog.records)


def test_whole_operands_count_in_the_workers_and_their_budgets(
    two_cpus, caplog, monkeypatch
):
    """Each worker holds the whole operands too: an 8 MB operand beside 80
    bytes of rows capped nothing (2 workers under a budget for one), and
    each task's budget left them out."""
    from xpkit._executors.joblib import JoblibPool

    caplog.set_level(logging.INFO, logger="xpkit")
    asked: list[int] = []
    real = JoblibPool.task_budget_gb
    monkeypatch.setattr(
        JoblibPool,
        "task_budget_gb",
        lambda self, input_bytes: asked.append(input_bytes) or real(self, input_bytes),
    )
    w = np.zeros((1_000_000, 1))  # 8 MB
    rows = np.zeros((10, 1))
    with (
        xpkit.memory_budget(1.5 * w.nbytes / 2**30),
        pytest.warns(xpkit.MemoryCapWarning, match="worker count at 1"),
    ):
        got = xpkit.map_batches(lambda r, w: r * 2, rows, whole=(w,), executor="joblib")
    assert got.shape == rows.shape
    assert any("joblib's 1 worker processes" in r.getMessage() for r in caplog.records)
    assert asked == [rows.nbytes + w.nbytes]


class _HerePool(HerePool, Pool):
    """A pool that runs each task as it is submitted, here.

    It records each task's rows with the smallest failed task the driver
    had been told of (by `wait`) when it submitted that one.
    """

    def __init__(self, slots: int) -> None:
        super().__init__(slots)
        self.failed_seen: int | None = None
        self.submitted: list[tuple[int, int | None]] = []

    def submit(self, start, stop, *, pad=True):
        self.submitted.append((stop - start, self.failed_seen))
        return super().submit(start, stop, pad=pad)

    def wait(self, futures):
        done = super().wait(futures)
        for _, _, error in done:
            if error is not None:
                rows = int(str(error))
                self.failed_seen = min(rows, self.failed_seen or rows)
        return done


@pytest.mark.parametrize("slots", [1, 3])
def test_a_pool_never_runs_a_size_that_failed_again(slots):
    """An OOM at 1000 rows: its halves, and every queued batch, at 500 or fewer."""
    sizes: list[int] = []
    x = np.arange(8000.0)[:, None]
    pool = _HerePool(slots)
    outputs, steps = _steps(pool, _failing_above(300, sizes), x, 1000)
    resubmitted = _to_the_end(steps)
    np.testing.assert_array_equal(outputs.value(), x * 2.0)
    assert resubmitted > 0
    assert pool.submitted[:slots] == [(1000, None)] * slots  # before any failure
    if slots == 1:  # one task at a time: each sees the last one's outcome
        assert_no_failed_size_again(sizes, 300)
    after = [(rows, seen) for rows, seen in pool.submitted if seen is not None]
    assert after
    assert all(rows < seen for rows, seen in after), pool.submitted
    assert after[0][0] <= 1000 // 2


class _PlainHerePool(HerePool, Pool):
    """A pool that runs each task as it is submitted, here, and records nothing."""


def test_a_task_s_bug_inside_the_caller_s_except_memory_error_is_the_task_s():
    """A task run in the caller's thread, inside its ``except MemoryError:``,
    carries that MemoryError as its error's context: the driver split it
    as an OOM ([64, 32, ...])."""
    sizes: list[int] = []

    def fn(x):
        sizes.append(int(x.shape[0]))
        msg = "a bug in fn"
        raise ValueError(msg)

    x = np.arange(64.0)[:, None]
    try:
        msg = "the whole array at once"
        raise MemoryError(msg)
    except MemoryError:
        _, steps = _steps(_PlainHerePool(1), fn, x, 64)
        with pytest.raises(ValueError, match="^a bug in fn$"):
            _to_the_end(steps)
    assert sizes == [64]


def _failing_above(rows: int, sizes: list[int]):
    """A fn that records the rows of each call, out of memory above ``rows``."""

    def fn(x):
        sizes.append(int(x.shape[0]))
        if x.shape[0] > rows:
            raise MemoryError(x.shape[0])
        return x * 2.0

    return fn


def test_a_padded_last_batch_cut_after_an_oom_is_not_padded_back():
    """pad_to = 100 (pad=True): the halves of a failed last task run unpadded."""
    sizes: list[int] = []
    x = np.arange(500.0)[:, None]
    outputs, steps = _steps(_HerePool(1), _failing_above(30, sizes), x, 100, pad_to=100)
    _to_the_end(steps)
    np.testing.assert_array_equal(outputs.value(), x * 2.0)
    assert_no_failed_size_again(sizes, 30)


def test_a_padded_last_task_that_fails_at_min_batch_runs_its_own_rows():
    """Two tasks of 38 in flight, the last padded to 38: both fail; the
    last (37 rows, min_batch=37) was fatal, though its own rows fit (the
    local run recovers)."""
    sizes: list[int] = []
    x = np.arange(75.0)[:, None]
    outputs, steps = _steps(
        _HerePool(2), _failing_above(37, sizes), x, 38, min_batch=37, pad_to=38
    )
    _to_the_end(steps)
    np.testing.assert_array_equal(outputs.value(), x * 2.0)
    assert sizes[:2] == [38, 38]  # 0:38, and 38:75 padded to 38: both fail
    assert 37 in sizes[2:]  # 38:75's own rows, unpadded


def test_a_task_whose_half_is_under_min_batch_tries_min_batch_rows_first():
    """As the local split does: min_batch rows, then the rest (the driver
    raised "even at min_batch=40" having never tried 40 rows)."""
    sizes: list[int] = []
    x = np.arange(500.0)[:, None]
    outputs, steps = _steps(
        _HerePool(1), _failing_above(45, sizes), x, 100, min_batch=40
    )
    _to_the_end(steps)
    np.testing.assert_array_equal(outputs.value(), x * 2.0)
    assert max(sizes[sizes.index(50) + 1 :]) <= 45  # none above what fitted again


class _LosingPool(HerePool, Pool):
    """A pool whose tasks lose their inputs with a worker, as ``lose`` says.

    ``lose(start, stop, round)``: whether the task submitted for those rows in
    that round (one round per batch of tasks in flight together, as one
    worker's death takes them all) comes back as `InputsLost`, never run.
    """

    def __init__(self, slots, lose):
        super().__init__(slots)
        self.lose, self.round, self.submitted = lose, 0, []

    def submit(self, start, stop, *, pad=True):
        from concurrent.futures import Future

        self.submitted.append((start, stop, self.round))
        if self.lose(start, stop, self.round):
            future: Future = Future()
            future.set_exception(InputsLost("cancelled"))
            return future
        return super().submit(start, stop, pad=pad)

    def wait(self, futures):
        self.round += 1
        return super().wait(futures)


def _double(x):
    return x * 2.0


def _steps(pool, fn, x, batch, *, min_batch=1, pad_to=0):
    """The driver's run of ``fn`` over ``x`` on ``pool``: (its outputs, its steps)."""
    outputs = Outputs(len(x), fn, sources=(x,))
    job = Job(fn)
    job.pad_to = pad_to
    steps = each_task_on_pool(
        pool,
        job,
        (x,),
        outputs,
        first=0,
        batch=batch,
        min_batch=min_batch,
        bytes_per_row=8.0,
        budget_bytes=1e9,
        bar=None,
    )
    return outputs, steps


def _run_losing(lose, *, n=256, batch=64, slots=4):
    x = np.arange(float(n))[:, None]
    pool = _LosingPool(slots, lose)
    outputs, steps = _steps(pool, _double, x, batch)
    return pool, outputs, x, steps


def test_inputs_lost_with_one_worker_run_again_unsplit(caplog):
    """One worker's death takes the inputs of every task in flight: the rows
    did not fail, and run again at their size (CI: one death split the run
    down to one chunk and ended in a MemoryError)."""
    caplog.set_level(logging.INFO, logger="xpkit")
    pool, outputs, x, steps = _run_losing(lambda start, stop, rnd: rnd == 0)
    assert _to_the_end(steps) == 4
    np.testing.assert_array_equal(outputs.value(), x * 2.0)
    assert {stop - start for start, stop, _ in pool.submitted} == {64}
    assert len(pool.submitted) == 8
    assert sum("run again unsplit" in r.getMessage() for r in caplog.records) == 4


def test_inputs_lost_twice_split_and_still_finish():
    """Two deaths in a row, each taking every task in flight: the second
    loss of the same rows splits them (they may be what kills the workers),
    and the halves, lost once more, run again unsplit and finish."""
    pool, outputs, x, steps = _run_losing(lambda start, stop, rnd: rnd < 3)
    _to_the_end(steps)
    np.testing.assert_array_equal(outputs.value(), x * 2.0)
    sizes = [stop - start for start, stop, _ in pool.submitted]
    assert max(sizes) == 64
    assert min(sizes) >= 32  # never below the first halves


def test_rows_whose_inputs_are_always_lost_end_in_a_named_error():
    """Rows that lose their inputs at every size (they take their worker
    down): split, each size run again once, then the documented error naming
    the rows, after a bounded number of tasks."""
    pool, _, _, steps = _run_losing(lambda start, stop, rnd: start < 8 <= stop)
    with pytest.raises(
        RuntimeError,
        match=r"^map_batches: rows 7:8 \(1 rows, .* even at min_batch=1, running alone: its "
        r"inputs went down with a worker that died, .* not memory",
    ):
        _to_the_end(steps)
    assert len(pool.submitted) < 40


class _DyingPool(HerePool, Pool):
    """A pool in which a worker dies whenever ``kills(tasks in flight)``,
    taking every task in flight with it (their inputs lost, as on Dask);
    each task comes back when `wait` is called."""

    def __init__(self, slots, kills):
        super().__init__(slots)
        self.kills, self.pending, self.alone_deaths = kills, {}, []

    def submit(self, start, stop, *, pad=True):
        from concurrent.futures import Future

        future: Future = Future()
        self.pending[future] = (start, stop, pad)
        return future

    def wait(self, futures):
        from xpkit._rows import run_rows

        flight = [self.pending.pop(f) for f in futures]
        pads = [pad for _, _, pad in flight]
        flight = [(start, stop) for start, stop, _ in flight]
        dies = self.kills(flight)
        if dies and len(flight) == 1:
            self.alone_deaths.append(flight[0])
        for future, (start, stop), pad in zip(futures, flight, pads, strict=True):
            if dies:
                future.set_exception(InputsLost("cancelled"))
            else:
                rows = run_rows(self.job, start, stop, *self.arrays, pad=pad)
                future.set_result(rows)
        return [(f, None if dies else f.result(), f.exception()) for f in futures]


@pytest.mark.parametrize(
    ("culprit", "slots", "batch"),
    [(0, 4, 16), (100, 4, 16), (255, 4, 16), (100, 8, 16), (100, 5, 64)],
)
def test_the_rows_that_kill_their_worker_are_named_not_those_beside_them(
    culprit, slots, batch
):
    """Every death takes the tasks in flight beside the culprit: the error
    names the culprit's row, found by running it alone (it named an
    innocent neighbour, rows 101:102, on a real cluster), whatever the
    tasks in flight (a death is counted once, not once per task it took)."""
    pool = _DyingPool(slots, lambda flight: any(a <= culprit < b for a, b in flight))
    _, steps = _steps(pool, _double, np.arange(256.0)[:, None], batch)
    with pytest.raises(
        RuntimeError,
        match=rf"^map_batches: rows {culprit}:{culprit + 1} \(1 rows, .* even at "
        r"min_batch=1, running alone: its inputs went down with a worker",
    ):
        _to_the_end(steps)
    assert pool.alone_deaths == [(culprit, culprit + 1)]


@pytest.mark.parametrize(("slots", "batch"), [(8, 1024), (16, 256), (4, 2048)])
def test_deaths_for_memory_of_every_task_in_flight_split_until_they_fit(slots, batch):
    """A worker dies whenever a task of more than 16 rows runs, taking the
    rest in flight: the run splits down and finishes (it stopped at "died 65
    times" when each task lost counted as a death)."""
    pool = _DyingPool(slots, lambda flight: any(b - a > 16 for a, b in flight))
    x = np.arange(16384.0)[:, None]
    outputs, steps = _steps(pool, _double, x, batch)
    _to_the_end(steps)
    np.testing.assert_array_equal(outputs.value(), x * 2.0)


@SIGKILL
def test_joblib_names_the_row_that_kills_its_worker(two_cpus):
    x, y = jobs.make_data()
    with pytest.raises(
        RuntimeError, match=r"rows 100:101 \(1 rows, .* running alone: its worker died"
    ):
        xpkit.map_batches(
            jobs.exits_on_row(100), x, y, executor="joblib", **jobs.BATCHES_OF_64
        )


def test_an_exception_that_cannot_travel_back_is_named_not_a_death(data, two_cpus):
    """It read "its worker died, possibly killed for memory", 10 workers dying."""
    x, y = data
    with pytest.raises(
        RuntimeError,
        match=r"^fn raised pool_jobs\.Unsendable on rows \d+:\d+, which cannot be "
        r"pickled to travel back from the worker: fn failed holding a lock$",
    ):
        xpkit.map_batches(
            jobs.raise_unsendable, x, y, executor="joblib", **jobs.BATCHES_OF_64
        )


def test_fns_own_exception_classes_arrive_as_themselves(two_cpus):
    """Classes defined in a function (or __main__) travel by value, as
    cloudpickle sends them: they became RuntimeError, and a MemoryError
    subclass was not split as an OOM (the local run recovered)."""
    pytest.importorskip("cloudpickle")

    class MyError(Exception):
        pass

    class BatchTooLarge(MemoryError):
        pass

    def fails(x):
        raise MyError("bad input row")

    def too_large_above_30(x):
        if x.shape[0] > 30:
            raise BatchTooLarge(f"{x.shape[0]} rows")
        return x * 2.0

    x = np.arange(1000.0).reshape(500, 2)
    given = {"bytes_per_item": 16, "budget_gb": 16 * 100 / 2**30, "remember": False}
    with pytest.raises(MyError, match="^bad input row$"):
        xpkit.map_batches(fails, x, executor="joblib", **given)
    got = xpkit.map_batches(too_large_above_30, x, executor="joblib", **given)
    np.testing.assert_array_equal(got, x * 2.0)


def test_a_task_passes_an_exception_that_travels_as_it_is():
    from xpkit._rows import Job

    def fails(x):
        raise ValueError("plain")

    with pytest.raises(ValueError, match="^plain$"):
        run_rows(Job(fails), 0, 2, np.ones((4, 2)))
    with pytest.raises(RuntimeError, match=r"Unsendable on rows 0:2, which cannot"):
        run_rows(Job(jobs.raise_unsendable), 0, 2, np.ones((4, 2)), np.ones((4, 2)))


def test_a_workers_list_shorter_than_its_count_is_asked_for_again():
    """``Client.scheduler_info()`` returns the client's cached identity, which
    its periodic update (``n_workers=0``: no worker listed, only the count)
    can replace between the fetch and the return: a healthy cluster read as
    one without workers (CI, "has no workers")."""
    pytest.importorskip("distributed")
    from xpkit._executors.dask import scheduler_workers

    full = {"tcp://a": {"nthreads": 1}, "tcp://b": {"nthreads": 1}}
    answers = [{"workers": {}, "n_workers": 2}, {"workers": full, "n_workers": 2}]

    class Client:
        def scheduler_info(self, n_workers=0):
            assert n_workers == -1  # every worker listed
            return answers.pop(0)

    assert scheduler_workers(Client()) == full
    assert not answers

    class Empty:  # no worker at all: one question, an empty list
        asked = 0

        def scheduler_info(self, n_workers=0):
            assert n_workers == -1
            Empty.asked += 1
            return {"workers": {}, "n_workers": 0}

    assert scheduler_workers(Empty()) == {}
    assert Empty.asked == 1


def _to_the_end(steps):
    """Every step of a generator; what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value


class _PausedCluster:
    """A client whose scheduler lists workers paused for memory (``answers``:
    what it says of them, one call after another, the last one for good)."""

    class scheduler:  # (the attribute of a Client)
        address = "tcp://paused:8786"

    def __init__(self, *answers):
        self.answers, self.scattered = list(answers), []

    def scheduler_info(self, n_workers=0):
        assert n_workers == -1  # every worker listed
        workers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return {"workers": workers, "n_workers": len(workers)}

    def scatter(self, data, **kwargs):
        assert kwargs["broadcast"]
        self.scattered.append(data)
        return data


def _workers(*statuses):
    return {
        f"tcp://w{i}": {
            "status": status,
            "nthreads": 1,
            "memory_limit": 50 * 2**20,
            "metrics": {"memory": 72 * 2**20},
        }
        for i, status in enumerate(statuses)
    }


def test_workers_paused_for_memory_are_told_so_not_reported_dead(monkeypatch, caplog):
    """Every worker paused for memory: the scatter waited 30 s, then a
    RuntimeError said after 90 s that "its workers died and none came back".
    A warning says at once that they are paused, and the error that none
    resumed; nothing is shipped meanwhile."""
    pytest.importorskip("distributed")
    from xpkit._executors import dask as dask_executor

    monkeypatch.setattr(dask_executor, "WORKERS_BACK_S", 0.3)
    client = _PausedCluster(_workers("paused", "paused"))
    pool = dask_executor.DaskPool(client)
    with (
        caplog.at_level(logging.WARNING, logger="xpkit"),
        pytest.raises(RuntimeError) as caught,
    ):
        pool.start(Job(_double), (np.ones((4, 2)),))
    said = str(caught.value)
    assert said == (
        "the dask cluster at tcp://paused:8786 has no worker to run on: its 2 "
        "workers are paused for memory (one holds 72 MiB of its 50 MiB "
        "memory_limit): a paused worker takes no task until its memory frees "
        "and none resumed within 0.3 s; free memory on the workers or give "
        "them a larger memory_limit"
    )
    assert "died" not in said
    (warned,) = [r.getMessage() for r in caplog.records]
    assert warned.endswith(
        "until its memory frees; waiting up to 0.3 s for one to resume"
    )
    assert client.scattered == []


def test_inputs_are_shipped_once_a_paused_worker_resumes(monkeypatch):
    pytest.importorskip("distributed")
    from xpkit._executors import dask as dask_executor

    monkeypatch.setattr(dask_executor, "WORKERS_BACK_S", 30.0)
    paused = _workers("paused", "closing")
    client = _PausedCluster(paused, paused, paused, _workers("paused", "running"))
    pool = dask_executor.DaskPool(client)
    x = np.ones((4, 2))
    pool.start(Job(_double), (x,))
    assert len(client.scattered) == 2  # (the job, then the inputs)
    assert client.answers == [_workers("paused", "running")]
    idle = dask_executor.idle_workers(paused)
    assert idle is not None
    assert idle.paused
    assert "1 of its 2 workers are paused" in idle.why
