"""The variant ids xpkit knows, on any machine: what a marker or a statement may name.

A variant id is ``<backend>[-<mode>]``: a backend of a library on a kind of
device it can have (``torch-cuda``, ``jax-gpu``, ``cupy``: `Adapter.device_kinds`,
named by `Adapter.backend_name`), or one of its emulated or shape-only
devices (``array_api_strict-device1``, ``torch-meta``); a backend runs in
the library's modes (``-jit``, ``-compile``, ``-lazy``) and the plugin's own
(``-strictest``, ``-readonly``) where the library has them. These ids are
known from the adapters alone, whether or not the library is installed
here, so a misspelt one (``torch-cpu-compiled``, ``jax-cpu-jitt``) is
refused on every machine rather than matching nothing.
"""

from __future__ import annotations

import fnmatch
import functools

from .._adapters._registry import ADAPTERS

__all__ = ["is_known_name", "known_ids", "known_names_text"]


@functools.cache
def known_ids(key: str) -> frozenset[str]:
    """Every variant id library ``key`` can have, here or on another machine."""
    adapter = ADAPTERS[key]
    modes = [
        *adapter.test_modes,
        *(["strictest"] if adapter.test_strictest else []),
        *(["readonly"] if adapter.test_read_only else []),
    ]
    ids = set()
    for kind in adapter.device_kinds:
        name = adapter.backend_name(kind)
        ids |= {name, *(f"{name}-{mode}" for mode in modes)}
    for device in (*adapter.test_devices, *adapter.shape_only_devices):
        name = adapter.backend_name(device)
        ids.add(name if name != key else f"{key}-{device}")
    return frozenset(ids)


@functools.cache
def _every_id() -> frozenset[str]:
    return frozenset().union(*(known_ids(key) for key in ADAPTERS))


def is_known_name(name: str, also: frozenset[str] = frozenset()) -> bool:
    """Whether ``name`` is a library key, a known variant id, or a pattern of one.

    ``also``: more ids that count as known (the variants found on this
    machine). A pattern (``*``, ``?``, ``[``) must match a key or an id.
    """
    names = _every_id() | also | frozenset(ADAPTERS)
    if any(c in name for c in "*?["):
        return any(fnmatch.fnmatchcase(known, name) for known in names)
    return name in names


def known_names_text(name: object) -> str:
    """What to name instead of ``name``: its library's ids, else the library keys."""
    key = name.split("-", 1)[0] if isinstance(name, str) else None
    if key in ADAPTERS:
        return (
            f"{ADAPTERS[key].label}'s variant ids: {', '.join(sorted(known_ids(key)))}"
        )
    return f"library keys: {', '.join(ADAPTERS)}"
