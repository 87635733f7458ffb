"""Out-of-memory detection, cache release and split-and-retry recovery."""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable
from typing import Any

from ._adapters import ADAPTERS
from ._args import check_count
from ._log import logger
from ._outputs import Outputs
from ._rows import Job, common_rows

__all__ = [
    "compute_oom_safe",
    "empty_device_cache",
    "is_oom_error",
    "release_after_oom",
    "run_split_on_oom",
]


def is_oom_error(exc: BaseException) -> bool:
    """True if ``exc`` is an out-of-memory error of any supported library.

    Recognises torch's ``OutOfMemoryError`` and OOM ``RuntimeError``s (CUDA,
    cuBLAS/cuSOLVER/cuFFT ``*_ALLOC_FAILED``, MPS, the CPU allocator), CuPy's
    ``OutOfMemoryError``, JAX's ``RESOURCE_EXHAUSTED`` and host
    ``MemoryError``s, anywhere in the ``__cause__``/``__context__`` chain or
    among the members of an exception group (``asyncio.TaskGroup``, trio
    nurseries).

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


def compute_oom_safe(fn: Callable[..., Any], *arrays: Any, min_chunk: int = 1) -> Any:
    """Run ``fn(*arrays)`` with reactive out-of-memory recovery.

    All arrays must share their axis-0 length, and ``fn`` must map them to an
    array (or a tuple, list or dict of arrays) whose axis 0 corresponds
    row-for-row to its inputs. On an OOM (`is_oom_error`) the failed
    attempt's frames are cleared, young garbage collected and device caches
    emptied, then the rows are split in half and each half retried
    (recursively). The result is allocated once on the host, from the first
    piece that succeeds, and every piece is copied into its rows. Each split
    is logged on the ``xpkit`` logger.

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
    if not callable(fn):
        msg = f"fn must be callable, got {fn!r}"
        raise TypeError(msg)
    floor = check_count("min_chunk", min_chunk)
    n = common_rows(arrays)
    outputs = Outputs(n, fn)
    run_split_on_oom(Job(fn), arrays, n, (0, n), floor, outputs)
    return outputs.value()


def run_split_on_oom(
    job: Job,
    arrays: tuple[Any, ...],
    n: int,
    span: tuple[int, int],
    min_chunk: int,
    outputs: Outputs,
) -> int | None:
    """`compute_oom_safe`'s loop over rows ``span`` of ``arrays``, into ``outputs``.

    Returns None when no OOM happened, else the row count of the largest
    chunk that succeeded after a split (what a caller can use as its batch
    size from now on).
    """
    first, last = span
    fitted: int | None = None
    split = False
    smallest_failed = last - first + 1
    pending = [span]
    while pending:
        start, stop = pending.pop()
        size = stop - start
        if size >= smallest_failed and size // 2 >= min_chunk:
            # A chunk this large already ran out of memory: split without trying.
            mid = start + size // 2
            pending += [(mid, stop), (start, mid)]
            continue
        try:
            # (The first put allocates the outputs: if they do not fit beside
            # this chunk's result, a smaller chunk is tried, as for any OOM.)
            result = job.run(arrays, start, stop, n, pad=not split)
            rows = outputs.take(result, start, stop)
            outputs.put(start, stop, rows)
        except BaseException as exc:
            rows = None
            result = None
            if not is_oom_error(exc) or size // 2 < min_chunk:
                raise
            # Drop the failed attempt's locals (its buffers) before retrying.
            traceback.clear_frames(exc.__traceback__)
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        else:
            rows = None
            result = None
            if split:
                fitted = max(fitted or 0, size)
            continue
        # Outside the except block: the exception and its frames are gone.
        split = True
        smallest_failed = min(smallest_failed, size)
        release_after_oom()
        mid = start + size // 2
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
