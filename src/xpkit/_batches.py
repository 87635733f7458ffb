"""`map_batches` and `plan_batches`: memory-sized batches, each run with OOM recovery.

The arrays flow one way: the arguments are checked (`_Call`), the plan is
made (`xpkit._plan`: the probe's rows already land in the outputs), then the
remaining rows run here (`run_split_on_oom`) or on an executor's pool
(`xpkit._executors.run_on_pool`), every batch written into outputs allocated
once (`xpkit._outputs`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._adapters import get_adapter
from ._args import check_count, check_gb, check_positive
from ._executors import pool_for, run_on_pool
from ._log import logger
from ._memory import BYTES_PER_GB
from ._oom import run_split_on_oom
from ._outputs import PLACES, Outputs
from ._plan import BatchPlan, make_plan
from ._rows import Job, common_rows

if TYPE_CHECKING:
    from ._backend import Backend
    from ._executors import Pool

__all__ = ["map_batches", "plan_batches"]


class _Call:
    """The checked arguments of one `map_batches` / `plan_batches` call."""

    def __init__(
        self,
        fn: Any,
        arrays: tuple[Any, ...],
        backend: Any,
        whole: Any,
        bytes_per_item: Any,
        overhead: Any,
        budget_gb: Any,
        min_batch: Any,
        executor: Any,
    ) -> None:
        from ._backend import Backend
        from ._select import coerce_backend

        if not callable(fn):
            msg = f"fn must be callable, got {fn!r}"
            raise TypeError(msg)
        self.n = common_rows(arrays)
        self.min_batch = check_count("min_batch", min_batch)
        self.overhead = check_positive("overhead", overhead)
        self.bytes_per_item = (
            None
            if bytes_per_item is None
            else check_positive("bytes_per_item", bytes_per_item)
        )
        self.budget_gb = None if budget_gb is None else check_gb("budget_gb", budget_gb)
        _check_whole(whole)
        moved = None if backend is None else coerce_backend(backend, "backend")
        self.owner: Backend = Backend.from_arrays(*arrays) if moved is None else moved
        self.pool: Pool | None = pool_for(executor, arrays)
        self.arrays = arrays
        self.job = Job(fn, whole, moved)
        if self.pool is not None:
            self.pool.check(self.job)

    def plan(self, outputs: Outputs) -> BatchPlan:
        return make_plan(
            self.job,
            self.arrays,
            self.n,
            self.owner,
            bytes_per_item=self.bytes_per_item,
            overhead=self.overhead,
            budget_gb=self.budget_gb,
            min_batch=self.min_batch,
            outputs=outputs,
            pool=self.pool,
        )


def _check_place(result_on: Any) -> None:
    if result_on not in PLACES:
        msg = f"result_on must be 'host' or 'device', got {result_on!r}"
        raise ValueError(msg)


def _check_whole(whole: Any) -> None:
    if isinstance(whole, Mapping):
        bad = [k for k in whole if not isinstance(k, str)]
        if bad:
            msg = f"whole must map fn's keyword names (str) to operands, got key {bad[0]!r}"
            raise TypeError(msg)
    elif not isinstance(whole, (tuple, list)):
        msg = (
            "whole must be a tuple of operands (passed after the batched rows) or a "
            f"dict of keyword operands, got {type(whole).__qualname__}"
        )
        raise TypeError(msg)


def map_batches(
    fn: Callable[..., Any],
    *arrays: Any,
    backend: Any = None,
    whole: tuple[Any, ...] | Mapping[str, Any] = (),
    bytes_per_item: float | None = None,
    overhead: float = 1.0,
    budget_gb: float | None = None,
    min_batch: int = 1,
    progress: bool = False,
    executor: Any = None,
    result_on: str = "host",
    pad: bool | None = None,
) -> Any:
    """Map ``fn`` over row batches of ``arrays`` sized to the device's memory.

    The one call a library author needs for a batched computation. Each
    output of ``fn`` is allocated once, for all rows, from the first batch's
    result, and every batch is copied into its rows: the peak is the outputs
    plus one batch's working set. When ``bytes_per_item`` is not given,
    ``fn``'s cost is measured: it runs on a few rows, then four times as
    many, and so on (at most 6 probes, whose rows are part of the
    result), under the peak-memory meter of the backend's device, and
    the last two probes give its cost per item and its fixed cost per call
    (`BatchPlan`). Batches are sized from the (capped) memory budget of the
    backend's device, each runs through the same split-and-retry as
    `compute_oom_safe`, and after an OOM the remaining batches use the size
    that fitted.

    How the probe measures, per library: NumPy, array-api-strict, Dask and
    torch CPU with the growth of the process's peak RSS (Linux: glibc's
    ``malloc_trim`` then a VmHWM reset through ``/proc/self/clear_refs``,
    page-granular); torch CUDA with the caching allocator's
    ``max_memory_allocated`` after ``reset_peak_memory_stats``. Elsewhere
    (MPS, CuPy, JAX, whose compiler dominates any peak it shows; off Linux,
    or where those files are missing) nothing is
    measured, and the bytes of one row of every input stand for an item (a
    log line says so). Measuring resets the peak statistic it reads.

    Parameters
    ----------
    fn : callable
        ``fn(*row_slices, *whole)`` (or ``fn(*row_slices, **whole)``) returns
        one array, or a tuple, list or dict of arrays, each with one row per
        input row (any supported library).
    *arrays : array
        Inputs sharing their axis-0 length (the items), cut into batches.
    backend : Backend or specifier, optional
        Where the batches run: each batch's slices (and the ``whole``
        operands, once) are moved to its device before ``fn`` sees them, and
        its device's memory sizes the batches. By default the backend the
        arrays live on (`Backend.from_arrays`), and nothing is moved.
    whole : tuple or dict of arrays, default ()
        Operands every batch needs whole (not split): a tuple is passed after
        the row slices, a dict as keyword arguments. With an executor they
        are shipped to the workers once.
    bytes_per_item : float, optional
        Working set of one item in bytes; by default measured (see above).
    overhead : float, default 1.0
        Safety multiplier on the per-item (and fixed) cost.
    budget_gb : float, optional
        Memory budget of one batch in GB; by default the `memory_budget` in
        force, else ``XPKIT_MEMORY_BUDGET_GB``, else
        ``device_memory_budget(backend, cap_for_batching=True)``.
    min_batch : int, default 1
        Smallest batch worth dispatching, and the size below which an OOM is
        fatal.
    progress : bool, default False
        Show a progress bar (tqdm; ``pip install 'xpkit[progress]'``). With
        an executor it follows completed tasks.
    executor : None, "dask", "joblib" or dask.distributed.Client, default None
        Where the batches run. None: here, one after the other. A
        ``dask.distributed.Client`` (or ``"dask"``: the current client):
        ``fn``, the ``whole`` operands and the inputs are scattered to the
        workers once (again only if a worker that died took the last copy),
        each batch is a task, batches are sized from the tightest worker's
        ``memory_limit`` (with the headroom and ceilings of local budgets,
        less what the worker holds, shared by its threads) and no larger than
        an equal share of the rows per worker thread. ``"joblib"``: the same
        on this host with joblib's worker processes, ``n_jobs`` by
        `auto_n_jobs_for_arrays`' rule (each process holds a copy of all the
        inputs). A `memory_budget` or ``XPKIT_MEMORY_BUDGET_GB`` set here only
        lowers the workers' budget; an explicit ``budget_gb`` sets it. The
        probe runs here. A task that runs out of memory, or whose worker dies
        (``KilledWorker``, as when the nanny kills it for memory; dask first
        retries it on ``distributed.scheduler.allowed-failures`` workers), is
        split in half and resubmitted, and queued batches as large are split
        before they run; at ``min_batch`` a task whose worker died is retried
        once, then a `MemoryError` names the rows and the memory they needed.
        Each task's results are written into the outputs as it completes.
    result_on : {"host", "device"}, default "host"
        Where the outputs are assembled: ``"host"``, NumPy arrays; ``"device"``,
        arrays of the backend's library on its device, allocated there (for
        libraries whose arrays cannot be written in place, JAX and Dask, they
        are assembled on the host and moved there once at the end).
    pad : bool, optional
        Pad the last batch, when it has fewer rows, to the batch size (its
        last row repeated; the extra results are dropped), so that ``fn``
        meets one shape and a compiling library compiles it once. By default
        where the backend's library compiles per shape (JAX; a
        ``torch.compile``-d ``fn``).

    Returns
    -------
    array, or a tuple, list or dict of arrays
        ``fn``'s results for all rows, in the structure ``fn`` returns. Never
        an input or a buffer ``fn`` returned.

    Raises
    ------
    TypeError
        ``fn`` is not callable or returns something other than arrays, or
        changes an output's dtype between batches; a bad argument type.
    ValueError
        Bad argument values; ``fn`` breaks the row alignment, or changes the
        structure or row shape of its outputs between batches.
    MemoryError
        A batch of ``min_batch`` rows still runs out of memory, or the outputs
        do not fit.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> x = np.arange(12.0).reshape(6, 2)
    >>> w = np.array([[1.0], [2.0]])
    >>> xpkit.map_batches(lambda rows, w: rows @ w, x, whole=(w,), bytes_per_item=16)
    array([[ 2.],
           [ 8.],
           [14.],
           [20.],
           [26.],
           [32.]])
    """
    if not isinstance(progress, bool):
        msg = f"progress must be a bool, got {progress!r}"
        raise TypeError(msg)
    if pad is not None and not isinstance(pad, bool):
        msg = f"pad must be a bool or None, got {pad!r}"
        raise TypeError(msg)
    _check_place(result_on)
    call = _Call(
        fn,
        arrays,
        backend,
        whole,
        bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        executor,
    )
    n = call.n
    outputs = Outputs(n, fn, call.owner, result_on)
    if n == 0:  # fn still runs once, and its result is checked
        outputs.put(0, 0, outputs.take(call.job.run(arrays, 0, 0, 0), 0, 0))
        return outputs.value()
    plan = call.plan(outputs)
    if pad if pad is not None else get_adapter(call.owner.library).pads_batches(fn):
        call.job.pad_to = plan.batch_size
    pool = call.pool
    logger().info(
        "map_batches: %d items, %d by the probe, then %d batches of %d "
        "(%.3g GB budget on %s; %.4g bytes per item, %s)",
        n,
        plan.probe_rows,
        plan.n_batches,
        plan.batch_size,
        plan.budget_gb,
        call.owner.name if pool is None else pool.where,
        plan.bytes_per_item,
        plan.source,
    )
    bar = _progress_bar(n) if progress else None
    if bar is not None and plan.probe_rows:
        bar.update(plan.probe_rows)
    try:
        if pool is not None and plan.probe_rows < n:
            resubmitted = run_on_pool(
                pool,
                call.job,
                arrays,
                outputs,
                first=plan.probe_rows,
                batch=plan.batch_size,
                min_batch=call.min_batch,
                bytes_per_row=plan.bytes_per_item * plan.overhead,
                budget_bytes=plan.budget_gb * BYTES_PER_GB,
                bar=bar,
            )
            if resubmitted:
                logger().info("map_batches: %d batches resubmitted", resubmitted)
        elif plan.probe_rows < n:
            _run_here(call, outputs, plan, bar)
    finally:
        if bar is not None:
            bar.close()
    return outputs.value()


def _run_here(call: _Call, outputs: Outputs, plan: BatchPlan, bar: Any) -> None:
    """The local loop: batches one after the other, each split on an OOM."""
    n, batch, start = call.n, plan.batch_size, plan.probe_rows
    while start < n:
        stop = min(start + batch, n)
        fitted = run_split_on_oom(
            call.job, call.arrays, n, (start, stop), call.min_batch, outputs
        )
        if fitted is not None and fitted < batch:
            logger().info(
                "map_batches: batch size %d -> %d after an OOM", batch, fitted
            )
            batch = fitted
            if call.job.pad_to:
                call.job.pad_to = batch
        if bar is not None:
            bar.update(stop - start)
        start = stop


def plan_batches(
    fn: Callable[..., Any],
    *arrays: Any,
    backend: Any = None,
    whole: tuple[Any, ...] | Mapping[str, Any] = (),
    bytes_per_item: float | None = None,
    overhead: float = 1.0,
    budget_gb: float | None = None,
    min_batch: int = 1,
    executor: Any = None,
    result_on: str = "host",
) -> BatchPlan:
    """The batch plan `map_batches` would use for these arguments.

    Size a hand-written loop the way `map_batches` sizes its own. Without
    ``bytes_per_item`` this runs ``fn`` on the probe's rows (and discards
    their results); the plan's ``probe_rows`` says how many, and its
    ``batch_size`` is for the rows after them; nothing is allocated for
    the outputs. The parameters are `map_batches`' own.

    Returns
    -------
    BatchPlan
        Budget, per-item and fixed cost and how they were obtained, batch
        size and count.

    Parameters
    ----------
    fn, *arrays, backend, whole, bytes_per_item, overhead, budget_gb, min_batch, executor, result_on
        As for `map_batches`.

    Raises
    ------
    TypeError, ValueError
        As `map_batches` raises them for bad arguments.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> x = np.ones((1000, 8))
    >>> plan = xpkit.plan_batches(
    ...     lambda r: r * 2.0, x, bytes_per_item=64.0, budget_gb=640 / 2**30
    ... )
    >>> plan.batch_size, plan.n_batches, plan.source
    (10, 100, 'given')
    """
    _check_place(result_on)
    call = _Call(
        fn,
        arrays,
        backend,
        whole,
        bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        executor,
    )
    return call.plan(Outputs(call.n, fn, call.owner, result_on, keep=False))


def _progress_bar(total: int) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        msg = "progress=True needs tqdm: pip install 'xpkit[progress]'"
        raise ImportError(msg) from None
    return tqdm(total=total, unit="item", desc="xpkit", mininterval=0.5, leave=False)
