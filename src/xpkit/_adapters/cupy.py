"""Adapter for CuPy (CUDA/ROCm GPUs)."""

from __future__ import annotations

import sys
from collections.abc import Hashable
from types import ModuleType
from typing import TYPE_CHECKING

import array_api_compat
import numpy as np

from ._base import Adapter
from ._caps import cupy_env_limit
from ._cupy_hooks import HookPeak
from ._device_memory import MemoryCap, MemoryInfo, MemoryProbe
from ._layout import Extent, Unshareable, dlpack_place, extent, native_layout
from ._nvml import NVML_HINT, nvml, nvml_memory
from ._top_k import partitioned_top_k
from ._trace import DtypeRules

if TYPE_CHECKING:
    from .._typing import Array, DType, HostArray, Namespace, NativeDevice
    from ._peak import PeakMeter
    from ._top_k import TopK
    from ._trace import Traits

__all__ = ["CupyAdapter"]

_ALLOC_FAILED = ("_alloc_failed", "cudaerrormemoryallocation", "hiperroroutofmemory")


def _cupy() -> ModuleType:
    import cupy

    module: ModuleType = cupy  # typed whether installed or not
    return module


class CupyAdapter(Adapter):
    """CuPy through ``array_api_compat.cupy``; devices ``"cuda"``, ``"cuda:N"``.

    CuPy has no CPU device: moving a CuPy array "to the CPU" gives a NumPy
    array.
    """

    key = "cupy"
    module = "cupy"
    extra = "cupy"
    label = "CuPy"
    dtype_prefixes = ("cupy", "cp")
    gpu_kinds = "CUDA"
    #: Its assignment copies elementwise on the device, unbuffered: an
    #: overlapping value is copied first (not verified on a GPU here).
    reads_overlapping_values = False
    device_kinds = ("cuda",)

    def memory_extent(self, x: Array) -> Extent | None:
        """Where ``x``'s elements lie on its GPU (``"cuda:<id>"``, as torch names it)."""
        data = getattr(x, "data", None)
        if data is None or not hasattr(data, "ptr"):
            return None
        place = dlpack_place(2, int(x.device.id))
        return extent(place, int(data.ptr), x.shape, x.strides, int(x.itemsize))

    def distributions(self) -> tuple[str, ...]:
        """CuPy ships as one wheel per CUDA/ROCm version."""
        return ("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x", "cupy-rocm-6-0")

    def namespace(self) -> ModuleType:
        """``array_api_compat.cupy``."""
        import array_api_compat.cupy as xp

        return xp

    def owns(self, x: object) -> bool:
        """``cupy.ndarray`` instances."""
        return bool(array_api_compat.is_cupy_array(x))

    def to_numpy(self, x: Array) -> HostArray:
        """Device-to-host copy (``cupy.asnumpy``, which `host_exits` watches)."""
        import cupy

        return np.asarray(cupy.asnumpy(x))

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """``cupy.asnumpy``; ``ndarray.get`` cannot be watched (a C type)."""
        import cupy

        return ((cupy, "asnumpy"),)

    #: CuPy arrays have no read-only flag.
    always_writable = True

    def unshareable(self, x: Array) -> Unshareable | None:
        """Negative or zero strides (reversed and broadcast views)."""
        for n, stride in zip(x.shape, x.strides, strict=True):
            if n > 1 and stride < 0:
                return Unshareable("has negative strides (a reversed view)", False)
            if n > 1 and stride == 0:
                return Unshareable("has zero strides (a broadcast view)", False)
        return None

    def contiguous_copy(self, x: Array) -> Array:
        """``x.copy(order="C")``, on its device."""
        return x.copy(order="C")

    def from_host(
        self, xp: Namespace, host: HostArray, dtype: DType, device: NativeDevice
    ) -> Array:
        """Host-to-device copy, from native byte order (CuPy has no swapped bytes)."""
        return xp.asarray(native_layout(host), dtype=dtype, device=device)

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """float16."""
        return frozenset({"float16"})

    def dtype_object(self, xp: Namespace, name: str) -> DType:
        """The namespace's dtype, or NumPy's (which CuPy takes)."""
        found = getattr(xp, name, None)
        return np.dtype(name) if found is None else found

    def to_cpu(self, x: Array) -> Array:
        """A NumPy array (CuPy has no CPU device)."""
        return self.to_numpy(x)

    def devices(self) -> tuple[str, ...]:
        """``"cuda"`` and ``"cuda:N"`` for each visible GPU; empty without one."""
        cupy = _cupy()
        try:
            n = int(cupy.cuda.runtime.getDeviceCount())
        except RuntimeError:  # CUDARuntimeError: no driver, or no device
            return ()
        return ("cuda", *(f"cuda:{i}" for i in range(n))) if n else ()

    def canonical_device(self, device: str) -> str:
        """``"cuda"`` means ``"cuda:0"``."""
        name = device.strip().lower()
        return "cuda:0" if name == "cuda" else name

    def native_device(self, device: str) -> NativeDevice:
        """A ``cupy.cuda.Device``."""
        return _cupy().cuda.Device(int(self.canonical_device(device).split(":")[1]))

    def device_str(self, native: NativeDevice) -> str:
        """``"cuda:N"``."""
        return f"cuda:{int(native.id)}"

    def device_key(self, x: Array) -> Hashable:
        """The device's index: ``cupy.cuda.Device`` objects are not hashable."""
        return int(x.device.id)

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """``cupy.argpartition`` and a sort of the k (as NumPy without ``top_k``)."""
        import cupy

        return partitioned_top_k(cupy, xp, x, k, axis, largest=largest)

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """The device's index, as `device_key` gives it for its arrays."""
        return int(native.id)

    def backend_name(self, device: str) -> str:
        """Always ``"cupy"``."""
        return "cupy"

    def is_gpu(self, device: str) -> bool:
        """Every CuPy device is a GPU."""
        return True

    def device_name(self, device: str) -> str:
        """The GPU's name from the CUDA runtime."""
        cupy = _cupy()
        index = int(self.canonical_device(device).split(":")[1])
        props = cupy.cuda.runtime.getDeviceProperties(index)
        name = props.get("name", b"CUDA device")
        return name.decode() if isinstance(name, bytes) else str(name)

    def _index(self, device: str) -> int:
        return int(self.canonical_device(device).split(":")[1])

    def _has_context(self, index: int) -> bool:
        """The current device once CuPy's pool holds memory there.

        Conservative: CuPy cannot say whether another device has a context
        without making it current (which creates one), so only the device
        CuPy is using and has allocated on counts.
        """
        cupy = _cupy()
        if int(cupy.cuda.runtime.getDevice()) != index:
            return False
        return int(cupy.get_default_memory_pool().total_bytes()) > 0

    def _nvml_reading(self, index: int) -> MemoryInfo | None:
        if bool(getattr(_cupy().cuda.runtime, "is_hip", False)):
            return None
        reading = None if self._has_context(index) else nvml_memory(index)
        return None if reading is None else MemoryInfo(*reading)

    def memory_probe(self, device: str) -> MemoryProbe:
        """NVML for a device CuPy has not used, where installed; else ``memGetInfo``."""
        index = self._index(device)
        if self._has_context(index):
            return MemoryProbe("cupy memGetInfo + memory pool")
        in_use = int(_cupy().cuda.runtime.getDevice()) == index
        if self._nvml_reading(index) is not None:
            return MemoryProbe("NVML", in_use)
        hint = NVML_HINT if nvml() is None else "NVML cannot tell which GPU it is"
        cost = (
            f"asking would create a CUDA context on {self.canonical_device(device)} "
            f"(hundreds of MB of its memory); {hint}"
        )
        return MemoryProbe("cupy memGetInfo", in_use, cost)

    def memory_info(self, device: str) -> MemoryInfo | None:
        """``memGetInfo`` plus the free bytes held by CuPy's memory pool.

        A device CuPy has not used is read through NVML where ``nvidia-ml-py``
        is installed (``memGetInfo`` would create a context there).
        """
        found = self._nvml_reading(self._index(device))
        if found is not None:
            return found
        cupy = _cupy()
        with self.native_device(device):
            free, total = cupy.cuda.runtime.memGetInfo()
            pooled = cupy.get_default_memory_pool().free_bytes()
        return MemoryInfo(free=int(free) + int(pooled), total=int(total))

    def memory_cap(self, device: str) -> MemoryCap | None:
        """The memory pool's limit (``MemoryPool.set_limit``, ``CUPY_GPU_MEMORY_LIMIT``).

        Read from the device's pool where `memory_info` enters the device
        anyway; on a device read through NVML, from the environment variable
        (which sets every device's pool when CuPy creates it). ``held`` is
        the pool's used bytes (its free blocks are reused first).
        """
        reading = self._nvml_reading(self._index(device))
        if reading is not None:
            found = cupy_env_limit(reading.total)
            return None if found is None else MemoryCap(found[0], 0, found[1])
        cupy = _cupy()
        with self.native_device(device):
            pool = cupy.get_default_memory_pool()
            limit, held = int(pool.get_limit()), int(pool.used_bytes())
            if not limit:  # 0: no limit
                return None
            total = int(cupy.cuda.runtime.memGetInfo()[1])
        env = cupy_env_limit(total)
        if env is not None and env[0] == limit:
            return MemoryCap(limit, held, env[1])
        return MemoryCap(limit, held, f"cupy MemoryPool.set_limit({limit})")

    numpy_dtypes = True

    def shape_traits(self, device: str) -> Traits | None:
        """NumPy's views and promotion, in the memory pool's 512-byte blocks."""
        return {"granule": 512, "dtype_rules": DtypeRules(numpy_tables=True)}

    def peak_meters(self, device: str) -> tuple[PeakMeter, ...]:
        """The memory pool's blocks the call's thread takes (`HookPeak`)."""
        return (HookPeak(self._index(device)),)

    def empty_cache(self) -> None:
        """Free the device and pinned memory pools, only if CuPy is in use."""
        cupy = sys.modules.get("cupy")
        if cupy is None:
            return
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def is_oom(self, exc: BaseException) -> bool:
        """CuPy's ``OutOfMemoryError`` and its ``*_ALLOC_FAILED`` errors."""
        memory = sys.modules.get("cupy.cuda.memory")
        oom_type = getattr(memory, "OutOfMemoryError", None)
        if oom_type is not None and isinstance(exc, oom_type):
            return True
        module = type(exc).__module__ or ""
        if not module.startswith(("cupy", "cupy_backends")):
            return False
        text = str(exc).lower()
        return any(m in text for m in _ALLOC_FAILED)
