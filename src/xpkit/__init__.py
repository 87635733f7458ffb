"""xpkit: write numerical code once, run it on every Array API library.

A typed `Backend` facade over the namespaces that ``array_api_compat``
resolves (NumPy, PyTorch, array-api-strict, CuPy, JAX, Dask), and one memory
layer that sizes work to the device and recovers from out-of-memory errors.
"""

from ._backend import BACKEND_NAMES, Backend
from ._batches import map_batches
from ._dtypes import PrecisionWarning
from ._memory import (
    BATCH_WORKING_SET_CEILING_GB,
    MemoryCapWarning,
    auto_batch_size,
    auto_n_jobs_for_arrays,
    device_memory_budget,
    gb_to_bytes,
    memory_budget,
)
from ._oom import compute_oom_safe, empty_device_cache, is_oom_error
from ._select import auto_select_backend, check_gpu_available, resolve_backend
from ._version import __version__
from .testing import assert_array_almost_equal

__all__ = [
    "BACKEND_NAMES",
    "BATCH_WORKING_SET_CEILING_GB",
    "Backend",
    "MemoryCapWarning",
    "PrecisionWarning",
    "__version__",
    "assert_array_almost_equal",
    "auto_batch_size",
    "auto_n_jobs_for_arrays",
    "auto_select_backend",
    "check_gpu_available",
    "compute_oom_safe",
    "device_memory_budget",
    "empty_device_cache",
    "gb_to_bytes",
    "is_oom_error",
    "map_batches",
    "memory_budget",
    "resolve_backend",
]
