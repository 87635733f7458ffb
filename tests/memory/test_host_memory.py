"""Host memory: the process's cgroup limit (v1 and v2) and its reclaimable page cache.

The cgroup files are written under ``tmp_path`` (``fakes.write_file``), which
stands for the filesystem root that `xpkit._host_memory` reads.
"""

from __future__ import annotations

import tracemalloc

import pytest
from fakes import write_file as _write

from xpkit import _host_memory, _memory

GB = 1024**3


def test_cgroup_v2_limit(tmp_path, monkeypatch):
    _write(tmp_path, "proc/self/cgroup", "0::/user.slice/job\n")
    _write(tmp_path, "sys/fs/cgroup/user.slice/job/memory.max", str(2 * GB))
    _write(tmp_path, "sys/fs/cgroup/user.slice/job/memory.current", str(GB // 2))
    _write(tmp_path, "sys/fs/cgroup/user.slice/memory.max", "max")
    assert _host_memory.cgroup_available_bytes(tmp_path) == GB + GB // 2
    monkeypatch.setattr(
        "psutil.virtual_memory", lambda: type("VM", (), {"available": 64 * GB})()
    )
    assert _memory.host_available_bytes(tmp_path) == GB + GB // 2


def test_cgroup_v2_parent_limit_applies(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "0::/a/b\n")
    _write(tmp_path, "sys/fs/cgroup/a/b/memory.max", "max")
    _write(tmp_path, "sys/fs/cgroup/a/memory.max", str(4 * GB))
    _write(tmp_path, "sys/fs/cgroup/a/memory.current", str(GB))
    assert _host_memory.cgroup_available_bytes(tmp_path) == 3 * GB


def test_cgroup_v1_limit(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "12:cpu,cpuacct:/x\n4:memory:/docker/abc\n")
    _write(
        tmp_path, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", str(8 * GB)
    )
    _write(
        tmp_path, "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", str(5 * GB)
    )
    assert _host_memory.cgroup_available_bytes(tmp_path) == 3 * GB


def test_cgroup_v1_unlimited_and_missing(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/\n")
    _write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", str(2**63 - 4096))
    assert _host_memory.cgroup_available_bytes(tmp_path) is None
    assert _host_memory.cgroup_available_bytes(tmp_path / "nowhere") is None


def test_cgroup_v2_page_cache_is_reclaimable(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "0::/job\n")
    _write(tmp_path, "sys/fs/cgroup/job/memory.max", str(2 * GB))
    _write(tmp_path, "sys/fs/cgroup/job/memory.current", str(2 * GB))
    _write(
        tmp_path,
        "sys/fs/cgroup/job/memory.stat",
        f"anon 100\ninactive_file {GB}\nactive_file 5\n",
    )
    assert _host_memory.cgroup_available_bytes(tmp_path) == GB


def test_cgroup_v1_page_cache_is_reclaimable(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/c\n")
    _write(tmp_path, "sys/fs/cgroup/memory/c/memory.limit_in_bytes", str(4 * GB))
    _write(tmp_path, "sys/fs/cgroup/memory/c/memory.usage_in_bytes", str(4 * GB))
    _write(
        tmp_path,
        "sys/fs/cgroup/memory/c/memory.stat",
        f"cache 9\ntotal_inactive_file {3 * GB}\n",
    )
    assert _host_memory.cgroup_available_bytes(tmp_path) == 3 * GB


# -- what the kernel says is available ------------------------------------------
_MEMINFO = (
    "MemTotal:       32000000 kB\nMemFree:         1000 kB\nMemAvailable:   {} kB\n"
)


def test_meminfo_available_is_the_kernels_figure(tmp_path, monkeypatch):
    _write(tmp_path, "proc/meminfo", _MEMINFO.format(2_000_000))
    monkeypatch.setattr("psutil.virtual_memory", _no_psutil)
    assert _host_memory.meminfo_available_bytes(tmp_path) == 2_000_000 * 1024
    assert _memory.host_available_bytes(tmp_path) == 2_000_000 * 1024


def test_without_meminfo_psutil_says(tmp_path, monkeypatch):
    """Off Linux (no /proc/meminfo), and a kernel older than MemAvailable."""
    vm = type("VM", (), {"available": 3 * GB})()
    monkeypatch.setattr("psutil.virtual_memory", lambda: vm)
    assert _host_memory.meminfo_available_bytes(tmp_path) is None
    assert _memory.host_available_bytes(tmp_path) == 3 * GB
    _write(tmp_path, "proc/meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n")
    assert _host_memory.meminfo_available_bytes(tmp_path) is None
    assert _memory.host_available_bytes(tmp_path) == 3 * GB


def test_meminfo_agrees_with_psutil_here():
    import psutil

    ours = _host_memory.meminfo_available_bytes()
    if ours is None:
        pytest.skip("no /proc/meminfo with MemAvailable here")
    theirs = psutil.virtual_memory().available
    assert abs(ours - theirs) <= max(theirs // 20, 64 * 2**20)  # (read apart)


def test_reading_host_memory_allocates_little():
    """A plan reads these files, and its own peak counts (psutil's buffer is 32 kB)."""
    _host_memory.host_available_bytes()  # (first calls)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        _host_memory.host_available_bytes()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        if not was_tracing:
            tracemalloc.stop()
    assert peak < 16_000, peak


def _no_psutil():
    raise AssertionError("psutil was asked though /proc/meminfo says")
