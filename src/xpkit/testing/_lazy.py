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
from typing import TYPE_CHECKING

from .._adapters._base import LazyTags
from .._statement import check_host_copies, statement_of

if TYPE_CHECKING:
    from .._typing import UserFunction

__all__ = ["has_lazy_functions", "lazy_xp_function", "replaced_functions", "tagged"]

#: Tagged function -> how it runs in each mode.
_TAGS: weakref.WeakKeyDictionary[UserFunction, LazyTags] = weakref.WeakKeyDictionary()


def lazy_xp_function(
    func: UserFunction,
    *,
    jit: bool | None = None,
    compiled: bool | None = None,
    computes: bool | int | None = None,
    host_copies: int | None = None,
) -> None:
    """Declare ``func`` to be tested lazily by the xpkit plugin's variants.

    Call it at module level in a test module (or in a module listed in
    that test module's ``lazy_xp_modules``), on the function as the test
    module names it. In the ``*-jit`` variants ``func`` runs jitted (every
    argument that is not an array static); in the ``*-lazy`` variants a
    compute of the lazy graph beyond ``computes`` fails with the count; in
    the ``*-compile`` variants it runs under the library's compiler with the
    whole graph required, so a graph break (a Python ``if`` on an array
    value, ``float(x)``) fails. Elsewhere it runs as written. A keyword left
    out takes its value from ``func``'s own `capabilities` statement, where
    it has one.

    Parameters
    ----------
    func : callable
        A module-level function of the code under test.
    jit : bool, optional
        False: run it eagerly in the ``*-jit`` variants. By default True,
        unless its statement names the ``jit`` mode.
    compiled : bool, optional
        False: run it uncompiled in the ``*-compile`` variants. By default
        True, unless its statement names the ``compile`` mode.
    computes : bool or int, optional
        How many computes of a lazy graph one call may make (True: any);
        by default its statement's ``computes``, else none.
    host_copies : int, optional
        In the eager variants of libraries other than NumPy, fail a call that
        turns an array into a NumPy array (``np.asarray(x)``, ``x.numpy()``,
        ``Backend.to_numpy``, ``.compute()``, ...) more than this many times,
        naming each place. By default its statement's, else not counted.

    Raises
    ------
    TypeError
        ``func`` is not callable, or a keyword has the wrong type.
    ValueError
        ``host_copies`` is negative.

    Returns
    -------
    None

    Examples
    --------
    >>> from xpkit.testing import lazy_xp_function
    >>> def double(x):
    ...     return x * 2
    >>> lazy_xp_function(double, host_copies=0)
    """
    if not callable(func):
        msg = f"func must be callable, got {type(func).__qualname__}"
        raise TypeError(msg)
    for name, value in (("jit", jit), ("compiled", compiled)):
        if value is not None and not isinstance(value, bool):
            msg = f"{name} must be a bool, got {value!r}"
            raise TypeError(msg)
    if computes is not None and (not isinstance(computes, (bool, int)) or computes < 0):
        msg = f"computes must be a bool or a non-negative int, got {computes!r}"
        raise TypeError(msg)
    check_host_copies(host_copies)
    stated = statement_of(func)
    if stated is not None:
        jit = "jit" not in stated.modes if jit is None else jit
        compiled = "compile" not in stated.modes if compiled is None else compiled
        computes = stated.computes if computes is None else computes
        host_copies = stated.host_copies if host_copies is None else host_copies
    allowed = 1_000_000 if computes is True else int(computes or 0)
    _TAGS[func] = LazyTags(
        jit=True if jit is None else jit,
        compiled=True if compiled is None else compiled,
        computes=allowed,
        host_copies=host_copies,
    )


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


def _is_tagged(value: object) -> bool:
    try:
        return value in _TAGS
    except TypeError:  # unhashable module attributes
        return False


def tagged(module: ModuleType) -> list[tuple[UserFunction, LazyTags]]:
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
    wrap: Callable[[UserFunction, LazyTags], UserFunction | None],
) -> Iterator[None]:
    """Within the block, each tagged function ``f`` of ``module`` is ``wrap(f, tags)``.

    Where ``wrap`` returns None the function is left as it is; every
    replaced one is restored on exit.
    """
    replaced: list[tuple[ModuleType, str, object]] = []
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
