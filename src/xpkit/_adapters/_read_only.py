"""NumPy's namespace with every array it returns read-only: the plugin's ``numpy-readonly``.

A test's inputs made through it cannot be written: code under test that
writes into an array it was given (``x[0] = ...``, ``x += ...``,
``out=x``) raises NumPy's "assignment destination is read-only" there,
instead of silently changing the caller's data. Code under test that takes
its namespace from the arrays (``array_namespace(x)``, `Backend.from_arrays`)
gets NumPy's own namespace and makes writeable arrays of its own, as
array-api-extra's ``numpy_readonly`` backend does.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["ReadOnlyNamespace", "read_only"]


def read_only(value: Any) -> Any:
    """``value`` with each NumPy array in it a read-only view.

    A view, so that an array the caller owns (``asarray(x)`` returns ``x``)
    keeps its own flag; tuples (``unique_all``'s, ``linalg.svd``'s named
    results) and lists are rebuilt around their read-only items. NumPy
    scalars are immutable already; anything else is returned as is.
    """
    if isinstance(value, np.ndarray):
        view = value.view()
        view.flags.writeable = False
        return view
    if isinstance(value, tuple):
        items = [read_only(v) for v in value]
        if hasattr(value, "_fields"):  # a named tuple
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, list):
        return [read_only(v) for v in value]
    return value


class ReadOnlyNamespace:
    """A NumPy namespace whose functions return read-only arrays.

    Its extensions (``linalg``, ``fft``) and ufuncs (their ``reduce``,
    ``outer``, ... too) are wrapped alike; dtypes, constants and classes
    are the namespace's own.
    """

    def __init__(self, xp: Any) -> None:
        self._xp = xp
        self.__name__ = getattr(xp, "__name__", "numpy")

    def __getattr__(self, name: str) -> Any:
        if name == "_xp":  # (copy.copy asks before __init__ has run)
            raise AttributeError(name)
        attr = getattr(self._xp, name)
        if isinstance(attr, types.ModuleType):
            wrapped: Any = ReadOnlyNamespace(attr)
        elif isinstance(attr, np.ufunc):
            wrapped = _ReadOnlyUfunc(attr)
        elif callable(attr) and not isinstance(attr, type):
            wrapped = _returning_read_only(attr)
        else:
            return attr
        setattr(self, name, wrapped)  # (made once per name)
        return wrapped

    def __repr__(self) -> str:
        return f"<read-only arrays of {self.__name__}>"


class _ReadOnlyUfunc:
    """A ufunc whose call and methods (``reduce``, ``outer``, ...) return read-only arrays."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.__doc__ = ufunc.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return read_only(self._ufunc(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        if name == "_ufunc":
            raise AttributeError(name)
        attr = getattr(self._ufunc, name)
        return _returning_read_only(attr) if callable(attr) else attr

    def __repr__(self) -> str:
        return f"<read-only {self._ufunc!r}>"


def _returning_read_only(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return read_only(func(*args, **kwargs))

    return wrapper
