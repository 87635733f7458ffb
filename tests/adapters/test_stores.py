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


def test_an_in_memory_fsspec_store_is_written_here():
    zarr = pytest.importorskip("zarr")
    pytest.importorskip("fsspec")
    z = zarr.create_array(store="memory://xpkit-test-store", shape=(4,), dtype="f8")
    assert not written_by_workers(z)  # (each worker would write its own memory)


def test_a_sharded_arrays_write_is_a_shard(tmp_path):
    zarr = pytest.importorskip("zarr")
    from xpkit._adapters._stores import rows_per_write

    sharded = zarr.create_array(
        store=str(tmp_path / "s"), shape=(40,), chunks=(5,), shards=(20,), dtype="f8"
    )
    plain = zarr.create_array(
        store=str(tmp_path / "p"), shape=(40,), chunks=(5,), dtype="f8"
    )
    assert rows_per_write(sharded) == (20,)
    assert rows_per_write(plain) == (5,)
