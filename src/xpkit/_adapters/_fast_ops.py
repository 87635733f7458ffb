"""`FastOps`: the standard's functions an adapter binds once per `Backend`."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._typing import Array

__all__ = ["FastOps"]


class FastOps(NamedTuple):
    """Functions with the standard's signatures, bound once per Backend."""

    matmul: Callable[[Array, Array], Array]
    sort: Callable[..., Array]
    expand_dims: Callable[..., Array]
    concat: Callable[..., Array]
    zeros_like: Callable[..., Array]
    ones_like: Callable[..., Array]
    full_like: Callable[..., Array]
