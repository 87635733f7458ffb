"""`iter_batches`: `map_batches`' batches handed to the caller one by one.

The same request, cost, plan and run as `map_batches` (`xpkit._batches`),
with outputs that keep nothing (`xpkit._outputs.Outputs` with ``stream``):
each batch's rows, checked as `map_batches` checks them, are yielded as
``(rows, result)`` in the order of the rows, and released once the caller
moves on. The form for reductions (a top-k per row, sums, histograms) and
for writing into stores xpkit does not know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._batches import _costed_plan, _log_plan, pool_steps
from ._local import each_batch_here
from ._outputs import Outputs
from ._request import BatchCall, batch_request

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from ._backend import Backend
    from ._request import BatchRequest
    from ._typing import Array, DaskClient, UserFunction, UserResult

__all__ = ["iter_batches"]


def iter_batches(
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
    pad: bool | None = None,
    fallback_bytes_per_item: float | None = None,
    remember: bool = True,
) -> Iterator[tuple[range, UserResult]]:
    """``fn``'s results batch by batch, ``(rows, result)``, in the order of the rows.

    `map_batches` without the outputs: the same planning (the trace or the
    probe, the budget, the plan memory), the same split-and-retry on an
    OOM and the same executors, but each batch's result (checked as
    `map_batches` checks it: one row per input row, the same structure,
    dtypes and row shapes in every batch; on the host as NumPy, or on the
    backend's device with ``result_on="device"``) is yielded with the
    `range` of input rows it holds, and nothing keeps it once the caller
    moves on. The ranges tile ``range(n)`` in order (a batch split after an
    OOM comes as its pieces; the probe's rows first). With an executor the
    tasks in flight keep running while the caller holds a batch, and those
    that finish out of order wait until the rows before them are yielded;
    they count against the executor's tasks in flight, so that at most
    that many wait. Closing the generator early (``break``) cancels what is
    left. ``result`` is ``fn``'s own (a view of the input where ``fn``
    returns one, as ``map_batches`` never does), save where ``fn`` ran
    again before it was yielded (the probe's rows, the pieces of an OOM
    split, a task that finished in this process while the caller held
    another): a copy then, so that a ``fn`` that reuses a buffer does not
    overwrite it.

    The arguments are checked when the generator is made, before any
    batch runs; ``fn`` first runs at the first ``next``. Zero rows yield
    nothing (``fn`` does not run).

    Parameters
    ----------
    fn, *arrays, backend, whole, bytes_per_item, overhead, budget_gb, min_batch, executor, result_on, pad, fallback_bytes_per_item, remember
        As for `map_batches`.

    Returns
    -------
    iterator of (range, result)
        For each batch, ``rows``, the `range` of its input rows (the
        result's axis 0), and ``result``, ``fn``'s result for them: an
        array, or a tuple, list or dict of arrays, in the structure ``fn``
        returns.

    Raises
    ------
    TypeError, ValueError
        As `map_batches` raises them for bad arguments (at the call) and
        for a result that breaks the rows or changes between batches.
    MemoryError
        A batch of ``min_batch`` rows still runs out of memory.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> x = np.arange(10.0)[:, None]
    >>> total = 0.0
    >>> for rows, result in xpkit.iter_batches(
    ...     lambda r: r * 2.0, x, bytes_per_item=8, budget_gb=32 / 2**30
    ... ):
    ...     total += float(result.sum())
    >>> total
    90.0
    """
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
        pad,
        fallback_bytes_per_item,
        remember,
    )
    request = batch_request(call, "iter_batches")
    return _batches_of(request)


def _batches_of(request: BatchRequest) -> Iterator[tuple[range, UserResult]]:
    """The checked call's batches, in the order of their rows."""
    if request.n == 0:
        return
    outputs = Outputs(
        request.n, request.fn, request.owner, request.result_on, stream=True
    )
    cost, plan = _costed_plan(request, outputs)  # (the probe's rows: pieces)
    if request.pad:
        request.job.pad_to = plan.batch_size
    _log_plan(request, plan)
    in_order = _InOrder(outputs)
    yield from in_order.ready()
    if plan.probe_rows >= request.n:
        return
    steps = (
        each_batch_here(request, outputs, plan, cost, None, None)
        if request.pool is None
        else pool_steps(request, outputs, plan, None, in_order.held)
    )
    try:
        for _ in steps:
            yield from in_order.ready()
    finally:
        steps.close()  # (closed early: what is in flight is abandoned)


class _InOrder:
    """The pieces of ``outputs`` (`Outputs.pieces`), handed on in the order of their rows."""

    def __init__(self, outputs: Outputs) -> None:
        self._outputs = outputs
        self._waiting: dict[int, tuple[range, UserResult]] = {}
        self._at = 0  # the first row not yet handed on

    def held(self) -> int:
        """Pieces that came before the rows ahead of them (they wait here)."""
        return len(self._waiting)

    def ready(self) -> Iterator[tuple[range, UserResult]]:
        """The pieces that came, from the first row not yet handed on, while they follow."""
        waiting = self._waiting
        for piece in self._outputs.pieces():
            waiting[piece[0].start] = piece
        while self._at in waiting:
            piece = waiting.pop(self._at)
            self._at = piece[0].stop
            yield piece
            del piece  # (the caller's once it moves on)
