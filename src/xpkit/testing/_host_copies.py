"""Host copies counted: where a declared function turns an array into a NumPy array.

``lazy_xp_function(func, host_copies=N)`` asks the pytest plugin to fail a
test in which one call of ``func`` turns an array of the variant's library
into a NumPy array more than ``N`` times. For the call's duration the exits
each adapter names (`Adapter.host_exits`: ``__array__``, torch's ``numpy``,
Dask's ``compute``, NumPy's ``asarray`` and ``from_dlpack``, ...) are
replaced by counting versions, and each exit taken with an array of that
library is recorded with the line of code that took it.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from .._adapters._registry import ADAPTERS

if TYPE_CHECKING:
    from .._adapters._base import Adapter
    from .._typing import UserFunction

__all__ = ["HostCopy", "counted_host_copies", "watched"]

_MISSING = object()
#: Modules whose frames a place skips to reach the code that asked for the copy.
_INNER = frozenset({"numpy", "array_api_compat", "array_api_extra", "xpkit"})


class _Depth(threading.local):
    """Per thread: how many watched exits are running.

    A nested one is no copy of its own: ``np.asarray(t)`` calls
    ``t.__array__``, which calls ``t.numpy``.
    """

    value = 0


_depth = _Depth()


class HostCopy(NamedTuple):
    """One conversion to NumPy: the exit taken, and the code that took it."""

    exit: str
    place: str


def _label(owner: object, attr: str) -> str:
    name = getattr(owner, "__name__", type(owner).__name__)
    return f"{name}.{attr}"


def _place(library: str) -> str:
    """``file:line in function: source`` of the innermost frame outside the libraries."""
    skip = _INNER | {library}
    frame = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] not in skip:
            break
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "an unknown place"
    path = frame.f_code.co_filename
    with contextlib.suppress(ValueError):
        path = os.path.relpath(path)
    source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{path}:{frame.f_lineno} in {frame.f_code.co_name}: {source}"


def _counting(
    original: Callable[..., object], label: str, adapter: Adapter, seen: list[HostCopy]
) -> Callable[..., object]:
    def exit_counted(*args: object, **kwargs: object) -> object:
        if _depth.value == 0 and args and adapter.owns(args[0]):
            seen.append(HostCopy(label, _place(adapter.module)))
        _depth.value += 1
        try:
            return original(*args, **kwargs)
        finally:
            _depth.value -= 1

    return exit_counted


_active: list[list[HostCopy]] = []


@contextlib.contextmanager
def watched(adapter: Adapter) -> Iterator[list[HostCopy]]:
    """Within the block, each conversion of ``adapter``'s arrays to NumPy is listed.

    The list yielded fills as conversions happen. Arrays of other libraries
    (NumPy's own included) are not counted. Within an outer block, an inner
    one adds nothing of its own: the outer one counts.
    """
    if _active:
        yield _active[-1]
        return
    seen: list[HostCopy] = []
    exits = (*adapter.host_exits(), *ADAPTERS["numpy"].host_exits())
    patched: list[tuple[object, str, object]] = []
    try:
        for owner, attr in exits:
            original = getattr(owner, attr, None)
            if original is None:
                continue
            saved = vars(owner).get(attr, _MISSING)
            counting = _counting(original, _label(owner, attr), adapter, seen)
            setattr(owner, attr, counting)
            patched.append((owner, attr, saved))
        _active.append(seen)
        yield seen
    finally:
        if _active and _active[-1] is seen:
            _active.pop()
        for owner, attr, saved in reversed(patched):
            if saved is _MISSING:
                delattr(owner, attr)
            else:
                setattr(owner, attr, saved)


def counted_host_copies(
    func: UserFunction, allowed: int, adapter: Adapter, variant: str
) -> UserFunction:
    """``func``, failing a call that converts ``adapter``'s arrays more than ``allowed`` times.

    The AssertionError names the variant, the count and each place.
    """
    name = getattr(func, "__qualname__", repr(func))

    @functools.wraps(func)
    def run(*args: object, **kwargs: object) -> object:
        __tracebackhide__ = True
        nested = bool(_active)
        with watched(adapter) as seen:
            before = len(seen)
            out = func(*args, **kwargs)
        copies = seen[before:]
        if not nested and len(copies) > allowed:
            lines = "\n".join(f"  {c.exit} at {c.place}" for c in copies)
            msg = (
                f"{name} turned {adapter.label} arrays into NumPy arrays "
                f"{len(copies)} time(s) in one call on {variant}; "
                f"host_copies={allowed} allows {allowed}:\n{lines}"
            )
            raise AssertionError(msg)
        return out

    return run
