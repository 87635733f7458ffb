"""Whether host memory can be written, from the process's page map."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest
from helpers import run_python

from xpkit._adapters import _pages
from xpkit._adapters._pages import read_only_host_memory

pytestmark = pytest.mark.skipif(
    not Path(_pages.MAPS).exists(), reason="no page map here (Linux only)"
)


def _bounds(a: np.ndarray) -> tuple[int, int]:
    low = a.__array_interface__["data"][0]
    return low, low + a.nbytes


def test_a_read_only_mapping_is_told_and_a_writable_one_is_not(tmp_path):
    path = tmp_path / "data"
    np.arange(4096.0).tofile(path)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = np.frombuffer(m, dtype=np.float64)
        assert read_only_host_memory(*_bounds(view))
        _, high = _bounds(view)
        assert read_only_host_memory(high - 8, high)  # (its last byte alone)
        del view
    writable = np.zeros(100_000)
    assert not read_only_host_memory(*_bounds(writable))
    assert not read_only_host_memory(10, 10)  # (no bytes)


def test_memory_in_no_mapping_is_not_writable():
    assert read_only_host_memory(8, 16)  # (page zero is never mapped)


def test_without_a_page_map_nothing_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(_pages, "MAPS", str(tmp_path / "absent"))
    assert not read_only_host_memory(8, 16)


def test_out_over_read_only_memory_is_refused_not_a_crash(tmp_path):
    """torch.from_numpy of a read-only memmap as ``out``: writing the rows
    was a segmentation fault (torch holds no read-only flag)."""
    pytest.importorskip("torch")
    path = tmp_path / "f"
    np.zeros((10, 2)).tofile(path)
    code = f"""
import warnings
import numpy as np, torch, xpkit
warnings.simplefilter("ignore")  # (torch warns of the read-only array)
ro = np.memmap({str(path)!r}, dtype="f8", mode="r", shape=(10, 2))
out = torch.from_numpy(ro)
x = np.arange(20.0).reshape(10, 2)
try:
    xpkit.map_batches(lambda r: r * 2, x, out=out, bytes_per_item=16)
except ValueError as exc:
    print("refused:", exc)
rw = torch.from_numpy(np.memmap({str(path)!r}, dtype="f8", mode="r+", shape=(10, 2)))
got = xpkit.map_batches(lambda r: r * 2, x, out=rw, bytes_per_item=16)
print("written:", got.sum().item())
"""
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "refused: out cannot be written: it is a tensor over read-only memory" in (
        proc.stdout
    )
    assert "written: 380.0" in proc.stdout
