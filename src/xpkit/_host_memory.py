"""Host memory: what psutil reports, capped by the process's cgroup limit.

Read from ``/proc`` and ``/sys/fs/cgroup`` (v1 and v2) with plain file reads:
no GPU library is imported, and ``os.path`` rather than pathlib keeps
``import xpkit`` cheap.
"""

from __future__ import annotations

import os

__all__ = ["cgroup_available_bytes", "host_available_bytes"]


def _read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as fh:
        return fh.read()


def cgroup_available_bytes(root: str | os.PathLike[str]) -> int | None:
    """Bytes the process's cgroup still allows, or None without a limit.

    Reads ``/proc/self/cgroup`` (under ``root``) to find the process's own
    cgroup, then its v2 ``memory.max``/``memory.current`` or v1
    ``memory.limit_in_bytes``/``memory.usage_in_bytes``, walking up to the
    nearest ancestor that sets a limit.
    """
    root = os.fspath(root)
    try:
        lines = _read(os.path.join(root, "proc/self/cgroup")).splitlines()
    except OSError:
        return None
    best: int | None = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":  # cgroup v2 unified hierarchy
            base, files = os.path.join(root, "sys/fs/cgroup"), _V2_FILES
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "sys/fs/cgroup/memory"), _V1_FILES
        else:
            continue
        avail = _cgroup_walk(base, rel.lstrip("/"), *files)
        if avail is not None:
            best = avail if best is None else min(best, avail)
    return best


# (limit file, usage file, memory.stat key of reclaimable page cache)
_V2_FILES = ("memory.max", "memory.current", "inactive_file")
_V1_FILES = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")


def _cgroup_walk(
    base: str, rel: str, limit_f: str, usage_f: str, cache_key: str
) -> int | None:
    parts = [p for p in rel.split("/") if p]
    best: int | None = None
    for depth in range(len(parts), -1, -1):
        folder = os.path.join(base, *parts[:depth])
        try:
            raw = _read(os.path.join(folder, limit_f)).strip()
        except OSError:
            continue
        if raw == "max" or not raw.isdigit() or int(raw) >= 2**60:
            continue  # no limit at this level (v1 reports a huge number)
        try:
            usage = int(_read(os.path.join(folder, usage_f)).strip())
        except (OSError, ValueError):
            usage = 0
        # Usage counts page cache; its inactive part is reclaimed on demand.
        usage -= min(_stat_value(os.path.join(folder, "memory.stat"), cache_key), usage)
        avail = max(int(raw) - usage, 0)
        best = avail if best is None else min(best, avail)
    return best


def _stat_value(path: str, key: str) -> int:
    try:
        for line in _read(path).splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def host_available_bytes(_root: str | os.PathLike[str] = "/") -> int:
    """Available host RAM: psutil's figure, capped by the cgroup limit."""
    import psutil

    available = int(psutil.virtual_memory().available)
    limited = cgroup_available_bytes(_root)
    return available if limited is None else min(available, limited)
