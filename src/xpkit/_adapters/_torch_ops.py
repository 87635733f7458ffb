"""torch's own paths behind the facade's operations (``top_k`` by ``torch.topk``), and its default dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._top_k import sorted_top_k

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from .._typing import Array, Namespace
    from ._top_k import TopK

__all__ = ["set_default_dtype", "torch_top_k"]


def torch_top_k(xp: Namespace, x: Array, k: int, axis: int, *, largest: bool) -> TopK:
    """``torch.topk(x, k, dim=axis, largest=largest, sorted=True)``.

    torch has no ``topk`` kernel for uint16, uint32 and uint64 on the CPU
    (``NotImplementedError``): those take the stable sort. Any other error
    (an OOM among them) propagates.
    """
    import torch

    try:
        values, indices = torch.topk(x, k, dim=axis, largest=largest, sorted=True)
    except NotImplementedError:
        return sorted_top_k(xp, x, k, axis, largest=largest)
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
