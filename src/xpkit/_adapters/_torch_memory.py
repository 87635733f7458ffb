"""torch's CUDA and XPU memory: free bytes, caps and contexts.

The torch adapter's memory questions for its two caching-allocator device
kinds, ``torch.cuda`` and ``torch.xpu`` (MPS answers in the adapter). Every
``torch.xpu`` lookup is guarded: torch builds may lack the module or parts of
it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from ._caps import alloc_conf_fraction
from ._device_memory import MemoryCap, MemoryInfo, MemoryProbe
from ._nvml import NVML_HINT, nvml, nvml_memory, nvml_name

__all__ = [
    "accelerator_cap",
    "accelerator_memory",
    "accelerator_probe",
    "device_name",
    "has_context",
    "is_torch_oom",
]

T = TypeVar("T")

#: Allocator-config variables torch 2.13 reads, first set wins (CUDA, ROCm).
_CUDA_CONF = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
_HIP_CONF = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


def _module(torch: ModuleType, kind: str) -> ModuleType | None:
    """``torch.cuda`` or ``torch.xpu``; None in builds without it."""
    mod: ModuleType | None = getattr(torch, kind, None)
    return mod


def _listed(torch: ModuleType, kind: str) -> ModuleType:
    """``torch.cuda`` or ``torch.xpu`` where torch listed a device of the kind."""
    mod: ModuleType = getattr(torch, kind)
    return mod


def _is_hip(torch: ModuleType) -> bool:
    return bool(getattr(getattr(torch, "version", None), "hip", None))


def has_context(torch: ModuleType, kind: str, index: int) -> bool:
    """Whether this process surely has a driver context on device ``index``.

    CUDA: torch's CUDA state is initialised and the driver reports a primary
    context there (CUDA builds), or torch's allocator holds memory there.
    Conservative: False when unsure, so that nothing else creates one.
    XPU devices have no per-device context that costs memory: True.
    """
    if kind != "cuda":
        return True
    cuda = _module(torch, "cuda")
    if cuda is None or not cuda.is_initialized():
        return False
    probe = getattr(getattr(torch, "_C", None), "_cuda_hasPrimaryContext", None)
    if probe is not None:
        # A CUDA error, or a torch whose private probe takes other arguments:
        # the allocator answers instead.
        with contextlib.suppress(RuntimeError, TypeError):
            return bool(probe(index))
    return int(cuda.memory_reserved(index)) > 0


def _current(torch: ModuleType, kind: str) -> int:
    """The current device's index (0 before torch initialised the kind)."""
    mod = _module(torch, kind)
    if mod is None or not mod.is_initialized():
        return 0
    return int(mod.current_device())


def _nvml_ok(torch: ModuleType, kind: str, index: int) -> MemoryInfo | None:
    """NVML's reading of a CUDA device without a context (not on ROCm)."""
    if kind != "cuda" or _is_hip(torch) or has_context(torch, kind, index):
        return None
    reading = nvml_memory(index)
    return None if reading is None else MemoryInfo(*reading)


def device_name(torch: ModuleType, kind: str, index: int) -> str:
    """The device's name: from NVML for a CUDA device without a context.

    (``torch.cuda.get_device_name`` initialises torch's CUDA state.)
    """
    if kind == "cuda" and not _is_hip(torch) and not has_context(torch, kind, index):
        name = nvml_name(index)
        if name is not None:
            return name
    return str(_listed(torch, kind).get_device_name(index))


def accelerator_probe(
    torch: ModuleType, kind: str, index: int, device: str
) -> MemoryProbe:
    """How `accelerator_memory` reads the device now, and what asking costs."""
    call = f"torch.{kind}.mem_get_info"
    if has_context(torch, kind, index):
        return MemoryProbe(f"{call} + caching allocator")
    in_use = index == _current(torch, kind)
    if _nvml_ok(torch, kind, index) is not None:
        return MemoryProbe("NVML", in_use)
    if _is_hip(torch):
        hint = "NVML does not read ROCm GPUs"
    elif nvml() is None:
        hint = NVML_HINT
    else:
        hint = "NVML cannot tell which GPU it is (set CUDA_DEVICE_ORDER=PCI_BUS_ID)"
    cost = (
        f"asking would create a CUDA context on {device} (hundreds of MB of its "
        f"memory); {hint}"
    )
    return MemoryProbe(call, in_use, cost)


def accelerator_memory(torch: ModuleType, kind: str, index: int) -> MemoryInfo:
    """Free/total bytes of a CUDA or XPU device.

    NVML for a CUDA device without a context, where it answers; otherwise
    the runtime's free memory plus the caching allocator's idle blocks.
    An XPU build without ``mem_get_info`` gives the device's total memory
    less what torch's allocator holds.
    """
    found = _nvml_ok(torch, kind, index)
    if found is not None:
        return found
    mod = _listed(torch, kind)
    idle = max(int(mod.memory_reserved(index)) - int(mod.memory_allocated(index)), 0)
    if hasattr(mod, "mem_get_info"):
        free, total = mod.mem_get_info(index)
        return MemoryInfo(free=int(free) + idle, total=int(total))
    total = int(mod.get_device_properties(index).total_memory)
    return MemoryInfo(
        free=max(total - int(mod.memory_allocated(index)), 0), total=total
    )


def accelerator_cap(
    torch: ModuleType, kind: str, index: int, total: Callable[[], int]
) -> MemoryCap | None:
    """The per-process memory fraction of torch's allocator, as a cap.

    The smaller of the fraction torch reports (only asked once torch has
    initialised the kind, which asking would otherwise do) and, on CUDA,
    the one the allocator config variable sets; the variable wins a tie, as
    the likelier source. ``total`` gives the device's bytes, asked only when
    there is a fraction below 1. ``held`` is what torch's allocator has
    allocated (its idle cached blocks are reused before the cap is met).
    """
    mod = _module(torch, kind)
    if mod is None:
        return None
    found: list[tuple[float, int, str]] = []
    if kind == "cuda":
        conf = alloc_conf_fraction(_HIP_CONF if _is_hip(torch) else _CUDA_CONF)
        if conf is not None:
            found.append((conf[0], 0, conf[1]))
    getter = getattr(mod, "get_per_process_memory_fraction", None)
    if getter is not None and mod.is_initialized():
        fraction = float(getter(index))
        found.append(
            (fraction, 1, f"torch.{kind}.set_per_process_memory_fraction({fraction:g})")
        )
    if not found:
        return None
    fraction, _, source = min(found)
    if fraction >= 1:
        return None
    held = int(mod.memory_allocated(index)) if mod.is_initialized() else 0
    return MemoryCap(limit=int(total() * fraction), held=held, source=source)


#: Messages of RuntimeErrors (incl. ``torch.AcceleratorError``) that mean OOM.
_OOM_MESSAGES = (
    "cuda out of memory",
    "cuda error: out of memory",
    "cublas_status_alloc_failed",
    "cusolver_status_alloc_failed",
    "cufft_alloc_failed",
    "hip out of memory",
    "hip error: out of memory",
    "defaultcpuallocator: can't allocate memory",
    "defaultcpuallocator: not enough memory",  # (Windows)
    "mps backend out of memory",
    "xpu out of memory",
    "ur_result_error_out_of_device_memory",
)


def is_torch_oom(exc: BaseException) -> bool:
    """``torch.OutOfMemoryError``, or a RuntimeError whose message means OOM."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    oom_type = getattr(torch, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(exc, oom_type):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(m in text for m in _OOM_MESSAGES)
