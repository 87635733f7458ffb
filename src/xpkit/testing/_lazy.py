"""Functions a test declares lazy: run under a compiler or a lazy graph.

`lazy_xp_function` tags a function for the pytest plugin's lazy variants
(``<backend>-jit``, ``<backend>-lazy``, ``<backend>-compile``: the modes each
adapter lists in `Adapter.test_modes`). Within a test of such a variant the
adapter runs the tagged functions of the test module its way
(`Adapter.lazy_context`): through array-api-extra's
``patch_lazy_xp_functions`` (a jitted function; computes counted and refused
beyond the allowance) or replaced by a compiled version (`replaced_functions`).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from .._adapters import LazyTags

__all__ = ["has_lazy_functions", "lazy_xp_function", "replaced_functions", "tagged"]

#: Tagged function -> how it runs in each mode.
_TAGS: weakref.WeakKeyDictionary[Callable[..., Any], LazyTags] = (
    weakref.WeakKeyDictionary()
)


def lazy_xp_function(
    func: Callable[..., Any],
    *,
    jit: bool = True,
    compiled: bool = True,
    computes: bool | int = False,
) -> None:
    """Declare ``func`` to be tested lazily by the xpkit plugin's variants.

    Call it at module level in a test module (or in a module listed in
    that test module's ``lazy_xp_modules``), on the function as the test
    module names it. In the ``*-jit`` variants ``func`` runs jitted (every
    argument that is not an array static); in the ``*-lazy`` variants a
    compute of the lazy graph beyond ``computes`` fails with the count; in
    the ``*-compile`` variants it runs under the library's compiler with the
    whole graph required, so a graph break (a Python ``if`` on an array
    value, ``float(x)``) fails. Elsewhere it runs as written.

    Parameters
    ----------
    func : callable
        A module-level function of the code under test.
    jit : bool, default True
        False: run it eagerly in the ``*-jit`` variants.
    compiled : bool, default True
        False: run it uncompiled in the ``*-compile`` variants.
    computes : bool or int, default False
        How many computes of a lazy graph one call may make (True: any).

    Raises
    ------
    TypeError
        ``func`` is not callable, or a flag has the wrong type.

    Returns
    -------
    None

    Examples
    --------
    >>> from xpkit.testing import lazy_xp_function
    >>> def double(x):
    ...     return x * 2
    >>> lazy_xp_function(double)
    """
    if not callable(func):
        msg = f"func must be callable, got {type(func).__qualname__}"
        raise TypeError(msg)
    for name, value in (("jit", jit), ("compiled", compiled)):
        if not isinstance(value, bool):
            msg = f"{name} must be a bool, got {value!r}"
            raise TypeError(msg)
    if not isinstance(computes, (bool, int)) or computes < 0:
        msg = f"computes must be a bool or a non-negative int, got {computes!r}"
        raise TypeError(msg)
    allowed = 1_000_000 if computes is True else int(computes)
    _TAGS[func] = LazyTags(jit=jit, compiled=compiled, computes=allowed)


def _search_targets(module: ModuleType) -> list[ModuleType]:
    return [module, *getattr(module, "lazy_xp_modules", [])]


def has_lazy_functions(module: ModuleType | None) -> bool:
    """Whether a test module (or its ``lazy_xp_modules``) declares lazy functions."""
    if module is None:
        return False
    return any(
        _is_tagged(value)
        for target in _search_targets(module)
        for value in list(vars(target).values())
    )


def _is_tagged(value: Any) -> bool:
    try:
        return value in _TAGS
    except TypeError:  # unhashable module attributes
        return False


def tagged(module: ModuleType) -> list[tuple[Callable[..., Any], LazyTags]]:
    """The tagged functions of a test module and its ``lazy_xp_modules``."""
    return [
        (value, _TAGS[value])
        for target in _search_targets(module)
        for value in list(vars(target).values())
        if _is_tagged(value)
    ]


@contextlib.contextmanager
def replaced_functions(
    module: ModuleType,
    wrap: Callable[[Callable[..., Any], LazyTags], Callable[..., Any] | None],
) -> Iterator[None]:
    """Within the block, each tagged function ``f`` of ``module`` is ``wrap(f, tags)``.

    Where ``wrap`` returns None the function is left as it is; every
    replaced one is restored on exit.
    """
    replaced: list[tuple[ModuleType, str, Any]] = []
    try:
        for target in _search_targets(module):
            for name, value in list(vars(target).items()):
                if not _is_tagged(value):
                    continue
                wrapped = wrap(value, _TAGS[value])
                if wrapped is not None:
                    replaced.append((target, name, value))
                    setattr(target, name, wrapped)
        yield
    finally:
        for target, name, value in reversed(replaced):
            setattr(target, name, value)
