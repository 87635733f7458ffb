"""`map_batches` on joblib's worker processes (loky) on this host."""

from __future__ import annotations

from typing import Any

from .._memory import BYTES_PER_GB, HEADROOM, MIN_BUDGET_GB, host_available_bytes
from .._rows import Job
from ._base import Pool, run_rows

__all__ = ["JoblibPool"]


_SHIPPED: dict[str, Any] = {}


def _receive(job: Job, arrays: tuple[Any, ...]) -> None:
    """Worker initializer: keep what the pool ships, once per process."""
    _SHIPPED["job"] = (job, arrays)


def _run_shipped(start: int, stop: int) -> Any:
    job, arrays = _SHIPPED["job"]
    return run_rows(job, start, stop, *arrays)


class JoblibPool(Pool):
    """Batches as tasks of joblib's process executor (loky) on this host.

    ``n_jobs`` follows `auto_n_jobs_for_arrays`' rule with all the inputs
    as one worker's item: each worker process holds a copy of all of them. A worker process killed by the system breaks the
    executor: every batch in flight then counts as failed for memory and is
    split, and a fresh executor takes the rest.
    """

    def __init__(self, n_jobs: int) -> None:
        from joblib.externals.loky.process_executor import BrokenProcessPool

        self.slots = n_jobs
        self.where = f"joblib's {n_jobs} worker processes"
        self._broken = BrokenProcessPool
        self._executor: Any = None
        self._job: tuple[Job | None, tuple[Any, ...]] = (None, ())

    def task_budget_gb(self, input_bytes: int) -> float:
        free = host_available_bytes() * HEADROOM - self.slots * input_bytes
        return max(free / self.slots / BYTES_PER_GB, MIN_BUDGET_GB)

    def start(self, job: Job, arrays: tuple[Any, ...]) -> None:
        # (`Pool.check` found out earlier that fn pickles: a worker that
        # cannot unpickle its job dies at start-up, which reads like a worker
        # killed for memory.)
        self._job = (job, arrays)

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
        self._job = (None, ())
