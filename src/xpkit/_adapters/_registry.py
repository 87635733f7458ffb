"""The registry of adapters: find the one for a library or an array.

What the layers above the adapters ask of them goes through here, and
through the `Adapter` interface: which adapters there are, the one for a
key or an array, whether converting an array would drop what it holds
(`refuse_lossy`, asked where its adapter is found), and an array on the
host. The registry knows no library;
the package ``xpkit._adapters`` fills it with the seven adapters
(`register_adapters`) when it is imported, which Python does before it
imports this module for anyone (a package runs before its modules).
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

import numpy as np

from .._dtypes import register_dtype_spelling
from ._host_loss import LostOnHost
from ._pages import read_only_host_memory

if TYPE_CHECKING:
    from .._typing import Array, HostArray
    from ._base import Adapter

__all__ = [
    "ADAPTERS",
    "LostOnHost",
    "adapter_for_array",
    "get_adapter",
    "over_read_only_memory",
    "refuse_lossy",
    "register_adapters",
    "register_guest",
    "to_host",
]

#: The adapters by key, in the order a GPU is looked for by ``"gpu"`` /
#: ``"auto"`` (the order they were registered in).
ADAPTERS: dict[str, Adapter] = {}

#: Array type -> adapter; filled on first sight of each type.
BY_TYPE: dict[type, Adapter] = {}

#: Python's own types, which no library's arrays are: an index's slices and
#: integers, a value's number are answered None without asking each adapter
#: (seven checks each, run several times an update).
NOT_ARRAYS: frozenset[type] = frozenset(
    {bool, int, float, complex, str, bytes, slice, tuple, list, dict}
    | {type(None), type(Ellipsis)}
)

#: Array type -> the adapter of an array library of xpkit's own, which is
#: no backend (not in `ADAPTERS`): the shape-only arrays a cost trace runs.
GUESTS: dict[type, Adapter] = {}


def register_adapters(*adapters: Adapter) -> None:
    """Add ``adapters`` to the registry; each tells `xpkit._dtypes` its spellings.

    Called once, by the package ``xpkit._adapters`` as it is imported: the
    modules above build tables from `ADAPTERS` when they are imported (the
    adapters that trace, the backend names), which a later registration
    would not reach. Facts flow down: ``_dtypes`` knows no library, and
    reads ``"torch.float32"`` or a ``jnp`` prefix because the adapters
    registered them here.
    """
    for adapter in adapters:
        register_dtype_spelling(adapter.dtype_prefixes, adapter.dtype_repr_module)
        ADAPTERS[adapter.key] = adapter
    BY_TYPE.clear()


def register_guest(array_type: type, adapter: Adapter) -> None:
    """Find ``adapter`` for arrays of exactly ``array_type``, listing it nowhere.

    For the shape-only arrays of `xpkit._adapters._shapes`: code that asks
    which library an array is of (``Backend.from_arrays(x).xp``) reaches
    their namespace, while `ADAPTERS` (the backends a user can name) does
    not change.
    """
    GUESTS[array_type] = adapter


def get_adapter(key: str) -> Adapter:
    """The adapter registered under ``key`` (KeyError when unknown)."""
    return ADAPTERS[key]


def adapter_for_array(x: object) -> Adapter | None:
    """The adapter whose library ``x`` is an array of, or None.

    Looks only at already imported modules (never imports a library) and
    caches the answer per array type. A library that another thread is
    importing now (its module partly made: the array class not yet bound,
    an AttributeError from the check) owns nothing yet: no array of it can
    exist before its import ends.
    """
    cls = type(x)
    found = BY_TYPE.get(cls) or GUESTS.get(cls)
    if found is not None or cls in NOT_ARRAYS:
        return found
    for adapter in ADAPTERS.values():
        try:
            owned = adapter.owns(x)
        except AttributeError:  # (its module is partly made: being imported)
            continue
        if owned:
            BY_TYPE[cls] = adapter
            return adapter
    return None


def over_read_only_memory(x: Array) -> bool:
    """Whether ``x`` (of any library) views pages the process cannot write.

    What owns the memory it views answers (its own library's checks of
    ``x`` itself, `Adapter.update_refusal` and `Adapter.unwritable`, ask
    its own memory), followed owner by owner (a NumPy array's ``base``, a memoryview's
    ``obj``): a NumPy array that owns its memory says it by its flag;
    another library's array (a tensor over a read-only memmap, which torch
    holds writable) answers for itself; an owner no library answers for (a
    DLPack capsule) has the pages under ``x`` looked up in the process's
    map. A NumPy or array-api-strict array over such a tensor is writable
    as NumPy sees it, and a write into it ended the process.
    """
    adapter = adapter_for_array(x)
    if adapter is None:
        return False
    owner = adapter.host_owner(x)
    numpy_adapter = ADAPTERS["numpy"]
    for _ in range(64):  # (a chain of owners: each view's own)
        if owner is None:
            return False  # (memory NumPy allocated: its flags say)
        if isinstance(owner, memoryview):
            owner = owner.obj
            continue
        found = adapter_for_array(owner)
        if found is None:
            if isinstance(owner, mmap.mmap):
                return False  # (a read-only map gives read-only arrays)
            view = adapter.host_view(x)  # (a capsule: the pages themselves)
            extent = None if view is None else numpy_adapter.memory_extent(view)
            return extent is not None and read_only_host_memory(extent.low, extent.high)
        if found is not numpy_adapter:
            return found.over_read_only_memory(owner)
        owner = getattr(owner, "base", None)
    return False


def refuse_lossy(adapter: Adapter, x: Array, param: str) -> None:
    """TypeError when converting ``x`` (of ``adapter``'s library) drops information.

    A NumPy masked array's mask, say (`Adapter.lost_in_conversion`).
    """
    reason = adapter.lost_in_conversion(x)
    if reason is not None:
        msg = f"{param} is {reason}"
        raise TypeError(msg)


def to_host(x: Array, name: str = "x") -> HostArray:
    """An array of any supported library (or array-like) as NumPy.

    Zero-copy where the library allows it (NumPy, CPU torch tensors, CPU
    array-api-strict and JAX arrays); device arrays are copied to the host,
    lazy ones computed. The package's one conversion to the host. A copy
    that would drop what ``x`` holds (`LostOnHost`) names it ``name``.
    """
    adapter = adapter_for_array(x)
    if adapter is None:
        return np.asarray(x)
    try:
        return adapter.to_numpy(x)
    except LostOnHost as exc:
        raise exc.named(name) from None
