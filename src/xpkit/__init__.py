"""xpkit: write numerical code once, run it on every Array API library.

A typed `Backend` facade over the namespaces that ``array_api_compat``
resolves (NumPy, PyTorch, array-api-strict, CuPy, JAX, Dask), and one memory
layer that sizes work to the device and recovers from out-of-memory errors.
`Backend` is generic in its library's array type (``Backend("torch")`` is a
``Backend[torch.Tensor]`` to a type checker); `BackendName` is the
``Literal`` of the names it accepts.

``import xpkit`` loads the facade; the memory layer, selection and testing
tools load on first use (SPEC 1 lazy loading, through the explicit table
`_LAZY` below), so that importing xpkit costs little more than importing
NumPy and array_api_compat.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._adapters._types import BackendName
from ._at import At
from ._backend import BACKEND_NAMES, Backend
from ._current_rows import current_rows
from ._dtypes import PrecisionWarning
from ._version import __version__

if TYPE_CHECKING:
    from ._batches import compute_oom_safe, map_batches, plan_batches
    from ._device_budget import device_memory_budget
    from ._memory import (
        BATCH_WORKING_SET_CEILING_GB,
        FALLBACK_BUDGET_GB,
        HEADROOM,
        HOST_BATCH_WORKING_SET_BYTES,
        MIN_BUDGET_GB,
        MemoryCapWarning,
        auto_batch_size,
        auto_n_jobs_for_arrays,
        gb_to_bytes,
        memory_budget,
    )
    from ._oom import empty_device_cache, is_oom_error
    from ._plan import BatchPlan
    from ._plan_memory import PlanMemory, plan_memory
    from ._select import (
        AUTO_CPU_MAX_ELEMENTS,
        auto_select_backend,
        check_gpu_available,
        resolve_backend,
    )
    from ._stream import iter_batches
    from .testing import assert_array_almost_equal

__all__ = [
    "AUTO_CPU_MAX_ELEMENTS",
    "BACKEND_NAMES",
    "BATCH_WORKING_SET_CEILING_GB",
    "FALLBACK_BUDGET_GB",
    "HEADROOM",
    "HOST_BATCH_WORKING_SET_BYTES",
    "MIN_BUDGET_GB",
    "At",
    "Backend",
    "BackendName",
    "BatchPlan",
    "MemoryCapWarning",
    "PlanMemory",
    "PrecisionWarning",
    "__version__",
    "assert_array_almost_equal",
    "auto_batch_size",
    "auto_n_jobs_for_arrays",
    "auto_select_backend",
    "check_gpu_available",
    "compute_oom_safe",
    "current_rows",
    "device_memory_budget",
    "empty_device_cache",
    "gb_to_bytes",
    "is_oom_error",
    "iter_batches",
    "map_batches",
    "memory_budget",
    "plan_batches",
    "plan_memory",
    "resolve_backend",
]

#: Public name -> the module that defines it, imported on first access.
_LAZY = {
    "AUTO_CPU_MAX_ELEMENTS": "._select",
    "BATCH_WORKING_SET_CEILING_GB": "._memory",
    "BatchPlan": "._plan",
    "FALLBACK_BUDGET_GB": "._memory",
    "HEADROOM": "._memory",
    "HOST_BATCH_WORKING_SET_BYTES": "._memory",
    "MIN_BUDGET_GB": "._memory",
    "MemoryCapWarning": "._memory",
    "assert_array_almost_equal": ".testing",
    "auto_batch_size": "._memory",
    "auto_n_jobs_for_arrays": "._memory",
    "auto_select_backend": "._select",
    "check_gpu_available": "._select",
    "compute_oom_safe": "._batches",
    "device_memory_budget": "._device_budget",
    "empty_device_cache": "._oom",
    "gb_to_bytes": "._memory",
    "is_oom_error": "._oom",
    "iter_batches": "._stream",
    "map_batches": "._batches",
    "memory_budget": "._memory",
    "plan_batches": "._batches",
    "plan_memory": "._plan_memory",
    "PlanMemory": "._plan_memory",
    "resolve_backend": "._select",
}


def __getattr__(name: str) -> Any:
    if name == "testing":  # the subpackage, documented as xpkit.testing
        return importlib.import_module(".testing", __name__)
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'xpkit' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # found once: later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, "testing", *(n for n in globals() if n.startswith("__"))})
