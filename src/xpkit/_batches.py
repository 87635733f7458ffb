"""`map_batches`, `plan_batches` and `compute_oom_safe`: batches sized to memory.

The arrays flow one way: the arguments are checked once into a
`BatchRequest` (`xpkit._request`), the plan is made (`xpkit._plan`: from
the caller's cost, the plan memory or the probe, whose rows already land in
the outputs), then the remaining rows run here, each batch through the
split-and-retry of `xpkit._oom.split_on_oom`, or on an executor's pool
(`xpkit._executors.run_on_pool`), every batch written into outputs
allocated once (`xpkit._outputs`); where one call covers every row, its
result is kept as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._adapters._peak import release_freed_host_memory
from ._adapters._registry import ADAPTERS
from ._args import check_count
from ._executors import run_on_pool
from ._log import logger
from ._memory import BYTES_PER_GB, TRIM_ABOVE_BYTES
from ._oom import UnsplittableMemoryError, split_on_oom
from ._outputs import Outputs
from ._plan import BatchPlan, make_plan
from ._plan_memory import GROW_AFTER, plan_memory
from ._repeat import NO_REPEAT, Repeat, learn_repeat, plan_state, repeat
from ._request import BatchRequest, batch_request
from ._rows import Job, common_rows, refuse_traced
from ._statement import ATTRIBUTE, Capabilities

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._backend import Backend
    from ._typing import Array, DaskClient, ProgressBar, UserFunction, UserResult

__all__ = ["compute_oom_safe", "map_batches", "plan_batches"]


def map_batches(
    fn: UserFunction,
    *arrays: Array,
    backend: Backend | str | None = None,
    whole: tuple[Array, ...] | Mapping[str, Array] = (),
    bytes_per_item: float | None = None,
    overhead: float = 1.0,
    budget_gb: float | None = None,
    min_batch: int = 1,
    progress: bool = False,
    executor: str | DaskClient | None = None,
    result_on: str = "host",
    pad: bool | None = None,
    fallback_bytes_per_item: float | None = None,
    remember: bool = True,
) -> UserResult:
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

    Called in a loop, a call that repeats the last one (the same ``fn`` by
    signature, inputs of the same library, device, shape and dtype, the same
    options, outputs on the host) while nothing its plan depends on changed
    (the host's memory reading, reused for 0.1 s; the budget in force; what
    `plan_memory` holds) runs ``fn`` on all rows at once without checking or
    planning again, where the last one was planned as one batch on a device
    whose memory is the host's: a few microseconds of its own.

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
        Working set of one item in bytes; by default remembered from an
        earlier call with the same signature, else measured (see above).
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
    fallback_bytes_per_item : float, optional
        An estimate of one item's working set, used only where nothing
        measures (no meter for the device, or too few rows), before the
        bytes of one input row.
    remember : bool, default True
        Recall and learn this signature's cost, the batch size an OOM
        taught and a one-batch plan to repeat in `plan_memory` (see above).
        False: none of them.

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
    return _eager(_map_batches)(  # (by position: the parameters, in order)
        fn,
        arrays,
        backend,
        whole,
        bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        progress,
        executor,
        result_on,
        pad,
        fallback_bytes_per_item,
        remember,
    )


_EAGER_REASON = (
    "map_batches (like plan_batches and compute_oom_safe) is an eager loop "
    "on the host: it sizes batches from memory measured now and reads each "
    "batch's result. Call it outside the compiled function (fn itself may be "
    "compiled)"
)


#: The adapters whose library compiles Python by tracing it.
_TRACERS = [a for a in ADAPTERS.values() if a.traces_python]


def _eager(fn: UserFunction) -> UserFunction:
    """``fn``; while a library's compiler traces the caller, ``fn`` run eagerly.

    (A compiler that traces Python, torch.compile's dynamo, then breaks the
    graph there, or fails under ``fullgraph=True`` with the reason. The
    eager ``fn`` is made on the first call outside a trace; outside a trace
    ``fn`` itself is called: the wrapper would cost every call.)
    """
    for adapter in _TRACERS:
        if adapter not in _MADE:
            if not adapter.is_imported():
                continue
            _mark_eager()  # (outside a trace: made once, at no cost)
        if adapter.compiling():
            fn = adapter.eager_only(fn, _EAGER_REASON)
    return fn


#: The tracing adapters whose eager bodies are made.
_MADE: set[Adapter] = set()


def _mark_eager() -> None:
    """Make the eager bodies now, for each compiling library imported already.

    (Made inside a trace, they cost a graph break; here they cost nothing.)
    """
    for adapter in _TRACERS:
        if adapter.is_imported():
            for body in (_map_batches, _plan_batches, _compute_oom_safe):
                adapter.eager_only(body, _EAGER_REASON)
            _MADE.add(adapter)


def _map_batches(  # (map_batches' parameters, by position)
    fn: UserFunction,
    arrays: tuple[Array, ...],
    backend: Backend | str | None,
    whole: tuple[Array, ...] | Mapping[str, Array],
    bytes_per_item: float | None,
    overhead: float,
    budget_gb: float | None,
    min_batch: int,
    progress: bool,
    executor: str | DaskClient | None,
    result_on: str,
    pad: bool | None,
    fallback_bytes_per_item: float | None,
    remember: bool,
) -> UserResult:
    """`map_batches`' body (the public function keeps compilers out of it)."""
    if not isinstance(progress, bool):
        msg = f"progress must be a bool, got {progress!r}"
        raise TypeError(msg)
    repeated = NO_REPEAT  # (an executor, a backend, ...: never repeated)
    if (
        backend is executor is None
        and progress is False
        and remember is True
        and result_on == "host"
    ):
        costs = (bytes_per_item, overhead, fallback_bytes_per_item)
        repeated = repeat(fn, arrays, whole, budget_gb, costs, min_batch, pad)
        if repeated.__class__ is not Repeat:
            return repeated
    request = batch_request(  # (by position: map_batches' parameters, in order)
        fn,
        arrays,
        backend,
        whole,
        bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        executor,
        result_on,
        pad,
        fallback_bytes_per_item,
        remember,
    )
    return _plan_and_run(request, repeated, progress)


def _plan_and_run(
    request: BatchRequest, repeated: Repeat, progress: bool
) -> UserResult:
    """The planned path of `map_batches`: plan, refuse or run, learn a repeat."""
    outputs = _outputs_of(request)
    if request.n == 0:  # fn still runs once, and its result is checked
        outputs.put(0, 0, outputs.take(request.job.run(request.arrays, 0, 0, 0), 0, 0))
        return outputs.value()
    state = None if repeated.call is None else plan_state(request.budget_gb)
    plan = make_plan(request, outputs)
    if plan.outputs_fit is False:
        _refuse(request, plan)
    if request.pad:
        request.job.pad_to = plan.batch_size
    _log_plan(request, plan)
    bar = _progress_bar(request.n, plan.probe_rows) if progress else None
    try:
        if plan.probe_rows < request.n:
            _run(request, outputs, plan, bar)
    finally:
        if bar is not None:
            bar.close()
    learn_repeat(repeated, request, plan, state)
    return outputs.value()


def _outputs_of(request: BatchRequest, *, keep: bool = True) -> Outputs:
    """The outputs of ``request``'s call, where ``result_on`` says."""
    return Outputs(
        request.n,
        request.fn,
        request.owner,
        request.result_on,
        keep=keep,
        sources=request.sources,
    )


def _refuse(request: BatchRequest, plan: BatchPlan) -> None:
    """MemoryError: the outputs alone do not fit where they go."""
    assert plan.output_bytes is not None
    ran = (
        f"only the probe's {plan.probe_rows} rows ran"
        if plan.probe_rows
        else ("nothing ran")
    )
    msg = (
        f"map_batches: the outputs of fn={request.fn!r} need "
        f"{plan.output_bytes / 2**30:.3g} GiB on {plan.output_place}, more than "
        f"the memory available there; {ran}. Ask for fewer rows, or outputs "
        "on another device (result_on=)"
    )
    raise UnsplittableMemoryError(msg)


def _log_plan(request: BatchRequest, plan: BatchPlan) -> None:
    log = logger()
    if not log.isEnabledFor(logging.INFO):
        return
    pool = request.pool
    log.info(
        "map_batches: %d items, %d by the probe, then %d batches of %d "
        "(%.3g GB budget on %s; %.4g bytes per item, %s)",
        request.n,
        plan.probe_rows,
        plan.n_batches,
        plan.batch_size,
        plan.budget_gb,
        request.owner.name if pool is None else pool.where,
        plan.bytes_per_item,
        plan.source,
    )


def _run(
    request: BatchRequest, outputs: Outputs, plan: BatchPlan, bar: ProgressBar | None
) -> None:
    """The rows after the probe's: on the executor's pool, else here."""
    pool = request.pool
    if pool is None:
        _run_here(request, outputs, plan, bar)
        return
    resubmitted = run_on_pool(
        pool,
        request.job,
        request.arrays,
        outputs,
        first=plan.probe_rows,
        batch=plan.batch_size,
        min_batch=request.min_batch,
        bytes_per_row=plan.bytes_per_item * plan.overhead,
        budget_bytes=plan.budget_gb * BYTES_PER_GB,
        bar=bar,
    )
    if resubmitted:
        logger().info("map_batches: %d batches resubmitted", resubmitted)


def _run_here(
    request: BatchRequest, outputs: Outputs, plan: BatchPlan, bar: ProgressBar | None
) -> None:
    """The local loop: batches one after the other, each split on an OOM.

    After an OOM the batch size is what fitted (and the plan memory learns
    it); after `GROW_AFTER` batches in a row at that size it doubles, up to
    the planned size. A doubled size that runs out of memory again ends the
    growing for this call: at most one such attempt fails per call.
    """
    job, arrays, n = request.job, request.arrays, request.n
    batch, planned = plan.batch_size, max(plan.planned_batch_size, plan.batch_size)
    start, successes, growing, grown = plan.probe_rows, 0, True, False

    def piece(s: int, e: int, split: bool) -> None:
        outputs.put(s, e, outputs.take(job.run(arrays, s, e, n, pad=not split), s, e))

    # Large host batches of a library whose threads keep freed memory hand it
    # back after each batch, so that the next batch's peak is not added to it.
    trim = (
        request.adapter.keeps_freed_host_memory
        and not request.owner.is_gpu
        and plan.batch_peak_bytes > TRIM_ABOVE_BYTES
    )
    while start < n:
        stop = min(start + batch, n)
        fitted = split_on_oom(piece, (start, stop), request.min_batch)
        if trim:
            release_freed_host_memory()
        if fitted is not None and fitted < batch:
            logger().info(
                "map_batches: batch size %d -> %d after an OOM", batch, fitted
            )
            batch, successes = fitted, 0
            growing = growing and not grown  # a grown size failed: grow no more
            plan_memory.learn_fit(request.key, fitted, request.alive)
        elif batch < planned and growing:
            successes += 1
            if successes >= GROW_AFTER:
                batch, successes, grown = min(2 * batch, planned), 0, True
                plan_memory.relax_fit(request.key, batch, planned)
        if job.pad_to:
            job.pad_to = batch
        if bar is not None:
            bar.update(stop - start)
        start = stop


def plan_batches(
    fn: UserFunction,
    *arrays: Array,
    backend: Backend | str | None = None,
    whole: tuple[Array, ...] | Mapping[str, Array] = (),
    bytes_per_item: float | None = None,
    overhead: float = 1.0,
    budget_gb: float | None = None,
    min_batch: int = 1,
    executor: str | DaskClient | None = None,
    result_on: str = "host",
    fallback_bytes_per_item: float | None = None,
    remember: bool = True,
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
    fn, *arrays, backend, whole, bytes_per_item, overhead, budget_gb, min_batch, executor, result_on, fallback_bytes_per_item, remember
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
    plan: BatchPlan = _eager(_plan_batches)(
        fn,
        arrays,
        backend,
        whole,
        bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        executor,
        result_on,
        fallback_bytes_per_item,
        remember,
    )
    return plan


def _plan_batches(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    backend: Backend | str | None,
    whole: tuple[Array, ...] | Mapping[str, Array],
    bytes_per_item: float | None,
    overhead: float,
    budget_gb: float | None,
    min_batch: int,
    executor: str | DaskClient | None,
    result_on: str,
    fallback_bytes_per_item: float | None,
    remember: bool,
) -> BatchPlan:
    """`plan_batches`' body (the public function keeps compilers out of it)."""
    request = batch_request(
        fn,
        arrays,
        backend=backend,
        whole=whole,
        bytes_per_item=bytes_per_item,
        fallback_bytes_per_item=fallback_bytes_per_item,
        overhead=overhead,
        budget_gb=budget_gb,
        min_batch=min_batch,
        executor=executor,
        result_on=result_on,
        pad=None,
        remember=remember,
        caller="plan_batches",
    )
    return make_plan(request, _outputs_of(request, keep=False))


def compute_oom_safe(
    fn: UserFunction, *arrays: Array, min_chunk: int = 1
) -> UserResult:
    """Run ``fn(*arrays)`` with reactive out-of-memory recovery.

    All arrays must share their axis-0 length, and ``fn`` must map them to an
    array (or a tuple, list or dict of arrays) whose axis 0 corresponds
    row-for-row to its inputs. On an OOM (`is_oom_error`) the failed
    attempt's frames are cleared, young garbage collected and device caches
    emptied, then the rows are split in half and each half retried
    (recursively). The result is on the host: ``fn``'s own where one call
    covered every row (unless it shares memory with an input), else
    allocated once, from the first piece that succeeds, with every piece
    copied into its rows. Each split is logged on the ``xpkit`` logger.

    Splitting reuses the inputs already generated, so a seeded computation is
    recovered from the same data. For a row-independent ``fn`` the result
    matches the unsplit call to within floating-point reduction order.

    Parameters
    ----------
    fn : callable
        Maps the arrays (row slices of them) to axis-0-aligned arrays.
    *arrays : array
        Inputs of any supported library, sharing their axis-0 length.
    min_chunk : int, default 1
        Chunk size below which an OOM is fatal: the original error is
        re-raised.

    Returns
    -------
    numpy.ndarray, or a tuple, list or dict of them
        ``fn``'s result on the host, in the structure ``fn`` returns.

    Raises
    ------
    TypeError
        ``fn`` is not callable, or returns something other than arrays.
    ValueError
        The arrays differ in length, or ``fn`` breaks the row alignment.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> x = np.arange(6.0).reshape(3, 2)
    >>> xpkit.compute_oom_safe(lambda rows: rows.sum(axis=1), x)
    array([1., 5., 9.])
    """
    return _eager(_compute_oom_safe)(fn, arrays, min_chunk)


def _compute_oom_safe(
    fn: UserFunction, arrays: tuple[Array, ...], min_chunk: int
) -> UserResult:
    """`compute_oom_safe`'s body (the public function keeps compilers out of it)."""
    if not callable(fn):
        msg = f"fn must be callable, got {fn!r}"
        raise TypeError(msg)
    floor = check_count("min_chunk", min_chunk)
    n = common_rows(arrays)
    refuse_traced(arrays, (), "compute_oom_safe")
    outputs = Outputs(n, fn, sources=arrays)
    job = Job(fn)

    def piece(s: int, e: int, split: bool) -> None:
        outputs.put(s, e, outputs.take(job.run(arrays, s, e, n, pad=not split), s, e))

    split_on_oom(piece, (0, n), floor)
    return outputs.value()


def _progress_bar(total: int, done: int) -> ProgressBar:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        msg = "progress=True needs tqdm: pip install 'xpkit[progress]'"
        raise ImportError(msg) from None
    bar: ProgressBar = tqdm(
        total=total, unit="item", desc="xpkit", mininterval=0.5, leave=False
    )
    if done:
        bar.update(done)
    return bar


_mark_eager()

#: What a traced, compiled or lazy caller of the batching functions meets.
_LOOP = "an eager loop on the host: it sizes batches now and reads each result"
#: The capability statement of `map_batches`, `plan_batches` and
#: `compute_oom_safe` (``xpkit capabilities xpkit`` prints it): under
#: ``jax.jit`` traced inputs are refused by name; ``torch.compile`` runs
#: them eagerly (a graph break, and with ``fullgraph=True`` an error that
#: gives the reason); on lazy Dask input each batch's graph is computed.
EAGER_LOOP = Capabilities(
    modes={
        "jit": f"{_LOOP}: traced inputs are refused, naming the transform",
        "compile": f"{_LOOP}: it runs eagerly (a graph break; fullgraph=True "
        "refuses it, with this reason)",
        "lazy": f"{_LOOP}: it computes each batch's graph",
    },
    computes=True,
)
for _function in (map_batches, plan_batches, compute_oom_safe):
    setattr(_function, ATTRIBUTE, EAGER_LOOP)
