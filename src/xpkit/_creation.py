"""The namespace's creation functions, bound once to a `Backend`'s device."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = ["Creation", "creation_on"]

ArrayT = TypeVar("ArrayT")


class Creation(NamedTuple, Generic[ArrayT]):
    """``b.create``: the standard's creation functions on ``b``'s device.

    Each is the namespace's own function (``b.xp.zeros``, ...) with
    ``device=b.native_device`` bound: the library's signatures, defaults
    (torch's float32 default dtype included) and dtype objects, and the
    array lands on the backend's device without repeating ``device=``. An
    explicit ``device=`` still wins. `Backend.asarray` and `Backend.full`
    are the checked versions (NumPy's dtype rules, values kept by casts);
    these cost what the library's own call costs.

    Each returns the backend's array type (``b.create.zeros(3)`` is a
    ``torch.Tensor`` on a ``Backend[torch.Tensor]``); the parameters are
    the library's own, so they are not typed here.

    Examples
    --------
    >>> import xpkit
    >>> b = xpkit.Backend("numpy")
    >>> b.create.arange(3)
    array([0, 1, 2])
    >>> b.create.zeros((2, 2)).shape
    (2, 2)
    """

    asarray: Callable[..., ArrayT]
    zeros: Callable[..., ArrayT]
    ones: Callable[..., ArrayT]
    empty: Callable[..., ArrayT]
    full: Callable[..., ArrayT]
    arange: Callable[..., ArrayT]
    linspace: Callable[..., ArrayT]
    eye: Callable[..., ArrayT]


def creation_on(xp: Any, native: Any) -> Creation[Any]:
    """`Creation` for namespace ``xp`` with ``device=native`` bound."""
    return Creation(
        *(
            functools.partial(getattr(xp, name), device=native)
            for name in Creation._fields
        )
    )
