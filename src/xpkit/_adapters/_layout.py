"""Host (NumPy) memory layouts: which other libraries can view as they are.

Libraries that import an array without copying it view its memory as it
is. Some layouts they cannot view (torch aborts the process on negative
strides), some they would view wrongly (swapped bytes), and some they
would make writable where the source is not (torch has no read-only
tensors). The adapters ask these questions of NumPy memory; each adapter
answers them for its own library's arrays (`Adapter.unshareable`). An
`Extent` says where an array's elements lie (on the host or a device), so
that ``out=`` can be told apart from what ``fn`` reads
(`Adapter.memory_extent`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from .._typing import HostArray

__all__ = [
    "Extent",
    "Unshareable",
    "contiguous_host_copy",
    "dlpack_place",
    "extent",
    "host_extent",
    "host_unshareable",
    "native_layout",
    "overlaps_itself",
]


class Unshareable(NamedTuple):
    """Why an array's memory must not be handed to another library as it is.

    ``reason`` completes "<parameter> ..." ("is read-only", "has negative
    strides"). ``read_only`` is True when the one reason is that writes must
    not reach the array: a library whose arrays keep that (NumPy's read-only
    flag, JAX's immutable arrays) may still share its memory. Otherwise no
    library may: a copy in a plain layout is made first.
    """

    reason: str
    read_only: bool


def host_unshareable(host: HostArray) -> Unshareable | None:
    """Why the NumPy array ``host`` cannot be shared as it is, or None.

    Swapped bytes, negative or zero strides (reversed and broadcast views)
    and strides that are not whole items (fields of structured arrays) are
    layouts another library cannot view as they are; a read-only array may
    be shared only with a library that keeps it read-only.
    """
    if host.size == 0:  # (no element to view: NumPy 2 gives it zero strides)
        return None
    if not host.dtype.isnative:
        return Unshareable("has byte-swapped values", read_only=False)
    size = host.dtype.itemsize
    for n, stride in zip(host.shape, host.strides, strict=True):
        # (torch refuses these on an axis of one element too, where they are
        # never taken: `native_layout` copies for them on every axis.)
        if stride < 0:
            return Unshareable(
                "has negative strides (a reversed view)", read_only=False
            )
        if size and stride % size:
            return Unshareable("has strides that are not whole items", read_only=False)
        if stride == 0 and n > 1:
            return Unshareable("has zero strides (a broadcast view)", read_only=False)
    if not host.flags.writeable:
        return Unshareable("is read-only", read_only=True)
    return None


def contiguous_host_copy(host: HostArray) -> HostArray:
    """A writable, C-contiguous copy of ``host`` in native byte order."""
    return np.array(host, dtype=host.dtype.newbyteorder("="), order="C", copy=True)


def native_layout(host: HostArray) -> HostArray:
    """``host`` in native byte order with non-negative, item-aligned strides.

    A copy only when needed: for libraries (torch, CuPy) that refuse NumPy's
    byte-swapped arrays, reversed views (``x[::-1]``) and strides that are
    not a multiple of the item size (fields of structured arrays).
    """
    if not host.dtype.isnative:
        host = host.astype(host.dtype.newbyteorder("="))
    size = host.dtype.itemsize
    if any(s < 0 or (size and s % size) for s in host.strides):
        # (A copy: NumPy calls an array whose only odd strides are on axes of
        # one element contiguous, and ascontiguousarray would keep them.)
        host = host.copy(order="C")
    return host


class Extent(NamedTuple):
    """Where an array's elements lie in memory, for telling overlaps apart.

    ``place`` names the memory (``"host"`` for the process's own, a device
    otherwise); ``low`` and ``high`` are the first byte the array can touch
    and one past the last (equal for an empty array); ``layout`` is its
    shape, strides in bytes and item size: two arrays with equal extents
    are the same elements in the same order.
    """

    place: Hashable
    low: int
    high: int
    layout: tuple[tuple[int, ...], tuple[int, ...], int]
    address: int = 0

    def overlaps(self, other: Extent) -> bool:
        """Whether the two may share a byte: their bounds meet.

        As NumPy's ``may_share_memory`` tells them: interleaved views of one
        buffer (two columns) count. `shares` tells them apart.
        """
        return (
            self.place == other.place
            and self.low < other.high
            and other.low < self.high
        )

    def shares(self, other: Extent) -> bool:
        """Whether the two share a byte, exactly (``np.shares_memory``).

        Where the bounds meet, the two layouts are solved for a common byte
        (within `EXACT_WORK` steps; beyond that, taken as shared). Nothing
        is read: the arrays are described to NumPy by address alone.
        """
        if not self.overlaps(other):
            return False
        try:
            return bool(
                np.shares_memory(  # (NumPy's stubs admit -1 and 0 alone; any int runs)
                    _described(self),
                    _described(other),
                    EXACT_WORK,  # type: ignore[arg-type]
                )
            )
        except np.exceptions.TooHardError:
            return True


#: Steps ``np.shares_memory`` may take to tell two layouts apart.
EXACT_WORK = 100_000


class _At:
    """An array's layout at an address, as NumPy's array interface spells it."""

    def __init__(self, where: Extent) -> None:
        shape, strides, itemsize = where.layout
        self.__array_interface__ = {
            "data": (where.address, True),
            "shape": shape,
            "strides": strides,
            "typestr": f"|V{itemsize}",
            "version": 3,
        }


def _described(where: Extent) -> HostArray:
    """A NumPy array over ``where``'s bytes, for telling overlaps only (never read)."""
    return np.asarray(_At(where))


def extent(
    place: Hashable,
    address: int,
    shape: Sequence[int],
    strides: Sequence[int],
    itemsize: int,
) -> Extent:
    """The `Extent` of an array at ``address`` (its first element) of this layout."""
    low = high = address
    layout = (tuple(shape), tuple(strides), itemsize)
    for n, stride in zip(shape, strides, strict=True):
        if n == 0:
            return Extent(place, address, address, layout, address)
        if stride > 0:
            high += (n - 1) * stride
        else:
            low += (n - 1) * stride
    return Extent(place, low, high + itemsize, layout, address)


#: DLPack's device types whose memory two libraries name alike: the host's,
#: and CUDA's (ROCm's too: torch names both devices "cuda").
_DLPACK_GPU = {2: "cuda", 10: "cuda"}


def dlpack_place(device_type: int, device_id: int) -> Hashable:
    """The `Extent.place` of memory on DLPack's ``(device_type, device_id)``.

    ``"host"`` for the CPU, ``"cuda:<id>"`` for a CUDA or ROCm device (as
    torch names its devices), so that arrays of two libraries compare.
    """
    if device_type == 1:
        return "host"
    kind = _DLPACK_GPU.get(device_type)
    return f"{kind}:{device_id}" if kind else (f"dlpack-{device_type}", device_id)


def overlaps_itself(
    shape: Sequence[int], strides: Sequence[int], itemsize: int
) -> bool:
    """Whether two elements of this layout may share memory (writes would clash).

    The axes of more than one element, by the size of their step: each
    step must clear every element the smaller steps reach. That holds for
    every layout slicing and transposing make; a layout that fails it
    (a zero step, ``as_strided`` rows that overlap) is taken as
    overlapping, the rare interleaved one that does not included. A layout
    of no elements overlaps nowhere (NumPy gives an empty array zero strides).
    """
    if 0 in shape:
        return False
    reach = itemsize
    for step, n in sorted(
        (abs(st), n) for st, n in zip(strides, shape, strict=True) if n > 1
    ):
        if step < reach:
            return True
        reach = step * n
    return False


def host_extent(host: HostArray) -> Extent:
    """The `Extent` of a NumPy array's memory."""
    address: int = host.__array_interface__["data"][0]
    return extent("host", address, host.shape, host.strides, host.dtype.itemsize)
