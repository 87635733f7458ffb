"""Functions the executor tests run inside worker processes.

They live in their own module, pickled by value (see ``register_by_value``), so
a worker needs nothing from the test suite to run them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

W = np.linspace(-1.0, 1.0, 24).reshape(8, 3)


def work(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A row-wise computation with a per-row reduction: equal whatever the batches.

    Not ``x @ W``: BLAS picks its kernel (and blocking, and threads) by the
    number of rows, so a batch of 1 and one of 256 may round differently.
    A reduction over the middle axis adds each row's terms in one order.
    """
    return np.tanh((x[:, :, None] * W[None, :, :]).sum(axis=1)) * y[:, None]


#: One buffer `reuses_a_buffer` writes every batch into (each worker
#: process holds its own copy of this module).
BUFFER = np.empty(64)


def reuses_a_buffer(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x[:, 0] + y``, written into `BUFFER` and returned as a view of it."""
    out = BUFFER[: x.shape[0]]
    np.add(x[:, 0], y, out=out)
    return out


def log_attempt(log: Path, x: np.ndarray) -> None:
    """Append the rows of this attempt (``first:last+1``) to ``log``."""
    with log.open("a") as f:
        f.write(f"{int(x[0, 0])}:{int(x[-1, 0]) + 1} pid={os.getpid()}\n")


def memory_error_above(rows: int, log: Path):
    """``work``, but a MemoryError inside the task above ``rows`` rows."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        log_attempt(log, x)
        if x.shape[0] > rows:
            msg = f"fake: {x.shape[0]} rows do not fit"
            raise MemoryError(msg)
        return work(x, y)

    return fn


def hog_first_batch(marker: Path, log: Path, above: int):
    """``work``, but the first attempt at the batch holding row 0 (when it has
    more than ``above`` rows) grows its worker past any memory limit, so the
    nanny kills the worker."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        log_attempt(log, x)
        if int(x[0, 0]) == 0 and x.shape[0] > above and not marker.exists():
            marker.write_text("hogging\n")
            blocks = []
            for _ in range(80):  # up to 2 GiB, 25 MiB at a time
                blocks.append(np.ones(25 * 2**20 // 8))
                time.sleep(0.02)
            msg = "the nanny never killed this worker"
            raise RuntimeError(msg)
        return work(x, y)

    return fn


def fails_with(exc: BaseException):
    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise exc

    return fn


def raises_on_a_worker(exc: BaseException):
    """``work`` here (the probe), ``exc`` raised on a dask worker."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        import distributed

        try:
            distributed.get_worker()
        except ValueError:  # not on a worker
            return work(x, y)
        raise exc

    return fn


def exit_first_batch(marker: Path, above: int):
    """``work``, but the first attempt at the batch holding row 0 (above
    ``above`` rows) kills its own process, as the kernel's OOM killer would."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if int(x[0, 0]) == 0 and x.shape[0] > above and not marker.exists():
            marker.write_text("killed\n")
            os.kill(os.getpid(), 9)
        return work(x, y)

    return fn


def die_writing(marker: Path, first_row: int, chunk_rows: int):
    """``work``, but the worker running the batch from ``first_row`` the
    first time dies while writing that batch's rows into a zarr store: once
    the batch's first chunk is written whole, it leaves its second one half
    written (as a store without atomic writes would) and kills its own
    process.

    The fault is armed in the worker itself, before its task's rows are
    written there: zarr's `LocalStore` there writes through ``_put``
    (atomically: a chunk's file exists once it is whole), from several
    threads at once, in no set order; so the second chunk waits for the
    first's file.
    """

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if int(x[0, 0]) == first_row and not marker.exists():
            from zarr.storage import _local

            put = _local._put
            second = str(first_row // chunk_rows + 1)

            def dying_put(path: Path, value: Any, exclusive: bool = False) -> int:
                if path.parent.parent.name != "c" or path.parent.name != second:
                    return put(path, value, exclusive)
                whole = path.parent.parent / str(first_row // chunk_rows) / path.name
                deadline = time.monotonic() + 60
                while not whole.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
                data = bytes(value.as_buffer_like())
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data[: len(data) // 2])
                marker.write_text(f"{whole if whole.exists() else ''}\n{path}\n")
                os.kill(os.getpid(), 9)
                raise AssertionError("unreachable")  # pragma: no cover

            _local._put = dying_put
        return work(x, y)

    return fn


def cancel_inputs_once(marker: Path):
    """``work``, but the first attempt cancels the scattered inputs on the
    cluster (as if their last holder had died) and waits to be cancelled."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not marker.exists():
            marker.write_text("cancelled\n")
            from distributed import Future, get_client, get_worker

            client = get_client()
            keys = [k for k in get_worker().data if str(k).startswith("ndarray-")]
            client.cancel([Future(k, client) for k in keys], force=True)
            time.sleep(2)  # the scheduler cancels this task meanwhile
        return work(x, y)

    return fn


@contextlib.contextmanager
def local_cluster(**dask_config: object):
    """A client of a LocalCluster of 2 worker processes of 1 thread, 400 MiB each.

    ``dask_config`` is set for the cluster's lifetime (e.g. the scheduler's
    ``allowed-failures``); nothing of the scheduler is mocked.
    """
    import dask
    import distributed

    with (
        dask.config.set(dask_config),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            memory_limit="400MiB",
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def register_by_value() -> None:
    """Pickle this module's functions by value (dask and joblib's loky both
    use cloudpickle when it is installed)."""
    import pytest

    cloudpickle = pytest.importorskip("cloudpickle")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def map_inside_task(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """map_batches with executor='dask', called from inside a dask task."""
    import xpkit

    return xpkit.map_batches(work, x, y, executor="dask")


# -- helpers of the tests themselves --------------------------------------------
N = 256
# 1 KiB per row declared, a 64 KiB budget: batches of 64 rows.
BATCHES_OF_64 = {"bytes_per_item": 2**10, "budget_gb": 64 * 2**10 / 2**30}


def make_data() -> tuple[np.ndarray, np.ndarray]:
    """N rows whose first column is the row index (tasks log which rows they got)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 8))
    x[:, 0] = np.arange(N)
    return x, rng.standard_normal(N)


def attempts(log: Path) -> list[str]:
    """The row ranges tasks ran on, sorted as strings."""
    return sorted(line.split()[0] for line in log.read_text().splitlines())


def split_logs(records: list) -> list[str]:
    """map_batches' log lines that resubmit rows."""
    return [r.getMessage() for r in records if "resubmitting" in r.getMessage()]


def kill_above(rows: int):
    """``work``, but the process running a batch of more than ``rows`` rows is
    killed (SIGKILL), every time."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if x.shape[0] > rows:
            os.kill(os.getpid(), 9)
        return work(x, y)

    return fn


def sigkill(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """SIGKILLs its worker process at every size."""
    os.kill(os.getpid(), 9)
    return x


def exits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Ends its worker process with ``os._exit(3)`` at every size."""
    os._exit(3)


def exits_on_row(row: int):
    """``work``, but the worker process of any batch holding ``row`` ends
    (``os._exit(3)``), at every size: the tasks beside it die with it."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if row in x[:, 0]:
            os._exit(3)
        return work(x, y)

    return fn


class Unsendable(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__("fn failed holding a lock")
        self.lock = threading.Lock()


def raise_unsendable(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Raises an exception a worker cannot send back."""
    raise Unsendable


def raise_beside_unsendable(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Raises a plain ValueError while handling an exception that cannot travel."""
    try:
        raise Unsendable
    except Unsendable:
        raise ValueError("raised while handling one that cannot travel") from None


def always_exit(x: np.ndarray) -> np.ndarray:
    """Kills its worker process every time (not a memory problem at all)."""
    os.kill(os.getpid(), 9)
    return x


# -- the child process of tests/executors/test_interrupts.py -----------------------
def sleepy(markers: Path, seconds: float):
    """``x * 2`` after ``seconds`` of sleep; each batch first leaves a file named
    ``<pid>-<first row>`` in ``markers`` (which process runs it, and that it began)."""

    def fn(x: np.ndarray) -> np.ndarray:
        (markers / f"{os.getpid()}-{int(x[0, 0])}").touch()
        time.sleep(seconds)
        return x * 2.0

    return fn


class _CtrlCOnTaking:
    """A future's lock (an RLock) on which a Ctrl-C arrives, once: a real
    SIGINT, raised right after the main thread first takes it."""

    fired = False

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        taken = self._lock.acquire(blocking, timeout)
        cls = type(self)
        if (
            taken
            and not cls.fired
            and threading.current_thread() is threading.main_thread()
        ):
            cls.fired = True
            sys.stdout.write(f"CTRL-C {time.time()}\n")
            sys.stdout.flush()
            signal.raise_signal(signal.SIGINT)  # (its handler runs here)
        return taken

    __enter__ = acquire

    def release(self) -> None:
        self._lock.release()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _is_owned(self) -> bool:
        return self._lock._is_owned()  # type: ignore[attr-defined]

    def _release_save(self) -> object:
        return self._lock._release_save()  # type: ignore[attr-defined]

    def _acquire_restore(self, state: object) -> None:
        self._lock._acquire_restore(state)  # type: ignore[attr-defined]


def _ctrl_c_in_a_future_lock() -> None:
    """The first Ctrl-C arrives while the main thread holds a task future's lock.

    Where a Ctrl-C lands is chance. Where the main thread has just taken a
    future's lock and lets the KeyboardInterrupt out before it releases
    it (as ``concurrent.futures.wait`` does, between the futures it takes),
    the lock stays taken for good, and loky's thread, which takes it to run
    the task, hangs the process at exit. This makes that moment certain:
    every future's lock raises a real SIGINT right after the main thread
    first takes one (where a Ctrl-C is held, it is held).
    """
    original = Future.__init__

    def init(future: Future[Any]) -> None:
        original(future)
        future._condition = threading.Condition(_CtrlCOnTaking())  # type: ignore[attr-defined]

    Future.__init__ = init  # type: ignore[method-assign]


def _children() -> list[list[object]]:
    """This process's descendants: [pid, status, command line] each."""
    import psutil

    found: list[list[object]] = []
    for child in psutil.Process().children(recursive=True):
        try:
            found.append([child.pid, child.status(), " ".join(child.cmdline())])
        except psutil.ZombieProcess:
            found.append([child.pid, psutil.STATUS_ZOMBIE, ""])
        except psutil.NoSuchProcess:
            pass
    return found


def _scheduler_tasks(client) -> int:
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))


def interrupted_run(
    kind: str, markers: str, seconds: str, cluster_survives: str
) -> None:
    """A long ``map_batches`` for tests/executors/test_interrupts.py to interrupt.

    250 batches of 16 rows, each ``seconds`` long, of 1 MiB of inputs;
    ``kind``: "none" (here), "joblib" or "dask" (a client of a LocalCluster
    of 2 worker processes started here). When map_batches raises
    KeyboardInterrupt, one line on stdout, ``REPORT`` and JSON, says when,
    and what is left: this process's descendants and, on the cluster, how
    many tasks the scheduler still holds (after up to 5 s for them to go)
    and, when ``cluster_survives`` is "yes", whether the cluster still
    computes. Then the KeyboardInterrupt goes on, and ends the process.
    ``kind`` "joblib-lock" is "joblib" where the first Ctrl-C comes at the
    worst moment (`_ctrl_c_in_a_future_lock`).
    """
    import json

    import cloudpickle

    import xpkit

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    x = np.zeros((4000, 32))  # 1 MiB: more than a pipe holds, as a job to ship
    x[:, 0] = np.arange(len(x))
    fn = sleepy(Path(markers), float(seconds))
    plan = {"bytes_per_item": 8.0, "budget_gb": 16 * 8 / 2**30}  # 16 rows a batch
    if kind == "joblib-lock":
        kind = "joblib"
        _ctrl_c_in_a_future_lock()
    with contextlib.ExitStack() as stack:
        executor: Any = None if kind == "none" else kind
        if kind == "dask":
            import distributed

            cluster = stack.enter_context(
                distributed.LocalCluster(
                    n_workers=2,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                )
            )
            executor = stack.enter_context(distributed.Client(cluster))
        report: dict[str, object] = {}
        try:
            xpkit.map_batches(fn, x, executor=executor, **plan)
        except KeyboardInterrupt:
            # Further Ctrl-Cs (the test may send a burst) wait for the report.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            report["caught_at"] = time.time()
            report["children"] = _children()
            if kind == "dask":
                deadline = time.monotonic() + 5
                while _scheduler_tasks(executor) and time.monotonic() < deadline:
                    time.sleep(0.05)
                report["scheduler_tasks"] = _scheduler_tasks(executor)
                if cluster_survives == "yes":
                    future = executor.submit(sum, [1, 2])
                    report["cluster_computes"] = future.result(timeout=30) == 3
            sys.stdout.write(f"REPORT {json.dumps(report)}\n")
            sys.stdout.flush()
            raise
        msg = "map_batches finished before the test interrupted it"
        raise AssertionError(msg)


def rows_and_checked_values(x: np.ndarray) -> np.ndarray:
    """Each row's position as `xpkit.current_rows` says it, checked against ``x``.

    ``x[:, 0]`` holds each row's own position: a range that named other
    rows than the batch holds fails here, in the worker.
    """
    import xpkit

    rows = xpkit.current_rows()
    assert rows is not None, "current_rows() is None inside fn"
    held = np.asarray(x[:, 0], dtype=np.int64)
    assert held.tolist() == list(rows)[: len(held)], (rows, held[:3])
    return np.arange(rows.start, rows.stop, dtype=np.int64)
