"""Which adapter: by a backend name, or by the arrays a caller holds."""

from __future__ import annotations

from collections.abc import Collection, Hashable
from typing import TYPE_CHECKING, TypeGuard, cast

from ._adapters._registry import ADAPTERS, adapter_for_array
from ._adapters._registry import BY_TYPE as _ADAPTER_BY_TYPE
from ._args import PY_SCALARS
from ._log import logger
from ._shown import shown

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._adapters._types import BackendName
    from ._typing import Device, Value

__all__ = [
    "AUTO_PREFERENCE",
    "BACKEND_NAMES",
    "adapter_for_name",
    "device_object_str",
    "find_gpus",
    "is_backend_name",
    "key_of",
    "locate_arrays",
    "specified_backend",
]

#: Names accepted by ``Backend(...)``.
BACKEND_NAMES: tuple[str, ...] = ("auto", *ADAPTERS)

#: Which library ``"auto"`` picks, in order of preference (the adapters rank).
AUTO_PREFERENCE: tuple[str, ...] = tuple(
    sorted(
        (k for k, a in ADAPTERS.items() if a.auto_rank is not None),
        key=lambda k: ADAPTERS[k].auto_rank or 0,
    )
)


def is_backend_name(name: object) -> TypeGuard[BackendName]:
    """Whether ``name`` is one of `BACKEND_NAMES` exactly (no case folding).

    For code holding a name as a plain ``str``: ``Backend(name)`` type-checks
    once this has narrowed it to `BackendName`.
    """
    return name in BACKEND_NAMES


def key_of(adapter: Adapter) -> BackendName:
    """``adapter.key``, typed as the `BackendName` it is (registry keys are)."""
    return cast("BackendName", adapter.key)


def adapter_for_name(backend: object) -> Adapter:
    if not isinstance(backend, str):
        msg = f"backend must be a string, got {shown(backend)}"
        raise TypeError(msg)
    key = backend.strip().lower()
    if key == "auto":
        key = next(k for k in AUTO_PREFERENCE if ADAPTERS[k].is_installed())
        logger().info(
            "backend='auto' chose %s (preference: %s)", key, ", ".join(AUTO_PREFERENCE)
        )
    if key not in ADAPTERS:
        msg = f"backend={backend!r} is not known; accepted names: {', '.join(BACKEND_NAMES)}"
        raise ValueError(msg)
    return ADAPTERS[key]


def locate_arrays(
    arrays: tuple[Value, ...],
) -> tuple[Adapter | None, Hashable, int]:
    """The adapter, device key and first position of the arrays in ``arrays``.

    The work behind `Backend.from_arrays` (whose docstring says what it
    skips and raises); ``(None, None, -1)`` when no array is left.
    """
    found: Adapter | None = None
    found_key: Hashable = None
    found_at = -1
    for i, x in enumerate(arrays):
        adapter = _ADAPTER_BY_TYPE.get(type(x))
        if adapter is None:
            if x is None or isinstance(x, PY_SCALARS):
                continue
            adapter = adapter_for_array(x)
            if adapter is None:
                msg = (
                    f"arrays[{i}] is a {type(x).__qualname__}, not an array of a "
                    f"supported library ({', '.join(ADAPTERS)})"
                )
                raise TypeError(msg)
        key = adapter.device_key(x)
        if found is None:
            found, found_key, found_at = adapter, key, i
        elif adapter is not found:
            msg = (
                f"arrays mix libraries: arrays[{found_at}] is {found.label}, "
                f"arrays[{i}] is {adapter.label}"
            )
            raise TypeError(msg)
        elif key != found_key:
            first = found.device_str(found.device_of(arrays[found_at]))
            this = adapter.device_str(adapter.device_of(x))
            if adapter.canonical_device(first) != adapter.canonical_device(this):
                msg = (
                    f"arrays mix devices: arrays[{found_at}] is on {first!r}, "
                    f"arrays[{i}] is on {this!r}"
                )
                raise ValueError(msg)
    return found, found_key, found_at


def find_gpus(keys: Collection[str] | None = None) -> list[tuple[Adapter, str]]:
    """Every GPU device of every installed library, in registry order.

    Imports the installed libraries that have GPUs to ask them; never imports
    one that is not installed. ``keys``: only those libraries (the others are
    neither imported nor asked).
    """
    found: list[tuple[Adapter, str]] = []
    for adapter in ADAPTERS.values():
        if keys is not None and adapter.key not in keys:
            continue
        if not adapter.is_installed():
            continue
        try:
            devices = adapter.devices()
        except Exception:  # noqa: BLE001 - a broken driver means "no GPU here"
            logger().debug("listing %s devices failed", adapter.label, exc_info=True)
            continue
        seen: set[str] = set()
        for dev in devices:
            canon = adapter.canonical_device(dev)
            if adapter.is_gpu(dev) and canon not in seen:
                seen.add(canon)
                found.append((adapter, dev))
    return found


def device_object_str(adapter: Adapter, device: Device) -> str:
    """The device string of a library device object (``torch.device("cpu", 0)``).

    TypeError for what is not a device of the library; ValueError (from
    `Adapter.validate_device`, naming it) for one of its devices that does
    not exist here (``torch.device("cuda")`` without CUDA), as its string
    ``"cuda"`` raises.
    """
    try:  # (a device of the library: its string names one of its type)
        text = adapter.device_str(device)
        ours = type(adapter.native_device(text)) is type(device)
    except Exception:  # noqa: BLE001 - what a library says of a foreign object
        ours = False
    if not ours:
        msg = (
            f"device must be a string, a {adapter.label} device or None, got {device!r}"
        )
        raise TypeError(msg) from None
    return adapter.validate_device(text)


def specified_backend(spec: Value, param: str) -> tuple[BackendName, str | None]:
    """The library and device (None: its default) that a backend specifier names.

    None and ``"cpu"``: NumPy; ``"gpu"``: the first device of `find_gpus` (a
    RuntimeError when there is none); else a backend name (a ValueError when
    it is none; a TypeError for what is not a string). Errors name ``param``.
    """
    if spec is None:
        return "numpy", None
    if not isinstance(spec, str):
        msg = (
            f"{param} must be None, a string or a Backend, got {shown(spec)}; "
            f"accepted strings: cpu, gpu, {', '.join(BACKEND_NAMES)}"
        )
        raise TypeError(msg)
    key = spec.strip().lower()
    if key == "cpu":
        return "numpy", None
    if key == "gpu":
        gpus = find_gpus()
        if not gpus:
            looked = ", ".join(
                f"{a.label} {a.gpu_kinds}" for a in ADAPTERS.values() if a.gpu_kinds
            )
            msg = (
                f"{param}='gpu' was requested but no GPU is available "
                f"(looked for {looked})"
            )
            raise RuntimeError(msg)
        adapter, dev = gpus[0]
        return key_of(adapter), dev
    if not is_backend_name(key):
        msg = (
            f"{param}={spec!r} is not a backend specifier; accepted: None, "
            f"cpu, gpu, {', '.join(BACKEND_NAMES)}, or a Backend"
        )
        raise ValueError(msg)
    return key, None
