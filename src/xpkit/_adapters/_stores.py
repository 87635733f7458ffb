"""On-disk stores as `map_batches(..., out=...)` writes them.

Two facts about a store's array that only its library knows:

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
  pickles as a plain array: those are written by the caller's process.
"""

from __future__ import annotations

import sys

__all__ = ["rows_per_write", "written_by_workers"]

#: zarr's stores that a worker reaches through the pickled array.
_SHARED_ZARR_STORES = frozenset({"LocalStore", "FsspecStore", "ObjectStore"})
#: Filesystems that live in one process (fsspec's protocols).
_IN_PROCESS = frozenset({"memory"})


def _zarr_array(leaf: object) -> bool:
    zarr = sys.modules.get("zarr")
    return zarr is not None and isinstance(leaf, zarr.Array)


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
