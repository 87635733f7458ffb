"""Dtype names shared by every backend, and the float64 downcast policy."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ._typing import Array, DType

__all__ = [
    "DTYPE_KINDS",
    "DTYPE_NAMES",
    "PrecisionWarning",
    "collected_narrowings",
    "collecting_narrowings",
    "dtype_label",
    "dtype_name",
    "external_stacklevel",
    "forget_narrowings",
    "item_size",
    "narrow_for_device",
    "narrowed",
    "own_dtype",
    "register_dtype_spelling",
]

#: The standard's dtype kinds and the dtypes of each.
DTYPE_KINDS: dict[str, tuple[str, ...]] = {
    "bool": ("bool",),
    "integral": (
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
    ),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}

#: Dtype names of the standard (plus float16/bfloat16 where libraries have
#: them), the vocabulary every backend is addressed in.
DTYPE_NAMES = frozenset(
    {name for names in DTYPE_KINDS.values() for name in names} | {"float16", "bfloat16"}
)


#: Module names a dtype may be spelt with ("torch" in "torch.float32"), and
#: the top-level modules whose dtype objects print as their name, bare or so
#: spelt. The adapters register them (`register_dtype_spelling`) as their
#: registry is built: this module knows no library.
_PREFIXES: set[str] = set()
_PRINTING: set[str] = set()


def register_dtype_spelling(prefixes: Iterable[str], printing_module: str = "") -> None:
    """Let `dtype_name` read a library's dtypes as the library spells them.

    ``prefixes``: the module names its dtypes may be written with
    (``"torch"``, ``"jnp"``); ``printing_module``: the top-level module whose
    dtype objects print as their name, bare (``"float32"``) or with one of
    the prefixes (``"torch.float32"``); ``""`` where they print otherwise.
    """
    _PREFIXES.update(prefixes)
    if printing_module:
        _PRINTING.add(printing_module)


#: What a dtype becomes on a device that lacks it (MPS; JAX without x64).
_NARROW = {
    "float64": "float32",
    "complex128": "complex64",
    "int64": "int32",
    "uint64": "uint32",
}


class PrecisionWarning(UserWarning):
    """A requested precision is not available on a device and was narrowed.

    Parameters
    ----------
    message : str
        Which device lacks which dtype, and what it became.

    Raises
    ------
    Nothing: it is a warning category, raised once per process and device.

    Examples
    --------
    >>> import xpkit
    >>> issubclass(xpkit.PrecisionWarning, UserWarning)
    True
    """


_warned: set[tuple[str, str]] = set()
#: Dtype objects already named (strings are not kept: callers make any).
_NAMED: dict[tuple[type, DType], str] = {}


def dtype_name(dtype: DType) -> str | None:
    """Normalise a dtype of any supported library (or its name) to a string.

    Raises
    ------
    TypeError
        When ``dtype`` is not a numeric or boolean dtype.
    """
    # Keyed by type first: libraries' dtypes never compare with each other
    # (array-api-strict's warn when compared with NumPy's).
    key = (type(dtype), dtype)
    try:
        return _NAMED[key]
    except (KeyError, TypeError):  # not seen yet, or unhashable
        pass
    if dtype is None:
        return None
    name = _name_of(dtype)
    # A spelled-out name may depend on the prefixes adapters register later
    # ("torch.float32"); a bare standard name ("float64") never does.
    if not isinstance(dtype, str) or dtype in DTYPE_NAMES:
        with contextlib.suppress(TypeError):
            _NAMED[key] = name
    return name


def dtype_label(dtype: DType) -> str:
    """The standard's name of a dtype, else its own text (str, object, datetime).

    Without the module a library spells it with (``float8_e4m3fn``, NumPy's
    with ml_dtypes, for one spelt ``<module>.float8_e4m3fn``): one dtype has
    one label whichever library holds it.
    """
    try:
        return str(dtype_name(dtype))
    except TypeError:
        return str(dtype).rpartition(".")[2]


def item_size(dtype: DType, label: str) -> int:
    """Bytes of one element of ``dtype`` (labelled ``label``).

    The dtype's own ``itemsize`` where it has one (NumPy's record and
    aligned structured dtypes, whose labels NumPy cannot read back), else
    the label's; 8 where neither says (2 for bfloat16).
    """
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int) and size > 0:
        return size
    try:
        return np.dtype(label).itemsize
    except (TypeError, ValueError):
        return 2 if label == "bfloat16" else 8


def own_dtype(x: Array, param: str) -> str:
    """The dtype name of ``x``, an array; a TypeError naming ``param`` otherwise.

    For an array whose dtype is outside the standard's vocabulary (a
    string, an object dtype).
    """
    try:
        name = dtype_name(x.dtype)
    except TypeError:
        msg = (
            f"{param} has dtype {x.dtype}, which is not a numeric or boolean "
            f"dtype of the standard ({', '.join(sorted(DTYPE_NAMES))})"
        )
        raise TypeError(msg) from None
    assert name is not None
    return name


def _name_of(dtype: DType) -> str:
    if isinstance(dtype, str):
        text = dtype.strip()
        prefix, _, candidate = text.rpartition(".")
        if candidate in DTYPE_NAMES and (not prefix or prefix in _PREFIXES):
            return candidate
        return _numpy_name(dtype, text)
    if dtype is bool or dtype is int or dtype is float or dtype is complex:
        return _numpy_name(dtype, dtype)  # (``is``: ``in`` asked an array's __eq__)
    # Some libraries' dtype objects print as their name, bare or as
    # "<module>.<name>" (the adapters say which).
    module = (type(dtype).__module__ or "").split(".", 1)[0]
    if module in _PRINTING:
        prefix, _, candidate = str(dtype).rpartition(".")
        if candidate in DTYPE_NAMES and (not prefix or prefix in _PREFIXES):
            return candidate
    return _numpy_name(dtype, dtype)


def _numpy_name(dtype: DType, shown: object) -> str:
    try:  # (an array is no dtype: np.dtype(tensor) raised ValueError, an
        # array's truth value "ambiguous")
        array = not isinstance(dtype, (np.dtype, type, np.generic)) and hasattr(
            dtype, "shape"
        )
        name = "" if array else str(np.dtype(dtype).name)
    except (TypeError, ValueError):
        name = ""
    if name not in DTYPE_NAMES:
        msg = (
            f"dtype={shown!r} is not a numeric or boolean dtype; expected one of "
            f"{', '.join(sorted(DTYPE_NAMES))}"
        )
        raise TypeError(msg)
    return name


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def external_stacklevel() -> int:
    """``stacklevel`` that points a warning at the first caller outside xpkit."""
    level = 1
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level


#: Places whose narrowings are collected for a report instead of warned
#: about, each as often as `collecting_narrowings` blocks for it are open.
_collecting: dict[str, int] = {}
#: Place -> {requested dtype: what it became}, as collected.
_collected: dict[str, dict[str, str]] = {}


@contextlib.contextmanager
def collecting_narrowings(where: str) -> Iterator[None]:
    """Within the block, narrowings ``where`` makes are collected, not warned about.

    For a caller that reports them itself, once (the pytest plugin does, in
    the session's summary, around each test of a variant):
    `narrow_for_device` records each dtype it narrows there, and
    `collected_narrowings` returns them.
    """
    _collecting[where] = _collecting.get(where, 0) + 1
    try:
        yield
    finally:
        _collecting[where] -= 1
        if not _collecting[where]:
            del _collecting[where]


def collected_narrowings() -> dict[str, dict[str, str]]:
    """Place -> {dtype requested: dtype it became}, as collected.

    Only dtypes that were asked for and narrowed appear: a place that
    narrowed nothing has no entry.
    """
    return {where: dict(pairs) for where, pairs in _collected.items()}


def forget_narrowings() -> None:
    """Empty what `collected_narrowings` returns (a new pytest session in this process)."""
    _collected.clear()


def narrowed(name: str, supported: frozenset[str]) -> str:
    """What a device holding the dtypes ``supported`` makes of dtype ``name``.

    Its 32-bit sibling for a 64-bit dtype the device lacks (float64 ->
    float32, complex128 -> complex64, int64 -> int32, uint64 -> uint32);
    ``name`` itself otherwise. Nothing is warned or recorded.
    """
    if name in supported or name not in _NARROW:
        return name
    return _NARROW[name]


def narrow_for_device(name: str, supported: frozenset[str], where: str) -> str:
    """Map a 64-bit dtype the device lacks to its 32-bit sibling.

    float64 → float32, complex128 → complex64, int64 → int32, uint64 →
    uint32, on devices whose ``supported`` dtype names lack them. Warns once
    per process, device and dtype (a `PrecisionWarning`).
    """
    narrow = narrowed(name, supported)
    if narrow == name:
        return name
    if where in _collecting:
        _collected.setdefault(where, {})[name] = narrow
        return narrow
    # Check-then-add without a lock: a race costs at most one repeated warning.
    first = (where, name) not in _warned
    _warned.add((where, name))
    if first:
        warnings.warn(
            f"{where} has no {name}; using {narrow} instead (warned once per process)",
            PrecisionWarning,
            stacklevel=external_stacklevel(),
        )
    return narrow
