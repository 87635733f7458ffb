"""On-disk stores as `map_batches(..., out=...)` writes them.

Four facts about a store's array that only its library knows:

- how many rows one write must cover to leave no other write's rows
  behind (`rows_per_write`): a chunk, or for a sharded zarr array a shard
  (its chunks are the inner ones: two writers of one shard lose each
  other's chunks);
- whether an executor's workers can write its rows themselves
  (`written_by_workers`): where every worker reaches the same store and the
  array travels to them as a handle to it (a zarr array in a local
  directory, shared by the workers of one host, or many on a shared
  filesystem; an fsspec or object store other than an in-memory one). A
  zarr array in memory would travel as a copy, and an ``np.memmap``
  pickles as a plain array: those are written by the caller's process;
- what it holds in memory while it writes rows (`bytes_held_while_writing`),
  which the batch budget counts beside ``fn``'s own cost: zarr encodes up to
  ``async.concurrency`` of a write's chunks (or shards) at once, each a
  contiguous copy plus its encoded bytes (about two chunks' bytes each, and
  three for a shard, which is assembled whole), and those of the next one
  being made (measured with tracemalloc, ``tests/batches/test_out_held.py``);
  h5py (HDF5) filters one chunk at a time, counted as three chunks, and
  keeps about 7 kB for each chunk a write covers and up to 8 MiB of its own
  (its chunk cache and free lists; measured as the peak RSS of a write, in a
  child); another chunked store is counted at two chunks; an array without
  chunks (``np.memmap``, whose pages are the page cache's, not the
  process's; h5py's contiguous datasets) nothing;
- whether it can be written (`read_only`): zarr's ``read_only``, an h5py
  dataset of a file opened read-only.
"""

from __future__ import annotations

import math
import sys

import numpy as np

__all__ = [
    "bytes_held_while_writing",
    "closed",
    "itemsize_of",
    "read_only",
    "rows_per_write",
    "written_by_workers",
]

#: zarr's stores that a worker reaches through the pickled array.
_SHARED_ZARR_STORES = frozenset({"LocalStore", "FsspecStore", "ObjectStore"})
#: Filesystems that live in one process (fsspec's protocols).
_IN_PROCESS = frozenset({"memory"})
#: Bytes of one chunk (or shard) that its library holds while it writes it:
#: zarr's contiguous copy and encoded bytes of a chunk, and of a shard also
#: the shard assembled whole; another chunked store's (one in its cache).
_CHUNK_COPIES, _SHARD_COPIES, _OTHER_COPIES = 2, 3, 2
#: zarr's own objects for one write, beside the chunks' bytes.
_WRITE_SLACK_BYTES = 64 * 1024
#: h5py: chunks it holds while filtering one, what it keeps for each chunk a
#: write covers, and its own (chunk cache, free lists) up to this.
_H5PY_COPIES, _H5PY_PER_CHUNK_BYTES, _H5PY_OWN_BYTES = 3, 8 * 1024, 8 * 2**20


def _zarr_array(leaf: object) -> bool:
    zarr = sys.modules.get("zarr")
    return zarr is not None and isinstance(leaf, zarr.Array)


def _h5py_dataset(leaf: object) -> bool:
    h5py = sys.modules.get("h5py")
    return h5py is not None and isinstance(leaf, h5py.Dataset)


def closed(leaf: object) -> str | None:
    """Why ``leaf`` cannot be read or written at all (its file is closed), or None.

    Asked before anything else of it: an h5py dataset of a closed file
    raises h5py's own RuntimeError at its ``shape``.
    """
    if _h5py_dataset(leaf) and not leaf:
        return "an h5py dataset of a file that is closed"
    return None


def read_only(leaf: object) -> str | None:
    """Why ``leaf`` cannot be written (None where nothing says it cannot)."""
    if _h5py_dataset(leaf):
        mode = getattr(getattr(leaf, "file", None), "mode", None)
        return "an h5py dataset of a file opened read-only" if mode == "r" else None
    if getattr(leaf, "read_only", False) is True:
        return "read-only (its read_only attribute is True)"
    return None


def rows_per_write(leaf: object) -> object:
    """The rows a write must cover whole: ``shards`` first where set, else ``chunks``.

    As the array spells them (a tuple whose first entry is the rows, or
    None, or something else that the caller refuses).
    """
    if _zarr_array(leaf):
        shards = getattr(leaf, "shards", None)
        if shards is not None:
            return shards
    return getattr(leaf, "chunks", None)


def written_by_workers(leaf: object) -> bool:
    """Whether the workers can write rows of ``leaf`` themselves (see the module)."""
    if not _zarr_array(leaf):
        return False
    store = leaf.store  # type: ignore[attr-defined]
    kind = type(store).__name__
    if kind not in _SHARED_ZARR_STORES:
        return False
    if kind == "FsspecStore":
        protocol = getattr(getattr(store, "fs", None), "protocol", ())
        protocols = {protocol} if isinstance(protocol, str) else set(protocol)
        return not protocols & _IN_PROCESS
    if kind == "ObjectStore":  # (obstore's MemoryStore is one process's)
        return type(getattr(store, "store", None)).__name__ != "MemoryStore"
    return True


def _concurrency() -> int:
    """Chunks zarr encodes at once (``async.concurrency``; 1 where it has none)."""
    zarr = sys.modules.get("zarr")
    config = getattr(zarr, "config", None)
    try:
        value = config.get("async.concurrency") if config is not None else None
    except (KeyError, TypeError, ValueError):
        value = None
    return value if isinstance(value, int) and value >= 1 else 1


def itemsize_of(leaf: object) -> int:
    """Bytes of one element of ``leaf`` (of a complex128 where its dtype says none)."""
    itemsize = getattr(getattr(leaf, "dtype", None), "itemsize", None)
    if isinstance(itemsize, int) and itemsize > 0:
        return itemsize
    return np.dtype(np.complex128).itemsize  # (the widest it can be)


def bytes_held_while_writing(leaf: object, rows: int) -> int:
    """Bytes the library of ``leaf`` holds while ``rows`` of its rows are written at once.

    0 for an array without chunks; for a chunked store the chunks (or
    shards) those rows cover, as many at a time as it writes at once, times
    the copies it keeps of each, and of the next one (see the module).
    """
    unit = rows_per_write(leaf)
    if not isinstance(unit, tuple) or not unit or rows < 1:
        return 0
    shape = tuple(int(d) for d in getattr(leaf, "shape", ()))
    sizes = [max(1, min(int(u), d)) for u, d in zip(unit, shape, strict=False)]
    sizes += shape[len(sizes) :]
    unit_bytes = math.prod(sizes) * itemsize_of(leaf)
    across = math.prod(-(-d // u) for d, u in zip(shape[1:], sizes[1:], strict=True))
    units = -(-min(rows, shape[0] if shape else rows) // sizes[0]) * across
    if _h5py_dataset(leaf):
        own = _H5PY_PER_CHUNK_BYTES * units + _H5PY_OWN_BYTES
        return _H5PY_COPIES * unit_bytes + own
    if not _zarr_array(leaf):
        return _OTHER_COPIES * unit_bytes
    sharded = getattr(leaf, "shards", None) is not None
    copies = _SHARD_COPIES if sharded else _CHUNK_COPIES
    at_once = min(units, _concurrency())
    # The next one's copies, where more are to come, else a copy's worth.
    held = copies * (at_once + 1) if units > at_once else copies * at_once + 1
    return held * unit_bytes + _WRITE_SLACK_BYTES
