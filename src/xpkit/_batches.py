"""`map_batches`: memory-sized batches, each run with OOM recovery."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._log import logger
from ._memory import (
    _GB,
    _check_count,
    _check_positive,
    array_nbytes,
    auto_batch_size,
    configured_budget_gb,
    device_memory_budget,
)
from ._oom import common_rows, row_slices, run_split_on_oom, to_host

__all__ = ["batching_budget_gb", "map_batches"]


def map_batches(
    fn: Callable[..., Any],
    *arrays: Any,
    backend: Any = None,
    bytes_per_item: float | None = None,
    overhead: float = 1.0,
    budget_gb: float | None = None,
    min_batch: int = 1,
    progress: bool = False,
) -> np.ndarray[Any, Any]:
    """Map ``fn`` over row batches of ``arrays`` sized to the device's memory.

    The one call a library author needs for a batched computation: the
    per-item working set is estimated from the arrays' rows (unless given),
    batches are sized from the (capped) memory budget of the backend's device,
    each batch runs through `compute_oom_safe` (an OOM splits it and retries),
    and the results are concatenated on the host. After an OOM the remaining
    batches use the size that fitted, so one misjudged estimate costs one
    split, not one per batch.

    Parameters
    ----------
    fn : callable
        Maps row slices of ``arrays`` to an axis-0-aligned array (any
        supported library).
    *arrays : array
        Inputs sharing their axis-0 length (the items).
    backend : Backend or specifier, optional
        Whose device memory sizes the batches; by default the backend the
        arrays live on (`Backend.from_arrays`).
    bytes_per_item : float, optional
        Working set of one item in bytes; by default the bytes of one row of
        every input together.
    overhead : float, default 1.0
        Multiplier for ``fn``'s intermediate allocations.
    budget_gb : float, optional
        Memory budget in GB; by default the `memory_budget` in force, else
        ``XPKIT_MEMORY_BUDGET_GB``, else the measured budget capped for
        batching. On a CPU device a measured budget is also capped at
        ``HOST_BATCH_WORKING_SET_BYTES`` (64 MiB): past a few times the
        last-level cache, bigger batches only add allocation and page-fault
        cost (``benchmarks/bench_dispatch.py`` sweeps this).
    min_batch : int, default 1
        Smallest batch worth dispatching, and the size below which an OOM is
        fatal.
    progress : bool, default False
        Show a progress bar (tqdm; ``pip install 'xpkit[progress]'``).

    Returns
    -------
    numpy.ndarray
        ``fn``'s results for all rows, concatenated along axis 0.
    """
    from ._backend import Backend
    from ._select import resolve_backend

    if not callable(fn):
        msg = f"fn must be callable, got {fn!r}"
        raise TypeError(msg)
    if not isinstance(progress, bool):
        msg = f"progress must be a bool, got {progress!r}"
        raise TypeError(msg)
    n = common_rows(arrays)
    floor = _check_count("min_batch", min_batch)
    owner = (
        Backend.from_arrays(*arrays) if backend is None else resolve_backend(backend)
    )
    overhead = _check_positive("overhead", overhead)
    if bytes_per_item is None:
        per_item = max(sum(array_nbytes(a) for a in arrays) / max(n, 1), 1.0)
    else:
        per_item = _check_positive("bytes_per_item", bytes_per_item)
    if budget_gb is None:
        budget = batching_budget_gb(owner)
        # The throughput ceiling never makes the smallest batch impossible.
        budget = max(
            budget, min(per_item * overhead * floor / _GB, device_memory_budget(owner))
        )
    else:
        budget = _check_positive("budget_gb", budget_gb)
    if n == 0:
        return to_host(fn(*arrays))
    batch, n_batches = auto_batch_size(
        n, per_item, budget_gb=budget, overhead=overhead, min_batch=floor
    )
    logger().info(
        "map_batches: %d items in %d batches of %d (%.3g GB budget on %s)",
        n,
        n_batches,
        batch,
        budget,
        owner.name,
    )
    bar = _progress_bar(n) if progress else None
    pieces: list[np.ndarray[Any, Any]] = []
    start = 0
    try:
        while start < n:
            stop = min(start + batch, n)
            chunk = row_slices(arrays, start, stop, n)
            result, fitted = run_split_on_oom(fn, chunk, floor)
            pieces.append(result)
            if fitted is not None and fitted < batch:
                logger().info(
                    "map_batches: batch size %d -> %d after an OOM", batch, fitted
                )
                batch = fitted
            if bar is not None:
                bar.update(stop - start)
            start = stop
    finally:
        if bar is not None:
            bar.close()
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces, axis=0)


def batching_budget_gb(backend: Any) -> float:
    """The budget `map_batches` sizes batches from when none is given.

    The `memory_budget` in force or ``XPKIT_MEMORY_BUDGET_GB``; else the
    measured budget capped for batching and, on CPU devices, at the adapter's
    throughput ceiling (`Adapter.batch_ceiling_bytes`).
    """
    budget = device_memory_budget(backend, cap_for_batching=True)
    ceiling = backend._adapter.batch_ceiling_bytes(backend.device)
    if configured_budget_gb() is None and ceiling is not None:
        budget = min(budget, ceiling / _GB)
    return budget


def _progress_bar(total: int) -> Any:
    try:
        from tqdm.auto import tqdm
    except ImportError:
        msg = "progress=True needs tqdm: pip install 'xpkit[progress]'"
        raise ImportError(msg) from None
    return tqdm(total=total, unit="item", desc="xpkit", mininterval=0.5, leave=False)
