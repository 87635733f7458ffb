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
import functools
import inspect
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, cast

from .._adapters._lazy_tags import LazyTags
from .._statement import check_host_copies, statement_of

if TYPE_CHECKING:
    from .._typing import UserFunction

    #: A declared function, or a method as ``(cls, "name")``.
    Declared = UserFunction | tuple[type, str]

__all__ = [
    "has_lazy_functions",
    "lazy_xp_function",
    "method_function",
    "method_of",
    "replaced_functions",
    "tagged",
    "unseen_declarations",
]

#: Tagged function -> how it runs in each mode.
_TAGS: weakref.WeakKeyDictionary[UserFunction, LazyTags] = weakref.WeakKeyDictionary()
#: Tagged callables that cannot be weakly referenced (NumPy's ufuncs and
#: array functions, ``scipy.special.erf``): held for the session.
_HELD_TAGS: dict[object, LazyTags] = {}
#: Tagged methods, ``(cls, "name")``: declared on that class, by name.
_METHOD_TAGS: dict[tuple[type, str], LazyTags] = {}
#: Module name -> the functions `lazy_xp_function` was called on there
#: (weakly, where they can be; ufuncs are held in `_HELD_TAGS` anyway).
_DECLARED_BY: dict[str, list[Callable[[], object]]] = {}


def lazy_xp_function(
    func: Declared,
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
    value; torch 2.13 traces ``float(x)`` and ``.item()`` without one)
    fails. Elsewhere it runs as written. A keyword left
    out takes its value from ``func``'s own `capabilities` statement, where
    it has one.

    Parameters
    ----------
    func : callable or (class, str)
        A module-level function of the code under test (a ufunc or another
        callable that cannot be weakly referenced included), or a method as
        ``(cls, "name")``: the class as the test module (or a module of its
        ``lazy_xp_modules``) names it, and the method's name (a plain,
        static or class method; an inherited one is declared on ``cls``
        alone). A method given as ``Class.method`` is declared as
        ``(Class, "method")``, where ``Class`` is the class that defines it
        (found by its qualified name in its module; not a class defined
        inside a function).
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
        naming each place. By default its statement's, else not counted. On
        ``jax-cpu`` only ``np.asarray``, ``np.array``, ``np.asanyarray``,
        ``np.ascontiguousarray``, ``np.from_dlpack``, ``__array__`` and
        ``jax.device_get`` are seen: another NumPy function given a JAX
        array (``np.dot``, ``np.stack``, a ufunc) copies it unseen.

    Raises
    ------
    TypeError
        ``func`` is not callable (nor a class and the name of its method),
        or a keyword has the wrong type.
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
    method = method_function(func) if isinstance(func, tuple) else None
    if method is None and not callable(func):
        msg = f"func must be callable, got {type(func).__qualname__}"
        raise TypeError(msg)
    for name, value in (("jit", jit), ("compiled", compiled)):
        if value is not None and not isinstance(value, bool):
            msg = f"{name} must be a bool, got {value!r}"
            raise TypeError(msg)
    if computes is not None and not isinstance(computes, (bool, int)):
        msg = f"computes must be a bool or a non-negative int, got {computes!r}"
        raise TypeError(msg)
    if computes is not None and computes < 0:
        msg = f"computes must be a bool or a non-negative int, got {computes!r}"
        raise ValueError(msg)
    check_host_copies(host_copies)
    stated = statement_of(method if method is not None else func)
    as_method = None if isinstance(func, tuple) else method_of(func)
    if stated is not None:
        jit = "jit" not in stated.modes if jit is None else jit
        compiled = "compile" not in stated.modes if compiled is None else compiled
        computes = stated.computes if computes is None else computes
        host_copies = stated.host_copies if host_copies is None else host_copies
    allowed = 1_000_000 if computes is True else int(computes or 0)
    tags = LazyTags(
        jit=True if jit is None else jit,
        compiled=True if compiled is None else compiled,
        computes=allowed,
        host_copies=host_copies,
    )
    if isinstance(func, tuple):
        _METHOD_TAGS[func] = tags
    else:
        if as_method is not None:  # (and the function, where a module holds it)
            _METHOD_TAGS[as_method] = tags
        try:
            _TAGS[func] = tags
            ref: Callable[[], object] = weakref.ref(func)
        except TypeError:  # (no weak reference to it)
            _HELD_TAGS[func] = tags
            ref = functools.partial(_same, func)
        if as_method is None:
            where = str(sys._getframe(1).f_globals.get("__name__"))
            _DECLARED_BY.setdefault(where, []).append(ref)


def method_of(func: object) -> tuple[type, str] | None:
    """``(cls, "name")`` where ``func`` is a method as ``Class.method`` gives it.

    A function whose qualified name is ``<class path>.<name>``, where the
    class its module holds by that path has it as ``name`` (a plain or
    static method), or a class method bound to its class; None for
    anything else (a module-level function, a class defined in a function).
    """
    target = getattr(func, "__func__", func)
    owner = getattr(func, "__self__", None)
    name = getattr(target, "__name__", None)
    if not isinstance(owner, type):
        qualname = getattr(target, "__qualname__", None)
        module = sys.modules.get(str(getattr(target, "__module__", "")))
        if not isinstance(qualname, str) or "." not in qualname or module is None:
            return None
        path, _, name = qualname.rpartition(".")
        owner = module
        for part in path.split("."):
            owner = getattr(owner, part, None)
    if not isinstance(owner, type) or not isinstance(name, str):
        return None
    try:
        raw = inspect.getattr_static(owner, name)
    except AttributeError:
        return None
    return (owner, name) if _unwrapped(raw) is target else None


def method_function(declared: tuple[object, ...]) -> UserFunction:
    """The function of method ``(cls, "name")``, made ``cls``'s own.

    An inherited method is cloned into ``cls``, so that replacing it there
    leaves the class it came from as it is.
    """
    cls, name = (*declared, None, None)[:2]
    pair = len(declared) == 2
    if not (pair and isinstance(cls, type) and isinstance(name, str)):
        msg = f"func must be callable or (class, 'method name'), got {declared!r}"
        raise TypeError(msg)
    try:
        raw = inspect.getattr_static(cls, name)
    except AttributeError:
        msg = f"func names {cls.__qualname__}.{name}, which does not exist"
        raise TypeError(msg) from None
    func = _unwrapped(raw)
    if not isinstance(func, types.FunctionType):
        msg = f"func names {cls.__qualname__}.{name}, which is not a method"
        raise TypeError(msg)
    if name not in vars(cls):
        own = types.FunctionType(
            func.__code__, func.__globals__, name, func.__defaults__, func.__closure__
        )
        own.__kwdefaults__ = func.__kwdefaults__
        own.__dict__.update(func.__dict__)
        own.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, _rewrapped(raw, own))
        func = own
    return func


def _unwrapped(raw: object) -> object:
    """The function of a class attribute (a static or class method's own)."""
    if isinstance(raw, (staticmethod, classmethod)):
        return raw.__func__
    return raw


def _rewrapped(raw: object, func: UserFunction) -> object:
    """``func`` as the kind of class attribute ``raw`` is."""
    if isinstance(raw, staticmethod):
        return staticmethod(func)
    if isinstance(raw, classmethod):
        return classmethod(func)
    return func


def _search_targets(module: ModuleType) -> list[ModuleType]:
    return [module, *getattr(module, "lazy_xp_modules", [])]


def _declared_in(module: ModuleType) -> list[tuple[object, str, Declared, LazyTags]]:
    """(owner, attribute, declared, tags) of each declaration a test module sees.

    Functions of the module and its ``lazy_xp_modules``, and the declared
    methods of the classes they hold: declared with this module's
    `lazy_xp_function`, or with array-api-extra's own (a suite moved onto
    the plugin as it is).
    """
    found: list[tuple[object, str, Declared, LazyTags]] = []
    classes: set[type] = set()
    for target in _search_targets(module):
        for name, value in list(vars(target).items()):
            tags = _tags_of(value)
            if tags is not None:
                found.append((target, name, value, tags))
            elif isinstance(value, type):
                classes.add(value)
    for (cls, name), tags in _METHOD_TAGS.items():
        if cls in classes:
            found.append((cls, name, (cls, name), tags))
    mine = {(cls, name) for cls, name in _METHOD_TAGS}
    for cls in classes:
        for name, raw in list(vars(cls).items()):
            theirs = _array_api_extra_tags(_unwrapped(raw), owner=cls)
            if theirs is not None and (cls, name) not in mine:
                found.append((cls, name, (cls, name), theirs))
    return found


def _tags_of(value: object) -> LazyTags | None:
    if not callable(value):
        return None
    try:
        held = _HELD_TAGS.get(value)
        tags = held if held is not None else _TAGS.get(value)
    except TypeError:  # unhashable, or no weak reference to it
        tags = None
    return tags if tags is not None else _array_api_extra_tags(value, owner=None)


#: Where array-api-extra keeps the tags of callables it cannot set an
#: attribute on (``_ufuncs_tags``), by release.
_AAE_TESTING = ("array_api_extra.testing._testing", "array_api_extra.testing")


def _array_api_extra_tags(value: object, owner: type | None) -> LazyTags | None:
    """The `LazyTags` of a function declared with array-api-extra's own declaration.

    None where it was not declared with its ``lazy_xp_function``. It keeps them on the function (``_lazy_xp_function``: its
    ``jax_jit`` and ``allow_dask_compute``, and for a method the class that
    owns it), or in a table for callables that take no attribute. A method
    counts on its owning class only (``owner``); a function that a class
    merely holds does not. Read only where array-api-extra's testing module
    is imported (the declarations live nowhere else).
    """
    tags = None
    with contextlib.suppress(Exception):  # (any object: a getattr may raise)
        tags = (
            vars(value).get("_lazy_xp_function") if hasattr(value, "__dict__") else None
        )
    if tags is None:
        for name in _AAE_TESTING:
            table = getattr(sys.modules.get(name), "_ufuncs_tags", None)
            if isinstance(table, dict):
                with contextlib.suppress(TypeError):  # (unhashable)
                    tags = table.get(value)
            if tags is not None:
                break
    if not isinstance(tags, dict) or tags.get("owner") is not owner:
        return None
    allowed = tags.get("allow_dask_compute", False)
    return LazyTags(
        jit=bool(tags.get("jax_jit", True)),
        compiled=True,
        computes=1_000_000 if allowed is True else int(allowed or 0),
        by_array_api_extra=True,
    )


def _same(value: object) -> object:
    return value


def unseen_declarations(module: ModuleType) -> list[str]:
    """Functions ``module`` declared that neither it nor its ``lazy_xp_modules`` holds.

    Declared as ``mylib.f`` in a test module that calls ``mylib.f``: the
    variants replace functions where the test module (or a module of its
    ``lazy_xp_modules``) holds them, so ``f`` ran eagerly everywhere, and
    without another declaration the lazy variants were dropped in silence.
    """
    seen = {id(declared) for _, _, declared, _ in _declared_in(module)}
    unseen = []
    for ref in _DECLARED_BY.get(module.__name__, []):
        func = ref()
        if func is not None and id(func) not in seen:
            owner = getattr(func, "__module__", None) or "?"
            unseen.append(f"{owner}.{getattr(func, '__qualname__', func)!s}")
    return unseen


def has_lazy_functions(module: ModuleType | None) -> bool:
    """Whether a test module (or its ``lazy_xp_modules``) declares lazy functions."""
    return module is not None and bool(_declared_in(module))


def tagged(module: ModuleType) -> list[tuple[Declared, LazyTags]]:
    """The declared functions and methods of a test module and its ``lazy_xp_modules``."""
    return [(declared, tags) for _, _, declared, tags in _declared_in(module)]


@contextlib.contextmanager
def replaced_functions(
    module: ModuleType,
    wrap: Callable[[UserFunction, LazyTags], UserFunction | None],
) -> Iterator[None]:
    """Within the block, each declared function ``f`` of ``module`` is ``wrap(f, tags)``.

    A declared method is replaced on its class (as the static or class
    method it is). Where ``wrap`` returns None the function is left as it
    is; every replaced one is restored on exit.
    """
    replaced: list[tuple[object, str, object]] = []
    try:
        for owner, name, _, tags in _declared_in(module):
            raw = vars(owner)[name]
            func = _unwrapped(raw)
            wrapped = wrap(cast("UserFunction", func), tags)
            if wrapped is not None:
                replaced.append((owner, name, raw))
                setattr(owner, name, _rewrapped(raw, wrapped))
        yield
    finally:
        for owner, name, raw in reversed(replaced):
            setattr(owner, name, raw)
