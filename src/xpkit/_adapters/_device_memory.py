"""What an adapter reports about a device's memory.

Free and total bytes (`MemoryInfo`), a limit the process runs under there
(`MemoryCap`), and how a reading is made and what it would cost
(`MemoryProbe`). A module of its own, below `_base` and the memory helpers
(``_nvml``, ``_torch_memory``), so that each imports it without the others.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["MemoryCap", "MemoryInfo", "MemoryProbe"]


class MemoryInfo(NamedTuple):
    """Free and total bytes of one device, as its library reports them."""

    free: int
    total: int


class MemoryCap(NamedTuple):
    """A limit on what this process may hold on one device, below its memory.

    ``limit`` bytes in all (an allocator fraction, a memory-pool limit, a
    preallocated arena); ``held`` of them in use now, counted as the limit
    counts them but without cached blocks the library reuses before it
    allocates more; ``source`` says where the limit comes from
    (``"PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.5"``).
    """

    limit: int
    held: int
    source: str

    @property
    def room(self) -> int:
        """Bytes the process may still allocate under the limit."""
        return max(self.limit - self.held, 0)


class MemoryProbe(NamedTuple):
    """How `Adapter.memory_info` would read one device, asked now.

    ``source`` names what it reads (``"NVML"``, ``"psutil"``, a library
    call); ``in_use`` is False for a device this process has not started
    using; ``context_cost`` is None when asking costs nothing, else the
    sentence that says what asking would do (create a driver context, which
    holds device memory, on a device the process does not use).
    """

    source: str
    in_use: bool = True
    context_cost: str | None = None
