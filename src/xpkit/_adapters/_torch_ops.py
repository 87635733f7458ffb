"""torch's own paths behind the facade's operations (``top_k`` by ``torch.topk``, its hot paths), and its default dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base import FastOps
from ._top_k import along

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from .._typing import Array, Namespace
    from ._top_k import TopK

__all__ = ["set_default_dtype", "torch_fast_ops", "torch_top_k"]


def torch_top_k(x: Array, k: int, axis: int, *, largest: bool) -> TopK:
    """``torch.topk(x, k, dim=axis, largest=largest, sorted=True)``.

    torch has no ``topk`` kernel for uint16, uint32 and uint64 on the CPU
    (``NotImplementedError``), nor a ``gather`` for them: those take
    ``torch.sort`` (stable), which gives the values and their indices at
    once, and its first k. Any other error (an OOM among them) propagates.
    """
    import torch

    try:
        values, indices = torch.topk(x, k, dim=axis, largest=largest, sorted=True)
    except NotImplementedError:
        values, indices = torch.sort(x, dim=axis, descending=largest, stable=True)
        first = along(axis, slice(0, k))
        return values[first], indices[first]
    return values, indices


def set_default_dtype(torch: ModuleType, name: str) -> Callable[[], None] | None:
    """``torch.set_default_dtype(torch.<name>)``; what sets the one before back.

    None where ``name`` is the default already: nothing changed.
    """
    dtype, before = getattr(torch, name), torch.get_default_dtype()
    if dtype == before:
        return None
    torch.set_default_dtype(dtype)

    def undo() -> None:
        torch.set_default_dtype(before)

    return undo


def _on_two_devices(a: Array, b: Array) -> None:
    """ValueError: one of ``A`` and ``B`` is a meta tensor, the other has values.

    torch's ``matmul`` of a CPU tensor and a meta one returned a CPU tensor of
    uninitialised memory (other devices raise torch's RuntimeError).
    """
    msg = (
        f"A and B are on two devices ({a.device} and {b.device}): arrays of "
        "one library on two devices do not mix; move one with Backend.to_device"
    )
    raise ValueError(msg)


def torch_fast_ops(xp: Namespace, torch: ModuleType) -> FastOps:
    """Native torch calls where the compat wrapper only adds overhead.

    ``matmul`` of two tensors is ``torch.matmul``, its operands promoted as
    the standard does where torch refuses mixed dtypes with a RuntimeError
    (float32 with float16: it refuses every mixed pair, so no dtype check
    on the way in; the wrapper refused it too); ``sort`` takes the values of a
    stable ``Tensor.sort`` (the standard's default: it orders -0.0 before
    0.0 as they came, as the wrapper does; a 0-d tensor, which torch
    returns as it is, is an IndexError as elsewhere); ``expand_dims`` is
    ``torch.unsqueeze``; ``concat`` is ``torch.cat`` (which promotes dtypes
    as the standard does).
    """
    tensor, native_matmul, unsqueeze = torch.Tensor, torch.matmul, torch.unsqueeze
    native_sort = tensor.sort
    compat_matmul, compat_sort, compat_expand = xp.matmul, xp.sort, xp.expand_dims
    result_type = xp.result_type
    native_cat, compat_concat = torch.cat, xp.concat

    def matmul(a: Array, b: Array) -> Array:
        if type(a) is tensor and type(b) is tensor:
            if a.is_meta is not b.is_meta:  # (torch gave uninitialised memory)
                _on_two_devices(a, b)
            try:
                return native_matmul(a, b)
            except RuntimeError:
                if a.dtype == b.dtype:
                    raise  # (shapes: the facade says which)
        elif not (isinstance(a, tensor) and isinstance(b, tensor)):
            return compat_matmul(a, b)
        elif a.is_meta is not b.is_meta:  # (a Parameter, another subclass)
            _on_two_devices(a, b)
        elif a.dtype == b.dtype:
            return native_matmul(a, b)
        # mixed dtypes, which torch refuses (float32 with float16): promoted
        # as the standard does (unsigned ints beside others: RuntimeError,
        # which the facade tells as a TypeError)
        dtype = result_type(a, b)
        return native_matmul(a.to(dtype), b.to(dtype))

    def sort(x: Array, /, *, axis: int = -1) -> Array:
        if type(x) is tensor:  # (torch's argument parser charges for each arg)
            if not x.ndim:  # (torch returns a 0-d tensor as it is)
                msg = "a 0-dimensional tensor has no axis to sort"
                raise IndexError(msg)
            if axis == -1:
                return native_sort(x, stable=True)[0]
            return native_sort(x, dim=axis, stable=True)[0]
        return compat_sort(x, axis=axis)

    def expand_dims(x: Array, /, *, axis: int = 0) -> Array:
        if type(x) is tensor:
            return unsqueeze(x, axis)  # IndexError out of range, as compat's
        return compat_expand(x, axis=axis)

    def concat(arrays: Sequence[Array], /, *, axis: int | None = 0) -> Array:
        # torch.cat promotes dtypes as the standard does; axis=None (flatten)
        # is the compat wrapper's job.
        if axis is None:
            return compat_concat(arrays, axis=axis)
        out = native_cat(arrays) if axis == 0 else native_cat(arrays, axis)
        if out.ndim != 1 and any(a.ndim != out.ndim for a in arrays):
            # (torch.cat skipped an empty 1-D tensor: legacy; the facade explains)
            msg = "arrays must all have the same number of axes"
            raise ValueError(msg)
        return out

    return FastOps(
        matmul=matmul,
        sort=sort,
        expand_dims=expand_dims,
        concat=concat,
        zeros_like=torch.zeros_like,
        ones_like=torch.ones_like,
        full_like=torch.full_like,
    )
