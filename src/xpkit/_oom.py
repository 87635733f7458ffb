"""Out-of-memory detection, cache release and split-and-retry recovery."""

from __future__ import annotations

import gc
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ._adapters import ADAPTERS, adapter_for_array
from ._log import logger

__all__ = [
    "aligned",
    "common_rows",
    "compute_oom_safe",
    "empty_device_cache",
    "is_oom_error",
    "row_slices",
    "run_split_on_oom",
    "to_host",
]


def is_oom_error(exc: BaseException) -> bool:
    """True if ``exc`` is an out-of-memory error of any supported library.

    Recognises torch's ``OutOfMemoryError`` and OOM ``RuntimeError``s (CUDA,
    cuBLAS/cuSOLVER/cuFFT ``*_ALLOC_FAILED``, MPS, the CPU allocator), CuPy's
    ``OutOfMemoryError``, JAX's ``RESOURCE_EXHAUSTED`` and host
    ``MemoryError``s, anywhere in the ``__cause__``/``__context__`` chain.
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
        # `raise X from None` means "not because of the earlier error".
        context = None if link.__suppress_context__ else link.__context__
        todo += [e for e in (link.__cause__, context) if e is not None]
    return False


def empty_device_cache() -> None:
    """Release cached device memory of every library already imported.

    Runs ``gc.collect()``, then asks each imported library's adapter to empty
    its allocator caches (torch CUDA/MPS, CuPy device and pinned pools).
    Never imports a library, never initialises CUDA, never raises.
    """
    gc.collect()
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
    array whose axis 0 corresponds row-for-row to its inputs. On an OOM
    (`is_oom_error`) the failed attempt's frames are cleared, the garbage
    collected and device caches emptied, then the rows are split in half and
    each half retried (recursively); partial results are brought to the host
    and concatenated along axis 0. Each split is logged on the ``xpkit``
    logger.

    Splitting reuses the inputs already generated, so a seeded computation is
    recovered from the same data. For a row-independent ``fn`` the result
    matches the unsplit call to within floating-point reduction order.

    Parameters
    ----------
    fn : callable
        Maps the arrays (row slices of them) to an axis-0-aligned array.
    *arrays : array
        Inputs of any supported library, sharing their axis-0 length.
    min_chunk : int, default 1
        Chunk size below which an OOM is fatal: the original error is
        re-raised.

    Returns
    -------
    numpy.ndarray
        ``fn``'s result as a NumPy array, possibly assembled from chunks.
    """
    if not callable(fn):
        msg = f"fn must be callable, got {fn!r}"
        raise TypeError(msg)
    result, _ = run_split_on_oom(fn, arrays, _check_min_chunk(min_chunk))
    return result


def _check_min_chunk(min_chunk: Any) -> int:
    if isinstance(min_chunk, bool):
        msg = f"min_chunk must be an int, got {min_chunk!r}"
        raise TypeError(msg)
    try:
        min_chunk = operator.index(min_chunk)
    except TypeError:
        msg = f"min_chunk must be an int, got {min_chunk!r}"
        raise TypeError(msg) from None
    if min_chunk < 1:
        msg = f"min_chunk must be a positive int, got {min_chunk!r}"
        raise ValueError(msg)
    return int(min_chunk)


def run_split_on_oom(
    fn: Callable[..., Any], arrays: tuple[Any, ...], min_chunk: int
) -> tuple[np.ndarray[Any, Any], int | None]:
    """`compute_oom_safe`'s loop; also returns the largest chunk that fitted.

    The second value is None when no OOM happened, else the row count of the
    largest chunk that succeeded after a split (what a caller can use as its
    batch size from now on).
    """
    n = common_rows(arrays)
    pieces: list[np.ndarray[Any, Any]] = []
    fitted: int | None = None
    split = False
    smallest_failed = n + 1
    pending = [(0, n)]
    while pending:
        start, stop = pending.pop()
        size = stop - start
        if size >= smallest_failed and size // 2 >= min_chunk:
            # A chunk this large already ran out of memory: split without trying.
            mid = start + size // 2
            pending += [(mid, stop), (start, mid)]
            continue
        try:
            pieces.append(
                aligned(
                    to_host(fn(*row_slices(arrays, start, stop, n))), fn, stop - start
                )
            )
            if split:
                fitted = max(fitted or 0, stop - start)
            continue
        except BaseException as exc:
            if not is_oom_error(exc) or (stop - start) // 2 < min_chunk:
                raise
            # Drop the failed attempt's locals (its buffers) before retrying.
            import traceback

            traceback.clear_frames(exc.__traceback__)
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
        # Outside the except block: the exception and its frames are gone.
        split = True
        smallest_failed = min(smallest_failed, stop - start)
        empty_device_cache()
        mid = start + (stop - start) // 2
        logger().info(
            "out of memory on rows %d:%d (%d rows), retrying as %d + %d rows (%s)",
            start,
            stop,
            stop - start,
            mid - start,
            stop - mid,
            reason,
        )
        pending += [(mid, stop), (start, mid)]
    result = pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=0)
    return result, fitted


def aligned(result: np.ndarray[Any, Any], fn: Any, rows: int) -> np.ndarray[Any, Any]:
    """Check that ``fn`` kept axis 0 row-for-row, as splitting requires."""
    if result.ndim == 0 or result.shape[0] != rows:
        msg = (
            f"fn={fn!r} must return one row per input row (axis 0 of length {rows}), "
            f"got shape {result.shape}"
        )
        raise ValueError(msg)
    return result


def common_rows(arrays: tuple[Any, ...]) -> int:
    if not arrays:
        msg = "arrays must hold at least one array"
        raise ValueError(msg)
    lengths = []
    for i, a in enumerate(arrays):
        shape = getattr(a, "shape", None)
        if not shape:
            msg = f"arrays[{i}] must be an array with at least one axis, got {a!r:.80}"
            raise TypeError(msg)
        lengths.append(shape[0])
    if len(set(lengths)) != 1:
        msg = f"arrays must share their axis-0 length, got lengths {lengths}"
        raise ValueError(msg)
    n = lengths[0]
    if not isinstance(n, int):
        msg = f"arrays have an unknown axis-0 length ({n!r}); compute chunk sizes first"
        raise ValueError(msg)  # noqa: TRY004 - dask NaN length
    return n


def row_slices(
    arrays: tuple[Any, ...], start: int, stop: int, n: int
) -> tuple[Any, ...]:
    if start == 0 and stop == n:
        return arrays
    return tuple(a[start:stop, ...] for a in arrays)


def to_host(result: Any) -> np.ndarray[Any, Any]:
    adapter = adapter_for_array(result)
    return np.asarray(result) if adapter is None else adapter.to_numpy(result)
