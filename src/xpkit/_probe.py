"""The probe: ``fn`` run on a few real rows under a meter, where no tracer follows it.

The last source of a cost but the caller's fallback (`xpkit._cost`):
``fn`` runs on growing row ranges from row 0 under the first meter of the
backend's adapter (`Adapter.peak_meters`), each probe's rows part of the
result. The next probe is four times as many rows, never more than the
cost measured so far predicts to fit an eighth of the budget (from three
probes on, through a quadratic), and the last three probes fit the
curve (`xpkit._cost_model.fit`). A reading below one of fewer rows (a
sampled meter missed the peak) is measured once more, and the larger
stands. A meter whose library compiles per shape is warmed first: each
probe size runs once unmeasured.
"""

from __future__ import annotations

import math
import sys
import traceback
from typing import TYPE_CHECKING

from ._cost_model import Cost, fit
from ._log import logger
from ._memory import array_nbytes
from ._oom import at_min_batch, release_after_oom, splittable

if TYPE_CHECKING:
    from ._adapters._peak import PeakMeter
    from ._outputs import Outputs
    from ._request import BatchRequest
    from ._rows import Rows

__all__ = [
    "PROBE_BUDGET_SHARE",
    "PROBE_FIRST_ROWS",
    "PROBE_MAX_CALLS",
    "PROBE_POOL_SHARE",
    "input_rows",
    "probe",
]

#: Rows of the first probe (or ``min_batch``, if larger).
PROBE_FIRST_ROWS = 4
#: Most measured probe calls; each has at most four times the rows of the one before.
PROBE_MAX_CALLS = 6
#: A probe is never predicted to need more than this share of the budget.
PROBE_BUDGET_SHARE = 1 / 8
#: With an executor, the probe (run in this process) takes at most 1/8 of the rows.
PROBE_POOL_SHARE = 8


def input_rows(request: BatchRequest, why: str) -> Cost:
    """The caller's fallback estimate, else the bytes of one row of every input."""
    if request.fallback_bytes_per_item is not None:
        return Cost(request.fallback_bytes_per_item, 0.0, f"fallback ({why})")
    total = sum(array_nbytes(a) for a in request.arrays)
    per_item = max(total / max(request.n, 1), 1.0)
    return Cost(per_item, 0.0, f"input rows ({why})")


def _unfollowed(reasons: list[str]) -> str:
    """Why no tracer stands behind a measured cost, for its source."""
    return f" ({reasons[0][:160]})" if reasons else ""


def _next_rows(points: list[tuple[int, int]], rows: int, share_bytes: float) -> int:
    """The next probe's rows: four times as many, unless the cost so far says it won't fit.

    The prediction is the fitted curve from three points on; before, a power
    law through the last two (or proportional to the rows after one).
    """
    grown = 4 * rows
    if len(points) >= 3:
        fixed, per_item, squared = fit(points)
        affordable = Cost(per_item, fixed, "", squared=squared).rows_within(
            share_bytes, 1.0
        )
    else:
        k2, p2 = points[-1]
        exponent = 1.0
        if len(points) == 2:
            k1, p1 = points[-2]
            if p1 > 0 and p2 > p1 and k2 > k1:
                exponent = max(1.0, math.log(p2 / p1) / math.log(k2 / k1))
        per = max(p2, 1) / k2**exponent
        affordable = int((share_bytes / per) ** (1 / exponent))
    return max(min(grown, affordable), rows + 1)


def probe(
    request: BatchRequest, outputs: Outputs, budget_bytes: float, reasons: list[str]
) -> Cost:
    """Run ``fn`` on growing row ranges from row 0 under the device's first meter.

    At most an eighth of the rows on a pool (but always one probe). A meter
    that asks for warming runs each size once unmeasured, then measures it.
    """
    owner, n = request.owner, request.n
    meters = request.adapter.peak_meters(owner.device)
    if not meters:
        why = f"{owner.name} on {owner.device!r} has no peak-memory meter"
        if reasons:
            why += f", and {reasons[0][:160]}"
        cost = input_rows(request, why)
        logger().info("map_batches: per-item cost from the %s", cost.source)
        return cost
    meter = meters[0]
    share = budget_bytes * PROBE_BUDGET_SHARE
    most = n if request.pool is None else max(n // PROBE_POOL_SHARE, 1)
    points: list[tuple[int, int]] = []  # (rows, peak bytes)
    start, rows, limit = 0, max(min(PROBE_FIRST_ROWS, most), request.min_batch), None
    again = False  # (the last reading fell: its rows' count runs once more)
    while start < n and (len(points) < PROBE_MAX_CALLS or again):
        if points and start + rows > most:
            if again:
                break  # (too few rows left to measure the same count again)
            rows = most - start
            if rows < request.min_batch or rows < 1:
                break
        stop = min(start + rows, n)
        if meter.warm_up and start + 2 * (stop - start) > most:
            break  # no rows left to run this shape twice
        handled = sys.exception()  # (the caller's, if any: not fn's)
        try:
            if meter.warm_up:  # run this shape once unmeasured: it compiles
                _run_probe(request, outputs, start, stop, None)
                start, stop = stop, 2 * stop - start
            peak = _run_probe(request, outputs, start, stop, meter)
        except BaseException as exc:
            if not splittable(exc, handled):
                raise
            if stop - start <= request.min_batch:  # (no fewer rows to try)
                where = request.owner.name
                span, floor = (start, stop), request.min_batch
                raise at_min_batch(request.caller, span, where, floor, exc) from exc
            traceback.clear_frames(exc.__traceback__)
            failed = True
        else:
            failed = False
        if failed:
            release_after_oom()
            again = False
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
            cost = input_rows(request, why)
            logger().info("map_batches: per-item cost from the %s", cost.source)
            cost.probe_rows, cost.limit = stop, limit
            return cost
        if again:  # the same count of rows again: the larger reading stands
            points[-1] = (stop - start, max(points[-1][1], peak))
            again = False
        else:
            points.append((stop - start, peak))
            again = _fell(points)
        start = stop
        if limit is not None or (not again and len(points) >= 3 and peak >= share):
            break
        rows = points[-1][0] if again else _next_rows(points, points[-1][0], share)
    if not points:
        cost = input_rows(request, f"too few rows to measure with {meter.name}")
        cost.probe_rows = start
        return cost
    fixed, per_item, squared = fit(points)
    source = f"measured by {meter.name}{_unfollowed(reasons)}"
    logger().info(
        "map_batches: %s: %.4g bytes per item + %.4g fixed + %.4g per item squared, "
        "from probes of %s rows",
        source,
        per_item,
        fixed,
        squared,
        [r for r, _ in points],
    )
    return Cost(
        per_item,
        fixed,
        source,
        squared=squared,
        probe_rows=start,
        limit=limit,
        rows_seen=max(k for k, _ in points),
    )


def _fell(points: list[tuple[int, int]]) -> bool:
    """Whether the last reading is below one of fewer rows.

    A peak does not fall as the rows grow: a sampled meter missed part of
    it (under load its thread did not run while the peak stood; 6 rows read
    3.9 MB after 11 MB at 5, and the line through them planned one row at
    0.06 of its cost). The probe measures as many rows once more, and the
    larger reading stands (a sampled peak is missed, never made up). An
    exact meter reads the same again, at the cost of one more call.
    """
    rows, peak = points[-1]
    return any(k < rows and p > peak for k, p in points[:-1])


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
    outputs.put(start, stop, result, more=True)  # (more probes, or batches, follow)
    return peak
