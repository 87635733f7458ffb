"""One adapter per array library, registered in the registry that finds them.

Adding a library means adding one module here and one entry in the
`register_adapters` call below. The layers above import the registry
(`xpkit._adapters._registry`) and the interface (`xpkit._adapters._base`),
never an adapter: this package plugs the seven adapters in.
"""

from __future__ import annotations

import os

from ._base import (
    CAPABILITIES,
    HOST_BATCH_WORKING_SET_BYTES,
    Adapter,
    FastOps,
)
from ._device_memory import MemoryInfo
from ._lazy_tags import LazyTags
from ._peak import after_fork_in_child, release_freed_host_memory
from ._registry import (
    ADAPTERS,
    adapter_for_array,
    get_adapter,
    register_adapters,
    to_host,
)
from .cupy import CupyAdapter
from .dask import DaskAdapter
from .jax import JaxAdapter
from .ndonnx import NdonnxAdapter
from .numpy import NumpyAdapter
from .strict import StrictAdapter
from .torch import TorchAdapter

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


register_adapters(  # (in the order a GPU is looked for by "gpu" / "auto")
    NumpyAdapter(),
    TorchAdapter(),
    StrictAdapter(),
    CupyAdapter(),
    JaxAdapter(),
    DaskAdapter(),
    NdonnxAdapter(),
)
if hasattr(os, "register_at_fork"):  # (a forked child measures itself: not on Windows)
    os.register_at_fork(after_in_child=after_fork_in_child)
