"""Host memory: the process's cgroup limit (v1 and v2) and its reclaimable page cache.

The cgroup files are written under ``tmp_path`` (``fakes.write_file``), which
stands for the filesystem root that `xpkit._host_memory` reads.
"""

from __future__ import annotations

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
