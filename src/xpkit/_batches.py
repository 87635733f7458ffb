"""`map_batches`: memory-sized batches, each run with OOM recovery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._log import logger
from ._memory import (
    _GB,
    BATCH_WORKING_SET_CEILING_GB,
    _check_count,
    _check_positive,
    array_nbytes,
    auto_batch_size,
    configured_budget_gb,
    device_memory_budget,
)
from ._oom import common_rows, row_slices, run_split_on_oom, to_host
from ._pools import pool_for, run_on_pool

__all__ = ["batching_budget_gb", "map_batches"]


def map_batches(
    fn: Callable[..., Any],
    *arrays: Any,
    backend: Any = None,
    bytes_per_item: float | None = None,
    overhead: float = 1.0,
    budget_gb: float | None = None,
    min_batch: int = 1,
    progress: bool = False,
    executor: Any = None,
) -> np.ndarray[Any, Any]:
    """Map ``fn`` over row batches of ``arrays`` sized to the device's memory.

    The one call a library author needs for a batched computation: the
    per-item working set is estimated from the arrays' rows (unless given),
    batches are sized from the (capped) memory budget of the backend's device,
    each batch runs through `compute_oom_safe` (an OOM splits it and retries),
    and the results are concatenated on the host. After an OOM the remaining
    batches use the size that fitted, so one misjudged estimate costs one
    split, not one per batch.

    Parameters
    ----------
    fn : callable
        Maps row slices of ``arrays`` to an axis-0-aligned array (any
        supported library).
    *arrays : array
        Inputs sharing their axis-0 length (the items).
    backend : Backend or specifier, optional
        Whose device memory sizes the batches; by default the backend the
        arrays live on (`Backend.from_arrays`).
    bytes_per_item : float, optional
        Working set of one item in bytes; by default the bytes of one row of
        every input together.
    overhead : float, default 1.0
        Multiplier for ``fn``'s intermediate allocations.
    budget_gb : float, optional
        Memory budget in GB; by default the `memory_budget` in force, else
        ``XPKIT_MEMORY_BUDGET_GB``, else the measured budget capped for
        batching. On a CPU device a measured budget is also capped at
        ``HOST_BATCH_WORKING_SET_BYTES`` (16 MiB, half a typical last-level
        cache): past it, bigger batches only add cache misses, allocation and
        page-fault cost (``benchmarks/bench_dispatch.py`` sweeps this).
    min_batch : int, default 1
        Smallest batch worth dispatching, and the size below which an OOM is
        fatal.
    progress : bool, default False
        Show a progress bar (tqdm; ``pip install 'xpkit[progress]'``). With
        an executor it follows completed tasks.
    executor : None, "dask", "joblib" or dask.distributed.Client, default None
        Where the batches run. None: here, one after the other. A
        ``dask.distributed.Client`` (or ``"dask"``: the current client):
        ``fn`` and the inputs are scattered to the workers once (again only
        if a worker that died took the last copy), each batch is a task, batches are sized from the tightest worker's ``memory_limit`` (with
        the headroom and ceilings of local budgets, less what the worker
        holds, shared by its threads) and no larger than an equal share of
        the rows per worker thread. ``"joblib"``: the same on this host with
        joblib's worker processes, ``n_jobs`` by `auto_n_jobs_for_arrays`'
        rule (each process holds a copy of all the inputs). A `memory_budget`
        or ``XPKIT_MEMORY_BUDGET_GB`` set here only lowers the workers'
        budget; an explicit ``budget_gb`` sets it.
        A task that runs out of memory, or whose worker dies (``KilledWorker``,
        as when the nanny kills it for memory; dask first retries it on
        ``distributed.scheduler.allowed-failures`` workers), is split in half
        and resubmitted, and queued batches as large are split before they
        run; at ``min_batch`` a task whose worker died is retried once, then
        a `MemoryError` names the rows and the memory they needed. Results
        come back in row order as NumPy arrays, equal to a local run.

    Returns
    -------
    numpy.ndarray
        ``fn``'s results for all rows, concatenated along axis 0.
    """
    from ._backend import Backend
    from ._select import coerce_backend

    if not callable(fn):
        msg = f"fn must be callable, got {fn!r}"
        raise TypeError(msg)
    if not isinstance(progress, bool):
        msg = f"progress must be a bool, got {progress!r}"
        raise TypeError(msg)
    n = common_rows(arrays)
    floor = _check_count("min_batch", min_batch)
    pool = pool_for(executor, arrays)
    owner = (
        Backend.from_arrays(*arrays)
        if backend is None
        else coerce_backend(backend, "backend")
    )
    overhead = _check_positive("overhead", overhead)
    if bytes_per_item is None:
        per_item = max(sum(array_nbytes(a) for a in arrays) / max(n, 1), 1.0)
    else:
        per_item = _check_positive("bytes_per_item", bytes_per_item)
    if budget_gb is not None:
        budget_gb = _check_positive("budget_gb", budget_gb)
    if n == 0:
        return to_host(fn(*arrays))
    if pool is not None:
        batch, budget = _pool_batch(
            pool, owner, arrays, per_item * overhead, floor, budget_gb
        )
    else:
        if budget_gb is None:
            budget, measured = batching_budget_gb(owner), device_memory_budget(owner)
            # The throughput ceiling never makes the smallest batch impossible.
            budget = max(budget, min(per_item * overhead * floor / _GB, measured))
        else:
            budget = budget_gb
        batch, _ = auto_batch_size(
            n, per_item, budget_gb=budget, overhead=overhead, min_batch=floor
        )
    n_batches = -(-n // batch)
    logger().info(
        "map_batches: %d items in %d batches of %d (%.3g GB budget on %s)",
        n,
        n_batches,
        batch,
        budget,
        owner.name if pool is None else pool.where,
    )
    bar = _progress_bar(n) if progress else None
    if pool is not None:
        try:
            result, resubmitted = run_on_pool(
                pool,
                fn,
                arrays,
                batch=batch,
                min_batch=floor,
                bytes_per_row=per_item * overhead,
                bar=bar,
            )
        finally:
            if bar is not None:
                bar.close()
        if resubmitted:
            logger().info("map_batches: %d batches resubmitted", resubmitted)
        return result
    pieces: list[np.ndarray[Any, Any]] = []
    start = 0
    try:
        while start < n:
            stop = min(start + batch, n)
            chunk = row_slices(arrays, start, stop, n)
            result, fitted = run_split_on_oom(fn, chunk, floor)
            pieces.append(result)
            if fitted is not None and fitted < batch:
                logger().info(
                    "map_batches: batch size %d -> %d after an OOM", batch, fitted
                )
                batch = fitted
            if bar is not None:
                bar.update(stop - start)
            start = stop
    finally:
        if bar is not None:
            bar.close()
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=0)


def _capped(owner: Any, budget: float, *, cache_ceiling: bool = True) -> float:
    """A measured budget under the batching ceilings, unless one is configured."""
    configured = configured_budget_gb()
    if configured is not None:
        return configured
    budget = min(budget, BATCH_WORKING_SET_CEILING_GB)
    ceiling = owner._adapter.batch_ceiling_bytes(owner.device)
    if ceiling is None or not cache_ceiling:
        return budget
    return min(budget, float(ceiling) / _GB)


#: On a pool, the CPU cache ceiling (a throughput heuristic) never makes more
#: than this many tasks per worker thread: a task costs milliseconds to
#: schedule, a batch in a local loop microseconds.
TASKS_PER_THREAD = 4


def _pool_batch(
    pool: Any,
    owner: Any,
    arrays: tuple[Any, ...],
    row_bytes: float,
    floor: int,
    budget_gb: float | None,
) -> tuple[int, float]:
    """Rows per task on ``pool`` and the per-task budget (GB) they come from.

    The memory budget is a hard cap; within it, batches are no smaller than
    the cache ceiling makes them, or than a share of the rows giving
    `TASKS_PER_THREAD` tasks per worker thread, and no larger than an equal
    share per thread (so every thread gets work).
    """
    n = common_rows(arrays)

    def rows(gb: float) -> int:
        return max(floor, int(gb * _GB // row_bytes))

    if budget_gb is not None:
        hard = soft = budget_gb
    else:
        measured = pool.task_budget_gb(sum(array_nbytes(a) for a in arrays))
        hard = min(_capped(owner, measured, cache_ceiling=False), measured)
        soft = min(_capped(owner, measured), measured)
    slots = pool.slots
    batch = min(rows(hard), max(rows(soft), -(-n // (slots * TASKS_PER_THREAD))))
    return max(floor, min(batch, -(-n // slots))), hard


def batching_budget_gb(backend: Any) -> float:
    """The budget `map_batches` sizes batches from when none is given.

    The `memory_budget` in force or ``XPKIT_MEMORY_BUDGET_GB``; else the
    measured budget capped for batching and, on CPU devices, at the adapter's
    throughput ceiling (`Adapter.batch_ceiling_bytes`).
    """
    return _capped(backend, device_memory_budget(backend))


def _progress_bar(total: int) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        msg = "progress=True needs tqdm: pip install 'xpkit[progress]'"
        raise ImportError(msg) from None
    return tqdm(total=total, unit="item", desc="xpkit", mininterval=0.5, leave=False)
