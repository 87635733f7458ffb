"""One adapter per array library, and the registry that finds them.

Adding a library means adding one module here and one entry in `ADAPTERS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._dtypes import register_dtype_spelling
from ._base import (
    CAPABILITIES,
    HOST_BATCH_WORKING_SET_BYTES,
    Adapter,
    FastOps,
    LazyTags,
)
from ._device_memory import MemoryInfo
from ._peak import release_freed_host_memory
from .cupy import CupyAdapter
from .dask import DaskAdapter
from .jax import JaxAdapter
from .ndonnx import NdonnxAdapter
from .numpy import NumpyAdapter
from .strict import StrictAdapter
from .torch import TorchAdapter

if TYPE_CHECKING:
    from .._typing import Array, HostArray

__all__ = [
    "ADAPTERS",
    "CAPABILITIES",
    "HOST_BATCH_WORKING_SET_BYTES",
    "Adapter",
    "FastOps",
    "LazyTags",
    "MemoryInfo",
    "adapter_for_array",
    "get_adapter",
    "release_freed_host_memory",
    "to_host",
]


def _registry(*adapters: Adapter) -> dict[str, Adapter]:
    """The adapters by key; each tells `xpkit._dtypes` how its dtypes are spelt.

    Facts flow down: ``_dtypes`` knows no library, and reads ``"torch.float32"``
    or a ``jnp`` prefix because the adapters registered them here.
    """
    for adapter in adapters:
        register_dtype_spelling(adapter.dtype_prefixes, adapter.dtype_repr_module)
    return {adapter.key: adapter for adapter in adapters}


#: Registry, in the order a GPU is looked for by ``"gpu"`` / ``"auto"``.
ADAPTERS: dict[str, Adapter] = _registry(
    NumpyAdapter(),
    TorchAdapter(),
    StrictAdapter(),
    CupyAdapter(),
    JaxAdapter(),
    DaskAdapter(),
    NdonnxAdapter(),
)

# Array type -> adapter; filled on first sight of each type.
_BY_TYPE: dict[type, Adapter] = {}


def get_adapter(key: str) -> Adapter:
    """The adapter registered under ``key`` (KeyError when unknown)."""
    return ADAPTERS[key]


def adapter_for_array(x: object) -> Adapter | None:
    """The adapter whose library ``x`` is an array of, or None.

    Looks only at already imported modules (never imports a library) and
    caches the answer per array type.
    """
    cls = type(x)
    found = _BY_TYPE.get(cls)
    if found is not None:
        return found
    for adapter in ADAPTERS.values():
        if adapter.owns(x):
            _BY_TYPE[cls] = adapter
            return adapter
    return None


def to_host(x: Array) -> HostArray:
    """An array of any supported library (or array-like) as NumPy.

    Zero-copy where the library allows it (NumPy, CPU torch tensors, CPU
    array-api-strict and JAX arrays); device arrays are copied to the host,
    lazy ones computed. The package's one conversion to the host.
    """
    adapter = adapter_for_array(x)
    return np.asarray(x) if adapter is None else adapter.to_numpy(x)
