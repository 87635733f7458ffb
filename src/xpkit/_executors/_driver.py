"""`each_task_on_pool`: the driver every pool shares.

It keeps every worker thread busy, writes each completed task's rows into
the outputs allocated once (`xpkit._outputs`), follows completed tasks with
the progress bar, and splits a batch whose task ran out of memory (a worker
killed for memory, or an OOM raised inside the task) into halves that it
resubmits, down to ``min_batch``.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import TYPE_CHECKING

from .._into import stop_at_chunk
from .._log import logger
from .._oom import work_ran_out_of_memory
from .._rows import Job, common_rows
from .._shown import said
from ._base import InputsLost, Pool
from ._interrupts import interrupts_held

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from .._outputs import Outputs
    from .._typing import Array, ProgressBar, TaskFuture

__all__ = ["each_task_on_pool"]


def each_task_on_pool(
    pool: Pool,
    job: Job,
    arrays: tuple[Array, ...],
    outputs: Outputs,
    *,
    first: int,
    batch: int,
    min_batch: int,
    bytes_per_row: float,
    budget_bytes: float,
    bar: ProgressBar | None,
    chunk: int = 1,
    whole_chunks: bool = False,
    held: Callable[[], int] | None = None,
    caller: str = "map_batches",
) -> Generator[None, None, int]:
    """Run rows ``first:`` on ``pool``, yielding once each task's rows are in ``outputs``.

    Returns the number of resubmissions. With ``chunk`` (the rows of a
    chunk of a store the rows go to), the first task ends on a multiple of
    it, so that the rest cover whole chunks (``batch`` is one); with
    ``whole_chunks`` (the workers write their rows into that store), a task
    is split only on a chunk boundary too, and one of less than two
    chunks is not split. ``held``: how many tasks' rows the caller holds
    while it waits for earlier ones (`iter_batches`' order): those count
    against the tasks in flight, so that at most that many rows wait,
    while a task always runs. The tasks in flight keep running
    while the caller holds a yield; closing the generator abandons the run
    (as any error does). ``caller``: the public function, in messages.

    A task that fails for memory (an OOM inside it, or its worker died) is
    split in half and both halves go back in the queue, and queued batches
    larger than the halves are split before they are submitted. A worker's
    death takes every task in flight with it (their inputs, on Dask; the
    pool, on joblib), so a task that died may not be what killed it: a task
    whose inputs were lost runs again unsplit once (after the inputs are
    shipped again), and is split as its own death only when they are lost
    again; at ``min_batch`` a task whose worker died runs again once alone,
    with nothing beside it, and only a second death there is its own: a
    `MemoryError` names the rows and the memory they needed (a
    `RuntimeError` instead when they needed under a quarter of
    ``budget_bytes``: then it was not memory). Any other error, and a Ctrl-C
    (``KeyboardInterrupt``), abandons the run (`Pool.abandon`: its tasks
    cancelled, what the pool started stopped at once) and propagates.
    """
    n = common_rows(arrays)
    queue: deque[tuple[int, int]] = deque()
    at = first
    while at < n:
        stop = stop_at_chunk(at, min(at + batch, n), n, chunk)
        queue.append((at, stop))
        at = stop
    running: dict[TaskFuture, tuple[int, int]] = {}
    done: dict[int, int] = {}
    limit = batch  # the largest batch worth submitting; shrinks after a failure
    retried: set[tuple[int, int]] = set()
    alone: set[tuple[int, int]] = set()  # rows that run with nothing beside them
    padded: set[tuple[int, int]] = set()  # a last task that runs padded
    resubmitted = deaths = 0
    in_flight = pool.slots * pool.per_slot
    handled = sys.exception()  # (the caller's, if any: not a task's)
    try:
        pool.start(job, arrays)
        while queue or running:
            while queue and (
                not running
                or len(running) + (0 if held is None else held()) < in_flight
            ):
                if running and (
                    queue[0] in alone or alone.intersection(running.values())
                ):
                    break  # (the tasks in flight end first; then it runs alone)
                start, stop = queue.popleft()
                half = _cut(stop - start, chunk, whole_chunks, min_batch)
                if stop - start > limit and half:
                    mid = start + half  # a batch this size failed
                    queue.extendleft([(mid, stop), (start, mid)])
                    continue
                # (padding a last batch cut after an OOM would grow it back)
                pad = job.pad_to <= limit
                if pad and stop == n and stop - start < job.pad_to:
                    padded.add((start, stop))
                running[pool.submit(start, stop, pad=pad)] = (start, stop)
            died_now = False  # (one death takes every task in flight: counted once)
            for future, result, error in pool.wait(list(running)):
                start, stop = running.pop(future)
                rows = stop - start
                if error is None:
                    assert result is not None  # (a task without an error has rows)
                    outputs.put(start, stop, result)
                    del result
                    done[start] = stop
                    if bar is not None:
                        bar.update(rows)
                    yield
                    continue
                lost = isinstance(error, InputsLost)
                died = lost or pool.lost_worker(error)
                if not (died or work_ran_out_of_memory(error, handled)):
                    raise error
                if died and not died_now:
                    deaths, died_now = deaths + 1, True
                if deaths > _MAX_DEATHS:
                    msg = (
                        f"{caller}: workers of {pool.where} died {deaths} times "
                        f"(last on rows {start}:{stop}); this is more than memory "
                        "pressure, see the workers' logs"
                    )
                    raise RuntimeError(msg) from (None if lost else error)
                cause = (
                    "its inputs went down with a worker that died"
                    if lost
                    else f"its worker died, possibly killed for memory "
                    f"({type(error).__name__}: {said(error)[:200]})"
                    if died
                    else f"out of memory ({type(error).__name__}: {said(error)[:200]})"
                )
                half = _cut(rows, chunk, whole_chunks, min_batch)
                whole_task = not half  # (it cannot be split)
                if died and (start, stop) not in retried and (lost or whole_task):
                    # A worker's death takes every task in flight with it (their
                    # inputs, on Dask; the pool, on joblib): these rows may not
                    # be what killed it. They run again unsplit, once: where
                    # they cannot be split, alone (nothing beside them), so
                    # that a second death is theirs; else, lost again, they
                    # split as a death of their own.
                    retried.add((start, stop))
                    if whole_task:
                        alone.add((start, stop))
                    queue.appendleft((start, stop))
                    resubmitted += 1
                    if whole_task:
                        logger().info(
                            "map_batches: rows %d:%d on %s: %s; resubmitting them "
                            "once more at min_batch, alone",
                            start,
                            stop,
                            pool.where,
                            cause,
                        )
                    else:
                        logger().info(
                            "map_batches: rows %d:%d lost their inputs with a "
                            "worker that died on %s; the inputs are shipped again "
                            "and the rows run again unsplit",
                            start,
                            stop,
                            pool.where,
                        )
                    continue
                if whole_task and (start, stop) in padded:
                    # A last task padded to pad_to: run its own rows, unpadded.
                    padded.discard((start, stop))
                    limit = min(limit, rows)
                    queue.appendleft((start, stop))
                    resubmitted += 1
                    continue
                if whole_task:
                    need = rows * bytes_per_row
                    floor = (  # (a task of whole chunks splits down to one)
                        f"one chunk of out ({chunk} rows: the workers write whole "
                        "chunks; a store cut in smaller chunks splits further)"
                        if whole_chunks and rows > min_batch
                        else f"min_batch={min_batch}"
                    )
                    msg = (
                        f"{caller}: rows {start}:{stop} ({rows} rows, about "
                        f"{need / 2**20:.1f} MiB with the overhead) could not run on "
                        f"{pool.where} even at {floor}"
                        f"{', running alone' if (start, stop) in alone else ''}: {cause}"
                    )
                    if died and need * _NOT_MEMORY < budget_bytes:
                        # Far under the budget, and still the worker dies: the
                        # cause is not memory (fn exits, interrupts, crashes).
                        msg += (
                            f", though the workers' budget is {budget_bytes / 2**20:.0f} "
                            "MiB a task: not memory, see the workers' logs"
                        )
                        raise RuntimeError(msg) from (None if lost else error)
                    raise MemoryError(msg) from (None if lost else error)
                mid = start + half
                limit = min(limit, max(half, rows - half))
                logger().info(
                    "map_batches: rows %d:%d on %s: %s; resubmitting them as "
                    "%d + %d rows",
                    start,
                    stop,
                    pool.where,
                    cause,
                    mid - start,
                    stop - mid,
                )
                queue.extendleft([(mid, stop), (start, mid)])
                resubmitted += 2
    except BaseException as exc:
        # Stop the pool before anything else (no task waited for). A Ctrl-C
        # meanwhile cannot cut that short (see interrupts_held): a worker
        # would outlive the run.
        with interrupts_held(then_raise=not isinstance(exc, KeyboardInterrupt)):
            pool.abandon(list(running))
        raise
    with interrupts_held():
        pool.close()
    _check_tiled(done, first, n)
    if resubmitted:
        logger().info("map_batches: %d batches resubmitted", resubmitted)
    return resubmitted


#: A task that kills its worker at ``min_batch`` while needing under
#: 1/_NOT_MEMORY of the per-task budget did not die of memory.
_NOT_MEMORY = 4
#: Worker deaths (rounds of `Pool.wait` in which tasks died: one death takes
#: every task in flight) before giving up: a worker that dies for another
#: reason must not split forever.
_MAX_DEATHS = 64


def _half(rows: int, chunk: int) -> int:
    """Rows of the first half of a task of ``rows``, on a multiple of ``chunk`` (0: none).

    A task of more than one chunk and less than two (a store's last, partial
    chunk after a whole one) is cut after its first chunk: halved, it gave
    0, and the task was given up as not fitting "even at one chunk".
    """
    if rows <= chunk:
        return 0
    return max(rows // 2 // chunk * chunk, chunk)


def _cut(rows: int, chunk: int, whole_chunks: bool, min_batch: int) -> int:
    """Rows of the first part of a task of ``rows`` cut after an OOM (0: it cannot be).

    Its half (on whole chunks where the workers write chunks); where that is
    under ``min_batch``, ``min_batch`` rows and then the rest, as the local
    split does (`xpkit._oom.split_on_oom`); never a part under ``min_batch``
    first.
    """
    half = _half(rows, chunk if whole_chunks else 1)
    if half >= min_batch:
        return half
    if not whole_chunks and rows > min_batch:
        return min_batch
    return 0


def _check_tiled(done: dict[int, int], first: int, n: int) -> None:
    """Check that the completed tasks tile rows ``first:n`` exactly once."""
    at = first
    for start in sorted(done):
        if start != at:  # pragma: no cover - a bug in the driver, never the user's
            msg = f"map_batches lost or duplicated rows around {at}:{start}"
            raise AssertionError(msg)
        at = done[start]
    if at != n:  # pragma: no cover
        msg = f"map_batches lost rows {at}:{n}"
        raise AssertionError(msg)
