"""Choosing a backend: `resolve_backend`, `check_gpu_available`, `auto_select_backend`."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ._adapters._registry import ADAPTERS
from ._args import as_index
from ._backend import Backend, coerce_backend
from ._resolve import find_gpus, key_of
from ._shown import shown

if TYPE_CHECKING:
    from collections.abc import Collection

    from ._adapters._base import Adapter
    from ._adapters._types import BackendName
    from ._typing import JSONObject, Value

__all__ = [
    "AUTO_CPU_MAX_ELEMENTS",
    "AUTO_UNIFIED_MIN_ELEMENTS",
    "InventoryEntry",
    "auto_select_backend",
    "backend_inventory",
    "check_gpu_available",
    "coerce_backend",
    "find_gpus",
    "resolve_backend",
]


#: Below this many effective elements (n_samples * n_features * cv) the CPU
#: wins: transfers and kernel launches cost more than they save.
AUTO_CPU_MAX_ELEMENTS = 10_000_000
#: GPUs that share host memory (Apple MPS) pay a higher per-dispatch cost and
#: are only chosen from this many effective elements on.
AUTO_UNIFIED_MIN_ELEMENTS = 30_000_000


class InventoryEntry(NamedTuple):
    """One backend this machine has (``reason`` empty), or why it has not.

    ``broken``: the library is installed, but importing or asking it failed
    (a check fails there; a library that is missing is skipped).
    """

    key: BackendName
    device: str | None
    name: str
    reason: str = ""
    broken: bool = False


def backend_inventory(keys: Collection[str] | None = None) -> list[InventoryEntry]:
    """Every library in the registry: one entry per backend name it has here.

    A library's CPU device and each kind of GPU (``torch-cpu``, ``torch-cuda``,
    ``torch-mps``, ...), first device of each; a library that is not installed
    or sees no device gives one entry with the reason. Imports the installed
    libraries to ask them; ``keys``: only those libraries (the others are
    neither imported nor listed).
    """
    entries: list[InventoryEntry] = []
    for adapter in ADAPTERS.values():
        if keys is not None and adapter.key not in keys:
            continue
        if not adapter.is_installed():
            reason = f"{adapter.label} is not installed (pip install 'xpkit[{adapter.extra}]')"
            entries.append(InventoryEntry(key_of(adapter), None, adapter.key, reason))
            continue
        try:
            devices = adapter.devices()
        except Exception as exc:  # noqa: BLE001 - a broken install: report it
            reason = (
                f"{adapter.label} is installed, but loading it failed: "
                f"{type(exc).__name__}: {exc}"
            )
            entries.append(
                InventoryEntry(key_of(adapter), None, adapter.key, reason, broken=True)
            )
            continue
        if not devices:
            reason = f"{adapter.label} sees no device on this machine"
            entries.append(InventoryEntry(key_of(adapter), None, adapter.key, reason))
            continue
        seen: set[str] = set()
        for dev in devices:
            name = adapter.backend_name(dev)
            if name not in seen:  # one entry per backend name (cuda, not also cuda:1)
                seen.add(name)
                entries.append(InventoryEntry(key_of(adapter), dev, name))
    return entries


def resolve_backend(parallel: Backend | str | None) -> Backend:
    """Coerce a backend specifier into a `Backend` instance.

    Parameters
    ----------
    parallel : None, str or Backend
        - ``None`` or ``"cpu"``: the NumPy backend.
        - ``"numpy"``, ``"torch"``, ``"auto"``, ``"array_api_strict"``,
          ``"cupy"``, ``"jax"``, ``"dask"``: forwarded to ``Backend(...)``.
        - ``"gpu"``: the first GPU found (torch CUDA/MPS, then CuPy, then JAX);
          raises `RuntimeError` when there is none, never falls back to the CPU.
        - A `Backend` instance: returned as-is (no new device detection).

    Returns
    -------
    Backend
        Resolved backend instance.

    Raises
    ------
    TypeError
        ``parallel`` is neither None, a string nor a Backend.
    ValueError
        ``parallel`` is a string that names no backend.
    RuntimeError
        ``"gpu"`` was asked for on a machine without one.

    Examples
    --------
    >>> import xpkit
    >>> xpkit.resolve_backend(None).name
    'numpy'
    >>> b = xpkit.Backend("numpy")
    >>> xpkit.resolve_backend(b) is b
    True
    """
    return coerce_backend(parallel, "parallel")


def check_gpu_available() -> tuple[bool, JSONObject]:
    """Check if GPU acceleration is available.

    Returns
    -------
    tuple
        ``(available, info)`` where ``available`` is True if any GPU (torch
        CUDA/MPS, CuPy, JAX) is usable and ``info`` has the keys

        - ``"backend"``: library of the first GPU (``"torch"``, ``"cupy"``,
          ``"jax"``), or ``"numpy"`` when there is none;
        - ``"device"``: its device (``"cuda"``, ``"mps"``, ``"gpu"``), or
          ``"cpu"``;
        - ``"device_name"``: a human-readable device name;
        - ``"gpus"``: a list with one dict (backend, device, device_name) per
          GPU found across all libraries.

    Raises
    ------
    Nothing: a library that fails while it is asked is reported as having no GPU.

    Examples
    --------
    >>> import xpkit
    >>> available, info = xpkit.check_gpu_available()
    >>> sorted(info) == ["backend", "device", "device_name", "gpus"]
    True
    >>> available == bool(info["gpus"])
    True
    """
    gpus = [
        {"backend": a.key, "device": dev, "device_name": _device_name(a, dev)}
        for a, dev in find_gpus()
    ]
    if gpus:
        first = gpus[0]
        return True, {**first, "gpus": gpus}
    cpu = platform.processor() or platform.machine() or "CPU"
    return False, {"backend": "numpy", "device": "cpu", "device_name": cpu, "gpus": []}


def _device_name(adapter: Adapter, device: str) -> str:
    try:
        return adapter.device_name(device)
    except Exception:  # noqa: BLE001 - the name is cosmetic
        return device


def auto_select_backend(n_samples: int, n_features: int, cv: int = 1) -> Backend:
    """Automatically select a backend based on problem size.

    The workload is ``n_samples * n_features * cv`` elements (``cv`` folds
    multiply the work). Small problems use NumPy, to avoid transfer and
    launch overhead; large ones prefer a GPU when one is available:

    - below ``AUTO_CPU_MAX_ELEMENTS`` (10 million): NumPy;
    - a discrete GPU (CUDA via torch, CuPy or JAX) from 10 million elements;
    - a GPU sharing host memory (Apple MPS) only from
      ``AUTO_UNIFIED_MIN_ELEMENTS`` (30 million) elements;
    - NumPy otherwise.

    Parameters
    ----------
    n_samples : int
        Number of samples in the dataset (positive; a Python or NumPy
        integer).
    n_features : int
        Number of features in the dataset (positive).
    cv : int, default 1
        Number of cross-validation folds (positive).

    Returns
    -------
    Backend
        Selected backend instance.

    Raises
    ------
    ValueError
        A size is not positive.
    TypeError
        A size is not an integer (a bool, a float or a string is refused).

    Examples
    --------
    >>> import xpkit
    >>> xpkit.auto_select_backend(100, 10).name  # small work stays on NumPy
    'numpy'
    """
    sizes = [
        _size(param, value)
        for param, value in (
            ("n_samples", n_samples),
            ("n_features", n_features),
            ("cv", cv),
        )
    ]
    work = sizes[0] * sizes[1] * sizes[2]  # Python ints: no int64 overflow
    if work < AUTO_CPU_MAX_ELEMENTS:
        return Backend("numpy")
    for adapter, dev in find_gpus():
        if not adapter.unified_memory(dev) or work >= AUTO_UNIFIED_MIN_ELEMENTS:
            return Backend(key_of(adapter), device=dev)
    return Backend("numpy")


def _size(param: str, value: Value) -> int:
    """``value`` as a positive Python int: any integer (NumPy's too), not a bool."""
    if isinstance(value, (bool, np.bool_)):
        msg = f"{param} must be an int, got {shown(value)}"
        raise TypeError(msg)
    size = as_index(param, value)
    if size < 1:
        msg = f"{param} must be positive, got {shown(value)}"
        raise ValueError(msg)
    return size
