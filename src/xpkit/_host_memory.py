"""Host memory: what the kernel says is available, capped by the process's cgroup limit.

Read from ``/proc`` and ``/sys/fs/cgroup`` (v1 and v2) with plain file reads
of a page at a time (a plan reads them, and its own peak counts: Python's
buffered ``open`` takes 8 kB, psutil's 32 kB); psutil where ``/proc/meminfo``
is not there (macOS, Windows). No GPU library is imported, and ``os.path``
rather than pathlib keeps ``import xpkit`` cheap.
"""

from __future__ import annotations

import os

__all__ = ["cgroup_available_bytes", "host_available_bytes", "meminfo_available_bytes"]


#: Bytes one read takes (these files are a few hundred bytes to a few kB).
_CHUNK = 4096


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", errors="replace")


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


def meminfo_available_bytes(root: str | os.PathLike[str] = "/") -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` (under ``root``), or None without one.

    The figure psutil reports as ``virtual_memory().available`` on Linux
    (kernels before 3.14 have none: psutil estimates it, and so does the
    caller by asking psutil).
    """
    try:
        text = _read(os.path.join(os.fspath(root), "proc/meminfo"))
    except OSError:
        return None
    at = text.find("MemAvailable:")  # (one line: the file has 50)
    if at < 0:
        return None
    end = text.find("\n", at)
    fields = (text[at:] if end < 0 else text[at:end]).split()
    if len(fields) < 2 or not fields[1].isdigit():
        return None
    return int(fields[1]) * (1024 if fields[2:3] == ["kB"] else 1)


def host_available_bytes(_root: str | os.PathLike[str] = "/") -> int:
    """Available host RAM (the kernel's ``MemAvailable``, else psutil's), capped by the cgroup limit."""
    available = meminfo_available_bytes(_root)
    if available is None:
        import psutil

        available = int(psutil.virtual_memory().available)
    limited = cgroup_available_bytes(_root)
    return available if limited is None else min(available, limited)
