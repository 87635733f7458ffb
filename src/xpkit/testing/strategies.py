"""Hypothesis strategies that draw arrays and dtypes for a `Backend`.

Arrays are drawn as NumPy arrays (``hypothesis.extra.numpy``) and then
placed on the backend with `Backend.asarray`: Hypothesis fills arrays by
item assignment, which immutable libraries (JAX, Dask) lack, and it does
not recognise every compat namespace as an Array API library. The dtypes
drawn by default are the ones the backend's *device* supports (its
``__array_namespace_info__``), without float64/complex128 where the device
has none (MPS), so a drawn array never needs narrowing; a dtype asked for
by name may be any the device holds, and is narrowed as ``asarray`` does.

Requires ``hypothesis`` (the ``test`` extra).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst

from .._adapters._registry import ADAPTERS
from .._backend import Backend
from .._dtypes import DTYPE_KINDS, dtype_name, narrow_for_device, narrowed

if TYPE_CHECKING:
    from .._typing import Array, DType, HostArray

__all__ = ["arrays", "dtype_names", "dtypes"]


def dtype_names(backend: Backend, kind: str | None = None) -> list[str]:
    """Names of the dtypes ``backend``'s device supports (optionally of one kind).

    ``kind`` is one of the standard's kinds: ``"bool"``, ``"integral"``,
    ``"real floating"``, ``"complex floating"``, or ``"numeric"``.
    """
    _check_backend(backend)
    if kind is not None and not isinstance(kind, str):
        msg = f"kind must be a string or None, got {kind!r}"
        raise TypeError(msg)
    names = set(backend.dtypes)
    if kind is not None:
        if kind == "numeric":
            wanted = {
                n for k, group in DTYPE_KINDS.items() if k != "bool" for n in group
            }
        elif kind in DTYPE_KINDS:
            wanted = set(DTYPE_KINDS[kind])
        else:
            msg = f"kind={kind!r} is not one of {', '.join([*DTYPE_KINDS, 'numeric'])}"
            raise ValueError(msg)
        names &= wanted
    order = [n for group in DTYPE_KINDS.values() for n in group]
    return [n for n in order if n in names]


def dtypes(backend: Backend, kind: str | None = None) -> st.SearchStrategy[DType]:
    """Dtype objects of ``backend``'s namespace that its device supports."""
    names = dtype_names(backend, kind)
    return st.sampled_from([getattr(backend.xp, n) for n in names])


def arrays(
    backend: Backend,
    *,
    dtype: DType | st.SearchStrategy[DType] = None,
    shape: int | Sequence[int] | st.SearchStrategy[tuple[int, ...]] | None = None,
    elements: st.SearchStrategy[object] | Mapping[str, object] | None = None,
) -> st.SearchStrategy[Array]:
    """Arrays of ``backend``'s library, on its device.

    Parameters
    ----------
    backend : Backend
        Where the arrays live.
    dtype : dtype, str or strategy, optional
        A dtype of any library or its name, or a strategy of those: any the
        device holds (the standard's, and its library's float16, bfloat16 or
        unsigned ones where `Backend.asarray` makes them); by default any of
        the standard's the device supports. A 64-bit dtype the device lacks
        is narrowed as `Backend.asarray` narrows it (float64 to float32 on
        JAX without x64, MPS, array-api-strict's ``no_float64``): values are
        drawn in the narrow dtype, within ``elements``' bounds (a float64
        bound becomes the nearest float32 inside it; one beyond the narrow
        dtype's range, ``1e300``, is a ValueError). bfloat16, which NumPy
        lacks, is drawn as float32 (within its range, no subnormals) and
        rounded.
    shape : int, tuple or strategy, optional
        By default Hypothesis' ``array_shapes()`` (1 to 3 dimensions, 1 to 6
        per side).
    elements : strategy or dict, optional
        Passed to Hypothesis' ``arrays`` (e.g. ``{"allow_nan": False}``).
    """
    _check_backend(backend)
    held = ADAPTERS[backend.library].held_dtypes(backend.device)
    pairs: st.SearchStrategy[tuple[str, str, str]]
    if dtype is None:
        pairs = st.sampled_from([(n, n, n) for n in dtype_names(backend)])
    elif isinstance(dtype, st.SearchStrategy):
        pairs = dtype.map(lambda d: _drawn_as(d, held, backend))
    else:
        pairs = st.just(_drawn_as(dtype, held, backend))
    shapes = npst.array_shapes() if shape is None else _check_shape(shape)
    return pairs.flatmap(
        lambda pair: npst.arrays(
            pair[1], shapes, elements=_within(elements, pair[0], pair[1])
        ).map(
            lambda host: backend.asarray(
                _bfloat16_range(host) if pair[2] == "bfloat16" else host,
                dtype=pair[2],
            )
        )
    )


def _drawn_as(
    dtype: DType, held: frozenset[str], backend: Backend
) -> tuple[str, str, str]:
    """``(asked, drawn, made)``: the dtype asked for, the NumPy one drawn, the one made.

    ``made`` is ``asked`` narrowed as `Backend.asarray` narrows it (a 64-bit
    dtype the device lacks becomes its 32-bit sibling, with asarray's
    `PrecisionWarning` or the plugin's summary line); values are drawn in
    it (bfloat16, which NumPy lacks, in float32). A dtype the device cannot
    hold at all is a ValueError.
    """
    name = dtype_name(dtype)
    if name is None:
        msg = f"dtype must be a dtype, its name or a strategy of those, got {dtype!r}"
        raise TypeError(msg)
    if name not in held and narrowed(name, held) not in held:
        msg = f"dtype={dtype!r} is not supported on {backend.name} ({backend.device})"
        raise ValueError(msg)
    adapter = ADAPTERS[backend.library]
    made = narrow_for_device(name, held, adapter.variant_name(backend.device))
    return name, ("float32" if made == "bfloat16" else made), made


#: The largest finite bfloat16 (NumPy has no ``finfo`` of it).
_BFLOAT16_MAX = float.fromhex("0x1.fep127")


def _within(
    elements: st.SearchStrategy[object] | Mapping[str, object] | None,
    asked: str,
    drawn: str,
) -> st.SearchStrategy[object] | Mapping[str, object] | None:
    """``elements`` as bounds of ``drawn``, where ``asked`` was narrowed to it.

    A float64 bound becomes the nearest float32 inside it (Hypothesis takes
    only bounds the dtype holds exactly); a bound beyond what ``drawn``
    holds is a ValueError naming it. bfloat16 is drawn as float32 within
    its range and without subnormals (which it would flush to 0). A
    strategy of elements is left as it is.
    """
    if asked == drawn or not (elements is None or isinstance(elements, Mapping)):
        return elements
    bounds = dict(elements or {})
    if asked == "bfloat16":
        bounds.setdefault("allow_subnormal", False)
        top = _BFLOAT16_MAX
    elif drawn.startswith(("float", "complex")):
        top = float(np.finfo(drawn).max)
    else:  # (an integer: int64 to int32)
        info = np.iinfo(drawn)
        for key in ("min_value", "max_value"):
            _check_bound(bounds, key, (int(info.min), int(info.max)), asked, drawn)
        return bounds
    for key, inward in (("min_value", 1.0), ("max_value", -1.0)):
        given = bounds.get(key)
        if given is None:
            continue
        _check_bound(bounds, key, (-top, top), asked, drawn)
        exact = float(cast("float", given))
        value = np.float32(exact)  # (every narrowing here is to float32)
        if (float(value) - exact) * inward < 0:  # (rounded outward: step in)
            value = np.nextafter(value, np.float32(inward * np.inf))
        if asked == "bfloat16":  # (a bfloat16 inside it: rounding keeps within)
            value = _bfloat16_inward(value, up=inward > 0)
            flag = "exclude_min" if key == "min_value" else "exclude_max"
            if bounds.get(flag) and value != 0 and float(value) == exact:
                # (a float32 drawn past a bfloat16 bound rounds back onto it:
                # the next bfloat16 inward, itself allowed)
                past = np.nextafter(value, np.float32(inward * np.inf))
                value, bounds[flag] = _bfloat16_inward(past, up=inward > 0), False
        bounds[key] = float(value)
    if "max_magnitude" in bounds and bounds["max_magnitude"] is not None:
        _check_bound(bounds, "max_magnitude", (0.0, top), asked, drawn)
    return bounds


def _bfloat16_inward(value: np.float32, *, up: bool) -> np.float32:
    """The nearest bfloat16 (a float32 whose low 16 bits are 0) up or down from it."""
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    kept = bits & 0xFFFF0000
    if kept != bits and (value > 0) == up:  # (away from zero: one step further)
        kept += 0x10000
    found: np.float32 = np.frombuffer(np.uint32(kept).tobytes(), dtype=np.float32)[0]
    return found


def _bfloat16_range(host: HostArray) -> HostArray:
    """Finite float32 values beyond bfloat16's range brought to its largest."""
    with np.errstate(invalid="ignore"):
        over = np.isfinite(host) & (np.abs(host) > _BFLOAT16_MAX)
    if not over.any():
        return host
    return np.where(over, np.copysign(np.float32(_BFLOAT16_MAX), host), host)


def _check_bound(
    bounds: dict[str, object],
    key: str,
    limits: tuple[float, float],
    asked: str,
    drawn: str,
) -> None:
    """ValueError where ``bounds[key]`` is outside ``limits``, what ``drawn`` holds.

    An infinite bound of a float is within (float32 holds infinities); a
    bound that is not a real number is a TypeError naming it.
    """
    given = bounds.get(key)
    if given is None:
        return
    if isinstance(given, (bool, np.bool_)) or not isinstance(
        given, (numbers.Real, np.integer, np.floating)
    ):
        msg = f"elements={{{key!r}: {given!r}}}: a bound must be a real number"
        raise TypeError(msg)
    low, high = limits
    if isinstance(low, float) and given in (-np.inf, np.inf):
        return
    if not low <= cast("float", given) <= high:  # (a Fraction, an int: exact)
        holds = f"what {drawn} holds ({low!r} to {high!r}): {asked} is {drawn}"
        if asked == "bfloat16":  # (drawn as float32, within bfloat16's range)
            holds = f"what bfloat16 holds ({low!r} to {high!r})"
        msg = f"elements={{{key!r}: {given!r}}} is beyond {holds} on this device"
        raise ValueError(msg)


def _check_shape(
    shape: int | Sequence[int] | st.SearchStrategy[tuple[int, ...]],
) -> int | tuple[int, ...] | st.SearchStrategy[tuple[int, ...]]:
    """``shape`` as Hypothesis takes it: a strategy, or sides of at least 0 as ints.

    A list of sides, and NumPy integers, are taken (as Hypothesis takes
    them); anything else is a TypeError naming ``shape``.
    """
    if isinstance(shape, st.SearchStrategy):
        return shape
    sides = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    for side in sides:
        if isinstance(side, (bool, np.bool_)) or not isinstance(
            side, (int, np.integer)
        ):
            msg = f"shape must be an int, a tuple of ints or a strategy, got {shape!r}"
            raise TypeError(msg)
        if side < 0:
            msg = f"shape must have no negative side, got {shape!r}"
            raise ValueError(msg)
    if isinstance(shape, (tuple, list)):
        return tuple(int(side) for side in sides)
    return int(sides[0])


def _check_backend(backend: object) -> None:
    if not isinstance(backend, Backend):
        msg = f"backend must be a Backend, got {backend!r}"
        raise TypeError(msg)
