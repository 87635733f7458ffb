"""CuPy's meter: its memory pool's allocations, followed by a thread-local hook.

``cupy.cuda.MemoryHook`` calls a hook entered in the calling thread for every
allocation and free of CuPy's memory pool (``malloc_postprocess``,
``free_postprocess``), with the pool's own block size (a multiple of 512
bytes). The meter counts what the call's thread allocates and frees on the
measured device, and its peak; other threads, and CuPy's statistics
(``MemoryPool.used_bytes``, ``total_bytes``), are left as they are. What a
library allocates outside CuPy's pool (cuBLAS's workspace, a raw
``cudaMalloc``) is not seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ._peak import PeakMeter

if TYPE_CHECKING:
    from .._typing import Value

__all__ = ["HookPeak"]

T = TypeVar("T")

#: The ``MemoryHook`` subclass, made on first use (CuPy imported).
_HOOK: list[type] = []


def _hook_type() -> type:
    if not _HOOK:
        from cupy.cuda.memory_hook import MemoryHook

        base_init: Callable[[Value], None] = MemoryHook.__init__

        def init(self: Value, device_id: int) -> None:
            base_init(self)
            self.device_id = device_id
            self.blocks = {}
            self.live = 0
            self.peak = 0

        def malloc_postprocess(self: Value, **kw: Value) -> None:
            if kw.get("device_id") != self.device_id:
                return
            size = int(kw["mem_size"])
            self.blocks[int(kw["mem_ptr"])] = size
            self.live += size
            self.peak = max(self.peak, self.live)

        def free_postprocess(self: Value, **kw: Value) -> None:
            self.live -= self.blocks.pop(int(kw["mem_ptr"]), 0)

        # (made with type(): the class exists only once CuPy is imported)
        hook = type(
            "CountingHook",
            (MemoryHook,),
            {
                "name": "xpkit",
                "__init__": init,
                "malloc_postprocess": malloc_postprocess,
                "free_postprocess": free_postprocess,
            },
        )
        _HOOK.append(hook)
    return _HOOK[0]


class HookPeak(PeakMeter):
    """What a call's thread takes from CuPy's memory pool on one device, at most."""

    process_wide = False
    cheap = True

    def __init__(self, device_id: int) -> None:
        self._device_id = device_id
        self.name = "CuPy memory hooks (the pool's blocks)"

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        hook = _hook_type()(self._device_id)
        with hook:
            result = run()
        return result, int(hook.peak)
