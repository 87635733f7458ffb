"""Adapter for Dask arrays (lazy, host memory)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import array_api_compat
import numpy as np

from ._base import Adapter
from ._peak import PeakMeter, tracemalloc_meter

__all__ = ["DaskAdapter"]


class DaskAdapter(Adapter):
    """Dask through ``array_api_compat.dask.array``.

    Everything stays lazy; `to_numpy` is the one place that computes.
    """

    key = "dask"
    module = "dask"
    extra = "dask"
    label = "Dask"

    def namespace(self) -> ModuleType:
        """``array_api_compat.dask.array``."""
        import array_api_compat.dask.array as xp

        return xp

    def owns(self, x: object) -> bool:
        """``dask.array.Array`` instances."""
        return bool(array_api_compat.is_dask_array(x))

    def device_key(self, x: Any) -> Any:  # noqa: ARG002
        """Dask arrays live on the (lazy) CPU."""
        return None

    def native_device_key(self, native: Any) -> Any:  # noqa: ARG002
        """Dask arrays all live on the (lazy) CPU."""
        return None

    def to_numpy(self, x: Any) -> np.ndarray[Any, Any]:
        """Compute the graph and return the NumPy result."""
        return np.asarray(x.compute())

    #: A lazy graph: a result is assembled on the host, then wrapped.
    writable_rows = False

    def peak_meter(self, device: str) -> PeakMeter | None:  # noqa: ARG002
        """`tracemalloc`: the chunks are NumPy arrays, computed on the host."""
        return tracemalloc_meter()

    def is_oom(self, exc: BaseException) -> bool:
        """A chunk's own host-memory error."""
        return isinstance(exc, MemoryError)
