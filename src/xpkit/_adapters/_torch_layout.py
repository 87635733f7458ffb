"""What a tensor's memory allows: writing rows into it, sharing it, where it lies.

The torch adapter's answers to `Adapter.unwritable`, `Adapter.unshareable`
and `Adapter.memory_extent`, for a tensor whose library is imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._layout import Extent, Unshareable, extent, overlaps_itself

if TYPE_CHECKING:
    from .._typing import Array

__all__ = ["tensor_extent", "tensor_unshareable", "tensor_unwritable"]


def tensor_unwritable(x: Array, inference_mode: bool, strided: bool) -> str | None:
    """Why rows cannot be written into ``x``, or None.

    A meta tensor (no memory), a sparse one (``strided``: its layout is
    strided), a tensor that requires grad, an inference tensor outside
    inference mode (``inference_mode``: whether it is on), or one whose
    elements share memory (expanded, or overlapping strides).
    """
    if x.device.type == "meta":
        return "a meta tensor: it has a shape and a dtype but no memory to write into"
    if not strided:
        return (
            f"a sparse tensor (layout {x.layout}), whose rows cannot be written "
            "in place; give a dense one"
        )
    if x.requires_grad:
        return "a tensor that requires grad (autograd refuses writes into it)"
    if x.is_inference() and not inference_mode:
        return (
            "an inference tensor (made under torch.inference_mode, which "
            "alone may write into it)"
        )
    if overlaps_itself(x.shape, x.stride(), 1):  # (strides in elements)
        return (
            f"a tensor whose elements share memory (strides {tuple(x.stride())} "
            f"for shape {tuple(x.shape)}: expanded or overlapping); give a "
            "contiguous one"
        )
    return None


def tensor_unshareable(x: Array, strided: bool) -> Unshareable | None:
    """Lazy conjugate and negative bits (DLPack drops them), zero strides.

    ``x.conj()`` of a complex tensor, and its ``.imag``, are views with
    a bit that says "negate when read": DLPack exports the memory
    without it. ``expand()`` views (``strided``: a strided tensor) have
    zero strides.
    """
    if x.is_conj():
        return Unshareable(
            "is a lazy conj() view, whose conjugate bit DLPack drops", False
        )
    if x.is_neg():
        return Unshareable("is a lazy negated view, whose bit DLPack drops", False)
    if strided and any(
        n > 1 and s <= 0 for n, s in zip(x.shape, x.stride(), strict=True)
    ):
        return Unshareable("has zero strides (an expand()ed view)", False)
    return None


def tensor_extent(x: Array) -> Extent | None:
    """A strided tensor's extent on its device (the host's for the CPU).

    None on the ``meta`` device, which holds no memory.
    """
    if x.device.type == "meta":
        return None
    size = x.element_size()
    place = "host" if x.device.type == "cpu" else str(x.device)
    strides = [step * size for step in x.stride()]
    return extent(place, x.data_ptr(), x.shape, strides, size)
