"""`map_batches` on a real dask.distributed LocalCluster and on joblib.

One LocalCluster (worker processes, 2 workers of 1 thread, a 400 MiB memory
limit each) serves the module; no part of the scheduler is mocked. Its
scheduler allows no retries of a task whose worker died, so a worker killed
for memory surfaces at once as ``KilledWorker`` to map_batches.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import numpy as np
import pool_jobs as jobs
import pytest
from helpers import run_xpkit, written_marks

import xpkit

distributed = pytest.importorskip("distributed")
jobs.register_by_value()

pytestmark = pytest.mark.cluster

N, BATCHES_OF_64 = jobs.N, jobs.BATCHES_OF_64


@pytest.fixture(scope="module")
def client():
    with jobs.local_cluster(**{"distributed.scheduler.allowed-failures": 0}) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_workers_back(client):
    """Each test starts with the cluster's two workers (a test before it may
    have had one killed; the nanny restarts it): a wait for the condition."""
    client.wait_for_workers(2, timeout=180)


@pytest.fixture
def data():
    return jobs.make_data()


def test_cluster_result_equals_the_local_one(client, data):
    x, y = data
    expected = xpkit.map_batches(jobs.work, x, y)
    got = xpkit.map_batches(jobs.work, x, y, executor=client, budget_gb=2**-20)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, jobs.work(x, y))


def test_dask_means_the_current_client(client, data, tmp_path):
    x, y = data
    log = tmp_path / "attempts"
    fn = jobs.memory_error_above(N, log)  # never fails; logs each task
    got = xpkit.map_batches(fn, x, y, executor="dask", bytes_per_item=8.0)
    np.testing.assert_array_equal(got, jobs.work(x, y))
    # One task per worker thread (the budget allows more rows per task).
    assert jobs.attempts(log) == ["0:128", "128:256"]


def test_the_probe_runs_here_on_an_eighth_of_the_rows(client, data, tmp_path):
    x, y = data
    log = tmp_path / "attempts"
    fn = jobs.memory_error_above(N, log)  # never fails; logs each call and its pid
    plan = xpkit.plan_batches(fn, x, y, executor=client)
    assert plan.source.startswith(
        ("measured by sampled RSS", "input rows")
    )  # (it reads values)
    assert 0 < plan.probe_rows <= N // 8
    log.unlink()
    got = xpkit.map_batches(fn, x, y, executor=client)
    np.testing.assert_array_equal(got, jobs.work(x, y))
    calls = [line.split() for line in log.read_text().splitlines()]
    here = [rows for rows, pid in calls if pid == f"pid={os.getpid()}"]
    there = sorted(
        (rows for rows, pid in calls if pid != f"pid={os.getpid()}"),
        key=lambda rows: int(rows.split(":")[0]),
    )
    # The probe's rows ran in this process, one range after another from
    # row 0 on, at most an eighth of them; the rest on the workers: one task
    # per worker thread. (This call's probe, not plan_batches': a reading
    # that falls is measured again, so their rows may differ.)
    ranges = [tuple(int(r) for r in rows.split(":")) for rows in here]
    assert [a for a, _ in ranges] == [0] + [b for _, b in ranges[:-1]], here
    first = ranges[-1][1]
    assert 0 < first <= N // 8
    half = first + (N - first + 1) // 2
    assert there == [f"{first}:{half}", f"{half}:{N}"]


def test_a_function_the_cluster_cannot_receive_is_refused_first(client, data):
    import threading

    lock = threading.Lock()
    x, y = data
    with pytest.raises(TypeError, match="cannot be sent to the dask cluster at tcp://"):
        xpkit.map_batches(lambda a, b: a + lock.locked(), x, y, executor=client)


def test_memory_error_in_a_task_splits_and_resubmits(client, data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    log = tmp_path / "attempts"
    fn = jobs.memory_error_above(40, log)
    got = xpkit.map_batches(fn, x, y, executor=client, **BATCHES_OF_64)
    np.testing.assert_array_equal(got, jobs.work(x, y))
    # 64-row batches fail, their 32-row halves fit: four splits, eight resubmissions.
    assert len(jobs.split_logs(caplog.records)) == 4
    attempts = jobs.attempts(log)
    assert len(attempts) == 4 + 8
    assert {a for a in attempts if a.split(":")[1] in {"64", "128", "192", "256"}} >= {
        "0:64",
        "64:128",
        "128:192",
        "192:256",
    }


def test_worker_killed_for_memory_is_split_and_resubmitted(
    client, data, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    marker, log = tmp_path / "hogged", tmp_path / "attempts"
    fn = jobs.hog_first_batch(marker, log, above=64)
    got = xpkit.map_batches(fn, x, y, executor=client, bytes_per_item=8.0)
    assert marker.exists()  # the first attempt did hog its worker
    np.testing.assert_array_equal(got, jobs.work(x, y))
    (split,) = jobs.split_logs(caplog.records)  # exactly one task was lost, once
    assert "rows 0:128" in split
    assert "KilledWorker" in split
    # The killed attempt, the other batch, then the two halves of the first.
    assert jobs.attempts(log) == ["0:128", "0:64", "128:256", "64:128"]


def test_memory_error_at_min_batch_names_the_rows(client, data, tmp_path):
    x, y = data
    fn = jobs.memory_error_above(0, tmp_path / "attempts")
    with pytest.raises(MemoryError) as info:  # 1 MiB rows in batches of 64 rows
        xpkit.map_batches(
            fn,
            x,
            y,
            executor=client,
            min_batch=32,
            bytes_per_item=2**20,
            budget_gb=1 / 16,
        )
    found = re.search(
        r"rows (\d+):(\d+) \(32 rows, about 32\.0 MiB with the overhead\) could not "
        r"run on the dask cluster at .* even at min_batch=32: out of memory "
        r"\(MemoryError: fake: 32 rows do not fit\)",
        str(info.value),
    )
    assert found is not None, str(info.value)
    start, stop = map(int, found.groups())
    assert (stop - start, start % 32) == (32, 0)


def test_other_errors_propagate_unchanged(client, data):
    x, y = data
    with pytest.raises(ValueError, match="not a memory problem"):
        xpkit.map_batches(
            jobs.fails_with(ValueError("not a memory problem")), x, y, executor=client
        )


def test_exceptions_that_cannot_travel_arrive_named_or_without_their_chain(
    client, data
):
    """Dask pickles an exception's context too (tblib): both arrived as a bare
    ``Exception`` holding a repr, where joblib gave the RuntimeError naming
    the one and the ValueError itself."""
    x, y = data
    with pytest.raises(RuntimeError, match=r"^fn raised pool_jobs\.Unsendable on rows"):
        xpkit.map_batches(
            jobs.raise_unsendable, x, y, executor=client, **jobs.BATCHES_OF_64
        )
    with pytest.raises(ValueError, match="^raised while handling one") as raised:
        xpkit.map_batches(
            jobs.raise_beside_unsendable, x, y, executor=client, **jobs.BATCHES_OF_64
        )
    assert raised.type is ValueError


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()])
def test_fns_exit_or_interrupt_reaches_the_caller_and_kills_no_worker(
    client, data, exc
):
    """Raised on a worker, either killed it; xpkit split and resubmitted the
    rows as deaths for memory until the cluster had no worker left."""
    x, y = data
    workers = set(client.scheduler_info()["workers"])
    with pytest.raises(type(exc)) as raised:
        xpkit.map_batches(jobs.raises_on_a_worker(exc), x, y, executor=client)
    assert raised.value.args == exc.args
    assert set(client.scheduler_info()["workers"]) == workers  # none restarted


def test_xpkit_info_shows_the_cluster(client):
    address = client.scheduler.address
    run = run_xpkit("info", "--json", "--scheduler", address, check=True)
    cluster = json.loads(run.stdout)["cluster"]
    assert cluster["scheduler"] == address
    limits = [w["memory_limit_bytes"] for w in cluster["workers"]]
    assert limits == [400 * 2**20] * 2
    assert [w["nthreads"] for w in cluster["workers"]] == [1, 1]
    text = run_xpkit("info", "--scheduler", address, check=True).stdout
    assert re.search(rf"Dask cluster at {re.escape(address)}", text)
    assert text.count(" 0.39 ") == 2  # 400 MiB in GB, once per worker


def test_xpkit_info_tells_a_worker_from_its_scheduler(client):
    worker = min(client.scheduler_info()["workers"])
    run = run_xpkit("info", "--scheduler", worker)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.stderr == (
        f"xpkit info: the scheduler {worker} is not reachable: it answers as "
        "a Dask Worker, not as a Dask scheduler\n"
    )


class _Bar:
    """Records each update with how many tasks had logged their attempt."""

    def __init__(self, log):
        self.log, self.updates, self.closed = log, [], False

    def update(self, n):
        started = len(self.log.read_text().splitlines()) if self.log.exists() else 0
        self.updates.append((n, started))

    def close(self):
        self.closed = True


def test_progress_follows_completed_tasks(client, data, monkeypatch, tmp_path):
    from xpkit import _batches

    log = tmp_path / "attempts"
    bar = _Bar(log)
    monkeypatch.setattr(_batches, "_progress_bar", lambda total, done: bar)
    x, y = data
    fn = jobs.memory_error_above(N, log)  # never fails; logs each attempt
    xpkit.map_batches(fn, x, y, executor=client, progress=True, **BATCHES_OF_64)
    assert [n for n, _ in bar.updates] == [64, 64, 64, 64]
    # The k-th update comes after at least k tasks ran (not at submission).
    assert all(started >= k for k, (_, started) in enumerate(bar.updates, 1))
    assert bar.closed


def test_closed_client_is_rejected(client):
    # (the last test's cancellations settle first: a second client's handshake
    # read a message of theirs once, and distributed's own check failed)
    assert _settles_to_zero(client)
    other = _second_client(client.scheduler.address)
    other.close()
    with pytest.raises(ValueError, match="is not running"):
        xpkit.map_batches(jobs.work, np.ones((4, 8)), np.ones(4), executor=other)


def _second_client(address):
    """A second client of the scheduler at ``address`` (its handshake tried again
    where distributed's own check of it fails, as it did once under load)."""
    for attempt in range(3):
        try:
            return distributed.Client(address, set_as_default=False)
        except AssertionError:  # (distributed's `assert len(msg) == 1` on connect)
            if attempt == 2:
                raise
    raise AssertionError  # pragma: no cover - the loop returns or raises


def _scheduler_tasks(client):
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))


def _settles_to_zero(client):
    import time

    for _ in range(100):  # releases reach the scheduler asynchronously
        if _scheduler_tasks(client) == 0:
            return True
        time.sleep(0.05)
    return False


def test_futures_and_inputs_are_released(client, data):
    x, y = data
    xpkit.map_batches(jobs.work, x, y, executor=client, **BATCHES_OF_64)
    assert _settles_to_zero(client)
    with pytest.raises(ValueError, match="not a memory problem"):
        xpkit.map_batches(
            jobs.fails_with(ValueError("not a memory problem")),
            x,
            y,
            executor=client,
            **BATCHES_OF_64,
        )
    assert _settles_to_zero(client)


def test_queued_batches_shrink_after_a_failure(client, data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    log = tmp_path / "attempts"
    fn = jobs.memory_error_above(8, log)
    # 16 batches of 16 rows, at most 4 in flight: once one fails, the queued
    # ones are split before they run instead of failing one after another.
    got = xpkit.map_batches(
        fn, x, y, executor=client, bytes_per_item=2**10, budget_gb=16 * 2**10 / 2**30
    )
    np.testing.assert_array_equal(got, jobs.work(x, y))
    sizes = [int(b) - int(a) for a, b in (r.split(":") for r in jobs.attempts(log))]
    assert 1 <= sizes.count(16) <= 4
    assert sizes.count(8) == N // 8


def test_inputs_lost_on_the_cluster_are_shipped_again(client, data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    marker = tmp_path / "cancelled"
    got = xpkit.map_batches(
        jobs.cancel_inputs_once(marker), x, y, executor=client, bytes_per_item=8.0
    )
    assert marker.exists()
    np.testing.assert_array_equal(got, jobs.work(x, y))
    messages = [r.getMessage() for r in caplog.records]
    assert any("lost their inputs" in m for m in messages)
    assert any("shipping them again" in m for m in messages)


def test_dask_inside_a_task_is_refused(client, data):
    x, y = data
    with pytest.raises(ValueError, match="inside a dask task would block"):
        client.submit(jobs.map_inside_task, x, y).result()


def test_a_cluster_without_workers_is_refused():
    with (
        distributed.LocalCluster(
            n_workers=0, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as empty,
        pytest.raises(ValueError, match="has no workers"),
    ):
        xpkit.map_batches(jobs.work, np.ones((4, 8)), np.ones(4), executor=empty)


def test_each_batch_knows_its_rows_on_the_cluster(client):
    """`xpkit.current_rows` in the cluster's workers (fn checks it there)."""
    x = np.zeros((24, 8))
    x[:, 0] = np.arange(24)
    got = xpkit.map_batches(
        jobs.rows_and_checked_values,
        x,
        executor=client,
        bytes_per_item=1000.0,
        budget_gb=4.5e-6,
    )
    np.testing.assert_array_equal(got, np.arange(24))


def test_a_fn_that_reuses_a_buffer_gets_its_rows_back_from_worker_processes(
    client, data
):
    """A worker process holds a task's result until the client gathers it:
    fn's next task there overwrote the view it returned (rows 0:20 of 47
    wrong, or 0:27, from run to run)."""
    x, y = data
    got = xpkit.map_batches(
        jobs.reuses_a_buffer, x, y, executor=client, **jobs.BATCHES_OF_64
    )
    np.testing.assert_array_equal(got, x[:, 0] + y)
    batches = xpkit.iter_batches(
        jobs.reuses_a_buffer, x, y, executor=client, **jobs.BATCHES_OF_64
    )
    for rows, values in batches:
        np.testing.assert_array_equal(values, x[rows, 0] + y[rows])


def test_an_input_dask_cannot_serialize_is_refused_before_a_task_runs(client):
    """Dask's serializer reads a tensor through numpy(), which refuses
    bfloat16: its TypeError came from the scatter, naming no argument."""
    torch = pytest.importorskip("torch")
    x = torch.arange(6.0).reshape(3, 2).to(torch.bfloat16)
    with pytest.raises(
        TypeError,
        match=r"^arrays\[0\] \(torch.Tensor of dtype torch.bfloat16\) cannot be sent "
        r"to the dask cluster at .*\(TypeError: Could not serialize object of type "
        r"Tensor\); convert",
    ):
        xpkit.map_batches(lambda r: r * 2, x, executor=client)


def test_out_is_written_by_the_client_as_tasks_complete(client, data, tmp_path):
    """out= with a Dask client: every task's rows land in the caller's store,
    an OOM split included (issue #32 item 1; workers writing their own rows,
    item 3, is not built)."""
    x, y = data
    want = jobs.work(x, y)
    out = np.lib.format.open_memmap(
        tmp_path / "out.npy", mode="w+", dtype=want.dtype, shape=want.shape
    )
    fn = jobs.memory_error_above(40, tmp_path / "attempts")
    got = xpkit.map_batches(fn, x, y, executor=client, out=out, **BATCHES_OF_64)
    assert got is out
    np.testing.assert_array_equal(out, want)


def _holds_no_more_futures(client, before) -> bool:
    """Whether the client's futures come back to ``before`` (a condition, within 5 s)."""
    import time

    for _ in range(100):  # (the client forgets a future as its last reference goes)
        if set(client.futures) <= before:
            return True
        time.sleep(0.05)
    return False


def test_iter_batches_on_the_cluster_in_order_and_closed_early(client, data, tmp_path):
    """iter_batches with a Dask client: the rows in order, an OOM split
    included; a loop that stops early leaves none of its futures behind."""
    x, y = data
    want = jobs.work(x, y)
    before = set(client.futures)
    fn = jobs.memory_error_above(40, tmp_path / "attempts")
    pieces = list(xpkit.iter_batches(fn, x, y, executor=client, **BATCHES_OF_64))
    assert [r.start for r, _ in pieces] == sorted(r.start for r, _ in pieces)
    assert pieces[-1][0].stop == N
    assert max(len(r) for r, _ in pieces) <= 40
    np.testing.assert_array_equal(np.concatenate([v for _, v in pieces]), want)
    assert _holds_no_more_futures(client, before)
    batches = xpkit.iter_batches(jobs.work, x, y, executor=client, **BATCHES_OF_64)
    rows, _ = next(batches)
    assert rows.start == 0
    assert set(client.futures) - before  # (the rest in flight, and the inputs)
    batches.close()  # the loop left early: what was in flight is cancelled
    assert _holds_no_more_futures(client, before)


def test_workers_write_their_own_rows_into_a_shared_store(
    client, data, tmp_path, monkeypatch, writing_holds_nothing
):
    """out= a zarr store every worker reaches: each task writes its rows
    itself, nothing of them comes back; a worker killed mid-run leaves a
    complete, correct array (issue #32 item 3)."""
    zarr = pytest.importorskip("zarr")
    x, y = data
    want = jobs.work(x, y)
    z = zarr.create_array(
        store=str(tmp_path / "z"), shape=want.shape, chunks=(16, 3), dtype=want.dtype
    )
    came = written_marks(monkeypatch)  # per task's rows: whether only WRITTEN came
    marker = tmp_path / "killed"
    fn = jobs.exit_first_batch(marker, above=16)
    got = xpkit.map_batches(fn, x, y, executor=client, out=z, **BATCHES_OF_64)
    assert got is z
    assert marker.exists()  # (the first task's worker died, once)
    np.testing.assert_array_equal(z[:], want)
    assert came
    assert all(came)


def test_a_worker_dying_while_it_writes_leaves_no_partial_chunk(
    client, data, tmp_path, writing_holds_nothing
):
    """The worker of one task writes one of its chunks, leaves the next
    half written, and dies: the task's retry writes its chunks again whole,
    and the array is complete and correct (issue #32 item 3)."""
    zarr = pytest.importorskip("zarr")
    x, y = data
    want = jobs.work(x, y)
    z = zarr.create_array(
        store=str(tmp_path / "z"), shape=want.shape, chunks=(16, 3), dtype=want.dtype
    )
    marker = tmp_path / "died"
    # (bytes_per_item given: no probe; the tasks are rows 0:64, 64:128, ...)
    fn = jobs.die_writing(marker, first_row=64, chunk_rows=16)
    assert xpkit.map_batches(fn, x, y, executor=client, out=z, **BATCHES_OF_64) is z
    whole, half = marker.read_text().split("\n")[:2]  # (the fault fired)
    assert Path(whole).parent.name == "4"  # rows 64:80, written whole first
    assert Path(half).parent.name == "5"  # rows 80:96
    np.testing.assert_array_equal(z[:], want)
