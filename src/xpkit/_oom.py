"""Out-of-memory detection, cache release and split-and-retry recovery.

Recovery knows how to split a piece of work and run it again, and nothing
of what the work computes: `split_on_oom` calls back for each piece, and
the batching modules above (`map_batches`, `compute_oom_safe`) decide what
a piece does with its rows and where its results go.
"""

from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Callable, Iterator

from ._adapters._registry import ADAPTERS
from ._log import logger
from ._shown import said

__all__ = [
    "Piece",
    "UnsplittableMemoryError",
    "at_min_batch",
    "empty_device_cache",
    "is_oom_error",
    "release_after_oom",
    "split_on_oom",
    "splittable",
    "work_ran_out_of_memory",
]


class UnsplittableMemoryError(MemoryError):
    """Memory that no smaller piece of work would need less of.

    What xpkit raises when the outputs of a call cannot fit whatever the
    batch size: recovery re-raises it at once instead of splitting.
    """


def is_oom_error(exc: BaseException) -> bool:
    """True if ``exc`` is an out-of-memory error of any supported library.

    Recognises torch's ``OutOfMemoryError`` and OOM ``RuntimeError``s (CUDA,
    cuBLAS/cuSOLVER/cuFFT ``*_ALLOC_FAILED``, MPS, the CPU allocator), CuPy's
    ``OutOfMemoryError``, JAX's ``RESOURCE_EXHAUSTED`` and host
    ``MemoryError``s, anywhere in the ``__cause__``/``__context__`` chain, or
    in each member of an exception group (``asyncio.TaskGroup``, trio
    nurseries: a group that also holds a ``ValueError`` is not, as a smaller
    piece would not mend it, and a retry that ran would drop it). A
    ``KeyboardInterrupt``, ``SystemExit`` or ``GeneratorExit`` never is,
    even one raised while an OOM was handled. An exception whose message
    cannot be read (its ``__str__`` raises) is judged by its type alone.

    Parameters
    ----------
    exc : BaseException
        The exception to classify (with its chain and group members).

    Returns
    -------
    bool
        Whether some link is an out-of-memory signal of a supported library.

    Raises
    ------
    TypeError
        ``exc`` is not an exception.

    Examples
    --------
    >>> import xpkit
    >>> xpkit.is_oom_error(MemoryError())
    True
    >>> xpkit.is_oom_error(ValueError("bad shape"))
    False
    >>> try:
    ...     try:
    ...         raise MemoryError
    ...     except MemoryError as inner:
    ...         raise RuntimeError("while computing") from inner
    ... except RuntimeError as outer:
    ...     xpkit.is_oom_error(outer)
    True
    """
    if not isinstance(exc, BaseException):
        msg = f"exc must be an exception, got {exc!r}"
        raise TypeError(msg)
    return work_ran_out_of_memory(exc, None)


def work_ran_out_of_memory(exc: BaseException, handled: BaseException | None) -> bool:
    """`is_oom_error` of what some work raised, not of what its caller handled.

    ``handled`` is ``sys.exception()`` where the work started. Python makes
    the exception being handled the ``__context__`` of every exception
    raised meanwhile, so a bug of ``fn`` called inside the caller's ``except
    MemoryError:`` block (batching after a whole-array attempt ran out of
    memory) carries that ``MemoryError``: the walk stops at it, or ``fn``'s
    bug would be split and retried down to one row and then named an OOM.
    """
    if _stops(exc):
        return False  # (Ctrl-C or an exit while an OOM was handled: never retried)
    return _chain_oom(exc, handled)


def _chain_oom(exc: BaseException, handled: BaseException | None) -> bool:
    """Whether ``exc`` or its ``__cause__``/``__context__`` chain is an OOM.

    A group is one where each of its members is (with their chains): one
    member's OOM says nothing of another's ``ValueError``, which a retry
    that succeeds would drop; a group that is not one may still have an OOM
    in its own chain. Walked with a stack of its own, not by recursion (a
    group nested 500 deep, or 1,000 links that each fork into a cause and a
    context, raised RecursionError); a link met again (a cycle) adds nothing.
    """
    memo: dict[int, bool] = {}
    stack: list[_Walk] = []

    def opened(link: BaseException) -> bool | None:
        """Its verdict where known; else None, and its walk is on the stack."""
        if link is handled:
            return False
        if id(link) in memo:
            return memo[id(link)]
        memo[id(link)] = False  # (until known: a cycle back to it adds nothing)
        if isinstance(link, BaseExceptionGroup):  # asyncio.TaskGroup, trio nurseries
            stack.append(_Walk(link, True, iter(link.exceptions), True))
        else:
            stack.append(_Walk(link, False, iter(_links(link)), _signals(link)))
        return None

    found = opened(exc)
    if found is not None:
        return found
    while True:
        walk = stack[-1]
        if walk.found == walk.every:  # (not yet decided)
            nxt = next(walk.rest, None)
            if nxt is not None:
                verdict = opened(nxt)
                if verdict is not None:
                    walk.found = verdict
                continue
        if walk.every and not walk.found:  # (not every member: its own chain)
            walk.every, walk.rest = False, iter(_links(walk.link))
            continue
        memo[id(walk.link)] = walk.found
        stack.pop()
        if not stack:
            return walk.found
        stack[-1].found = walk.found


class _Walk:
    """One link of `_chain_oom`'s walk: the verdict so far and what is left to read.

    ``every``: a group's members are read, each must be an OOM (``found``
    starts True, and is decided once one is not); else its links, one of
    which may be (``found`` starts as its own signal, decided once True).
    """

    __slots__ = ("every", "found", "link", "rest")

    def __init__(
        self,
        link: BaseException,
        every: bool,
        rest: Iterator[BaseException],
        found: bool,
    ) -> None:
        self.link, self.every, self.rest, self.found = link, every, rest, found


def _links(link: BaseException) -> list[BaseException]:
    """``link``'s cause, then its context (not where ``raise ... from None``)."""
    context = None if link.__suppress_context__ else link.__context__
    cause = link.__cause__
    return [
        e for e in (cause, context if context is not cause else None) if e is not None
    ]


def _signals(link: BaseException) -> bool:
    """Whether one link is some library's OOM signal (its own chain aside).

    An exception whose ``__str__`` raises is read by type alone: the
    adapters that read the message see nothing there.
    """
    for adapter in ADAPTERS.values():
        try:
            found = adapter.is_oom(link)
        except Exception:  # noqa: BLE001 - (its message could not be read)
            found = False
        if found:
            return True
    return False


def splittable(exc: BaseException, handled: BaseException | None) -> bool:
    """Whether work that raised ``exc`` may run again in smaller pieces.

    An OOM of the work (`work_ran_out_of_memory`, ``handled`` as there),
    but not an `UnsplittableMemoryError`, which no smaller piece avoids.
    """
    if isinstance(exc, UnsplittableMemoryError):
        return False
    return work_ran_out_of_memory(exc, handled)


def _stops(exc: BaseException) -> bool:
    """Whether ``exc`` stops the program rather than failing (or a group holds one).

    ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` are no
    errors of the work: one raised while an out-of-memory error was handled
    (in its ``__context__``) still stops, and is never split and retried.
    """
    todo, seen = [exc], set()
    while todo:  # (a stack of its own: a group may nest hundreds deep)
        link = todo.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        if isinstance(link, BaseExceptionGroup):
            todo += link.exceptions
        elif not isinstance(link, Exception):
            return True
    return False


def empty_device_cache() -> None:
    """Release cached device memory of every library already imported.

    Runs ``gc.collect()``, then asks each imported library's adapter to empty
    its allocator caches (torch CUDA/MPS, CuPy device and pinned pools).
    Never imports a library, never initialises CUDA, never raises.

    Returns
    -------
    None

    Raises
    ------
    Nothing: a library that fails to release its cache is skipped.

    Examples
    --------
    >>> import xpkit
    >>> xpkit.empty_device_cache()  # a no-op where no GPU library is in use
    """
    gc.collect()
    _empty_caches()


def release_after_oom() -> None:
    """Free what a failed attempt left behind, cheaply, before its retry.

    The attempt's frames are already cleared (`traceback.clear_frames`), so
    reference counting has freed its buffers; a collection of the young
    generations catches cycles the attempt created (a full ``gc.collect()``
    costs 0.1-0.2 s with torch imported; `empty_device_cache` does that), then
    each imported library's allocator cache is emptied.
    """
    gc.collect(1)
    _empty_caches()


def _empty_caches() -> None:
    """Ask each imported library's adapter to empty its allocator caches."""
    for adapter in ADAPTERS.values():
        if not adapter.is_imported():
            continue
        try:
            adapter.empty_cache()
        except Exception:  # noqa: BLE001 - releasing a cache must never fail a run
            logger().debug("emptying the %s cache failed", adapter.label, exc_info=True)


#: One piece of work: rows ``start:stop``, and whether an OOM has split the
#: work already (a caller that pads the last batch does not pad halves).
def at_min_batch(
    caller: str,
    span: tuple[int, int],
    where: str,
    min_batch: int,
    error: BaseException,
    bytes_per_row: float | None = None,
) -> MemoryError:
    """The `MemoryError` of rows ``span`` that ran out of memory at ``min_batch``.

    It names the rows, what they needed where that is known
    (``bytes_per_row``, the overhead included) and ``error``, as the
    executors' name theirs; raise it from ``error``.
    """
    start, stop = span
    rows = stop - start
    need = (
        ""
        if bytes_per_row is None
        else f", about {rows * bytes_per_row / 2**20:.1f} MiB with the overhead"
    )
    msg = (
        f"{caller}: rows {start}:{stop} ({rows} rows{need}) could not run on "
        f"{where} even at min_batch={min_batch}: out of memory "
        f"({type(error).__name__}: {said(error)[:200]})"
    )
    return MemoryError(msg)


Piece = Callable[[int, int, bool], None]


def split_on_oom(
    run: Piece,
    span: tuple[int, int],
    min_chunk: int,
    at_floor: Callable[[int, int, BaseException], BaseException] | None = None,
    padded: Callable[[int, int], bool] | None = None,
) -> int | None:
    """Run ``run`` over rows ``span``, halving a piece that runs out of memory.

    ``run(start, stop, split)`` does the work for rows ``start:stop`` (and
    keeps its result: this knows nothing of results or rows). On an OOM
    (`is_oom_error`) the failed attempt's frames are cleared, outside the
    ``except`` block `release_after_oom` frees what it left, and the piece
    is split in half, each half run in turn (where half would be under
    ``min_chunk``: ``min_chunk`` rows, then the rest); a piece as large as
    one that failed is split before it is tried. At ``min_chunk`` rows or
    fewer the error is re-raised, or what ``at_floor(start, stop, error)``
    makes of it (raised from it). A piece whose first attempt ran padded
    (``padded(start, stop)``: ``run`` pads an unsplit piece) that runs out
    of memory runs once more on its own rows first, whatever its size; its
    success teaches no size (it was not split).

    Returns None when no OOM happened, else the row count of the largest
    piece that succeeded after a split (what a caller can use as its batch
    size from now on).
    """
    first, last = span
    fitted: int | None = None
    split = False
    smallest_failed = last - first + 1
    pending = [span]
    rerun = None  # (a padded piece that failed, run again on its own rows)
    while pending:
        start, stop = pending.pop()
        size = stop - start
        if size >= smallest_failed and size > min_chunk:
            # A piece this large already ran out of memory: split without trying.
            mid = start + max(size // 2, min_chunk)
            pending += [(mid, stop), (start, mid)]
            continue
        alone = False
        handled = sys.exception()  # (the caller's, if any: not the work's)
        try:
            run(start, stop, split)
        except BaseException as exc:
            if not splittable(exc, handled):
                raise
            alone = not split and padded is not None and padded(start, stop)
            if size <= min_chunk and not alone:
                if at_floor is None:
                    raise
                raise at_floor(start, stop, exc) from exc
            # Drop the failed attempt's locals (its buffers) before retrying.
            traceback.clear_frames(exc.__traceback__)
            reason = f"{type(exc).__name__}: {said(exc)[:200]}"
        else:
            if split and (start, stop) != rerun:  # (a rerun teaches no size)
                fitted = max(fitted or 0, size)
            continue
        # Outside the except block: the exception and its frames are gone.
        split = True
        release_after_oom()
        if alone:  # (padded, and failed: its own rows first, unpadded)
            logger().info(
                "out of memory on padded rows %d:%d: run unpadded", start, stop
            )
            rerun = (start, stop)
            pending.append(rerun)
            continue
        smallest_failed = min(smallest_failed, size)
        # In halves; where half is under min_chunk, min_chunk rows and the rest.
        mid = start + max(size // 2, min_chunk)
        logger().info(
            "out of memory on rows %d:%d (%d rows), retrying as %d + %d rows (%s)",
            start,
            stop,
            size,
            mid - start,
            stop - mid,
            reason,
        )
        pending += [(mid, stop), (start, mid)]
    return fitted
