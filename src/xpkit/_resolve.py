"""Which adapter: by a backend name, or by the arrays a caller holds."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, TypeGuard, cast

from ._adapters import _BY_TYPE as _ADAPTER_BY_TYPE
from ._adapters import ADAPTERS, Adapter, adapter_for_array
from ._args import PY_SCALARS
from ._log import logger

if TYPE_CHECKING:
    from ._adapters._types import BackendName
    from ._typing import Value

__all__ = [
    "AUTO_PREFERENCE",
    "BACKEND_NAMES",
    "adapter_for_name",
    "is_backend_name",
    "key_of",
    "locate_arrays",
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
        msg = f"backend must be a string, got {backend!r}"
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
