"""The variants the pytest plugin runs a test on, and how a user chooses them.

A variant is a library on a device in a mode, with an id: ``numpy``,
``torch-cpu``, ``torch-cpu-compile``, ``array_api_strict-device1``. Every
adapter says which of its devices and modes make variants (`Adapter.test_modes`,
`Adapter.test_devices`, `Adapter.shape_only_devices`); this module lists them
for this machine and picks the ones ``--xpkit-backends`` names.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Sequence

from .._adapters import ADAPTERS

__all__ = ["BackendParam", "available_backend_params", "matches", "selected"]

#: The variants that change how the test module's declared functions run.
LAZY_MODES = frozenset({"jit", "lazy", "compile"})
#: The floating dtypes the ``xpkit_dtype`` fixture runs a test in, where held.
FLOATING = ("float32", "float64")


class BackendParam:
    """One variant to run tests on: a library key, a device, an id, a mode."""

    def __init__(
        self,
        key: str,
        device: str | None,
        ident: str,
        skip: str = "",
        mode: str = "",
        *,
        shape_only: bool = False,
    ) -> None:
        self.key = key
        self.device = device
        self.id = ident
        self.skip = skip
        #: "" (as written), "strictest", or one of the adapter's `test_modes`.
        self.mode = mode
        #: A device without values (torch's meta): for marked tests only.
        self.shape_only = shape_only

    @property
    def strictest(self) -> bool:
        """Whether this runs array-api-strict at its strictest flags."""
        return self.mode == "strictest"

    @property
    def lazy(self) -> bool:
        """Whether this runs the declared functions jitted, lazily or compiled."""
        return self.mode in LAZY_MODES

    @property
    def capabilities(self) -> frozenset[str]:
        """What the library has of `CAPABILITIES` in this variant.

        The strictest flags switch data-dependent shapes off.
        """
        has = ADAPTERS[self.key].capabilities
        return has - {"data_dependent_shapes"} if self.strictest else has

    def __repr__(self) -> str:
        return f"BackendParam({self.id!r})"


@functools.cache
def available_backend_params() -> tuple[BackendParam, ...]:
    """Every variant of every library on this machine, skipped ones with the reason.

    Per `backend_inventory` entry: the entry itself; array-api-strict's
    strictest variant; one variant per emulated device
    (`Adapter.test_devices`) and per device without values
    (`Adapter.shape_only_devices`, for marked tests); one per mode of
    `Adapter.test_modes` (``<id>-<mode>``). A library that is not installed
    (or has no device) gives one parameter, skipped with the reason.
    """
    from .._select import backend_inventory

    params: list[BackendParam] = []
    for entry in backend_inventory():
        params.append(BackendParam(entry.key, entry.device, entry.name, entry.reason))
        if entry.reason:
            continue
        adapter = ADAPTERS[entry.key]
        if adapter.strictest_mode() is not None:
            ident = f"{entry.name}-strictest"
            params.append(
                BackendParam(entry.key, entry.device, ident, mode="strictest")
            )
        if entry.device is not None and not adapter.is_gpu(entry.device):
            params += _device_params(entry.key)
        for mode in adapter.test_modes:
            ident = f"{entry.name}-{mode}"
            params.append(BackendParam(entry.key, entry.device, ident, mode=mode))
    return tuple(params)


def _device_params(key: str) -> list[BackendParam]:
    """The emulated and shape-only devices of library ``key`` (once, with its CPU)."""
    adapter = ADAPTERS[key]
    listed = {adapter.canonical_device(d) for d in adapter.devices()}
    params = []
    for device in adapter.test_devices:
        ident = adapter.variant_name(device)
        reason = ""
        if adapter.canonical_device(device) not in listed:
            version = adapter.version() or "installed here"
            reason = f"{adapter.label} {version} has no device {device!r}"
        params.append(BackendParam(key, device, ident, reason))
    params += [
        BackendParam(key, device, adapter.variant_name(device), shape_only=True)
        for device in adapter.shape_only_devices
    ]
    return params


def matches(name: str, param: BackendParam, ids: frozenset[str]) -> bool:
    """Whether ``--xpkit-backends`` name ``name`` selects ``param``.

    A variant id selects that variant alone (``dask``, ``torch-cpu``); a
    pattern with ``*``, ``?`` or ``[`` selects the ids it matches
    (``dask*``, ``*-compile``); a library key that is no variant's id
    (``torch``, ``jax``) selects all of that library's variants.
    """
    if any(c in name for c in "*?["):
        return fnmatch.fnmatchcase(param.id, name)
    if name == param.id:
        return True
    return name not in ids and name == param.key


def selected(
    params: Sequence[BackendParam], names: Sequence[str]
) -> tuple[BackendParam, ...]:
    """The variants of ``params`` that any of ``names`` selects (see `matches`)."""
    ids = frozenset(p.id for p in available_backend_params())
    return tuple(p for p in params if any(matches(n, p, ids) for n in names))
