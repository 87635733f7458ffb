"""The batch plan of `map_batches`: budget, measured per-item cost, batch size.

`plan_batches` is the public face: it returns the `BatchPlan` that
`map_batches` would use, so an author who writes their own loop sizes it the
same way. Inside `map_batches` the same code (`make_plan`) also writes the
probe's rows into the outputs, so they are not computed twice.

The per-item cost, when the caller gives none, is measured: ``fn`` runs on a
few rows, then on four times as many, and so on (each probe's rows are part
of the result), under the meter the backend's adapter offers
(`Adapter.peak_meter`). The last two probes give a straight line, peak bytes
= ``fixed_bytes + rows * bytes_per_item``: the fixed part is what ``fn``
allocates whatever its rows (a whole operand's norms, a transposed copy),
which a single small probe would spread over its few rows.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._adapters import get_adapter
from ._log import logger
from ._memory import (
    BATCH_WORKING_SET_CEILING_GB,
    BYTES_PER_GB,
    array_nbytes,
    auto_batch_size,
    configured_budget_gb,
    device_memory_budget,
)
from ._oom import is_oom_error, release_after_oom
from ._outputs import Outputs, Rows
from ._rows import Job

if TYPE_CHECKING:
    from ._backend import Backend
    from ._executors import Pool

__all__ = [
    "PROBE_FIRST_ROWS",
    "PROBE_MAX_CALLS",
    "TASKS_PER_THREAD",
    "BatchPlan",
    "make_plan",
]

#: Rows of the first probe (or ``min_batch``, if larger).
PROBE_FIRST_ROWS = 4
#: Most probe calls; each has four times the rows of the one before.
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
    """How `map_batches` sizes its batches for one call.

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
        <meter>"`` or ``"input rows (<why nothing was measured>)"``.
    batch_size : int
        Rows per batch: the most for which ``overhead * (fixed_bytes +
        rows * bytes_per_item)`` fits ``budget_gb`` (at least ``min_batch``).
    n_batches : int
        Batches for the rows the probe did not already compute.
    probe_rows : int
        Rows the probe computed (0 when nothing was measured).

    Parameters
    ----------
    n_items, budget_gb, bytes_per_item, fixed_bytes, overhead, source, batch_size, n_batches, probe_rows
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


@dataclass
class _Cost:
    """Peak bytes of one call: ``fixed + rows * per_item``."""

    per_item: float
    fixed: float
    source: str
    probe_rows: int = 0
    limit: int | None = None  # rows that ran out of memory in the probe, halved

    def rows_within(self, budget_bytes: float, overhead: float) -> int:
        room = budget_bytes / overhead - self.fixed
        rows = room / self.per_item * (1 + 1e-12)
        return int(min(max(rows, 0.0), 2.0**62))  # a subnormal per_item: inf


def make_plan(
    job: Job,
    arrays: tuple[Any, ...],
    n: int,
    owner: Backend,
    *,
    bytes_per_item: float | None,
    overhead: float,
    budget_gb: float | None,
    min_batch: int,
    outputs: Outputs,
    pool: Pool | None = None,
) -> BatchPlan:
    """The plan for rows of ``arrays``; a measuring probe writes into ``outputs``."""
    if budget_gb is not None:
        budget = measured = budget_gb
    else:  # (the device is measured only when no budget is given)
        measured = device_memory_budget(owner)
        budget = device_memory_budget(owner, cap_for_batching=True)
    if bytes_per_item is not None:
        cost = _Cost(bytes_per_item, 0.0, "given")
    elif n == 0:
        cost = _input_rows(arrays, n, "no rows to probe")
    else:
        # On a pool the probe (run here) takes at most an eighth of the rows.
        most = n if pool is None else max(n // PROBE_POOL_SHARE, 1)
        cost = _probe(
            job, arrays, n, owner, outputs, min_batch, budget * BYTES_PER_GB, most
        )
    left = n - cost.probe_rows
    if pool is not None and left > 0:
        batch, budget = _pool_batch(
            pool, owner, arrays, cost, overhead, min_batch, budget_gb
        )
    elif left > 0:
        # The throughput ceiling never makes the smallest batch impossible.
        need = overhead * (cost.fixed + cost.per_item * min_batch) / BYTES_PER_GB
        budget = max(budget, min(need, measured))
        if cost.source == "given":  # one item over the budget is the caller's error
            batch, _ = auto_batch_size(
                left,
                cost.per_item,
                budget_gb=budget,
                overhead=overhead,
                min_batch=min_batch,
            )
        else:  # measured: fn already ran on the probe's rows, so run, however small
            batch = min(
                max(cost.rows_within(budget * BYTES_PER_GB, overhead), min_batch), left
            )
            if cost.rows_within(budget * BYTES_PER_GB, overhead) < min_batch:
                logger().warning(
                    "map_batches: fn needs %.3g GB for min_batch=%d rows (%s), more "
                    "than the %.3g GB budget; running batches of %d rows",
                    overhead * (cost.fixed + cost.per_item * min_batch) / BYTES_PER_GB,
                    min_batch,
                    cost.source,
                    budget,
                    min_batch,
                )
    else:
        batch = max(cost.probe_rows, 1)
    if cost.limit is not None:
        batch = max(min(batch, cost.limit), min_batch)
    return BatchPlan(
        n_items=n,
        budget_gb=budget,
        bytes_per_item=cost.per_item,
        fixed_bytes=cost.fixed,
        overhead=overhead,
        source=cost.source,
        batch_size=batch,
        n_batches=-(-left // batch) if left > 0 else 0,
        probe_rows=cost.probe_rows,
    )


def _input_rows(arrays: tuple[Any, ...], n: int, why: str) -> _Cost:
    per_item = max(sum(array_nbytes(a) for a in arrays) / max(n, 1), 1.0)
    return _Cost(per_item, 0.0, f"input rows ({why})")


def _probe(
    job: Job,
    arrays: tuple[Any, ...],
    n: int,
    owner: Backend,
    outputs: Outputs,
    min_batch: int,
    budget_bytes: float,
    most: int,
) -> _Cost:
    """Run ``fn`` on growing row ranges from row 0 under the device's meter.

    At most ``most`` rows in all (but always one probe).
    """
    meter = get_adapter(owner.library).peak_meter(owner.device)
    if meter is None:
        why = f"{owner.name} on {owner.device!r} has no peak-memory meter"
        logger().info("map_batches: per-item cost from the %s", f"input rows ({why})")
        return _input_rows(arrays, n, why)
    points: list[tuple[int, int]] = []  # (rows, peak bytes)
    start, rows, limit = 0, max(min(PROBE_FIRST_ROWS, most), min_batch), None
    while start < n and len(points) < PROBE_MAX_CALLS:
        if points and start + rows > most:
            rows = most - start
            if rows < min_batch or rows < 1:
                break
        stop = min(start + rows, n)

        def attempt(s: int = start, e: int = stop) -> Rows:
            return outputs.take(job.run(arrays, s, e, n), s, e)

        try:
            result, peak = meter.measure(attempt)
        except BaseException as exc:
            if not is_oom_error(exc) or (stop - start) // 2 < min_batch:
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
            limit = max((stop - start) // 2, min_batch)
            rows = limit
            continue
        outputs.put(start, stop, result)
        del result
        if peak is None:  # measured by an enclosing probe, or another thread's
            start = stop
            if points:
                break  # fit what was measured
            why = "another peak measurement was under way"
            logger().info("map_batches: per-item cost from the input rows (%s)", why)
            cost = _input_rows(arrays, n, why)
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


def _fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """(bytes per item, fixed bytes) through the two largest probes.

    The largest, not the last: a last probe clipped to the few rows left
    would make a short, noisy baseline.
    """
    if not points:
        return 1.0, 0.0
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


def _pool_batch(
    pool: Pool,
    owner: Backend,
    arrays: tuple[Any, ...],
    cost: _Cost,
    overhead: float,
    floor: int,
    budget_gb: float | None,
) -> tuple[int, float]:
    """Rows per task on ``pool`` and the per-task budget (GB) they come from.

    The memory budget is a hard cap; within it, batches are no smaller than
    the cache ceiling makes them, or than a share of the rows giving
    `TASKS_PER_THREAD` tasks per worker thread, and no larger than an equal
    share per thread (so every thread gets work).
    """
    n = int(arrays[0].shape[0]) - cost.probe_rows

    def rows(gb: float) -> int:
        return max(floor, cost.rows_within(gb * BYTES_PER_GB, overhead))

    if budget_gb is not None:
        hard = soft = budget_gb
    else:
        measured = pool.task_budget_gb(sum(array_nbytes(a) for a in arrays))
        configured = configured_budget_gb()
        if configured is not None:  # a budget set here only lowers the workers'
            hard = soft = min(configured, measured)
        else:
            hard = min(measured, BATCH_WORKING_SET_CEILING_GB)
            ceiling = get_adapter(owner.library).batch_ceiling_bytes(owner.device)
            soft = hard if ceiling is None else min(hard, ceiling / BYTES_PER_GB)
    slots = pool.slots
    batch = min(rows(hard), max(rows(soft), -(-n // (slots * TASKS_PER_THREAD))))
    return max(floor, min(batch, -(-n // slots))), hard
