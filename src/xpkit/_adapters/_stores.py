"""Which arrays of an on-disk store an executor's workers can write themselves.

`map_batches(..., out=..., executor=...)` lets each task write its own rows
where every worker reaches the same store and the array travels to them
as a handle to it: a zarr array in a local directory (shared by the
workers of one host, or of many on a shared filesystem) or an fsspec or
object store. A zarr array in memory would travel as a copy, and an
``np.memmap`` pickles as a plain array: those are written by the caller's
process.
"""

from __future__ import annotations

import sys

__all__ = ["written_by_workers"]

#: zarr's stores that a worker reaches through the pickled array.
_SHARED_ZARR_STORES = frozenset({"LocalStore", "FsspecStore", "ObjectStore"})


def written_by_workers(leaf: object) -> bool:
    """Whether the workers can write rows of ``leaf`` themselves (see the module)."""
    zarr = sys.modules.get("zarr")
    if zarr is None or not isinstance(leaf, zarr.Array):
        return False
    return type(leaf.store).__name__ in _SHARED_ZARR_STORES
