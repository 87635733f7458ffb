"""The local loop of `map_batches`: batches one after the other, here.

The run stage of a call that has no executor: each batch runs through the
split-and-retry of `xpkit._oom.split_on_oom` and lands in the outputs
(`xpkit._outputs`). The first full batch is measured where a meter of a
real run can (`first_batch_meter`), and a batch over the budget makes the
rest smaller (`checked_batch`): the plan's trace or probe missed something
(a real allocation in ``fn`` that no operation on its arrays shows). After
an OOM the size that fitted holds for the rest of the call, and the plan
memory learns it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._adapters._peak import release_freed_host_memory
from ._into import chunk_rows, stop_at_chunk
from ._log import logger
from ._memory import BYTES_PER_GB, TRIM_ABOVE_BYTES
from ._oom import at_min_batch, split_on_oom
from ._plan_memory import GROW_AFTER, plan_memory

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from ._adapters._peak import PeakMeter
    from ._cost_model import Cost
    from ._outputs import Outputs
    from ._plan import BatchPlan
    from ._request import BatchRequest
    from ._rows import Rows
    from ._typing import ProgressBar

__all__ = [
    "CHECK_ABOVE_BYTES",
    "PAGE_BYTES",
    "checked_batch",
    "each_batch_here",
    "first_batch_meter",
    "stop_of_fn",
]

#: A batch over the budget by less than a page is within it (the host's
#: meters see memory in pages).
PAGE_BYTES = 4096
#: The host's sampled meter checks a first batch whose predicted peak is at
#: least this large (smaller ones hide in its pages and noise).
CHECK_ABOVE_BYTES = 4 * 1024**2


def stop_of_fn(exc: RuntimeError) -> StopIteration:
    """``fn``'s StopIteration that a loop of batches raised as ``exc``, to raise again.

    A generator turns a StopIteration raised in it into a RuntimeError
    (PEP 479), whose cause it is: ``fn``'s is raised as it was, as the
    calls that run no loop raise it. Any other RuntimeError is raised again.
    """
    if not isinstance(exc.__cause__, StopIteration):
        raise exc
    return exc.__cause__


def each_batch_here(
    request: BatchRequest,
    outputs: Outputs,
    plan: BatchPlan,
    cost: Cost,
    bar: ProgressBar | None,
    most: int | None,
) -> Generator[None, None, None]:
    """The local loop, batch by batch: it yields once each batch is in ``outputs``.

    Each batch is split on an OOM (`xpkit._oom.split_on_oom`).
    The first full batch is measured where a meter can (`first_batch_meter`):
    a batch over the budget makes the rest smaller (`checked_batch`). After
    an OOM the batch size is what fitted (and the plan memory learns it),
    and it never grows again in this call: no size that failed is tried
    twice. A batch size smaller than the planned one that an earlier call
    taught doubles after `GROW_AFTER` batches in a row at that size, up to
    the planned size, until a size runs out of memory. One smaller because
    this call ran out of memory already (its probe did, or the repeat it
    tried: ``most``, the most rows a batch may have), or because its first
    batch measured over the budget, stays.
    """
    job, arrays, n = request.job, request.arrays, request.n
    check = first_batch_meter(request, plan, cost)
    batch, planned = plan.batch_size, max(plan.planned_batch_size, plan.batch_size)
    if most is not None:
        batch = min(batch, most)
    if job.pad_to:  # (a last batch is padded to no more rows than the others)
        job.pad_to = batch
    at_floor = _at_min_batch(request, plan)
    # In a call that probed, a batch smaller than planned is what the probe's
    # OOM taught (or, rarely, a fit an earlier call taught without a cost):
    # either way it does not grow in this call.
    failed_here = most is not None or (plan.probe_rows > 0 and batch < planned)
    start, successes, growing = plan.probe_rows, 0, not failed_here

    def piece(s: int, e: int, split: bool) -> None:
        rows = outputs.take(job.run(arrays, s, e, n, pad=not split), s, e)
        outputs.put(s, e, rows, more=split)  # (a split's pieces: more runs follow)

    def padded(s: int, e: int) -> bool:
        """Whether rows ``s:e``, unsplit, ran padded (a short last batch)."""
        return bool(job.pad_to) and e - s < job.pad_to and e == n

    peaks: list[int | None] = []

    def measured(s: int, e: int, split: bool) -> None:
        """A piece whose ``fn`` (not the copy into the outputs) ``check`` measures."""

        def compute() -> Rows:
            return outputs.take(job.run(arrays, s, e, n, pad=not split), s, e)

        assert check is not None
        rows, peak = check.try_measure(compute)
        peaks.append(peak)
        outputs.put(s, e, rows, more=split)

    # Large host batches of a library whose threads keep freed memory hand it
    # back after each batch, so that the next batch's peak is not added to it.
    trim = (
        request.adapter.keeps_freed_host_memory
        and not request.owner.is_gpu
        and plan.batch_peak_bytes > TRIM_ABOVE_BYTES
    )
    chunk = 1 if request.out is None else chunk_rows(request.out)
    while start < n:
        stop = min(start + batch, n)
        if chunk > 1:  # (the first batch after the probe ends on a chunk's end)
            stop = stop_at_chunk(start, stop, n, chunk)
        span = (start, stop)
        if check is not None and stop - start == batch:
            fitted = split_on_oom(measured, span, request.min_batch, at_floor, padded)
            if fitted is None and peaks and peaks[0] is not None:
                batch = planned = checked_batch(request, plan, batch, peaks[0], check)
            check = None
        else:
            fitted = split_on_oom(piece, span, request.min_batch, at_floor, padded)
        if trim:
            release_freed_host_memory()
        if fitted is not None:  # (smaller than any piece that failed)
            logger().info(
                "map_batches: batch size %d -> %d after an OOM", batch, fitted
            )
            batch, growing = min(batch, fitted), False
            plan_memory.learn_fit(request.key, fitted, request.alive)
        elif batch < planned and growing:
            successes += 1
            if successes >= GROW_AFTER:
                batch, successes = min(2 * batch, planned), 0
                plan_memory.relax_fit(request.key, batch, planned)
        if job.pad_to:
            job.pad_to = batch
        if bar is not None:
            bar.update(stop - start)
        start = stop
        yield


def _at_min_batch(
    request: BatchRequest, plan: BatchPlan
) -> Callable[[int, int, BaseException], MemoryError]:
    """The error of rows that run out of memory at ``min_batch`` (`at_min_batch`)."""
    per_row = plan.bytes_per_item * plan.overhead

    def at_floor(start: int, stop: int, error: BaseException) -> MemoryError:
        return at_min_batch(
            request.caller,
            (start, stop),
            request.owner.name,
            request.min_batch,
            error,
            per_row,
        )

    return at_floor


def first_batch_meter(
    request: BatchRequest, plan: BatchPlan, cost: Cost
) -> PeakMeter | None:
    """The meter the first full batch is measured with, to check the plan (None: none).

    The first meter of a real run on the device (`Adapter.peak_meters`),
    where the cost was traced, remembered, measured on a few rows or is the
    input rows' (not given) and more than one batch follows; a meter that
    is not cheap (the host's, sampled) only where a batch's predicted peak
    is large enough to be seen (`CHECK_ABOVE_BYTES`).
    """
    if plan.n_batches < 2 or cost.source == "given":
        return None
    meters = request.adapter.peak_meters(request.owner.device)
    if not meters:
        return None
    meter = meters[0]
    if not meter.cheap and plan.batch_peak_bytes < CHECK_ABOVE_BYTES:
        return None
    return meter


def checked_batch(
    request: BatchRequest, plan: BatchPlan, batch: int, peak: int, meter: PeakMeter
) -> int:
    """The batch size after the first full batch measured ``peak`` bytes.

    Smaller where ``overhead * peak`` went over the budget (by more than a
    page): the rows scaled down by the excess, and the plan memory learns
    that size; else ``batch``.
    """
    budget = plan.budget_gb * BYTES_PER_GB
    if request.overhead * peak <= budget + PAGE_BYTES:
        return batch
    smaller = max(request.min_batch, int(batch * budget / (request.overhead * peak)))
    if smaller >= batch:
        return batch
    logger().info(
        "map_batches: the first batch of %d rows measured %.4g bytes by %s, over "
        "the %.4g-byte budget: batches of %d rows from now on",
        batch,
        peak,
        meter.name,
        budget,
        smaller,
    )
    plan_memory.learn_fit(request.key, smaller, request.alive)
    return smaller
