"""The cost stage of `map_batches`: what ``fn`` costs, from the first source that knows.

1. The caller's ``bytes_per_item``.
2. The plan memory (`xpkit.plan_memory`): what a trace or probe found for a
   call with the same signature.
3. A tracer, which says what ``fn`` would allocate at any row count without
   running it for real: the shape-only trace, ``fn`` on arrays that have
   shapes and dtypes but no values, impersonating the backend's library and
   device (`xpkit._adapters._shapes`); then the library's own
   (`Adapter.library_tracer`: XLA's memory analysis of a jitted ``fn``, JAX's
   trace of one written with ``jax.numpy``). One trace at `TRACE_FIRST_ROWS` rows guesses
   the batch; three traces around the guess fit the cost's curve
   (`xpkit._cost_model.fit`), and the plan checks its batch size against
   the tracer itself (`Cost.exact`). Tracing computes nothing, allocates
   nothing of the data's size and touches nothing outside the call.
4. The probe, where no tracer can follow ``fn`` (it reads values, or calls
   what has no shape rule): ``fn`` runs on a few real rows, then on four
   times as many, under the first meter of the backend's adapter, each
   probe's rows part of the result (`xpkit._probe`).
5. The caller's ``fallback_bytes_per_item``, where nothing measures; else
   the bytes of one row of every input.

The cost's ``source`` (`BatchPlan.source`) names what found it, and why the
tracers before it could not follow ``fn``.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

from ._adapters._registry import adapter_for_array
from ._adapters._shapes._run import ShapeTracer, spans
from ._adapters._trace import CannotFollow, Profile, Tracer, WrappedArrays
from ._cost_model import Cost, fit
from ._dtypes import dtype_name, narrowed
from ._log import logger
from ._plan_memory import Learned, PlanMemory
from ._probe import input_rows, probe

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._outputs import Outputs
    from ._request import BatchRequest
    from ._typing import Array

__all__ = [
    "TRACES",
    "TRACE_FIRST_ROWS",
    "TRACE_OPERATIONS",
    "TRACE_OPERATION_BYTES",
    "cost_of",
]

#: Rows of the first trace (or ``min_batch``, if larger).
TRACE_FIRST_ROWS = 16
#: Most operations one trace may be predicted to make (a ``fn`` that loops
#: over its rows makes more with more rows; about 100,000 take a second):
#: larger row counts are left to the fitted curve.
TRACE_OPERATIONS = 50_000
#: Bytes a trace holds of its own per operation ``fn`` makes, at most: a
#: shape-only array that stays alive holds about 280 (its object, shape and
#: charge, as tracemalloc counts them for a loop of small arrays), with room
#: for Python's free lists. A trace whose operations would not fit the
#: budget at this rate is not made: its row count is left to the curve.
TRACE_OPERATION_BYTES = 384
#: Most traces of one plan (a compiler's analysis compiles ``fn`` for each).
TRACES = 12

#: (library, device, settings) -> the profile its traces impersonate.
_PROFILES: dict[tuple[str, str, Hashable], Profile | None] = {}


def cost_of(
    request: BatchRequest,
    outputs: Outputs,
    learned: Learned | None,
    budget_bytes: float,
    memory: PlanMemory,
) -> Cost:
    """The cost of ``request``'s ``fn``, from the first source that has one.

    A probe writes its rows into ``outputs``; a cost traced or measured now
    is taught to ``memory``.
    """
    if request.bytes_per_item is not None:
        return Cost(request.bytes_per_item, 0.0, "given")
    if learned is not None and learned.source:  # (a fit alone has no cost)
        return Cost(
            learned.bytes_per_item,
            learned.fixed_bytes,
            learned.recalled_as,
            squared=learned.squared_bytes,
            remembered=True,
            output_row_bytes=learned.output_row_bytes,
            rows_seen=learned.rows_seen,
        )
    if request.n == 0:
        return input_rows(request, "no rows to probe")
    reasons: list[str] = []
    cost = _traced(request, budget_bytes, reasons)
    if cost is None:
        cost = probe(request, outputs, budget_bytes, reasons)
        cost.output_row_bytes = outputs.row_bytes if cost.probe_rows else None
    if cost.source.startswith(("traced", "measured")):
        memory.learn_cost(
            request.key,
            Learned(
                bytes_per_item=cost.per_item,
                fixed_bytes=cost.fixed,
                source=cost.source,
                output_row_bytes=cost.output_row_bytes,
                alive=request.alive,
                squared_bytes=cost.squared,
                rows_seen=cost.rows_seen,
            ),
        )
        if cost.limit is not None:
            memory.learn_fit(request.key, cost.limit, request.alive)
    return cost


# -- tracers --------------------------------------------------------------------
def _traced(
    request: BatchRequest, budget_bytes: float, reasons: list[str]
) -> Cost | None:
    """The cost from the first tracer that follows ``fn`` (None: none does).

    Inputs whose rows are not contiguous (a Fortran-order array, a strided
    view) are not traced: the trace's inputs are contiguous, and a reshape
    of such rows copies them where a trace would count a view (12 times
    the budget was seen); the probe measures the real batches. The same
    for a whole operand that is not contiguous (7.5 times).
    """
    scattered = [i for i, a in enumerate(request.arrays) if not _rows_contiguous(a)]
    if scattered:
        reasons.append(
            f"arrays[{scattered[0]}] is not contiguous: a trace cannot tell "
            "where fn would copy its rows"
        )
        return None
    job = request.job
    for name, operand in (*enumerate(job.args), *job.kwargs.items()):
        if not _rows_contiguous(operand):  # (its shape-only stand-in is)
            reasons.append(
                f"whole operand {name} is not contiguous: a trace cannot tell "
                "where fn would copy it"
            )
            return None
    for tracer in _tracers(request):
        try:
            return _trace_cost(tracer, request, budget_bytes)
        except CannotFollow as exc:
            reasons.append(f"{tracer.name} could not follow fn: {exc}")
            logger().info("map_batches: %s", reasons[-1])
    return None


def _rows_contiguous(a: Array) -> bool:
    """Whether ``a``'s rows are contiguous, asked of its own library's adapter.

    ``a`` may be of another library than the request's (``backend=`` moves
    each batch): the target's adapter cannot read its layout.
    """
    adapter = adapter_for_array(a)
    return adapter is None or adapter.rows_contiguous(a)


def _tracers(request: BatchRequest) -> list[Tracer]:
    """The tracers of ``fn`` on the request's device: the shape-only trace, then the library's."""
    adapter, device = request.adapter, request.owner.device
    specs = _input_specs(request)
    if specs is None:
        return []
    job = request.job
    found: list[Tracer] = []
    profile = _profile(adapter, device)
    graph = None if profile is None else profile.graph
    blocks = spans(request.fn, request.arrays, (job.args, job.kwargs), graph)
    if profile is not None:
        copies = profile.slices_copy or (
            request.owner.is_gpu and job.backend is not None
        )  # (a move to a device copies the rows there)
        found.append(
            ShapeTracer(
                profile,
                request.fn,
                specs,
                job.args,
                job.kwargs,
                charge_inputs=copies,
                blocks=blocks,
            )
        )
    own = adapter.library_tracer(request.fn, specs, (job.args, job.kwargs), device)
    if isinstance(own, WrappedArrays):  # (its own code, over shape-only arrays)
        wrap, unwrap = own.wrap, own.unwrap
        own = ShapeTracer(
            own.profile,
            request.fn,
            specs,
            job.args,
            job.kwargs,
            wrap=wrap,
            unwrap=unwrap,
            charge_inputs=own.profile.slices_copy,
            name=own.name,
            weight=own.weight,
            blocks=blocks,
        )
    if own is not None:
        found.append(own)
    return found


def _profile(adapter: Adapter, device: str) -> Profile | None:
    """The profile of ``adapter``'s library on ``device`` (cached; None: no trace)."""
    key = (adapter.key, device, adapter.config_token())
    if key not in _PROFILES:
        try:
            _PROFILES[key] = adapter.shape_profile(device)
        except Exception:  # noqa: BLE001 - no trace for this library: measure instead
            logger().debug("no shape-only profile of %s", adapter.label, exc_info=True)
            _PROFILES[key] = None
    return _PROFILES[key]


def _input_specs(
    request: BatchRequest,
) -> tuple[tuple[tuple[int, ...], str], ...] | None:
    """Each input's row shape and dtype name, as ``fn`` sees it on the device.

    None where a row shape is not known (a lazy array's unknown chunks) or a
    dtype has no standard name: nothing traces such inputs.
    """
    held = request.adapter.held_dtypes(request.owner.device)
    specs = []
    for a in request.arrays:
        row = tuple(a.shape[1:])
        if not all(isinstance(d, int) for d in row):
            return None
        try:
            name = dtype_name(a.dtype) or "float64"
        except TypeError:
            return None
        specs.append((row, narrowed(name, held)))
    return tuple(specs)


class _Exact:
    """A tracer's peaks at any row count, remembered, within a bound of work.

    How much work a trace is grows with the operations ``fn`` makes, which
    the tracer counts (`Tracer.operations`): a ``fn`` that loops over its rows
    makes more with more rows, one that does not makes as many whatever the
    rows (a compiler's analysis counts one). The count at a row count is
    extrapolated from the traces so far, and a trace of more than
    `TRACE_OPERATIONS` operations is not made (None), nor one whose own
    objects (`TRACE_OPERATION_BYTES` an operation) would not fit
    ``budget_bytes`` (the plan stays within the budget it plans for), unless
    it is of fewer rows than one already made, nor more than `TRACES`
    traces in all: what the plan traces depends on
    ``fn``, the rows and the budget, never on how busy the machine is.
    """

    def __init__(self, tracer: Tracer, budget_bytes: float) -> None:
        self._tracer = tracer
        self._most_operations = min(
            TRACE_OPERATIONS, budget_bytes / TRACE_OPERATION_BYTES
        )
        self._seen: dict[int, int] = {}
        self._unknown: set[int] = set()
        self._operations: list[tuple[int, int]] = []

    def __call__(self, rows: int) -> int | None:
        """The peak of ``fn`` on ``rows`` rows; None where it is not known.

        Not known: the trace would be too much work, or the tracer could not
        follow ``fn`` at that row count (``fn`` may behave otherwise at
        other sizes; the real run shows what it does).
        """
        found = self._seen.get(rows)
        if found is not None or rows in self._unknown:
            return found
        if len(self._seen) >= TRACES:
            return None
        traced = max(self._seen, default=0)  # (fewer rows: no more work than it was)
        if self.operations(rows) > self._most_operations and rows > traced:
            return None
        try:
            return self.first(rows)
        except CannotFollow:
            self._unknown.add(rows)
            return None

    def first(self, rows: int) -> int:
        """A trace at ``rows`` rows (`CannotFollow` where it cannot follow fn)."""
        peak = self._tracer.peak(rows)
        self._operations.append((rows, self._tracer.operations))
        self._seen[rows] = peak
        return peak

    def operations(self, rows: int) -> float:
        """The operations a trace of ``rows`` rows is predicted to make."""
        if not self._operations:
            return 0.0
        if len(self._operations) == 1:  # per row, the cautious guess, until a second
            k, ops = self._operations[0]
            return ops * max(rows / max(k, 1), 1.0) if rows > 2 * k else ops
        ranked = sorted(self._operations)
        (k1, o1), (k2, o2) = ranked[0], ranked[-1]
        per_row = max((o2 - o1) / (k2 - k1), 0.0) if k2 > k1 else 0.0
        return max(o1 - per_row * k1, 0.0) + per_row * rows


def _trace_cost(tracer: Tracer, request: BatchRequest, budget_bytes: float) -> Cost:
    """The cost curve through three traces around the batch the budget allows."""
    n, floor = request.n, request.min_batch
    exact = _Exact(tracer, budget_bytes)
    first = min(n, max(floor, TRACE_FIRST_ROWS))
    peak = exact.first(first)
    points = [(first, float(peak))]
    second = exact(min(n, 2 * first))  # (and how its time grows with the rows)
    if second is not None:
        points.append((min(n, 2 * first), float(second)))
    guess = int(budget_bytes / request.overhead / max(peak / first, 1.0))
    guess = min(max(guess, floor), n)
    for rows in sorted({max(guess // 4, 1), max(guess // 2, 1), guess} - {first}):
        found = exact(rows)
        if found is not None:
            points.append((rows, float(found)))
    _beyond_flat(exact, points, n, budget_bytes / request.overhead)
    fixed, per_item, squared = fit(points)
    logger().info(
        "map_batches: traced by %s: %.4g bytes per item + %.4g fixed + %.4g per "
        "item squared, from traces of %s rows",
        tracer.name,
        per_item,
        fixed,
        squared,
        sorted(k for k, _ in points),
    )
    return Cost(
        per_item,
        fixed,
        f"traced by {tracer.name}",
        squared=squared,
        exact=exact,
        rows_seen=max(k for k, _ in points),
        output_row_bytes=tracer.output_row_bytes,
    )


def _beyond_flat(
    exact: _Exact, points: list[tuple[int, float]], n: int, limit: float
) -> None:
    """More traces, eight times the rows each, while the peak has not grown.

    A peak that the rows do not move (a whole operand's temporary, which
    every batch pays once) hides what they cost: a curve through it charged
    it to each row, and batches of one row in a hundred of what fitted ran
    (``x + (W * 2).sum(0)``). The rows grow until the peak does, passes
    ``limit`` or the rows run out (or the tracer cannot afford a trace).
    """
    ranked = sorted(points)
    while len(ranked) > 1 and ranked[-1][1] <= min(ranked[-2][1], limit):
        rows = min(n, 8 * ranked[-1][0])
        if rows == ranked[-1][0] or (found := exact(rows)) is None:
            break  # (every row traced, or no trace affordable)
        ranked.append((rows, float(found)))
    points[:] = ranked
