"""`map_batches` on a real dask.distributed LocalCluster and on joblib.

One LocalCluster (worker processes, 2 workers of 1 thread, a 400 MiB memory
limit each) serves the module; no part of the scheduler is mocked. Its
scheduler allows no retries of a task whose worker died, so a worker killed
for memory surfaces at once as ``KilledWorker`` to map_batches.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

import cluster_jobs as jobs
import numpy as np
import pytest

import xpkit
from xpkit._pools import worker_task_budget_gb

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(jobs)

pytestmark = pytest.mark.cluster

N = 256
# 1 KiB per row declared, a 64 KiB budget: batches of 64 rows.
BATCHES_OF_64 = {"bytes_per_item": 2**10, "budget_gb": 64 * 2**10 / 2**30}


@pytest.fixture(scope="module")
def client():
    import dask

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="400MiB",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 8))
    x[:, 0] = np.arange(N)  # the row index, so tasks can tell which rows they got
    y = rng.standard_normal(N)
    return x, y


def _attempts(log):
    return sorted(line.split()[0] for line in log.read_text().splitlines())


def _resubmissions(caplog):
    return [r for r in caplog.records if "resubmitting" in r.getMessage()]


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
    got = xpkit.map_batches(fn, x, y, executor="dask")
    np.testing.assert_array_equal(got, jobs.work(x, y))
    # One task per worker thread (the budget allows more rows per task).
    assert _attempts(log) == ["0:128", "128:256"]


def test_memory_error_in_a_task_splits_and_resubmits(client, data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    log = tmp_path / "attempts"
    fn = jobs.memory_error_above(40, log)
    got = xpkit.map_batches(fn, x, y, executor=client, **BATCHES_OF_64)
    np.testing.assert_array_equal(got, jobs.work(x, y))
    # 64-row batches fail, their 32-row halves fit: four splits, eight resubmissions.
    assert len(_resubmissions(caplog)) == 4
    attempts = _attempts(log)
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
    got = xpkit.map_batches(fn, x, y, executor=client)
    assert marker.exists()  # the first attempt did hog its worker
    np.testing.assert_array_equal(got, jobs.work(x, y))
    (split,) = _resubmissions(caplog)  # exactly one task was lost, once
    assert "rows 0:128" in split.getMessage()
    assert "KilledWorker" in split.getMessage()
    # The killed attempt, the other batch, then the two halves of the first.
    assert _attempts(log) == ["0:128", "0:64", "128:256", "64:128"]


def test_memory_error_at_min_batch_names_the_rows(client, data, tmp_path):
    x, y = data
    fn = jobs.memory_error_above(0, tmp_path / "attempts")
    with pytest.raises(MemoryError, match=r"rows \d+:\d+ \(\d+ rows, about .* MiB"):
        xpkit.map_batches(fn, x, y, executor=client, min_batch=32)


def test_other_errors_propagate_unchanged(client, data):
    x, y = data
    with pytest.raises(ValueError, match="not a memory problem"):
        xpkit.map_batches(
            jobs.fails_with(ValueError("not a memory problem")), x, y, executor=client
        )


def test_xpkit_info_shows_the_cluster(client):
    address = client.scheduler.address
    run = subprocess.run(
        [sys.executable, "-m", "xpkit", "info", "--json", "--scheduler", address],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    cluster = json.loads(run.stdout)["cluster"]
    assert cluster["scheduler"] == address
    limits = [w["memory_limit_bytes"] for w in cluster["workers"]]
    assert limits == [400 * 2**20] * 2
    assert [w["nthreads"] for w in cluster["workers"]] == [1, 1]
    text = subprocess.run(
        [sys.executable, "-m", "xpkit", "info", "--scheduler", address],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert re.search(rf"Dask cluster at {re.escape(address)}", text)
    assert text.count(" 0.39 ") == 2  # 400 MiB in GB, once per worker


def test_joblib_executor_equals_the_local_result(data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    fn = jobs.memory_error_above(40, tmp_path / "attempts")
    got = xpkit.map_batches(fn, x, y, executor="joblib", **BATCHES_OF_64)
    np.testing.assert_array_equal(got, jobs.work(x, y))
    assert len(_resubmissions(caplog)) == 4


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
        (4, TypeError, "executor must be None, 'dask', 'joblib'.*got int"),
    ],
)
def test_bad_executor_is_rejected(executor, error, match):
    with pytest.raises(error, match=match):
        xpkit.map_batches(jobs.work, np.ones((4, 8)), np.ones(4), executor=executor)


def test_joblib_worker_killed_is_split_and_resubmitted(data, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    x, y = data
    marker = tmp_path / "killed"
    got = xpkit.map_batches(
        jobs.exit_first_batch(marker, above=64), x, y, executor="joblib"
    )
    assert marker.exists()
    np.testing.assert_array_equal(got, jobs.work(x, y))
    splits = [r.getMessage() for r in _resubmissions(caplog)]
    # The killed batch is split; a batch in flight on the broken pool may be too.
    assert any("rows 0:128" in m for m in splits)
    assert 1 <= len(splits) <= 2


class _Bar:
    def __init__(self):
        self.updates: list[int] = []
        self.closed = False

    def update(self, n):
        self.updates.append(n)

    def close(self):
        self.closed = True


def test_progress_follows_completed_tasks(client, data, monkeypatch):
    from xpkit import _batches

    bar = _Bar()
    monkeypatch.setattr(_batches, "_progress_bar", lambda total: bar)
    x, y = data
    xpkit.map_batches(jobs.work, x, y, executor=client, progress=True, **BATCHES_OF_64)
    assert sorted(bar.updates) == [64, 64, 64, 64]
    assert bar.closed


def test_closed_client_is_rejected(client):
    other = distributed.Client(client.scheduler.address, set_as_default=False)
    other.close()
    with pytest.raises(ValueError, match="is not running"):
        xpkit.map_batches(jobs.work, np.ones((4, 8)), np.ones(4), executor=other)


def test_dask_without_a_client_says_how_to_get_one():
    code = (
        "import numpy as np, xpkit\n"
        "xpkit.map_batches(lambda x: x, np.ones((4, 2)), executor='dask')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "ValueError: executor='dask' needs an active dask.distributed Client" in (
        run.stderr
    )
