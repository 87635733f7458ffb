"""`map_batches` on joblib's worker processes (loky) on this host."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from concurrent.futures import Future
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any, TypeAlias

from .._memory import BYTES_PER_GB, HEADROOM, MIN_BUDGET_GB, host_available_bytes
from .._rows import run_rows
from ._base import Pool, travels_back
from ._interrupts import block_sigint, interrupts_held, unblock_sigint

if TYPE_CHECKING:
    from .._rows import Job, Rows
    from .._typing import Array
    from ._base import Finished

__all__ = ["JoblibPool"]

#: loky's ``ProcessPoolExecutor`` (joblib ships no type information; its
#: private ``_processes``, ``_max_workers`` and manager thread are read here).
Loky: TypeAlias = Any

_SHIPPED: dict[str, tuple[Job, tuple[Array, ...]]] = {}
#: Seconds that stopping an executor's workers may take: idle ones asked to
#: exit, then whatever is still there killed and reaped.
STOP_SECONDS = 5.0


def _receive(job: Job, arrays: tuple[Array, ...]) -> None:
    """Worker initializer: keep what the pool ships, once per process."""
    _SHIPPED["job"] = (job, arrays)
    # Started with SIGINT blocked (`_submit_starting`); from here on a Ctrl-C
    # reaches this worker as it reaches any of loky's.
    unblock_sigint()


def _run_shipped(start: int, stop: int, pad: bool) -> Rows:
    job, arrays = _SHIPPED["job"]
    return run_rows(job, start, stop, *arrays, pad=pad, travels=travels_back)


class JoblibPool(Pool):
    """Batches as tasks of joblib's process executor (loky) on this host.

    ``n_jobs`` follows `auto_n_jobs_for_arrays`' rule with all the inputs
    as one worker's item: each worker process holds a copy of all of them. A worker process killed by the system breaks the
    executor: every batch in flight then counts as failed for memory and is
    split, and a fresh executor takes the rest.

    The executor is the pool's own (not joblib's reusable one), so that
    stopping the run may kill its workers: `abandon` kills them and their
    children at once, `close` lets the idle ones exit; either reaps them
    within `STOP_SECONDS`.

    The caller's thread never holds a lock of a task's future, nor one of
    loky's, where a Ctrl-C can reach it: a ``KeyboardInterrupt`` raised
    there leaves the lock taken for good, and loky's thread, which takes it
    to run the task, then hangs the process at its exit. So a task reports
    its end through a callback (`_finished`, run by loky's thread) to a
    queue that `wait` reads, and not through ``concurrent.futures.wait``,
    which takes every future's lock, one after the other; and `submit`
    holds a Ctrl-C until loky has the task.
    """

    def __init__(self, n_jobs: int) -> None:
        from joblib.externals.loky.process_executor import BrokenProcessPool

        self.slots = n_jobs
        self.where = f"joblib's {n_jobs} worker processes"
        self._broken = BrokenProcessPool
        self._executor: Loky | None = None
        self._starting: threading.Event | None = None
        self._job: tuple[Job | None, tuple[Array, ...]] = (None, ())
        self._ended: queue.SimpleQueue[Finished] = queue.SimpleQueue()
        self._unasked: dict[Future[Rows], Finished] = {}  # ended, not yet waited for

    def task_budget_gb(self, input_bytes: int) -> float:
        free = host_available_bytes() * HEADROOM - self.slots * input_bytes
        return max(free / self.slots / BYTES_PER_GB, MIN_BUDGET_GB)

    def start(self, job: Job, arrays: tuple[Array, ...]) -> None:
        # (`Pool.check` found out earlier that fn pickles: a worker that
        # cannot unpickle its job dies at start-up, which reads like a worker
        # killed for memory.)
        self._job = (job, arrays)

    def _fresh_executor(self) -> Loky:
        from joblib.externals.loky import ProcessPoolExecutor

        if self._executor is not None:  # broken: its workers are gone or going
            executor, self._executor = self._executor, None
            _stop(executor, now=True)
        self._executor = ProcessPoolExecutor(
            max_workers=self.slots, initializer=_receive, initargs=self._job
        )
        return self._executor

    def _submit_starting(
        self, executor: Loky, start: int, stop: int, pad: bool
    ) -> Future[Rows]:
        """A submit to ``executor`` that starts worker processes.

        It runs in a thread of its own, with SIGINT blocked: no Ctrl-C stops
        it with a worker half started (its handle lost, the process orphaned),
        and the workers start with SIGINT blocked until `_receive`, so that a
        terminal's Ctrl-C cannot end one before it has read its job (loky
        would wait for that forever). A Ctrl-C interrupts the wait here;
        `abandon` waits for the start to end before it kills the workers.
        """
        submitted: list[Future[Rows]] = []
        failed: list[BaseException] = []
        # (An Event, not Thread.join: a join interrupted by a Ctrl-C may mark
        # the thread finished while it still runs, in Python 3.11.)
        self._starting = done = threading.Event()

        def run() -> None:
            try:
                _start_trackers()
                block_sigint()
                future = executor.submit(_run_shipped, start, stop, pad)
                future.add_done_callback(self._finished)
                submitted.append(future)
            except BaseException as exc:  # noqa: BLE001 - raised in the caller
                failed.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name="xpkit-joblib-start", daemon=True).start()
        done.wait()
        if failed:
            raise failed[0]
        return submitted[0]

    def submit(self, start: int, stop: int, *, pad: bool = True) -> Future[Rows]:
        if self._executor is None:
            self._fresh_executor()
        try:
            return self._submit(start, stop, pad)
        except self._broken:  # a worker died since the last submit
            self._fresh_executor()
            return self._submit(start, stop, pad)

    def _submit(self, start: int, stop: int, pad: bool) -> Future[Rows]:
        executor: Loky = self._executor  # (made by `submit` before this)
        # loky starts workers in a submit: all of them at first, and one in
        # place of a worker that left (as one does when its memory grew).
        if len(getattr(executor, "_processes", {})) < self.slots:
            return self._submit_starting(executor, start, stop, pad)
        with interrupts_held():  # (loky's locks, then the future's)
            future: Future[Rows] = executor.submit(_run_shipped, start, stop, pad)
            future.add_done_callback(self._finished)
        return future

    def _finished(self, future: Future[Rows]) -> None:
        """A task ended (loky's thread): its rows or its error, for `wait`."""
        if not future.cancelled():
            error = future.exception()
            self._ended.put((future, None if error else future.result(), error))

    def wait(self, futures: list[Future[Rows]]) -> list[Finished]:
        # (A Ctrl-C ends SimpleQueue.get holding nothing.)
        wanted = set(futures)
        ended = [self._unasked.pop(f) for f in futures if f in self._unasked]
        while True:
            try:
                finished = self._ended.get(block=not ended)
            except queue.Empty:
                return ended
            if finished[0] in wanted:
                ended.append(finished)
            else:  # (not asked for yet)
                self._unasked[finished[0]] = finished

    def lost_worker(self, exc: BaseException) -> bool:
        return isinstance(exc, self._broken)

    def close(self) -> None:
        self._stop(now=False)

    def abandon(self, futures: list[Future[Rows]]) -> None:
        for future in futures:
            future.cancel()
        self._stop(now=True)

    def _stop(self, *, now: bool) -> None:
        executor, self._executor = self._executor, None
        starting, self._starting = self._starting, None
        self._job = (None, ())
        self._unasked.clear()
        with contextlib.suppress(queue.Empty):
            while True:  # (what ended and was not waited for)
                self._ended.get_nowait()
        deadline = time.monotonic() + STOP_SECONDS
        if starting is not None and not starting.is_set() and executor is not None:
            # Interrupted while loky starts the workers, one after the other
            # (each reads its job before the next starts): start no more.
            executor._max_workers = 0
        try:
            if starting is not None:  # the worker now starting cannot be stopped
                starting.wait(STOP_SECONDS)
        finally:
            if executor is not None:
                started = starting is None or starting.is_set()
                _stop(executor, now=now, started=started, deadline=deadline)


def _start_trackers() -> None:
    """Start the resource trackers that loky's workers report to, if not running.

    Starting multiprocessing's unblocks SIGINT in the calling thread (Python
    3.11), so `_submit_starting` starts them before it blocks SIGINT.
    """
    from joblib.externals.loky.backend import resource_tracker

    resource_tracker.ensure_running()
    if os.name == "posix":
        from multiprocessing import resource_tracker as multiprocessing_tracker

        multiprocessing_tracker.ensure_running()


def _stop(
    executor: Loky, *, now: bool, started: bool = True, deadline: float | None = None
) -> None:
    """Shut ``executor`` down: its worker processes ended and reaped.

    ``now``: kill them (and their own children) at once, whatever they run.
    Otherwise the idle workers are asked to exit, and those still there at
    the ``deadline`` (`STOP_SECONDS` from now) are killed. Either way this
    returns by then, or soon after (a worker that a kill cannot end is left
    to the system). ``started=False``: its first submit, which starts the
    workers, has not returned (it holds the executor's lock, so only the
    workers are killed).
    """
    if deadline is None:
        deadline = time.monotonic() + STOP_SECONDS
    # loky keeps its worker processes in `_processes` (pid -> process) and
    # reaps them in its manager thread; both may be missing (nothing submitted).
    processes = list(getattr(executor, "_processes", {}).values())
    manager = getattr(executor, "_executor_manager_thread", None)
    try:
        if now or not started:
            _kill(processes)
        if started:
            executor.shutdown(wait=False, kill_workers=now)
        if manager is not None:
            manager.join(max(deadline - time.monotonic(), 0.0))
    finally:  # also after an interrupt that would not wait
        _kill(processes)
        for process in processes:
            process.join(max(deadline - time.monotonic(), 0.1))


def _kill(processes: list[BaseProcess]) -> None:
    """SIGKILL (TerminateProcess) each process not yet reaped, and its children."""
    import psutil

    for process in processes:
        if process.exitcode is not None:  # reaped: its pid may be another's now
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            root = psutil.Process(process.pid)
            for each in [*root.children(recursive=True)[::-1], root]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    each.kill()
