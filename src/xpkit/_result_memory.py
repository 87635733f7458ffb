"""Whether ``fn``'s result shares memory with what it read, and copies of one's own.

`xpkit._outputs.Outputs` keeps a result's arrays as the outputs only where
they share nothing with ``fn``'s inputs and whole operands
(`kept_as_they_are`), holds copies (`copied`) of rows ``fn`` runs past
before they are handed over, and writes outputs that are inputs last
(`in_write_order`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._adapters._registry import adapter_for_array, get_adapter

if TYPE_CHECKING:
    from ._adapters._layout import Extent
    from ._typing import Array, HostArray

__all__ = ["copied", "in_write_order", "kept_as_they_are", "shares_nothing"]


def kept_as_they_are(leaves: list[Array], sources: tuple[Array, ...]) -> bool:
    """Whether host ``leaves`` can be the outputs as they are.

    Writable NumPy arrays, distinct, that share no memory with what
    ``fn`` read (``sources``: its inputs and whole operands, seen on the
    host where their memory is host memory).
    """
    for leaf in leaves:
        if type(leaf) is not np.ndarray or not leaf.flags.writeable:
            return False
    if len(leaves) > 1 and any(
        np.may_share_memory(a, b) for i, a in enumerate(leaves) for b in leaves[i + 1 :]
    ):
        return False
    return all(shares_nothing(leaf, sources) for leaf in leaves)


def shares_nothing(leaf: HostArray, sources: tuple[Array, ...]) -> bool:
    """Whether host ``leaf`` shares no memory with ``sources`` (seen on the host).

    Two distinct arrays that each own their memory (``flags.owndata``: NumPy
    allocated it for them) hold two allocations, which never overlap: no
    bounds are compared. Any other pair goes to ``np.may_share_memory``. A
    source with no host view whose memory is known to lie on the host (a
    torch tensor with its conjugate or negative bit set, whose resolved
    result is its very memory) is compared by bounds (`Extent.overlaps`).
    """
    owns = leaf.flags.owndata
    for source in sources:
        view: HostArray | None = source
        if type(source) is not np.ndarray:  # (an ndarray is its own memory)
            adapter = adapter_for_array(source)
            view = None if adapter is None else adapter.host_view(source)
            if view is None and adapter is not None and adapter.writable_rows:
                # (immutable arrays, JAX's, a writable result cannot be)
                where = adapter.memory_extent(source)
                if where is not None and where.overlaps(_extent_of(leaf)):
                    return False
        if view is None:
            continue
        if owns and view is not leaf and view.flags.owndata:
            continue
        if np.may_share_memory(leaf, view):
            return False
    return True


def _extent_of(leaf: HostArray) -> Extent:
    """Where host ``leaf``'s elements lie."""
    where = get_adapter("numpy").memory_extent(leaf)
    assert where is not None  # (a NumPy array's memory is its own)
    return where


def copied(leaf: Array) -> Array:
    """``leaf`` in memory of its own, by its library (itself where none is known)."""
    if type(leaf) is np.ndarray:
        return leaf.copy()
    adapter = adapter_for_array(leaf)
    return leaf if adapter is None else adapter.own_copy(leaf)


def in_write_order(
    leaves: list[Array], in_place: tuple[int, ...]
) -> list[tuple[int, Array]]:
    """``(position, leaf)`` in the order to write them: those in place last.

    ``in_place``: the positions whose output is an input itself. A leaf
    may be a view of ``fn``'s rows (``r[:, 0]``), which writing that input
    first changed before the view was copied (``[100, 102, ...]`` for
    ``[0, 2, ...]``). Where several are in place, each but the first is
    copied before any of them is written.
    """
    first = [(i, leaf) for i, leaf in enumerate(leaves) if i not in in_place]
    last = [
        (i, leaves[i] if k == 0 else copied(leaves[i])) for k, i in enumerate(in_place)
    ]
    return first + last
