"""Value checks for narrowing casts: which casts can change a value, and where.

Every path that converts or fills (``asarray``, ``asarray_like``, ``move``,
``check_arrays``, ``full`` and ``full_like``) asks the same questions here: may casting ``source`` to ``target`` lose a value
(overflow, wrap, NaN or infinity to an integer, underflow to 0), and does this
array hold one. The check runs in the array's own namespace and reads back one
bool; only when a value is lost is anything brought to the host, to name it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from ._dtypes import dtype_name
from ._shown import shown

if TYPE_CHECKING:
    from ._typing import Array, DType, HostArray, Namespace, Narrowing, Value

__all__ = [
    "cast_loss_mask",
    "cast_may_lose",
    "check_cast_keeps_values",
    "check_fill_fits",
    "fill_dtype_name",
    "rounded_to_finite",
    "scalar_cast_loss",
]


_INT_NAMES = frozenset(
    {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
)
_INT_RANGE = {
    name: (int(np.iinfo(name).min), int(np.iinfo(name).max)) for name in _INT_NAMES
}
_COMPLEX_PART = {"complex64": "float32", "complex128": "float64"}
#: The largest finite value of each floating dtype, and the magnitude from
#: which a value rounds to infinity in it (the largest value plus half an ulp).
_FLOAT_MAX = {
    "float16": 65504.0,
    "bfloat16": 2.0**128 - 2.0**120,
    "float32": 2.0**128 - 2.0**104,
    "float64": float(np.finfo(np.float64).max),
}
_OVERFLOW_AT = {
    "float16": 65520.0,
    "bfloat16": 2.0**128 - 2.0**119,
    "float32": 2.0**128 - 2.0**103,
}
#: The smallest positive (subnormal) value of each floating dtype, and the
#: magnitude at or below which a non-zero value rounds to zero in it (half
#: of that: a tie rounds to the even neighbour, zero).
_TINIEST = {
    "float16": 2.0**-24,
    "bfloat16": 2.0**-133,
    "float32": 2.0**-149,
    "float64": 2.0**-1074,
}
_UNDERFLOW_AT = {
    "float16": 2.0**-25,
    "bfloat16": 2.0**-134,
    "float32": 2.0**-150,
}


#: Where a float64 value overflows, and at or below which it underflows, in
#: a library that rounds it to float32 first (`Narrowing`): where its
#: float32 rounding reaches the bounds above (ties to even; each bound
#: here is exact in float64, and checked against torch's casts).
_VIA_FLOAT32_OVERFLOW_AT = {
    "float16": 65520.0 - 2.0**-9,
    "bfloat16": 2.0**128 - 2.0**119 - 2.0**103,
}
_VIA_FLOAT32_UNDERFLOW_AT = {
    "float16": 2.0**-25 + 2.0**-49,
    "bfloat16": 2.0**-134 + 2.0**-150,
}
#: With float32's subnormals flushed to 0: every value whose float32
#: rounding is subnormal (below 2**-126 less half of its smallest step).
_FLUSHED_UNDERFLOW_AT = math.nextafter(2.0**-126 - 2.0**-150, 0.0)


#: The largest finite value of each floating dtype narrower than float64.
_LARGEST = {
    "float16": 65504.0,
    "bfloat16": 2.0**128 - 2.0**120,
    "float32": 2.0**128 - 2.0**104,
}


def rounded_to_finite(value: complex, target: str) -> complex:
    """``value``, checked to fit ``target``, with a part past its largest finite value at it.

    A part between the largest finite value and the magnitude at which it
    overflows rounds to the largest (float32's printed maximum,
    ``3.4028235e38``, is above it): what the cast makes, which torch's fill
    refuses to make itself ("cannot be converted ... without overflow").
    """
    largest = _LARGEST.get(_real_part(target))
    if largest is None:
        return value
    if isinstance(value, complex):
        real = rounded_to_finite(value.real, target)
        imag = rounded_to_finite(value.imag, target)
        return complex(real, imag)
    if abs(value) > largest and math.isfinite(value):
        return math.copysign(largest, value)
    return value


def limits(
    source: str, target: str, narrowing: Narrowing = "exact"
) -> tuple[float | None, float | None]:
    """The magnitudes from which ``source`` overflows and at which it underflows.

    In ``target`` (a floating dtype; None for another, or where nothing
    overflows or underflows), as the library casts (``narrowing``): a
    float64 rounded through float32 overflows and underflows sooner.
    """
    part = _real_part(target)
    over, under = _OVERFLOW_AT.get(part), _UNDERFLOW_AT.get(part)
    if narrowing == "exact" or _real_part(source) != "float64":
        return over, under
    if narrowing == "flushed, float16 once" and part == "float16":
        return over, under
    over = _VIA_FLOAT32_OVERFLOW_AT.get(part, over)
    under = _VIA_FLOAT32_UNDERFLOW_AT.get(part, under)
    if narrowing != "via float32" and part in ("float32", "bfloat16"):
        under = _FLUSHED_UNDERFLOW_AT
    return over, under


def _real_part(name: str) -> str:
    return _COMPLEX_PART.get(name, name)


def _overflows_from(source: str, target: str) -> bool:
    """Whether a finite value of ``source`` can round to infinity in ``target``."""
    limit = _OVERFLOW_AT.get(_real_part(target))
    if limit is None:
        return False
    if source in _INT_RANGE:
        low, high = _INT_RANGE[source]
        return high >= limit or low <= -limit
    return _FLOAT_MAX.get(_real_part(source), 0.0) >= limit


def _underflows_from(source: str, target: str) -> bool:
    """Whether a non-zero value of ``source`` can round to zero in ``target``."""
    limit = _UNDERFLOW_AT.get(_real_part(target))
    tiniest = _TINIEST.get(_real_part(source))
    return limit is not None and tiniest is not None and tiniest <= limit


def cast_may_lose(source: str, target: str) -> bool:
    """Whether some value of dtype ``source`` changes when cast to ``target``."""
    if source in {target, "bool"}:
        return False
    if target == "bool" or (source in _COMPLEX_PART and target not in _COMPLEX_PART):
        return True
    if target in _INT_RANGE:
        if source not in _INT_RANGE:
            return True
        (s_low, s_high), (low, high) = _INT_RANGE[source], _INT_RANGE[target]
        return s_low < low or s_high > high
    return _overflows_from(source, target) or _underflows_from(source, target)


def cast_loss_mask(
    ns: Namespace, x: Array, source: str, target: str, narrowing: Narrowing = "exact"
) -> Array | None:
    """Where casting ``x`` (dtype ``source``) to ``target`` changes a value.

    A boolean array of ``ns`` (the namespace of ``x``), or None when no value
    of ``source`` can change (a widening cast, or bool to anything). Lost:
    values outside an integer dtype's range, NaN, infinities and fractions
    cast to an integer dtype, anything but 0 and 1 cast to bool, non-zero
    imaginary parts cast to a real dtype, and finite values that overflow to
    infinity in a narrower floating dtype, and non-zero values that round
    to zero in it (underflow). Rounding to the nearest representable float
    (float64 to float32, large ints to float, tiny values to a subnormal)
    is not a loss. Every bound compared with is exactly representable in ``source``,
    so no comparison rounds or overflows. ``narrowing``: how the library
    rounds a float64 (`limits`).
    """
    if not cast_may_lose(source, target):
        return None
    parts: list[Array] = []
    value = x
    if source in _COMPLEX_PART and target not in _COMPLEX_PART:
        parts.append(ns.imag(x) != 0)
        value, source = ns.real(x), _COMPLEX_PART[source]
    if target == "bool":
        parts.append(ns.logical_and(value != 0, value != 1))
    elif target in _INT_RANGE:
        parts += _int_loss(ns, value, source, target)
    elif source in _COMPLEX_PART:
        for part in (ns.real(value), ns.imag(value)):
            parts += _float_loss(ns, part, _COMPLEX_PART[source], target, narrowing)
    else:
        parts += _float_loss(ns, value, source, target, narrowing)
    if not parts:
        return None
    mask = parts[0]
    for part in parts[1:]:
        mask = ns.logical_or(mask, part)
    return mask


def _int_loss(ns: Namespace, x: Array, source: str, target: str) -> list[Array]:
    low, high = _INT_RANGE[target]
    parts: list[Array] = []
    if source in _INT_RANGE:
        s_low, s_high = _INT_RANGE[source]
        if s_low < low:
            parts.append(x < low)
        if s_high > high:
            parts.append(x > high)
        return parts
    # Floating: finite, whole, and within [low, high + 1) (powers of two, exact).
    keep = ns.logical_and(ns.isfinite(x), ns.trunc(x) == x)
    top = _FLOAT_MAX.get(source, 0.0)
    if -top < low:
        keep = ns.logical_and(keep, x >= float(low))
    if top >= high + 1:
        keep = ns.logical_and(keep, x < float(high + 1))
    parts.append(ns.logical_not(keep))
    return parts


def _float_loss(
    ns: Namespace, x: Array, source: str, target: str, narrowing: Narrowing
) -> list[Array]:
    """Overflow to infinity and underflow to zero of real values cast to a float."""
    parts: list[Array] = []
    over, under = limits(source, target, narrowing)
    if over is not None and _overflows_from(source, target):
        parts += _overflow(ns, x, source, over)
    if under is not None and _underflows_from(source, target):
        parts.append(ns.logical_and(x != 0, ns.abs(x) <= under))
    return parts


def _overflow(ns: Namespace, x: Array, source: str, limit: float) -> list[Array]:
    if source in _INT_RANGE:  # compared as ints (abs of the minimum overflows)
        bound = int(limit)
        low = _INT_RANGE[source][0]
        return [x >= bound, x <= -bound] if low <= -bound else [x >= bound]
    return [ns.logical_and(ns.isfinite(x), ns.abs(x) >= limit)]


def scalar_cast_loss(
    value: Value, target: str, narrowing: Narrowing = "exact"
) -> str | None:
    """Why casting the scalar ``value`` to dtype ``target`` changes it, or None.

    The reason reads after "does not fit dtype <target>"; the rule is
    `cast_loss_mask`'s (``narrowing``: how the library rounds a float).
    """
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, (complex, np.complexfloating)):
        if target in _COMPLEX_PART:
            part = _COMPLEX_PART[target]
            return scalar_cast_loss(value.real, part, narrowing) or scalar_cast_loss(
                value.imag, part, narrowing
            )
        if value.imag != 0:
            return "(its imaginary part would be dropped)"
        value = value.real
    if isinstance(value, np.floating) and value.dtype.itemsize > _FLOAT64_BYTES:
        return _wide_float_loss(value, target)
    if target == "bool":
        return None if value in (0, 1) else "(only 0 and 1 convert to bool unchanged)"
    if target in _INT_RANGE:
        low, high = _INT_RANGE[target]
        if isinstance(value, (float, np.floating)):
            as_float = float(value)
            if not math.isfinite(as_float):
                return "(it is not a finite number)"
            if not as_float.is_integer():
                return f"(it is not a whole number: it would become {int(as_float)})"
            value = int(as_float)
        if not low <= int(value) <= high:
            return f"({low} to {high})"
        return None
    wide = isinstance(value, (float, np.float64))  # (a Python float is float64)
    limit, under = limits("float64" if wide else "", target, narrowing)
    if limit is None:
        if isinstance(value, int) and abs(value) > _FLOAT_MAX["float64"]:
            return "(it would overflow to inf)"
        return None
    if isinstance(value, np.floating):  # (np.float32 beside a Python limit overflows)
        value = float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if abs(value) >= limit:
        return "(it would overflow to inf)"
    if value != 0 and under is not None and abs(value) <= under:
        return "(it would underflow to 0)"
    return None


#: Bytes of a float64: a NumPy float wider than this (``np.longdouble``, 80
#: or 128 bits) holds values ``float()`` would round, overflow or zero.
_FLOAT64_BYTES = 8


def _wide_float_loss(value: np.floating, target: str) -> str | None:
    """`scalar_cast_loss` of a float wider than float64 (``np.longdouble``).

    ``float(value)`` itself rounds it: 1e400 became inf, 1e-4940 0.0 and
    2**62 + 0.5 a whole number, all then let through. A whole number is
    taken exactly (its integer ratio), and a float64 that is inf or 0 where
    ``value`` is not is an overflow or an underflow.
    """
    if not np.isfinite(value):
        return scalar_cast_loss(float(value), target)  # (inf and NaN as floats)
    if target == "bool" or target in _INT_RANGE:
        numerator, denominator = value.as_integer_ratio()
        if denominator != 1:
            whole = int(Fraction(numerator, denominator))  # (toward 0, as a cast)
            return f"(it is not a whole number: it would become {whole})"
        return scalar_cast_loss(numerator, target)
    as_float = float(value)
    if math.isinf(as_float):
        return "(it would overflow to inf)"
    if as_float == 0.0 and value != 0:
        return "(it would underflow to 0)"
    return scalar_cast_loss(as_float, target)


def check_cast_keeps_values(
    ns: Namespace,
    x: Array,
    source: str,
    target: str,
    param: str,
    to_numpy: Callable[[Array], HostArray],
    narrowing: Narrowing = "exact",
) -> None:
    """Raise ValueError naming ``param`` and a value that casting would change.

    ``ns`` is ``x``'s namespace (the check runs where ``x`` lives and reads
    back one bool); ``to_numpy`` brings ``x`` to the host, to name the value
    (and to check there when the library cannot compare in ``source``, as
    torch's limited unsigned dtypes). ``narrowing``: how the library the
    values go to rounds a float64 (`limits`).
    """
    if not cast_may_lose(source, target):
        return
    try:
        lost = bool(ns.any(cast_loss_mask(ns, x, source, target, narrowing)))
    except (NotImplementedError, TypeError):  # e.g. comparisons of torch's uint32
        lost = True  # decided on the host below
    if not lost:
        return
    host = np.asarray(to_numpy(x))
    host_name = dtype_name(host.dtype)
    assert host_name is not None
    import array_api_compat.numpy as np_xp

    host_mask = cast_loss_mask(np_xp, host, host_name, target, narrowing)
    if host_mask is None or not host_mask.any():
        return
    value = host.reshape(-1)[int(np.argmax(host_mask.reshape(-1)))].item()
    reason = scalar_cast_loss(value, target, narrowing) or "(the cast would change it)"
    msg = (
        f"{param} holds {shown(value)}, which does not fit dtype {target} {reason}; "
        "a cast that changes values is refused"
    )
    raise ValueError(msg)


def check_fill_fits(
    fill_value: Value, dtype: DType, narrowing: Narrowing = "exact"
) -> None:
    """A numeric ``fill_value`` must be representable in ``dtype`` (any library's).

    Libraries disagree otherwise: NumPy raises OverflowError, torch a
    RuntimeError, JAX and Dask wrap around silently, and every one truncates
    0.5 to 0 in an integer dtype. The rule is `scalar_cast_loss`'s: a fill
    value the dtype would change is a ValueError naming ``fill_value``.
    """
    if not isinstance(fill_value, (bool, int, float, complex, np.number, np.bool_)):
        return
    name = dtype_name(dtype)
    if name is None:
        return
    reason = scalar_cast_loss(fill_value, name, narrowing)
    if reason is not None:
        msg = f"fill_value={shown(fill_value)} does not fit dtype {name} {reason}"
        raise ValueError(msg)


#: NumPy's dtype for each Python scalar type (ints: by their value).
_PYTHON_SCALARS = {bool: "bool", float: "float64", complex: "complex128"}


def fill_dtype_name(fill_value: Value) -> str:
    """The dtype ``full`` gives ``fill_value`` by NumPy's rules.

    A ValueError names ``fill_value`` when it fits no dtype (``2**64``).
    """
    kind_of = type(fill_value)
    if kind_of in _PYTHON_SCALARS:  # without NumPy: traced code (torch.compile)
        return _PYTHON_SCALARS[kind_of]
    if (
        kind_of is int
        and _INT_RANGE["int64"][0] <= fill_value <= _INT_RANGE["int64"][1]
    ):
        return "int64"
    if isinstance(fill_value, np.generic):
        name = dtype_name(fill_value.dtype)
    else:
        try:
            kind = np.result_type(fill_value)
        except (OverflowError, TypeError):  # pragma: no cover - NumPy versions
            kind = np.dtype(object)
        if kind == np.dtype(object):  # a Python int past uint64's range
            msg = (
                f"fill_value={shown(fill_value)} does not fit any integer dtype "
                f"({_INT_RANGE['int64'][0]} to {_INT_RANGE['uint64'][1]}); pass a "
                "floating dtype to store an approximation"
            )
            raise ValueError(msg)
        name = dtype_name(kind)
    assert name is not None
    return name
