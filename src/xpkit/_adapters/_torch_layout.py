"""What a tensor's memory allows: writing rows into it, sharing it, where it lies.

The torch adapter's answers to `Adapter.unwritable`, `Adapter.unshareable`
and `Adapter.memory_extent`, for a tensor whose library is imported.
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ._layout import Extent, Unshareable, extent, native_layout, overlaps_itself
from ._pages import read_only_host_memory

if TYPE_CHECKING:
    from .._typing import Array, DType, HostArray, NativeDevice

__all__ = [
    "tensor_extent",
    "tensor_not_updatable",
    "tensor_on_host",
    "tensor_over_read_only_memory",
    "tensor_refused",
    "tensor_unconvertible",
    "tensor_unshareable",
    "tensor_unwritable",
    "torch_takes",
    "widened_on_host",
]


def tensor_unconvertible(x: Array, strided: bool, torch: ModuleType) -> str | None:
    """Why ``x`` has no NumPy copy that keeps what it holds, or None.

    A meta tensor (no values), a nested one (rows of their own lengths), a
    sparse one (``strided``: its layout is strided; never densified), a
    quantized one (integers and a scale), a masked one (its mask would be
    lost, as a NumPy masked array's).
    """
    if isinstance(x, torch.masked.MaskedTensor):
        return (
            "a masked tensor (torch.masked), whose mask the conversion would "
            "lose: pass x.get_data() and x.get_mask() as two arrays"
        )
    if x.is_meta:
        return (
            "a meta tensor: it has a shape and a dtype but no values, so it "
            "cannot be converted or moved to a device that holds values"
        )
    if x.is_nested:
        return (
            "a nested tensor, whose rows may differ in length: pass "
            "x.to_padded_tensor(value), or map fn over x.unbind()"
        )
    if not strided:
        return (
            f"a sparse tensor (layout {x.layout}), which xpkit does not "
            "densify: pass x.to_dense() if the dense array fits, or map "
            "fn over its values"
        )
    if x.is_quantized:
        return (
            f"a quantized tensor ({x.dtype}: integers and a scale), whose "
            "values the conversion would not keep: pass x.dequantize()"
        )
    return None


def tensor_refused(x: Array, strided: bool, torch: ModuleType) -> str | None:
    """Why an operation of the facade refuses ``x``, or None.

    A nested, sparse (``strided``: its layout is strided) or quantized
    tensor, whose operations torch lacks (``sort`` of a sparse one met
    "aten::sort.stable not implemented for SparseCPU"), and a masked one
    (``at`` dropped its updates): as `tensor_unconvertible` names them.
    """
    if (
        strided
        and not x.is_nested
        and not x.is_quantized
        and not isinstance(x, torch.masked.MaskedTensor)
    ):
        return None
    return tensor_unconvertible(x, strided, torch)


def widened_on_host(dtype: DType, torch: ModuleType) -> DType | None:
    """The dtype a host copy of ``dtype`` has where NumPy lacks it, else None.

    bfloat16 and the 8-bit floats: float32; complex32 (two float16): complex64.
    """
    if dtype == torch.bfloat16 or (dtype.is_floating_point and dtype.itemsize == 1):
        return torch.float32
    if dtype == torch.complex32:
        return torch.complex64
    return None


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
    if tensor_over_read_only_memory(x):
        return (
            "a tensor over read-only memory (torch.from_numpy of a read-only "
            "array or memmap: a write into it ends the process); give a "
            "writable one"
        )
    return None


def tensor_on_host(x: Array, torch: ModuleType) -> HostArray:
    """``x`` as a NumPy array: detached, on the CPU, widened where NumPy lacks its dtype.

    Memory is shared with a CPU tensor where it can be, as ``x.numpy()``
    shares it: one over read-only pages (``torch.from_numpy`` of a
    read-only memmap) comes back as writable as torch holds it (asking the
    page map on every conversion would cost a millisecond a call). What
    xpkit writes into asks first: `Backend.at` and ``map_batches(out=)``
    follow the NumPy array's ``base`` to the tensor
    (`TorchAdapter.over_read_only_memory`). The view of a tensor that
    requires grad is read-only: torch refuses ``x.numpy()`` for it, as a
    write would change what autograd saved, unseen.
    """
    t = x.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    wider = widened_on_host(t.dtype, torch)  # NumPy has no bfloat16, no float8
    if wider is not None:
        t = t.to(wider)
    t = t.resolve_conj().resolve_neg()
    # (memory torch allocated is writable: said of the tensor NumPy's array
    # holds as its base, read before .numpy() makes the storage look foreign)
    allocated = not torch.compiler.is_compiling() and t.untyped_storage().resizable()
    host = np.asarray(t.numpy())  # (while dynamo traces: no memory, no storage)
    if allocated and host.base is not None:
        _TORCH_ALLOCATED[id(host.base)] = host.base
    if x.requires_grad and _same_memory(x, t, torch):
        # (torch refuses x.numpy() for it: a write through NumPy would change
        # what autograd saved without a trace, and the gradient silently;
        # a copy made on the way, of bfloat16 or from a GPU, stays writable)
        host.flags.writeable = False
    return host


def _same_memory(x: Array, t: Array, torch: ModuleType) -> bool:
    """Whether the CPU tensor ``t`` made of ``x`` is ``x``'s memory (no copy on the way).

    (Asked of a tensor that requires grad only, and not while dynamo
    traces: it has no storage to compare there.)
    """
    if torch.compiler.is_compiling() or x.device.type != "cpu":
        return False
    ptr: int = t.untyped_storage().data_ptr()
    return bool(ptr == x.untyped_storage().data_ptr())


def tensor_not_updatable(
    x: Array, inference_mode: bool, strided: bool, grad_enabled: bool = True
) -> str | None:
    """Why ``x`` cannot be updated in place (``x[idx] = y``), or None.

    Its elements share memory (an update of one writes them all), a leaf
    that requires grad where grad is on (``grad_enabled``: autograd refuses
    it; under ``torch.no_grad`` it is how weights are updated; a tensor
    computed in a graph is updated in the graph), an inference tensor outside inference mode
    (``inference_mode``: whether it is on), or it lies over read-only pages
    (a write ends the process). The answer completes "x is ...". None for
    one that is not ``strided`` (sparse: torch's own error).
    """
    if not strided:
        return None
    if overlaps_itself(x.shape, x.stride(), 1):
        return "a tensor whose elements share memory (an expand()ed view)"
    if x.requires_grad and x.is_leaf and grad_enabled:
        return "a leaf tensor that requires grad (autograd refuses in-place updates)"
    base = x._base if x.requires_grad and grad_enabled else None  # (a view's)
    if base is not None and base.is_leaf and base.requires_grad:
        return (
            "a view of a leaf tensor that requires grad (autograd refuses "
            "in-place updates)"
        )
    if x.is_inference() and not inference_mode:
        return "an inference tensor (only torch.inference_mode may update it)"
    if tensor_over_read_only_memory(x):
        return "a tensor over read-only memory (a write into it ends the process)"
    return None


def tensor_over_read_only_memory(x: Array) -> bool:
    """Whether CPU ``x`` lies over memory torch did not allocate, and cannot write.

    Only memory torch did not allocate (its storage is not resizable: from
    NumPy, DLPack) is looked up in the process's page map, once for each
    storage while it lives (`_READ_ONLY`: a look costs about half a
    millisecond; its pages stay mapped while the storage holds them).
    """
    if x.device.type != "cpu":
        return False
    if _TORCH_ALLOCATED.get(id(x)) is x:  # (a NumPy array's owner: `tensor_on_host`)
        return False
    storage = x.untyped_storage()
    if storage.resizable():
        return False
    try:
        return _READ_ONLY[storage]
    except (KeyError, TypeError):
        pass
    low = storage.data_ptr()
    read_only = read_only_host_memory(low, low + storage.nbytes())
    with contextlib.suppress(TypeError):  # (no weak reference: looked up each time)
        _READ_ONLY[storage] = read_only
    return read_only


#: Whether a storage torch did not allocate lies over read-only pages, while
#: it lives (torch keeps one Python object for a storage: `tensor_over_read_only_memory`).
_READ_ONLY: weakref.WeakKeyDictionary[object, bool] = weakref.WeakKeyDictionary()

#: The tensors `tensor_on_host` shared with NumPy whose memory torch allocated
#: (writable), by id while they live (a tensor's ``==`` is elementwise: no
#: key): a NumPy array's owner, asked before a write.
_TORCH_ALLOCATED: weakref.WeakValueDictionary[int, object] = (
    weakref.WeakValueDictionary()
)


def tensor_unshareable(x: Array, strided: bool) -> Unshareable | None:
    """Lazy conjugate and negative bits (DLPack drops them), zero strides, read-only memory.

    ``x.conj()`` of a complex tensor, and its ``.imag``, are views with
    a bit that says "negate when read": DLPack exports the memory
    without it. ``expand()`` views (``strided``: a strided tensor) have
    zero strides. A tensor over read-only pages (a read-only memmap's) is
    exported as writable: a write through the other library's array
    would end the process.
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
    if strided and tensor_over_read_only_memory(x):  # (DLPack exports it writable)
        return Unshareable(
            "lies over read-only memory (torch.from_numpy of a read-only array "
            "or memmap), which DLPack exports as writable",
            False,
        )
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


#: NumPy's ``long long`` types that torch refuses by type, and the int64 and
#: uint64 of the same size it takes (where ``long`` is 64 bits; else itself).
_LONG_LONG = {
    char: np.dtype(view)
    for char, view in (("q", np.int64), ("Q", np.uint64))
    if np.dtype(view).char != char
}


def torch_takes(host: HostArray) -> HostArray:
    """``host`` in a layout ``torch.asarray`` takes: itself where it is one.

    torch refuses negative strides (``x[::-1]``), swapped bytes (``'>f8'``)
    and NumPy extension dtypes (ml_dtypes' bfloat16, which goes through
    float32 exactly); those are copied first. So is a read-only array: a
    tensor over its memory could be written. NumPy's ``longlong`` and
    ``ulonglong`` (``'q'``, ``'Q'``: what ``np.array`` makes of an int at
    or above 2**63), which torch refuses by type, are viewed as the int64
    and uint64 of the same bytes.
    """
    host = native_layout(host)
    if not host.flags.writeable:
        host = host.copy()
    char = host.dtype.char
    if char in _LONG_LONG:
        return host.view(_LONG_LONG[char])
    if host.dtype.name == "bfloat16":  # ml_dtypes': torch.asarray refuses it
        return host.astype(np.float32)
    return host


def indexed(native: NativeDevice) -> NativeDevice:
    """``native`` with its index: ``torch.device("cuda")`` is device 0's."""
    if native.type != "cpu" and native.index is None:
        return type(native)(native.type, 0)
    return native


def narrowed_by_bits(x: Array, dtype: DType) -> Array:
    """float32 to bfloat16 by its upper half, NaNs' signs and payloads kept.

    (`Adapter.narrowed_back`: torch's cast makes every NaN 0xFFFF, so
    0x7FC1 came back negative.) A bfloat16 widened to float32 is its bits
    in the upper half: the upper half is the bfloat16, exactly. Other
    dtypes by ``Tensor.to``.
    """
    torch = sys.modules["torch"]
    if dtype is torch.bfloat16 and x.dtype is torch.float32:
        return (x.view(torch.int32) >> 16).to(torch.int16).view(torch.bfloat16)
    return x.to(dtype)
