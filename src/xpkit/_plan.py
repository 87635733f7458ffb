"""The batch plan of `map_batches`: budget, batch size, and whether the outputs fit.

`plan_batches` is the public face: it returns the `BatchPlan` that
`map_batches` would use, so an author who writes their own loop sizes it the
same way. The plan takes the cost the cost stage found (`xpkit._cost`): the
most rows whose predicted peak fits the budget, checked against the tracer
itself where one stands behind the cost (`Cost.exact`: the batch is grown or
shrunk until the traced peak of that very batch fits, and is not far under
it); then no more than an earlier OOM showed to fit (the plan memory keeps
that batch size: a later call with the same signature starts from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ._into import aligned_batch, chunk_rows, held_while_writing
from ._log import logger
from ._memory import (
    BATCH_WORKING_SET_CEILING_GB,
    BYTES_PER_GB,
    array_nbytes,
    available_bytes,
    batch_budgets,
    batch_size_within,
    configured_budget_gb,
    configured_budget_origin,
)
from ._shown import shown

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._cost_model import Cost
    from ._executors import Pool
    from ._into import Out
    from ._plan_memory import Learned
    from ._request import BatchRequest

__all__ = [
    "TASKS_PER_THREAD",
    "BatchPlan",
    "budget_of",
    "make_plan",
]

#: A traced batch is grown while its peak is under this share of the budget.
FULL_ENOUGH = 0.9
#: Most traces the plan asks to grow or shrink a batch to the budget.
REFINE_TRACES = 8
#: On a pool, the CPU cache ceiling (a throughput heuristic) never makes more
#: than this many tasks per worker thread: a task costs milliseconds to
#: schedule, a batch in a local loop microseconds.
TASKS_PER_THREAD = 4


@dataclass(frozen=True)
class BatchPlan:
    """How `map_batches` sizes its batches for one call, and whether it fits.

    Attributes
    ----------
    n_items : int
        Rows of the inputs.
    budget_gb : float
        The memory budget one batch may use (GB of 2**30 bytes).
    bytes_per_item : float
        Working set of one item (row) in bytes, before ``overhead``.
    fixed_bytes : float
        Working set of one call whatever its rows (traced or measured; 0
        otherwise).
    overhead : float
        The caller's safety multiplier on both.
    source : str
        How the cost was obtained: ``"given"``; ``"traced by shape-only
        arrays"`` (``fn`` ran on arrays without values, nothing computed) or
        ``"traced by XLA's memory analysis of the compiled fn"``; ``"measured
        by <meter> (<why no tracer could follow fn>)"``; ``"remembered: <one
        of those> at <time>"``; ``"fallback (...)"`` or ``"input rows (<why
        nothing was measured>)"``.
    batch_size : int
        Rows per batch: the most for which ``overhead * (fixed_bytes +
        rows * bytes_per_item + rows**2 * bytes_per_item_squared)`` fits
        ``budget_gb`` (at least ``min_batch``), checked against the trace of
        that batch where ``fn`` was traced, and no more than an earlier OOM
        showed to fit.
    n_batches : int
        Batches for the rows the probe did not already compute.
    probe_rows : int
        Rows the probe computed (0 when nothing was measured now).
    remembered : bool
        Whether the cost came from the plan memory (`xpkit.plan_memory`),
        without a probe.
    batch_peak_bytes : float
        The predicted working set of one batch: ``overhead`` times its
        traced peak, or the cost's curve at ``batch_size``.
    output_bytes : int or None
        Bytes of all the outputs (None until ``fn`` has run once for this
        signature).
    output_place : str
        Where the outputs are assembled: ``"host"``, the backend's name, or
        ``"out"`` (the caller's arrays, given as ``out``: they always fit).
    outputs_fit : bool or None
        Whether the outputs fit the memory available where they go (None
        when ``output_bytes`` is unknown). `map_batches` refuses a run whose
        outputs do not fit, with a `MemoryError` naming the sizes.
    planned_batch_size : int
        The batch size the budget allows. ``batch_size`` is smaller when an
        earlier OOM (of this call's probe, or of an earlier call with the
        same signature) showed that less fits; `map_batches` grows it back
        toward this after enough batches in a row succeed.
    bytes_per_item_squared : float
        The cost's term in the rows squared (0 for row-wise work; an outer
        product or a pairwise distance of the batch's rows has one).
    out_held_bytes : int
        What writing one batch into ``out`` holds in memory beside ``fn``'s
        result: a store's chunks being encoded (zarr's, up to its
        ``async.concurrency`` at once) and a chunk of rows waiting for the
        rest of it. The batch is planned within ``budget_gb`` less this
        (0 without ``out``, or for arrays without chunks: an ``np.memmap``'s
        pages are the page cache's).

    Parameters
    ----------
    n_items, budget_gb, bytes_per_item, fixed_bytes, overhead, source, batch_size, n_batches, probe_rows, remembered, batch_peak_bytes, output_bytes, output_place, outputs_fit, planned_batch_size, bytes_per_item_squared, out_held_bytes
        The attributes above; `plan_batches` makes plans, users read them.

    Raises
    ------
    Nothing: a plan is a record.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> plan = xpkit.plan_batches(lambda r: r, np.ones((50, 2)), bytes_per_item=8.0, budget_gb=80 / 2**30)
    >>> plan.batch_size * plan.n_batches >= plan.n_items
    True
    """

    n_items: int
    budget_gb: float
    bytes_per_item: float
    fixed_bytes: float
    overhead: float
    source: str
    batch_size: int
    n_batches: int
    probe_rows: int
    remembered: bool = False
    batch_peak_bytes: float = 0.0
    output_bytes: int | None = None
    output_place: str = "host"
    outputs_fit: bool | None = None
    planned_batch_size: int = 0
    bytes_per_item_squared: float = 0.0
    out_held_bytes: int = 0


def _new_plan(fields: dict[str, object]) -> BatchPlan:
    """A `BatchPlan` of all its ``fields``, made as unpickling makes one.

    Its instance dictionary is filled at once, without the frozen
    dataclass's checked ``object.__setattr__`` for each of 17 fields, which
    cost more than the rest of planning a call that `map_batches` makes
    over and over. The plan is the same (equal, hashable, frozen).
    """
    plan = object.__new__(BatchPlan)
    vars(plan).update(fields)
    return plan


def budget_of(request: BatchRequest) -> tuple[float, float]:
    """``(budget, measured)`` in GB: the batch budget and the device's measured one.

    An explicit ``budget_gb`` is both; otherwise one measurement of the
    device, its batch cap applied (`batch_budgets`).
    """
    if request.budget_gb is not None:
        return request.budget_gb, request.budget_gb
    measured, budget = batch_budgets(request.owner)
    return budget, measured


def make_plan(
    request: BatchRequest,
    cost: Cost,
    learned: Learned | None,
    budget: float,
    measured: float,
) -> BatchPlan:
    """The plan for ``request`` at ``cost`` within ``budget`` (GB)."""
    n = request.n
    left = n - cost.probe_rows
    out = request.out
    if left > 0:
        rows_within, budget = _sizing(request, cost, left, budget, measured)
        batch = rows_within(budget)
        if out is not None and held_while_writing(out, batch):
            batch = _beside_out(request, out, cost, rows_within, budget, batch)
    else:
        batch = max(cost.probe_rows, 1)
    planned = batch
    if cost.limit is not None:
        batch = max(min(batch, cost.limit), request.min_batch)
    if learned is not None and learned.fits is not None:
        batch = max(min(batch, learned.fits), request.min_batch)
    held = 0
    if out is not None:  # (whole chunks of a store, where min_batch allows)
        whole_chunks = aligned_batch(batch, out)
        batch = whole_chunks if whole_chunks >= request.min_batch else batch
        held = held_while_writing(out, batch)
    # Rows of the outputs: what the trace or the probe saw, else an earlier call.
    row_bytes = cost.output_row_bytes
    if row_bytes is None and learned is not None:
        row_bytes = learned.output_row_bytes
    output_bytes = None if row_bytes is None else row_bytes * n
    traced = cost.exact(batch) if cost.exact is not None else None
    peak = float(traced) if traced is not None else cost.peak(batch)
    return _new_plan(
        {
            "n_items": n,
            "budget_gb": budget,
            "bytes_per_item": cost.per_item,
            "fixed_bytes": cost.fixed,
            "overhead": request.overhead,
            "source": cost.source,
            "batch_size": batch,
            "n_batches": -(-left // batch) if left > 0 else 0,
            "probe_rows": cost.probe_rows,
            "remembered": cost.remembered,
            "batch_peak_bytes": request.overhead * peak,
            "output_bytes": output_bytes,
            "output_place": "out"
            if out is not None
            else "host"
            if request.result_on == "host"
            else request.owner.name,
            "outputs_fit": _outputs_fit(request, output_bytes),
            "planned_batch_size": planned,
            "bytes_per_item_squared": cost.squared,
            "out_held_bytes": held,
        }
    )


def _sizing(
    request: BatchRequest, cost: Cost, left: int, budget: float, measured: float
) -> tuple[Callable[[float], int], float]:
    """``(rows_within, budget)``: the rows of a batch within a budget (GB), and the budget.

    On the request's pool, its per-task budget (measured once). Here,
    ``budget``, but never less than ``min_batch`` rows need where the
    device has that: the throughput ceiling never makes the smallest batch
    impossible.
    """
    pool = request.pool
    if pool is not None:
        hard, soft = _pool_budgets(pool, request)

        def on_pool(gb: float) -> int:
            return _pool_rows(pool, request, cost, min(hard, gb), min(soft, gb))

        return on_pool, hard
    need = request.overhead * cost.peak(min(request.min_batch, left)) / BYTES_PER_GB
    return partial(_local_batch, request, cost, left), max(budget, min(need, measured))


def _beside_out(
    request: BatchRequest,
    out: Out,
    cost: Cost,
    rows_within: Callable[[float], int],
    budget: float,
    first: int,
) -> int:
    """Rows per batch within ``budget`` (GB) with what writing them into ``out`` holds.

    What writing holds grows with the chunks a batch covers
    (`held_while_writing`), so the batch is the largest of ``r`` chunks
    that the budget less what writing ``r`` chunks holds allows
    (``rows_within`` a budget: the plan's own sizing); ``r`` is found by
    bisection, from the chunks of ``first`` (the batch planned without it)
    down: fewer chunks hold no more, so the batch fits with what writing it
    holds. Where not even ``min_batch`` rows fit beside writing one chunk,
    batches are ``min_batch`` rows, and a warning says so.
    """
    chunk, overhead, floor = chunk_rows(out), request.overhead, request.min_batch

    def most(chunks: int) -> int:  # rows beside writing that many chunks (0: none)
        rest = budget - held_while_writing(out, chunks * chunk) / BYTES_PER_GB
        if rest <= 0 or cost.rows_within(rest * BYTES_PER_GB, overhead) < floor:
            return 0
        try:
            return rows_within(rest)
        except ValueError:  # (a given item over what is left, to the byte)
            return 0

    hi = -(-first // chunk)
    rows = most(hi)
    if rows > (hi - 1) * chunk:  # (a batch of that many chunks fits)
        return min(rows, hi * chunk)
    lo, found = 0, 0  # (no batch of hi chunks fits; one of lo, if any)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        rows = most(mid)
        if rows > (mid - 1) * chunk:
            lo, found = mid, min(rows, mid * chunk)
        else:
            hi = mid
    if found:
        return found
    logger().warning(
        "%s: writing one chunk into out holds %.3g GB (its store's "
        "chunks), which with fn's min_batch=%s rows is more than the %.3g GB "
        "budget; running batches of %s rows",
        request.caller,
        held_while_writing(out, chunk) / BYTES_PER_GB,
        shown(request.min_batch),
        budget,
        shown(request.min_batch),
    )
    return request.min_batch


def _local_batch(request: BatchRequest, cost: Cost, left: int, budget: float) -> int:
    """Rows per batch in this process within ``budget`` (GB)."""
    floor = min(request.min_batch, left)  # (a min_batch beyond the rows: them all)
    if cost.source == "given":  # one item over the budget is the caller's error
        per_item = cost.per_item * request.overhead
        origin = ""  # (where a budget no budget_gb= gave comes from, for its error)
        if request.budget_gb is None and per_item > int(budget * BYTES_PER_GB):
            origin = configured_budget_origin() or f"measured on {request.owner.name}"
        batch, _ = batch_size_within(left, per_item, budget, floor, origin)
        if batch <= floor and (need := batch * per_item / BYTES_PER_GB) > budget:
            _over_budget(request, need, floor, cost.source, budget, batch)
        return batch
    # Measured (or estimated): fn may already have run, so run, however small.
    fitting = cost.rows_within(budget * BYTES_PER_GB, request.overhead)
    batch = min(max(fitting, floor), left)
    if cost.exact is not None:
        batch = refine(cost, batch, floor, left, budget, request.overhead)
    traced = cost.exact(floor) if cost.exact is not None and batch <= floor else None
    if (
        batch <= floor
        and (need := request.overhead * (traced or cost.peak(floor)) / BYTES_PER_GB)
        > budget
    ):
        _over_budget(request, need, floor, cost.source, budget, batch)
    return batch


def _over_budget(
    request: BatchRequest,
    need: float,
    floor: int,
    source: str,
    budget: float,
    batch: int,
) -> None:
    """The warning that ``min_batch`` rows (``floor``) need more than the budget."""
    logger().warning(
        "%s: fn needs %.3g GB for %d rows (min_batch=%s; %s), more than the "
        "%.3g GB budget; running batches of %d rows",
        request.caller,
        need,
        floor,
        shown(request.min_batch),
        source,
        budget,
        batch,
    )


def refine(
    cost: Cost, batch: int, floor: int, most: int, budget: float, overhead: float
) -> int:
    """``batch``, checked against the tracer behind ``cost`` (itself where none is).

    Where the traced peak of ``batch`` rows is over the budget, the batch is
    halved down to the largest that fits (at least ``floor``); where it is
    under `FULL_ENOUGH` of it, grown toward ``most`` while it fits: a batch
    within the budget, and not far under it. At most `REFINE_TRACES` traces;
    a size the tracer cannot afford to trace (a row loop, `xpkit._cost`)
    ends the search.
    """
    exact = cost.exact
    if exact is None:
        return batch
    limit = budget * BYTES_PER_GB / overhead
    peak = exact(batch)
    if peak is None:
        return batch
    traces = 1
    lo, hi = (batch, None) if peak <= limit else (floor, batch)
    if hi is None:  # fits: grow while well under the budget
        while peak < FULL_ENOUGH * limit and lo < most and traces < REFINE_TRACES:
            grown = min(most, max(lo + 1, int(lo * limit / max(peak, 1))))
            found = exact(grown)
            traces += 1
            if found is None:
                return lo
            if found > limit:
                hi = grown
                break
            lo, peak = grown, found
        if hi is None:
            return lo
    while hi - lo > max(1, lo // 64) and traces < REFINE_TRACES:  # bisect
        mid = (lo + hi) // 2
        found = exact(mid)
        traces += 1
        if found is None:
            break
        if found <= limit:
            lo = mid
        else:
            hi = mid
    return max(lo, floor)


def _outputs_fit(request: BatchRequest, output_bytes: int | None) -> bool | None:
    """Whether ``output_bytes`` fit where the outputs go (None: unknown)."""
    if output_bytes is None:
        return None
    if request.out is not None:
        return True  # (the caller's arrays: they exist)
    place = None if request.result_on == "host" else request.owner
    try:
        return output_bytes <= available_bytes(place)
    except Exception:  # noqa: BLE001 - nothing to compare with
        return None


def _pool_budgets(pool: Pool, request: BatchRequest) -> tuple[float, float]:
    """``(hard, soft)``: the per-task memory budget on ``pool``, and the cache ceiling.

    Both in GB, the ceiling within the budget; measured once for the call,
    less what every worker holds: the inputs and the whole operands.
    """
    if request.budget_gb is not None:
        return request.budget_gb, request.budget_gb
    measured = pool.task_budget_gb(sum(array_nbytes(a) for a in request.shipped))
    configured = configured_budget_gb()
    if configured is not None:  # a budget set here only lowers the workers'
        return min(configured, measured), min(configured, measured)
    hard = min(measured, BATCH_WORKING_SET_CEILING_GB)
    ceiling = request.adapter.batch_ceiling_bytes(request.owner.device)
    return hard, hard if ceiling is None else min(hard, ceiling / BYTES_PER_GB)


def _pool_rows(
    pool: Pool, request: BatchRequest, cost: Cost, hard: float, soft: float
) -> int:
    """Rows per task on ``pool`` within the budgets of `_pool_budgets`.

    The memory budget is a hard cap; within it, batches are no smaller than
    the cache ceiling makes them, or than a share of the rows giving
    `TASKS_PER_THREAD` tasks per worker thread, and no larger than an equal
    share per thread (so every thread gets work).
    """
    n = request.n - cost.probe_rows
    floor, overhead = request.min_batch, request.overhead

    def rows(gb: float) -> int:
        return max(floor, cost.rows_within(gb * BYTES_PER_GB, overhead))

    slots = pool.slots
    batch = min(rows(hard), max(rows(soft), -(-n // (slots * TASKS_PER_THREAD))))
    batch = max(floor, min(batch, -(-n // slots)))
    return refine(cost, batch, floor, batch, hard, overhead)
