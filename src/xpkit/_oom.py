"""Out-of-memory detection, cache release and split-and-retry recovery.

Recovery knows how to split a piece of work and run it again, and nothing
of what the work computes: `split_on_oom` calls back for each piece, and
the batching modules above (`map_batches`, `compute_oom_safe`) decide what
a piece does with its rows and where its results go.
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable

from ._adapters._registry import ADAPTERS
from ._log import logger

__all__ = [
    "Piece",
    "UnsplittableMemoryError",
    "at_min_batch",
    "empty_device_cache",
    "is_oom_error",
    "release_after_oom",
    "split_on_oom",
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
    ``MemoryError``s, anywhere in the ``__cause__``/``__context__`` chain or
    among the members of an exception group (``asyncio.TaskGroup``, trio
    nurseries). A ``KeyboardInterrupt``, ``SystemExit`` or
    ``GeneratorExit`` never is, even one raised while an OOM was handled.

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
    if _stops(exc):
        return False  # (Ctrl-C or an exit while an OOM was handled: never retried)
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        link = todo.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        if any(adapter.is_oom(link) for adapter in ADAPTERS.values()):
            return True
        if isinstance(link, BaseExceptionGroup):  # asyncio.TaskGroup, trio nurseries
            todo += list(link.exceptions)
        # `raise X from None` means "not because of the earlier error".
        context = None if link.__suppress_context__ else link.__context__
        todo += [e for e in (link.__cause__, context) if e is not None]
    return False


def _stops(exc: BaseException) -> bool:
    """Whether ``exc`` stops the program rather than failing (or a group holds one).

    ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` are no
    errors of the work: one raised while an out-of-memory error was handled
    (in its ``__context__``) still stops, and is never split and retried.
    """
    if isinstance(exc, BaseExceptionGroup):
        return any(_stops(e) for e in exc.exceptions)
    return not isinstance(exc, Exception)


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
        f"({type(error).__name__}: {str(error)[:200]})"
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
        try:
            run(start, stop, split)
        except BaseException as exc:
            if not is_oom_error(exc) or isinstance(exc, UnsplittableMemoryError):
                raise
            alone = not split and padded is not None and padded(start, stop)
            if size <= min_chunk and not alone:
                if at_floor is None:
                    raise
                raise at_floor(start, stop, exc) from exc
            # Drop the failed attempt's locals (its buffers) before retrying.
            traceback.clear_frames(exc.__traceback__)
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
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
