"""`map_batches`, `plan_batches` and `compute_oom_safe`: batches sized to memory.

The arrays flow one way: the arguments are checked once into a
`BatchRequest` (`xpkit._request`), the plan is made (`xpkit._plan`: from
the caller's cost, the plan memory or the probe, whose rows already land in
the outputs), then the remaining rows run here, each batch through the
split-and-retry of `xpkit._oom.split_on_oom`, or on an executor's pool
(`xpkit._executors.each_task_on_pool`), every batch written into outputs
allocated once (`xpkit._outputs`); where one call covers every row, its
result is kept as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._adapters._registry import ADAPTERS
from ._args import check_count
from ._cost import cost_of
from ._executors import each_task_on_pool
from ._into import chunk_rows
from ._local import each_batch_here, stop_of_fn
from ._log import logger
from ._memory import BYTES_PER_GB
from ._oom import UnsplittableMemoryError, split_on_oom
from ._outputs import Outputs
from ._plan import BatchPlan, budget_of, make_plan
from ._plan_memory import plan_memory
from ._repeat import (
    NO_REPEAT,
    Repeat,
    as_if_no_backend,
    before_planning,
    learn_repeat,
    repeat,
)
from ._request import BatchCall, BatchRequest, batch_request
from ._rows import Job, common_rows, refuse_traced
from ._shown import shown
from ._statement import ATTRIBUTE, Capabilities
from ._written import WorkerWrites

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from ._adapters._base import Adapter
    from ._backend import Backend
    from ._cost_model import Cost
    from ._typing import (
        Array,
        DaskClient,
        ProgressBar,
        UserFunction,
        UserResult,
    )

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
    out: UserResult | None = None,
) -> UserResult:
    """Map ``fn`` over row batches of ``arrays`` sized to the device's memory.

    The one call a library author needs for a batched computation. Each
    output of ``fn`` is allocated once, for all rows, from the first batch's
    result, and every batch is copied into its rows: the peak is the outputs
    plus one batch's working set. When ``bytes_per_item`` is not given,
    ``fn``'s cost is traced: ``fn`` runs on arrays that have the batch's
    shapes and dtypes but no values, impersonating the backend's library and
    device, and every array an operation makes is counted as that library
    allocates it; a few traces fit the cost's curve (`BatchPlan`), and the
    batch is checked against the trace of that very batch. Nothing is
    computed, and no statistic of the process is read or reset. Where the
    trace cannot follow ``fn`` (it reads a value, a shape depends on
    values), the library's own account of it, else a probe measures: ``fn``
    runs on a few real rows, then up to four times as many, and so on (at
    most 6 probes, whose rows are part of the result), under the meter of
    the backend's device (torch: its operations, per thread; CuPy: its
    memory hooks; the host: its memory, sampled; none of them resets
    anything), and the last three probes give the curve. ``BatchPlan.source``
    says which, and why the ones before could not follow ``fn``. Batches are
    sized from the (capped) memory budget of the backend's device, each
    runs through the same split-and-retry as `compute_oom_safe`, and after
    an OOM the remaining batches use the size that fitted.

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
        earlier call with the same signature, else traced or measured (see
        above).
    overhead : float, default 1.0
        Safety multiplier on the per-item (and fixed) cost, between 1e-9
        and 1e9; times ``bytes_per_item`` a finite positive float.
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
        once, alone (nothing runs beside it, so a death there is its own),
        then a `MemoryError` names the rows and the memory they needed (a
        `RuntimeError` where they needed under a quarter of the budget: not
        memory). A task whose inputs went down with another's worker runs
        again unsplit once. An input, operand or ``fn`` that cannot travel
        to the workers is a TypeError naming it, before any task runs.
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
    out : array, or a tuple, list or dict of arrays, optional
        Where the results go, instead of outputs allocated here: in the
        structure ``fn`` returns, each with one row per input row, of the
        row shape and dtype of ``fn``'s rows (checked against its first
        result before any other batch runs; nothing is cast). Anything with
        ``shape``, ``dtype`` and slice assignment: a NumPy array or
        ``np.memmap``, a zarr or h5py array (a store cut in chunks of rows
        gets each chunk written once, whole), a writable array of the
        backend's library. The outputs then need no room in memory, and
        nothing the size of all of them is allocated. Not with
        ``result_on="device"``.

    Returns
    -------
    array, or a tuple, list or dict of arrays
        ``fn``'s results for all rows, in the structure ``fn`` returns (a
        named tuple as one of its class; ``out`` itself, where given). Never
        an input, a whole operand or memory shared with one. Where one call
        of ``fn`` covers every row, its own host result is returned as it is
        (not copied); a ``fn`` that returns the same buffer on every call
        then gets that buffer back (see the memory guide).

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
    # The call's arguments, in one record (made as tuple makes one: the named
    # tuple's own __new__ is a Python function of 13 arguments, which a
    # repeated call would pay for every time).
    call: BatchCall = tuple.__new__(
        BatchCall,
        (
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
            out,
        ),
    )
    return _eager(_map_batches)(call, progress)


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
    eager ``fn`` is made on the first call outside a trace once the compiler
    is imported (`Adapter.compiler_imported`: torch's dynamo, which a first
    call would otherwise import, for 2.3 s); outside a trace ``fn`` itself
    is called: the wrapper would cost every call.)
    """
    for adapter in _TRACERS:
        if adapter not in _MADE:
            if not adapter.compiler_imported():
                continue  # (it cannot be tracing)
            _mark_eager()  # (outside a trace: made once, at no cost)
        if adapter.compiling():
            fn = adapter.eager_only(fn, _EAGER_REASON)
    return fn


#: The tracing adapters whose eager bodies are made.
_MADE: set[Adapter] = set()


def _mark_eager() -> None:
    """Make the eager bodies now, for each library whose compiler is imported.

    (Made inside a trace, they cost a graph break; here they cost nothing.)
    """
    for adapter in _TRACERS:
        if adapter.compiler_imported():
            for body in (_map_batches, _plan_batches, _compute_oom_safe):
                adapter.eager_only(body, _EAGER_REASON)
            _MADE.add(adapter)


def _map_batches(call: BatchCall, progress: bool) -> UserResult:
    """`map_batches`' body (the public function keeps compilers out of it)."""
    if not isinstance(progress, bool):
        msg = f"progress must be a bool, got {shown(progress)}"
        raise TypeError(msg)
    repeated = NO_REPEAT  # (an executor, a backend that moves, ...: never repeated)
    if (
        call.executor is None
        and progress is False
        and call.remember is True
        and call.result_on == "host"
        and call.out is None
    ):
        same = call if call.backend is None else as_if_no_backend(call)
        if same is not None:
            repeated = repeat(same)
            if repeated.__class__ is not Repeat:
                return repeated
    return _plan_and_run(batch_request(call), repeated, progress)


def _plan_and_run(
    request: BatchRequest, repeated: Repeat, progress: bool
) -> UserResult:
    """The planned path of `map_batches`: plan, refuse or run, learn a repeat.

    After a repeat that ran out of memory (`Repeat.failed` rows), batches
    have at most half as many rows, and the plan memory learns it first.
    """
    outputs = _outputs_of(request)
    if request.n == 0:  # fn still runs once, and its result is checked
        outputs.put(0, 0, outputs.take(request.job.run(request.arrays, 0, 0, 0), 0, 0))
        return outputs.value()
    most, state = before_planning(repeated, request)
    cost, plan = _costed_plan(request, outputs)
    if plan.outputs_fit is False:
        _refuse(request, plan)
    if request.pad:
        request.job.pad_to = plan.batch_size
    _log_plan(request, plan)
    bar = _progress_bar(request.n, plan.probe_rows) if progress else None
    stopped = None
    try:
        if plan.probe_rows < request.n:
            # (a repeat's OOM, ``most``, never runs on a pool)
            steps = (
                each_batch_here(request, outputs, plan, cost, bar, most)
                if request.pool is None
                else pool_steps(request, outputs, plan, bar)
            )
            for _ in steps:
                pass
    except RuntimeError as exc:  # (fn's StopIteration, as the generator made it)
        stopped = stop_of_fn(exc)
    finally:
        if bar is not None:
            bar.close()
    if stopped is not None:
        raise stopped  # (outside the handler: no RuntimeError as its context)
    learn_repeat(repeated, request, plan, state)
    return outputs.value()


def _costed_plan(request: BatchRequest, outputs: Outputs) -> tuple[Cost, BatchPlan]:
    """What ``fn`` costs (a probe writes into ``outputs``), and the plan at that cost."""
    budget, measured = budget_of(request)
    learned = plan_memory.recall(request.key)
    cost = cost_of(request, outputs, learned, budget * BYTES_PER_GB, plan_memory)
    plan = make_plan(request, cost, learned, budget, measured)
    if cost.remembered and 0 < cost.rows_seen < plan.planned_batch_size:
        # Not stretched beyond the rows it was fitted at: a curve fitted on
        # few rows (a first call on 40 rows, or in a small budget) is a guess
        # beyond them; a pairwise fn whose small batches fit a straight line
        # planned 56 times its budget from one.
        logger().info(
            "map_batches: the remembered cost was fitted for %d rows a batch; "
            "this plan would run %d: costing fn afresh",
            cost.rows_seen,
            plan.planned_batch_size,
        )
        cost = cost_of(request, outputs, None, budget * BYTES_PER_GB, plan_memory)
        plan = make_plan(request, cost, learned, budget, measured)
    if not cost.remembered and cost.rows_seen:
        # The batch a plan from this cost makes here at most: what the budget
        # allows (a pool's share per thread, or the rows the probe left, may
        # have made this one smaller), within these rows.
        allowed = cost.rows_within(plan.budget_gb * BYTES_PER_GB, request.overhead)
        seen = max(plan.planned_batch_size, min(allowed, request.n))
        plan_memory.learn_rows_seen(request.key, seen)
    return cost, plan


def _outputs_of(request: BatchRequest, *, keep: bool = True) -> Outputs:
    """The outputs of ``request``'s call: ``out``, else where ``result_on`` says.

    Not ``keep``ing them (`plan_batches`), the probe's first rows are still
    checked against ``out``, and nothing is written into it.
    """
    return Outputs(
        request.n,
        request.fn,
        request.owner,
        request.result_on,
        keep=keep,
        sources=request.sources,
        into=request.out,
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
        f"map_batches: the outputs of fn={shown(request.fn)} need "
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


def pool_steps(
    request: BatchRequest,
    outputs: Outputs,
    plan: BatchPlan,
    bar: ProgressBar | None,
    held: Callable[[], int] | None = None,
) -> Generator[None, None, int]:
    """The rows after the probe's on the executor's pool, task by task.

    A generator that yields once each task's rows are in ``outputs``, and
    returns the resubmissions (`xpkit._executors.each_task_on_pool`). Where
    ``out`` is a store every worker reaches (`xpkit._into.Out.shared`), the
    workers write their rows into it themselves (`xpkit._written`): the rows
    from the probe's end to the next chunk boundary are written here first,
    and the tasks cover whole chunks (where a batch holds one chunk at
    least; else the rows come back and are written here). ``held``: as for
    `each_task_on_pool`.
    """
    assert request.pool is not None
    first, chunk, out = plan.probe_rows, chunk_rows(request.out), request.out
    # (a task smaller than a chunk would write part of one: written here then)
    shared = out is not None and out.shared and plan.batch_size >= chunk
    if shared:
        assert out is not None
        request.job.sink = WorkerWrites(out, request.n, request.fn)
        boundary = min(-(-first // chunk) * chunk, request.n)
        if boundary > first:  # (here: the chunk the probe's rows began)
            result = request.job.run(request.arrays, first, boundary, request.n)
            outputs.put(first, boundary, outputs.take(result, first, boundary))
            first = boundary
    return (
        yield from each_task_on_pool(
            request.pool,
            request.job,
            request.arrays,
            outputs,
            first=first,
            batch=plan.batch_size,
            min_batch=request.min_batch,
            bytes_per_row=plan.bytes_per_item * plan.overhead,
            budget_bytes=plan.budget_gb * BYTES_PER_GB,
            bar=bar,
            chunk=chunk,
            whole_chunks=shared,
            held=held,
            caller=request.caller,
        )
    )


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
    out: UserResult | None = None,
) -> BatchPlan:
    """The batch plan `map_batches` would use for these arguments.

    Size a hand-written loop the way `map_batches` sizes its own. Without
    ``bytes_per_item`` this traces ``fn`` on shape-only arrays, or (where
    the trace cannot follow it) runs it on the probe's rows and discards
    their results; the plan's ``probe_rows`` says how many, and its
    ``batch_size`` is for the rows after them; nothing is allocated for
    the outputs. The parameters are `map_batches`' own; with ``out``, the
    plan is for writing into those arrays (nothing is written): batches
    aligned to their chunks, within the budget less what writing one holds
    (``out_held_bytes``).

    Returns
    -------
    BatchPlan
        Budget, per-item and fixed cost and how they were obtained, batch
        size and count.

    Parameters
    ----------
    fn, *arrays, backend, whole, bytes_per_item, overhead, budget_gb, min_batch, executor, result_on, fallback_bytes_per_item, remember, out
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
        out,
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
    out: UserResult | None,
) -> BatchPlan:
    """`plan_batches`' body (the public function keeps compilers out of it)."""
    call = BatchCall(  # (by position: map_batches' parameters, in order)
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
        None,
        fallback_bytes_per_item,
        remember,
        out,
    )
    request = batch_request(call, caller="plan_batches")
    return _costed_plan(request, _outputs_of(request, keep=False))[1]


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
        msg = f"fn must be callable, got {shown(fn)}"
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
