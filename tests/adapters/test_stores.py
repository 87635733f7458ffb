"""Which stores an executor's workers write themselves (xpkit._adapters._stores)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from xpkit._adapters._stores import written_by_workers


def test_a_zarr_array_in_a_directory_is_written_by_the_workers(tmp_path):
    zarr = pytest.importorskip("zarr")
    on_disk = zarr.create_array(store=str(tmp_path / "z"), shape=(4,), dtype="f8")
    in_memory = zarr.create_array(
        store=zarr.storage.MemoryStore(), shape=(4,), dtype="f8"
    )
    assert written_by_workers(on_disk)
    assert not written_by_workers(in_memory)  # (it would travel as a copy)


def test_other_arrays_are_written_here(tmp_path):
    memmap = np.lib.format.open_memmap(
        tmp_path / "m.npy", mode="w+", dtype=np.float64, shape=(4,)
    )
    assert not written_by_workers(memmap)  # (it pickles as a plain array)
    assert not written_by_workers(np.zeros(4))


def test_without_zarr_imported_nothing_is(monkeypatch):
    monkeypatch.setitem(sys.modules, "zarr", None)
    assert not written_by_workers(np.zeros(4))
