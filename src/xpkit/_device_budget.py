"""`device_memory_budget`: the memory budget of a `Backend`'s device.

The public face of `xpkit._memory`'s budgets, which know devices through
the adapters only: this checks that it was given a Backend, then asks
`xpkit._memory.batch_budgets`.
"""

from __future__ import annotations

from ._args import check_gb
from ._backend import Backend
from ._memory import batch_budgets
from ._shown import shown

__all__ = ["device_memory_budget"]


def device_memory_budget(
    backend: Backend | None = None,
    max_gpu_memory_gb: float | None = None,
    *,
    cap_for_batching: bool = False,
) -> float:
    """Usable memory budget in GB for a backend's device.

    An explicit ``max_gpu_memory_gb`` always wins, uncapped; then a budget
    set by an enclosing `memory_budget` block, then the
    ``XPKIT_MEMORY_BUDGET_GB`` environment variable (both uncapped). Otherwise
    the budget is measured at call time, with `HEADROOM`: the device's free memory
    as its library reports it (CUDA ``mem_get_info`` or CuPy ``memGetInfo``
    plus pool-cached bytes; MPS recommended working set minus driver-held
    memory; JAX ``memory_stats()``), else available host RAM honouring the
    process's cgroup limit (a host reading is reused for
    `HOST_READING_REUSED_FOR` seconds). Measuring host memory never imports a
    GPU library. Where the process runs under a cap on the device (torch's per-process
    memory fraction, set in code or in ``PYTORCH_CUDA_ALLOC_CONF``; CuPy's
    pool limit or ``CUPY_GPU_MEMORY_LIMIT``; JAX's arena, sized by
    ``XLA_CLIENT_MEM_FRACTION``), the budget is measured from the smaller of
    the free memory and the cap less what the process holds under it
    (`xpkit info` shows the cap and where it came from). A CUDA device this
    process has no context on is read through NVML where ``nvidia-ml-py``
    is installed, so that measuring it does not create one.
    Host usage excludes the cgroup's reclaimable (inactive) page cache. When
    nothing can be measured the conservative `FALLBACK_BUDGET_GB` applies; a
    device with nothing free gets `MIN_BUDGET_GB`.

    Parameters
    ----------
    backend : Backend, optional
        The backend whose device the work runs on. None means the host (CPU).
    max_gpu_memory_gb : float, optional
        Explicit budget override in GB; a finite positive number.
    cap_for_batching : bool, default False
        The budget `map_batches` sizes batches from: a measured budget capped
        at `BATCH_WORKING_SET_CEILING_GB` and, on CPU devices, at
        `HOST_BATCH_WORKING_SET_BYTES` (16 MiB, half a typical last-level
        cache: past it, bigger batches only add cache misses, allocation and
        page-fault cost). Never applied to an explicit or configured budget.

    Returns
    -------
    float
        Budget in GB.

    Raises
    ------
    ValueError
        ``max_gpu_memory_gb`` (or ``XPKIT_MEMORY_BUDGET_GB``) is not a finite
        positive number.
    TypeError
        ``backend`` is not a Backend (or None), or a flag has the wrong type.

    Examples
    --------
    >>> import xpkit
    >>> xpkit.device_memory_budget(max_gpu_memory_gb=3.0)  # explicit wins
    3.0
    >>> 0 < xpkit.device_memory_budget() < 10_000  # measured: host RAM in GB
    True
    """
    if backend is not None and not isinstance(backend, Backend):
        msg = f"backend must be a Backend or None, got {shown(backend)}"
        raise TypeError(msg)
    if not isinstance(cap_for_batching, bool):  # (before any other answer)
        msg = f"cap_for_batching must be a bool, got {shown(cap_for_batching)}"
        raise TypeError(msg)
    if max_gpu_memory_gb is not None:
        return check_gb("max_gpu_memory_gb", max_gpu_memory_gb)
    measured, capped = batch_budgets(backend)
    return capped if cap_for_batching else measured
