"""Pools of workers for `map_batches`: a dask.distributed cluster or joblib.

A pool ships ``fn`` and the inputs to its workers once, runs batches as tasks
(row ranges of the inputs) and hands back NumPy results. `run_on_pool` is the
driver both pools share: it keeps every worker thread busy, follows completed
tasks with the progress bar, and splits a batch whose task ran out of memory
(a worker killed for memory, or an OOM raised inside the task) into halves
that it resubmits, down to ``min_batch``.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from ._log import logger
from ._memory import _GB, HEADROOM, MIN_BUDGET_GB, host_available_bytes
from ._oom import aligned, common_rows, is_oom_error, row_slices, to_host

__all__ = [
    "EXECUTORS",
    "DaskPool",
    "JoblibPool",
    "Pool",
    "cluster_info",
    "pool_for",
    "run_on_pool",
    "worker_task_budget_gb",
]

#: The executor names `map_batches` accepts besides None and a dask Client.
EXECUTORS = ("dask", "joblib")


class InputsLost(Exception):
    """A task never ran: the inputs it needed went down with a worker."""


class Pool:
    """What `run_on_pool` needs from a pool of workers."""

    #: Words for messages ("the dask cluster at tcp://...").
    where: str = ""
    #: Worker threads: batches are sized so that each gets work.
    slots: int = 1
    #: Tasks in flight per worker thread: the next waits on its worker
    #: while one runs, so no thread idles through a scheduling round trip.
    per_slot: int = 2

    def task_budget_gb(self, input_bytes: int) -> float:
        """Measured memory one task may use (GB), headroom included."""
        raise NotImplementedError

    def start(self, fn: Callable[..., Any], arrays: tuple[Any, ...]) -> None:
        """Ship ``fn`` and the inputs to the workers (once)."""
        raise NotImplementedError

    def submit(self, start: int, stop: int) -> Any:
        """Run rows ``start:stop`` as one task; a future."""
        raise NotImplementedError

    def wait(self, futures: list[Any]) -> list[tuple[Any, Any, BaseException | None]]:
        """Block until some of ``futures`` finish: (future, result, error) each."""
        raise NotImplementedError

    def lost_worker(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the task's worker died (killed for memory)."""
        raise NotImplementedError

    def close(self, futures: list[Any]) -> None:
        """Cancel ``futures`` and release what `start` shipped."""
        raise NotImplementedError


def run_rows(fn: Callable[..., Any], start: int, stop: int, *arrays: Any) -> Any:
    """The task: ``fn`` on rows ``start:stop``, brought to the host."""
    rows = row_slices(arrays, start, stop, common_rows(arrays))
    return aligned(to_host(fn(*rows)), fn, stop - start)


# -- the shared driver ------------------------------------------------------------
def run_on_pool(
    pool: Pool,
    fn: Callable[..., Any],
    arrays: tuple[Any, ...],
    *,
    batch: int,
    min_batch: int,
    bytes_per_row: float,
    bar: Any,
) -> tuple[np.ndarray[Any, Any], int]:
    """Run every batch on ``pool``; the results in row order and the resubmissions.

    A task that fails for memory is split in half and both halves go back in
    the queue; below ``min_batch`` rows a `MemoryError` names the rows and
    the memory they needed. Any other error cancels the run and propagates.
    """
    n = common_rows(arrays)
    queue = deque((s, min(s + batch, n)) for s in range(0, n, batch))
    running: dict[Any, tuple[int, int]] = {}
    done: dict[int, tuple[int, np.ndarray[Any, Any]]] = {}
    resubmitted = relaunched = 0
    pool.start(fn, arrays)
    try:
        while queue or running:
            while queue and len(running) < pool.slots * pool.per_slot:
                start, stop = queue.popleft()
                running[pool.submit(start, stop)] = (start, stop)
            for future, result, error in pool.wait(list(running)):
                start, stop = running.pop(future)
                if error is None:
                    done[start] = (stop, result)
                    if bar is not None:
                        bar.update(stop - start)
                    continue
                if isinstance(error, InputsLost) and relaunched < _MAX_RELAUNCHES:
                    logger().info(
                        "map_batches: rows %d:%d lost their inputs with a worker "
                        "(%s); shipping the inputs again and resubmitting them",
                        start,
                        stop,
                        error,
                    )
                    queue.appendleft((start, stop))
                    relaunched += 1
                    continue
                if not (pool.lost_worker(error) or is_oom_error(error)):
                    raise error
                rows = stop - start
                if rows // 2 < min_batch:
                    need = rows * bytes_per_row / 2**20
                    msg = (
                        f"map_batches: rows {start}:{stop} ({rows} rows, about "
                        f"{need:.1f} MiB with the overhead) ran out of memory on "
                        f"{pool.where} even at min_batch={min_batch} "
                        f"({type(error).__name__}: {str(error)[:200]})"
                    )
                    raise MemoryError(msg) from error
                mid = start + rows // 2
                logger().info(
                    "map_batches: rows %d:%d ran out of memory on %s (%s); "
                    "resubmitting them as %d + %d rows",
                    start,
                    stop,
                    pool.where,
                    type(error).__name__,
                    mid - start,
                    stop - mid,
                )
                queue.extendleft([(mid, stop), (start, mid)])
                resubmitted += 2
    finally:
        pool.close(list(running))
    return _in_order(done, n), resubmitted


#: Resubmissions of tasks whose inputs were lost, before giving up.
_MAX_RELAUNCHES = 100


def _in_order(
    done: dict[int, tuple[int, np.ndarray[Any, Any]]], n: int
) -> np.ndarray[Any, Any]:
    """Concatenate the pieces by row, checking they tile ``0:n`` exactly once."""
    pieces, at = [], 0
    for start in sorted(done):
        stop, result = done[start]
        if start != at:  # pragma: no cover - a bug in the driver, never the user's
            msg = f"map_batches lost or duplicated rows around {at}:{start}"
            raise AssertionError(msg)
        pieces.append(result)
        at = stop
    if at != n:  # pragma: no cover
        msg = f"map_batches lost rows {at}:{n}"
        raise AssertionError(msg)
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=0)


# -- dask.distributed ---------------------------------------------------------------
def worker_task_budget_gb(workers: dict[str, Any], input_bytes: int) -> float:
    """Memory one task may use on the tightest worker of a cluster, in GB.

    For each worker (``Client.scheduler_info()["workers"]``): its
    ``memory_limit`` with `HEADROOM`, less what the worker process already
    holds and the inputs every worker receives, shared by its threads. A
    worker without a limit counts this host's available memory instead.
    """
    budgets = []
    for info in workers.values():
        limit = info.get("memory_limit") or host_available_bytes()
        held = info.get("metrics", {}).get("memory", 0) or 0
        free = limit * HEADROOM - held - input_bytes
        budgets.append(free / max(int(info.get("nthreads", 1)), 1))
    if not budgets:
        msg = "the dask cluster has no workers"
        raise RuntimeError(msg)
    return max(min(budgets) / _GB, MIN_BUDGET_GB)


def scheduler_workers(client: Any) -> dict[str, Any]:
    """Every worker's entry of ``client.scheduler_info()``."""
    try:
        info = client.scheduler_info(n_workers=-1)  # some versions list 5 by default
    except TypeError:  # versions without the argument list them all
        info = client.scheduler_info()
    return dict(info["workers"])


class DaskPool(Pool):
    """Batches as tasks of a ``dask.distributed.Client``."""

    def __init__(self, client: Any) -> None:
        from distributed import wait
        from distributed.scheduler import KilledWorker

        self._client, self._killed = client, KilledWorker
        self._wait: Any = wait
        workers = scheduler_workers(client)
        self.slots = max(sum(int(w.get("nthreads", 1)) for w in workers.values()), 1)
        self.where = f"the dask cluster at {client.scheduler.address}"
        self._workers = workers
        self._shipped: list[Any] = []
        self._job: tuple[Callable[..., Any], tuple[Any, ...]] = (run_rows, ())

    def task_budget_gb(self, input_bytes: int) -> float:
        return worker_task_budget_gb(self._workers, input_bytes)

    def start(self, fn: Callable[..., Any], arrays: tuple[Any, ...]) -> None:
        self._job = (fn, arrays)
        self._ship()

    def _ship(self) -> None:
        # Broadcast warms every worker, but the scheduler may drop replicas
        # (its active memory manager), so a killed worker can take the only
        # copy with it: `submit` ships again when that happened.
        fn, arrays = self._job
        fn_future = self._client.scatter(fn, broadcast=True, hash=False)
        array_futures = self._client.scatter(list(arrays), broadcast=True, hash=False)
        self._shipped = [fn_future, *array_futures]

    def submit(self, start: int, stop: int) -> Any:
        if any(f.status != "finished" for f in self._shipped):
            logger().info("map_batches: inputs lost with a worker; shipping them again")
            self._ship()
        return self._client.submit(
            run_rows, self._shipped[0], start, stop, *self._shipped[1:], pure=False
        )

    def wait(self, futures: list[Any]) -> list[tuple[Any, Any, BaseException | None]]:
        finished = self._wait(futures, return_when="FIRST_COMPLETED").done
        out: list[tuple[Any, Any, BaseException | None]] = []
        for future in finished:
            if future.status == "finished":
                out.append((future, future.result(), None))
            elif future.status == "cancelled":  # e.g. "lost dependencies"
                out.append((future, None, InputsLost(future.status)))
            else:
                out.append((future, None, future.exception()))
        return out

    def lost_worker(self, exc: BaseException) -> bool:
        return isinstance(exc, self._killed)

    def close(self, futures: list[Any]) -> None:
        if futures:
            self._client.cancel(futures)
        self._client.cancel(self._shipped)
        self._shipped = []


# -- joblib (loky processes on this host) --------------------------------------------
_SHIPPED: dict[str, Any] = {}


def _receive(fn: Callable[..., Any], arrays: tuple[Any, ...]) -> None:
    """Worker initializer: keep what the pool ships, once per process."""
    _SHIPPED["job"] = (fn, arrays)


def _run_shipped(start: int, stop: int) -> Any:
    fn, arrays = _SHIPPED["job"]
    return run_rows(fn, start, stop, *arrays)


class JoblibPool(Pool):
    """Batches as tasks of joblib's process executor (loky) on this host.

    ``n_jobs`` comes from `auto_n_jobs_for_arrays` (each worker process holds
    a copy of the inputs). A worker process killed by the system breaks the
    executor: every batch in flight then counts as failed for memory and is
    split, and a fresh executor takes the rest.
    """

    def __init__(self, n_jobs: int) -> None:
        from joblib.externals.loky.process_executor import BrokenProcessPool

        self.slots = n_jobs
        self.where = f"joblib's {n_jobs} worker processes"
        self._broken = BrokenProcessPool
        self._executor: Any = None
        self._job: tuple[Callable[..., Any], tuple[Any, ...]] = (run_rows, ())

    def task_budget_gb(self, input_bytes: int) -> float:
        free = host_available_bytes() * HEADROOM - self.slots * input_bytes
        return max(free / self.slots / _GB, MIN_BUDGET_GB)

    def start(self, fn: Callable[..., Any], arrays: tuple[Any, ...]) -> None:
        self._job = (fn, arrays)

    def _fresh_executor(self) -> Any:
        from joblib.externals.loky import ProcessPoolExecutor

        if self._executor is not None:  # broken: its workers are gone or going
            self._executor.shutdown(wait=False, kill_workers=True)
        self._executor = ProcessPoolExecutor(
            max_workers=self.slots, initializer=_receive, initargs=self._job
        )
        return self._executor

    def submit(self, start: int, stop: int) -> Any:
        executor = self._executor or self._fresh_executor()
        try:
            return executor.submit(_run_shipped, start, stop)
        except self._broken:  # a worker died since the last submit
            return self._fresh_executor().submit(_run_shipped, start, stop)

    def wait(self, futures: list[Any]) -> list[tuple[Any, Any, BaseException | None]]:
        from concurrent.futures import FIRST_COMPLETED, wait

        finished = wait(futures, return_when=FIRST_COMPLETED).done
        return [
            (f, None if f.exception() else f.result(), f.exception()) for f in finished
        ]

    def lost_worker(self, exc: BaseException) -> bool:
        return isinstance(exc, self._broken)

    def close(self, futures: list[Any]) -> None:
        for future in futures:
            future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True, kill_workers=bool(futures))
            self._executor = None
        self._job = (run_rows, ())


# -- choosing a pool -------------------------------------------------------------------
def pool_for(executor: Any, arrays: tuple[Any, ...]) -> Pool | None:
    """The pool ``executor`` names (None: run in this process)."""
    if executor is None:
        return None
    if isinstance(executor, str):
        if executor == "joblib":
            from ._memory import auto_n_jobs_for_arrays

            return JoblibPool(auto_n_jobs_for_arrays(arrays))
        if executor == "dask":
            return DaskPool(_current_client())
        msg = (
            f"executor must be None, 'dask', 'joblib' or a dask.distributed.Client, "
            f"got {executor!r}"
        )
        raise ValueError(msg)
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(executor, distributed.Client):
        if executor.status != "running":
            msg = f"executor={executor!r} is not running (status {executor.status!r})"
            raise ValueError(msg)
        if executor.asynchronous:
            msg = (
                f"executor={executor!r} is an asynchronous client; map_batches "
                "needs a synchronous one (it blocks until the results are in)"
            )
            raise ValueError(msg)
        return DaskPool(executor)
    msg = (
        "executor must be None, 'dask', 'joblib' or a dask.distributed.Client, "
        f"got {type(executor).__qualname__}"
    )
    raise TypeError(msg)


def _current_client() -> Any:
    try:
        from distributed import get_client
    except ImportError:
        msg = "executor='dask' needs dask.distributed: pip install 'xpkit[distributed]'"
        raise ImportError(msg) from None
    try:
        return get_client()
    except ValueError:
        msg = (
            "executor='dask' needs an active dask.distributed Client "
            "(create one with distributed.Client(...), or pass it as executor=)"
        )
        raise ValueError(msg) from None


# -- xpkit info --------------------------------------------------------------------
def cluster_info(client: Any) -> dict[str, Any]:
    """The scheduler address and each worker's threads and memory limit."""
    workers = scheduler_workers(client)
    return {
        "scheduler": client.scheduler.address,
        "workers": [
            {
                "address": address,
                "nthreads": w.get("nthreads"),
                "memory_limit_bytes": w.get("memory_limit") or None,
                "memory_used_bytes": w.get("metrics", {}).get("memory"),
            }
            for address, w in sorted(workers.items())
        ],
    }
