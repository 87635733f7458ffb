"""torch's own paths behind the facade's operations (``top_k`` by ``torch.topk``), and its default dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._top_k import along

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from .._typing import Array
    from ._top_k import TopK

__all__ = ["set_default_dtype", "torch_top_k"]


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
