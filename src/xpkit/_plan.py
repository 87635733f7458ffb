"""The batch plan of `map_batches`: budget, per-item cost, batch size, fit.

`plan_batches` is the public face: it returns the `BatchPlan` that
`map_batches` would use, so an author who writes their own loop sizes it the
same way. Inside `map_batches` the same code (`make_plan`) also writes the
probe's rows into the outputs, so they are not computed twice.

Where the per-item cost comes from, first found first:

1. the caller's ``bytes_per_item``;
2. the plan memory (`xpkit.plan_memory`): what a probe measured for a call
   with the same signature;
3. the probe: ``fn`` runs on a few rows, then on four times as many, and so
   on (each probe's rows are part of the result), under the meter the
   backend's adapter offers (`Adapter.peak_meter`). The last two probes give
   a straight line, peak bytes = ``fixed_bytes + rows * bytes_per_item``: the
   fixed part is what ``fn`` allocates whatever its rows (a whole operand's
   norms, a transposed copy), which a single small probe would spread over
   its few rows. A meter whose library compiles per shape is warmed first:
   each probe size runs once unmeasured;
4. the caller's ``fallback_bytes_per_item``, where nothing measures;
5. the bytes of one row of every input.

The plan memory also keeps the batch size an OOM taught: a later call with
the same signature starts from it.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._log import logger
from ._memory import (
    BATCH_WORKING_SET_CEILING_GB,
    BYTES_PER_GB,
    array_nbytes,
    available_bytes,
    batch_budgets,
    batch_size_within,
    configured_budget_gb,
)
from ._oom import UnsplittableMemoryError, is_oom_error, release_after_oom
from ._plan_memory import Learned, PlanMemory, plan_memory

if TYPE_CHECKING:
    from ._adapters._peak import PeakMeter
    from ._executors import Pool
    from ._outputs import Outputs
    from ._request import BatchRequest
    from ._rows import Rows

__all__ = [
    "PROBE_FIRST_ROWS",
    "PROBE_MAX_CALLS",
    "TASKS_PER_THREAD",
    "BatchPlan",
    "make_plan",
]

#: Rows of the first probe (or ``min_batch``, if larger).
PROBE_FIRST_ROWS = 4
#: Most measured probe calls; each has four times the rows of the one before.
PROBE_MAX_CALLS = 6
#: The probe stops growing once a probe's peak reaches this share of the budget.
PROBE_BUDGET_SHARE = 1 / 8
#: With an executor, the probe (run in this process) takes at most 1/8 of the rows.
PROBE_POOL_SHARE = 8
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
        Working set of one call whatever its rows (measured; 0 otherwise).
    overhead : float
        The caller's safety multiplier on both.
    source : str
        How ``bytes_per_item`` was obtained: ``"given"``, ``"measured by
        <meter>"``, ``"remembered: measured by <meter> at <time>"``, ``"fallback
        (...)"`` or ``"input rows (<why nothing was measured>)"``.
    batch_size : int
        Rows per batch: the most for which ``overhead * (fixed_bytes +
        rows * bytes_per_item)`` fits ``budget_gb`` (at least ``min_batch``),
        and no more than an earlier OOM showed to fit.
    n_batches : int
        Batches for the rows the probe did not already compute.
    probe_rows : int
        Rows the probe computed (0 when nothing was measured now).
    remembered : bool
        Whether the cost came from the plan memory (`xpkit.plan_memory`),
        without a probe.
    batch_peak_bytes : float
        The predicted working set of one batch: ``overhead * (fixed_bytes +
        batch_size * bytes_per_item)``.
    output_bytes : int or None
        Bytes of all the outputs (None until ``fn`` has run once for this
        signature).
    output_place : str
        Where the outputs are assembled: ``"host"`` or the backend's name.
    outputs_fit : bool or None
        Whether the outputs fit the memory available where they go (None
        when ``output_bytes`` is unknown). `map_batches` refuses a run whose
        outputs do not fit, with a `MemoryError` naming the sizes.
    planned_batch_size : int
        The batch size the budget allows. ``batch_size`` is smaller when an
        earlier OOM (of this call's probe, or of an earlier call with the
        same signature) showed that less fits; `map_batches` grows it back
        toward this after enough batches in a row succeed.

    Parameters
    ----------
    n_items, budget_gb, bytes_per_item, fixed_bytes, overhead, source, batch_size, n_batches, probe_rows, remembered, batch_peak_bytes, output_bytes, output_place, outputs_fit, planned_batch_size
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


def _new_plan(fields: dict[str, object]) -> BatchPlan:
    """A `BatchPlan` of all its ``fields``, made as unpickling makes one.

    Its instance dictionary is filled at once, without the frozen
    dataclass's checked ``object.__setattr__`` for each of 15 fields, which
    cost more than the rest of planning a call that `map_batches` makes
    over and over. The plan is the same (equal, hashable, frozen).
    """
    plan = object.__new__(BatchPlan)
    vars(plan).update(fields)
    return plan


@dataclass(slots=True)
class _Cost:
    """Peak bytes of one call: ``fixed + rows * per_item``."""

    per_item: float
    fixed: float
    source: str
    probe_rows: int = 0
    limit: int | None = None  # rows that ran out of memory in the probe, halved
    remembered: bool = False

    def rows_within(self, budget_bytes: float, overhead: float) -> int:
        room = budget_bytes / overhead - self.fixed
        rows = room / self.per_item * (1 + 1e-12)
        # (A subnormal per_item makes rows infinite; NaN is impossible.)
        return 0 if rows <= 0.0 else int(rows) if rows < 2.0**62 else 2**62


def make_plan(
    request: BatchRequest, outputs: Outputs, memory: PlanMemory = plan_memory
) -> BatchPlan:
    """The plan for ``request``; a measuring probe writes into ``outputs``."""
    n = request.n
    if request.budget_gb is not None:
        budget = measured = request.budget_gb
    else:  # one measurement of the device, its batch cap applied
        measured, budget = batch_budgets(request.owner)
    learned = memory.recall(request.key)
    cost = _cost(request, outputs, learned, budget * BYTES_PER_GB, memory)
    left = n - cost.probe_rows
    pool = request.pool
    if pool is not None and left > 0:
        batch, budget = _pool_batch(pool, request, cost)
    elif left > 0:
        batch, budget = _local_batch(request, cost, left, budget, measured)
    else:
        batch = max(cost.probe_rows, 1)
    planned = batch
    if cost.limit is not None:
        batch = max(min(batch, cost.limit), request.min_batch)
    if learned is not None and learned.fits is not None:
        batch = max(min(batch, learned.fits), request.min_batch)
    # Rows of the outputs: what the probe returned, else what an earlier call did.
    row_bytes = (
        outputs.row_bytes
        if cost.probe_rows
        else (None if learned is None else learned.output_row_bytes)
    )
    output_bytes = None if row_bytes is None else row_bytes * n
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
            "batch_peak_bytes": request.overhead * (cost.fixed + batch * cost.per_item),
            "output_bytes": output_bytes,
            "output_place": "host"
            if request.result_on == "host"
            else request.owner.name,
            "outputs_fit": _outputs_fit(request, output_bytes),
            "planned_batch_size": planned,
        }
    )


def _cost(
    request: BatchRequest,
    outputs: Outputs,
    learned: Learned | None,
    budget_bytes: float,
    memory: PlanMemory,
) -> _Cost:
    """The per-item cost, from the first source that has one (module docstring)."""
    if request.bytes_per_item is not None:
        return _Cost(request.bytes_per_item, 0.0, "given")
    if learned is not None and learned.source:  # (a fit alone has no cost)
        return _Cost(
            learned.bytes_per_item,
            learned.fixed_bytes,
            learned.recalled_as,
            remembered=True,
        )
    if request.n == 0:
        return _input_rows(request, "no rows to probe")
    cost = _probe(request, outputs, budget_bytes)
    if cost.source.startswith("measured"):
        memory.learn_cost(
            request.key,
            Learned(
                bytes_per_item=cost.per_item,
                fixed_bytes=cost.fixed,
                source=cost.source,
                output_row_bytes=outputs.row_bytes,
                alive=request.alive,
            ),
        )
        if cost.limit is not None:
            memory.learn_fit(request.key, cost.limit, request.alive)
    return cost


def _local_batch(
    request: BatchRequest, cost: _Cost, left: int, budget: float, measured: float
) -> tuple[int, float]:
    """Rows per batch in this process, and the budget (GB) they come from."""
    floor = request.min_batch
    # The throughput ceiling never makes the smallest batch impossible.
    need = request.overhead * (cost.fixed + cost.per_item * floor) / BYTES_PER_GB
    budget = max(budget, min(need, measured))
    if cost.source == "given":  # one item over the budget is the caller's error
        batch, _ = batch_size_within(
            left, cost.per_item * request.overhead, budget, floor
        )
        return batch, budget
    # Measured (or estimated): fn may already have run, so run, however small.
    fitting = cost.rows_within(budget * BYTES_PER_GB, request.overhead)
    if fitting < floor:
        logger().warning(
            "map_batches: fn needs %.3g GB for min_batch=%d rows (%s), more "
            "than the %.3g GB budget; running batches of %d rows",
            need,
            floor,
            cost.source,
            budget,
            floor,
        )
    return min(max(fitting, floor), left), budget


def _outputs_fit(request: BatchRequest, output_bytes: int | None) -> bool | None:
    """Whether ``output_bytes`` fit where the outputs go (None: unknown)."""
    if output_bytes is None:
        return None
    place = None if request.result_on == "host" else request.owner
    try:
        return output_bytes <= available_bytes(place)
    except Exception:  # noqa: BLE001 - nothing to compare with
        return None


def _input_rows(request: BatchRequest, why: str) -> _Cost:
    """The caller's fallback estimate, else the bytes of one row of every input."""
    if request.fallback_bytes_per_item is not None:
        return _Cost(request.fallback_bytes_per_item, 0.0, f"fallback ({why})")
    total = sum(array_nbytes(a) for a in request.arrays)
    per_item = max(total / max(request.n, 1), 1.0)
    return _Cost(per_item, 0.0, f"input rows ({why})")


def _probe(request: BatchRequest, outputs: Outputs, budget_bytes: float) -> _Cost:
    """Run ``fn`` on growing row ranges from row 0 under the device's meter.

    At most an eighth of the rows on a pool (but always one probe). A meter
    that asks for warming runs each size once unmeasured, then measures it.
    """
    owner, n = request.owner, request.n
    meter = request.adapter.peak_meter(owner.device)
    if meter is None:
        why = f"{owner.name} on {owner.device!r} has no peak-memory meter"
        cost = _input_rows(request, why)
        logger().info("map_batches: per-item cost from the %s", cost.source)
        return cost
    most = n if request.pool is None else max(n // PROBE_POOL_SHARE, 1)
    points: list[tuple[int, int]] = []  # (rows, peak bytes)
    start, rows, limit = 0, max(min(PROBE_FIRST_ROWS, most), request.min_batch), None
    while start < n and len(points) < PROBE_MAX_CALLS:
        if points and start + rows > most:
            rows = most - start
            if rows < request.min_batch or rows < 1:
                break
        stop = min(start + rows, n)
        if meter.warm_up and start + 2 * (stop - start) > most:
            break  # no rows left to run this shape twice
        try:
            if meter.warm_up:  # run this shape once unmeasured: it compiles
                _run_probe(request, outputs, start, stop, None)
                start, stop = stop, 2 * stop - start
            peak = _run_probe(request, outputs, start, stop, meter)
        except BaseException as exc:
            if (
                not is_oom_error(exc)
                or (stop - start) // 2 < request.min_batch
                or isinstance(exc, UnsplittableMemoryError)
            ):
                raise
            traceback.clear_frames(exc.__traceback__)
            failed = True
        else:
            failed = False
        if failed:
            release_after_oom()
            logger().info(
                "map_batches: out of memory probing rows %d:%d; probing half",
                start,
                stop,
            )
            limit = max((stop - start) // 2, request.min_batch)
            rows = limit
            continue
        if peak is None:  # measured by an enclosing probe, or another thread's
            start = stop
            if points:
                break  # fit what was measured
            why = "another peak measurement was under way"
            cost = _input_rows(request, why)
            logger().info("map_batches: per-item cost from the %s", cost.source)
            cost.probe_rows, cost.limit = stop, limit
            return cost
        points.append((stop - start, peak))
        start = stop
        if limit is not None or (
            len(points) >= 2 and peak >= budget_bytes * PROBE_BUDGET_SHARE
        ):
            break
        # Grow four-fold, but keep the next probe's predicted peak in the budget.
        per_row = max(peak / points[-1][0], 1.0)
        affordable = int(budget_bytes * PROBE_BUDGET_SHARE * 4 / per_row)
        rows = max(min(4 * rows, affordable), rows + 1)
    if not points:
        cost = _input_rows(request, f"too few rows to measure with {meter.name}")
        cost.probe_rows = start
        return cost
    per_item, fixed = _fit(points)
    source = f"measured by {meter.name}"
    logger().info(
        "map_batches: %s: %.4g bytes per item + %.4g fixed, from probes of %s rows",
        source,
        per_item,
        fixed,
        [r for r, _ in points],
    )
    return _Cost(per_item, fixed, source, probe_rows=start, limit=limit)


def _run_probe(
    request: BatchRequest,
    outputs: Outputs,
    start: int,
    stop: int,
    meter: PeakMeter | None,
) -> int | None:
    """Rows ``start:stop`` into ``outputs``; their peak bytes under ``meter``.

    Without a meter (a warming run) the peak is None.
    """
    job, arrays, n = request.job, request.arrays, request.n

    def attempt() -> Rows:
        return outputs.take(job.run(arrays, start, stop, n), start, stop)

    if meter is None:
        result, peak = attempt(), None
    else:
        result, peak = meter.measure(attempt)
    outputs.put(start, stop, result)
    return peak


def _fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """(bytes per item, fixed bytes) through the two largest probes.

    The largest, not the last: a last probe clipped to the few rows left
    would make a short, noisy baseline.
    """
    ranked = sorted(points)
    k2, p2 = ranked[-1]
    smaller = [(k, p) for k, p in ranked if k < k2]
    if not smaller:
        return max(p2 / k2, 1.0), 0.0
    k1, p1 = smaller[-1]
    slope = (p2 - p1) / (k2 - k1)
    if slope <= 0:  # no growth with the rows (noise, or fn allocates per call)
        return max(p2 / k2, 1.0), 0.0
    return max(slope, 1.0), max(p2 - slope * k2, 0.0)


def _pool_batch(pool: Pool, request: BatchRequest, cost: _Cost) -> tuple[int, float]:
    """Rows per task on ``pool`` and the per-task budget (GB) they come from.

    The memory budget is a hard cap; within it, batches are no smaller than
    the cache ceiling makes them, or than a share of the rows giving
    `TASKS_PER_THREAD` tasks per worker thread, and no larger than an equal
    share per thread (so every thread gets work).
    """
    n = request.n - cost.probe_rows
    floor, overhead = request.min_batch, request.overhead

    def rows(gb: float) -> int:
        return max(floor, cost.rows_within(gb * BYTES_PER_GB, overhead))

    if request.budget_gb is not None:
        hard = soft = request.budget_gb
    else:
        measured = pool.task_budget_gb(sum(array_nbytes(a) for a in request.arrays))
        configured = configured_budget_gb()
        if configured is not None:  # a budget set here only lowers the workers'
            hard = soft = min(configured, measured)
        else:
            hard = min(measured, BATCH_WORKING_SET_CEILING_GB)
            ceiling = request.adapter.batch_ceiling_bytes(request.owner.device)
            soft = hard if ceiling is None else min(hard, ceiling / BYTES_PER_GB)
    slots = pool.slots
    batch = min(rows(hard), max(rows(soft), -(-n // (slots * TASKS_PER_THREAD))))
    return max(floor, min(batch, -(-n // slots))), hard
