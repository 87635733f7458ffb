"""What the pytest plugin's lazy modes ask of an adapter: tags and patches.

A test module declares its lazy functions (``xpkit.testing.lazy_xp_function``,
or array-api-extra's own): each is tagged (`LazyTags`), and an adapter whose
library runs lazily or compiled wraps them for its modes (`Tagged`,
`Replace`), through array-api-extra's ``patch_lazy_xp_functions`` where it
does that itself (`patched_by_array_api_extra`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, NamedTuple, TypedDict

from .._typing import UserFunction

if TYPE_CHECKING:
    import pytest

    from .._typing import Namespace

__all__ = [
    "LazyKeywords",
    "LazyTags",
    "Replace",
    "Tagged",
    "patched_by_array_api_extra",
]


class LazyTags(NamedTuple):
    """How a function declared with ``xpkit.testing.lazy_xp_function`` runs.

    ``jit``/``compiled``: whether it runs jitted/compiled in those modes;
    ``computes``: how many computes of a lazy graph one call may make;
    ``host_copies``: how many times one call may turn an array into a NumPy
    array (None: not counted); ``by_array_api_extra``: declared with
    array-api-extra's own ``lazy_xp_function`` (a suite moved onto the
    plugin as it is), which tags it itself.
    """

    jit: bool
    compiled: bool
    computes: int
    host_copies: int | None = None
    #: Declared with array-api-extra's own ``lazy_xp_function``: its
    #: ``patch_lazy_xp_functions`` runs it its way, with its own messages.
    by_array_api_extra: bool = False


class LazyKeywords(TypedDict, total=False):
    """array-api-extra's ``lazy_xp_function`` keywords, as an adapter sets them."""

    allow_dask_compute: bool | int
    jax_jit: bool


#: A test module's declared functions, each with its `LazyTags`; a method as
#: ``(cls, "name")`` (array-api-extra's ``lazy_xp_function`` form).
Tagged = list[tuple[UserFunction | tuple[type, str], LazyTags]]
#: ``replace(wrap)``: a context in which each declared function ``f`` of the
#: test module is ``wrap(f, tags)`` (where that is not None).
Replace = Callable[
    [Callable[[UserFunction, LazyTags], UserFunction | None]],
    AbstractContextManager[None],
]


def patched_by_array_api_extra(
    request: pytest.FixtureRequest,
    xp: Namespace,
    tagged: Tagged,
    tag: Callable[[LazyTags], LazyKeywords],
) -> AbstractContextManager[None]:
    """array-api-extra's ``patch_lazy_xp_functions`` for the declared functions.

    Each is tagged with its ``lazy_xp_function`` keywords (``tag(tags)``:
    the adapter's library's own), then patched for namespace ``xp``.
    """
    from array_api_extra.testing import lazy_xp_function, patch_lazy_xp_functions

    for func, tags in tagged:
        if not tags.by_array_api_extra:  # (tagged by array-api-extra already)
            lazy_xp_function(func, **tag(tags))
    context: AbstractContextManager[None] = patch_lazy_xp_functions(request, xp=xp)
    return context
