"""Free and total memory of NVIDIA GPUs through NVML, without a CUDA context.

Asking the CUDA runtime (``cudaMemGetInfo``, which ``torch.cuda.mem_get_info``
and CuPy's ``memGetInfo`` call) creates a context on the device it asks, and
a context holds hundreds of MB of device memory. NVML, the library behind
``nvidia-smi`` (Python bindings: the optional ``nvidia-ml-py`` package,
module ``pynvml``), answers without one. The torch and CuPy adapters read
devices their process does not use through here.

A CUDA device index is the position in ``CUDA_VISIBLE_DEVICES`` (all devices
when unset) in CUDA's order; NVML counts physical devices in PCI bus order.
The two agree when ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or when every GPU is the
same model (CUDA's default, fastest first, then orders by PCI bus); otherwise,
and for MIG instances, no NVML answer is given rather than a wrong one.
"""

from __future__ import annotations

import os
import weakref
from types import ModuleType

__all__ = ["NVML_HINT", "nvml", "nvml_memory", "nvml_name"]

#: What to install for context-free memory readings.
NVML_HINT = "install nvidia-ml-py (pip install 'xpkit[nvml]') to read it through NVML"

# pynvml module -> whether nvmlInit succeeded (once per module object).
_initialised: weakref.WeakKeyDictionary[ModuleType, bool] = weakref.WeakKeyDictionary()


def nvml() -> ModuleType | None:
    """``pynvml``, initialised; None when it is missing or finds no driver."""
    try:
        import pynvml
    except ImportError:
        return None
    ok = _initialised.get(pynvml)
    if ok is None:
        try:
            pynvml.nvmlInit()
            ok = True
        except pynvml.NVMLError:  # no driver, no NVML library
            ok = False
        _initialised[pynvml] = ok
    return pynvml if ok else None


def nvml_memory(index: int) -> tuple[int, int] | None:
    """``(free, total)`` bytes of CUDA device ``index`` from NVML, or None.

    None when NVML is missing or fails, or when which physical device the
    index means cannot be told for sure.
    """
    lib = nvml()
    if lib is None:
        return None
    try:
        handle = _handle(lib, index)
        if handle is None:
            return None
        memory = lib.nvmlDeviceGetMemoryInfo(handle)
        return int(memory.free), int(memory.total)
    except lib.NVMLError:  # a lost GPU, a call the driver lacks: no answer
        return None


def nvml_name(index: int) -> str | None:
    """The name NVML gives CUDA device ``index``, or None (as `nvml_memory`)."""
    lib = nvml()
    if lib is None:
        return None
    try:
        handle = _handle(lib, index)
        return None if handle is None else _text(lib.nvmlDeviceGetName(handle))
    except lib.NVMLError:  # a lost GPU, a call the driver lacks: no answer
        return None


def _handle(lib: ModuleType, index: int) -> object:
    """The NVML handle of CUDA device ``index``, or None when unsure."""
    if index < 0 or not _same_order(lib):
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return lib.nvmlDeviceGetHandleByIndex(index)
    entries = []
    for raw in visible.split(","):  # CUDA stops at the first entry it cannot read
        entry = raw.strip()
        if not (entry.isdigit() or entry.startswith("GPU-")):
            break
        entries.append(entry)
    if index >= len(entries):
        return None
    entry = entries[index]
    if entry.startswith("GPU-"):
        return lib.nvmlDeviceGetHandleByUUID(entry)
    return lib.nvmlDeviceGetHandleByIndex(int(entry))


def _same_order(lib: ModuleType) -> bool:
    """Whether CUDA and NVML number the GPUs alike (see the module's notes)."""
    if os.environ.get("CUDA_DEVICE_ORDER", "").strip().upper() == "PCI_BUS_ID":
        return True
    count = int(lib.nvmlDeviceGetCount())
    names = {
        _text(lib.nvmlDeviceGetName(lib.nvmlDeviceGetHandleByIndex(i)))
        for i in range(count)
    }
    return len(names) <= 1


def _text(name: object) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)
