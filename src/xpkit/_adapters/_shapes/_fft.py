"""Fourier transforms on shape-only arrays: NumPy's ``np.fft`` and the standard's ``fft``.

NumPy 2 computes a transform with a generalised ufunc (``numpy.fft``'s
``_pocketfft_umath``) whose loop its own type resolution picks from the
input's dtype and the scale factor's: a Python ``1`` where the norm needs
no scaling, which resolves float32 and complex64 to the complex128 loop.
A gufunc does not buffer, so an input of another dtype than the loop's is
cast whole first, and a loop whose output dtype is not the result's writes
a temporary that is cast into the result: a float32 ``fft`` holds five
times its result at its peak. Each handler charges that, from the loop
``ufunc.resolve_dtypes`` gives; multi-axis transforms are 1-D transforms
one axis after the other, as NumPy runs them. The standard's ``fft``
extension (``xp.fft.fft``) follows the same rules where the traced library
computes with NumPy (`Profile.numpy_internals`); elsewhere it is refused.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .._trace import active_trace, missing_name
from . import _rules as rules
from ._array import ShapeArray, made
from ._operands import lifted

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = [
    "FUNCTIONS",
    "fft",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfftn",
    "rfft",
    "rfftfreq",
    "rfftn",
]

#: The norms that scale by 1 (after an inverse transform swaps them).
_UNSCALED = (None, "backward")
#: An inverse transform's norm as NumPy passes it on (``_swap_direction``).
_SWAPPED: dict[Value, Value] = {
    "forward": "backward",
    "backward": "forward",
    None: "forward",
}


def _array(x: Value) -> ShapeArray:
    a = lifted(x)
    if not a._trace.profile.numpy_internals:
        msg = f"fft on {a._trace.profile.library} (no shape rule)"
        raise a._trace.refuse(msg)
    return a


def _loop(a: ShapeArray, name: str, scale: object) -> tuple[str, str]:
    """``(input, output)`` dtypes of the loop NumPy's gufunc ``name`` runs."""
    try:
        ufuncs = importlib.import_module("numpy.fft._pocketfft_umath")
        resolved = getattr(ufuncs, name).resolve_dtypes(
            (np.dtype(a._name), scale, None)
        )
    except (ImportError, AttributeError, TypeError) as exc:
        msg = f"numpy.fft's {name} of {a._name} ({type(exc).__name__})"
        raise a._trace.refuse(msg) from None
    return str(resolved[0]), str(resolved[2])


def _transform(
    x: Value, n: Value, axis: Value, norm: Value, real: bool, forward: bool
) -> ShapeArray:
    """One 1-D transform as NumPy's ``_raw_fft`` runs it."""
    a = _array(x)
    (ax,) = rules.axes_of(axis, a.ndim)
    length = a.shape[ax] if n is None else int(n)
    if not forward and real and n is None:
        length = 2 * (a.shape[ax] - 1)
    if length < 1:
        msg = f"an fft of {length} points"
        raise a._trace.refuse(msg)
    real_name = str(np.result_type(np.dtype(a._name).type(0).real.dtype, 1.0))
    swapped = norm if forward else _SWAPPED.get(norm, norm)
    scale: object = int if swapped in _UNSCALED else np.dtype(real_name)
    if real:
        name = "rfft_n_even" if length % 2 == 0 else "rfft_n_odd"
        name, size = (name, length // 2 + 1) if forward else ("irfft", length)
        wanted = str(np.result_type(a._name, 1j)) if forward else real_name
    else:
        name, size, wanted = (
            ("fft" if forward else "ifft"),
            length,
            str(np.result_type(a._name, 1j)),
        )
    loop_in, loop_out = _loop(a, name, scale)
    shape = tuple(size if i == ax else d for i, d in enumerate(a.shape))
    cast = made(a._trace, a.shape, loop_in, (a,)) if loop_in != a._name else None
    result = made(a._trace, shape, loop_out, (a, cast))
    if loop_out != wanted:  # (the loop's output, cast into the result)
        result = made(a._trace, shape, wanted, (result,))
    del cast
    return result


def _one_d(real: bool, forward: bool) -> Callable[..., ShapeArray]:
    """A 1-D transform with NumPy's (and the standard's) signature."""

    def transform(
        x: Value, n: Value = None, axis: Value = -1, norm: Value = None, **_: Value
    ) -> ShapeArray:
        return _transform(x, n, axis, norm, real=real, forward=forward)

    return transform


_fft, _ifft = _one_d(real=False, forward=True), _one_d(real=False, forward=False)
_rfft, _irfft = _one_d(real=True, forward=True), _one_d(real=True, forward=False)


def _hfft(
    x: Value, n: Value = None, axis: Value = -1, norm: Value = None, **_: Value
) -> ShapeArray:
    """``irfft`` of the conjugate (a copy), with the norm swapped."""
    a = _array(x)
    conjugate = made(a._trace, a.shape, a._name, (a,))
    swapped = _SWAPPED.get(norm, norm)
    result = _irfft(conjugate, n, axis, swapped)
    del conjugate
    return result


def _ihfft(
    x: Value, n: Value = None, axis: Value = -1, norm: Value = None, **_: Value
) -> ShapeArray:
    """``rfft`` with the norm swapped, conjugated in place."""
    swapped = _SWAPPED.get(norm, norm)
    return _rfft(x, n, axis, swapped)


def _cooked(
    a: ShapeArray, s: Value, axes: Value, inverse_real: bool
) -> tuple[list[int | None], list[int]]:
    """NumPy's ``_cook_nd_args``: the points and the axes of an n-D transform."""
    if s is None:
        chosen = list(range(a.ndim)) if axes is None else list(axes)
        points: list[int | None] = [a.shape[i] for i in chosen]
        if inverse_real and points:
            points[-1] = None  # (irfft's own default: 2 (m - 1))
        return points, chosen
    points = list(s)
    chosen = list(range(-len(points), 0)) if axes is None else list(axes)
    return points, chosen


def _nd(kind: str) -> Callable[..., ShapeArray]:
    def transform(
        x: Value, s: Value = None, axes: Value = None, norm: Value = None, **_: Value
    ) -> ShapeArray:
        a = _array(x)
        points, chosen = _cooked(a, s, axes, kind == "irfftn")
        if len(points) != len(chosen) or not chosen:
            msg = f"numpy.fft.{kind} with s={s!r}, axes={axes!r}"
            raise a._trace.refuse(msg)
        steps: Sequence[tuple[Callable[..., ShapeArray], int | None, int]]
        pairs = list(zip(points, chosen, strict=True))
        if kind in ("fftn", "ifftn"):
            one = _fft if kind == "fftn" else _ifft
            steps = [(one, p, ax) for p, ax in reversed(pairs)]
        elif kind == "rfftn":
            steps = [(_rfft, *pairs[-1])] + [
                (_fft, p, ax) for p, ax in reversed(pairs[:-1])
            ]
        else:
            steps = [(_ifft, p, ax) for p, ax in pairs[:-1]] + [(_irfft, *pairs[-1])]
        result: ShapeArray = a
        for step, p, ax in steps:
            result = step(result, p, ax, norm)
        return result

    return transform


_fftn, _ifftn, _rfftn, _irfftn = (_nd(k) for k in ("fftn", "ifftn", "rfftn", "irfftn"))


def _two(kind: str) -> Callable[..., ShapeArray]:
    transform = _nd(kind)

    def two(
        x: Value,
        s: Value = None,
        axes: Value = (-2, -1),
        norm: Value = None,
        **_: Value,
    ) -> ShapeArray:
        return transform(x, s, axes, norm)

    return two


def fftshift(x: Value, axes: Value = None) -> ShapeArray:
    """A rolled copy."""
    a = _array(x)
    return made(a._trace, a.shape, a._name, (a,))


ifftshift = fftshift


def fftfreq(
    n: int, d: float = 1.0, *, dtype: Value = None, device: Value = None
) -> ShapeArray:
    trace = active_trace()
    name = rules.dtype_name_of(trace, dtype) or trace.profile.default_float
    return made(trace, (int(n),), name)


def rfftfreq(
    n: int, d: float = 1.0, *, dtype: Value = None, device: Value = None
) -> ShapeArray:
    return fftfreq(int(n) // 2 + 1, d, dtype=dtype, device=device)


#: ``numpy.fft``'s transforms, as NumPy runs them.
_NUMPY: dict[str, Callable[..., ShapeArray]] = {
    "fft": _fft,
    "ifft": _ifft,
    "rfft": _rfft,
    "irfft": _irfft,
    "hfft": _hfft,
    "ihfft": _ihfft,
    "fftn": _fftn,
    "ifftn": _ifftn,
    "rfftn": _rfftn,
    "irfftn": _irfftn,
}


def _standard(name: str) -> Callable[..., ShapeArray]:
    """The standard's ``fft.<name>``: NumPy's, then the library's own cast of its result.

    array-api-strict casts NumPy's transform of a float32 or complex64
    array with ``astype`` (a copy, though NumPy 2 keeps single precision:
    `DtypeRules.fft_single_copies`): its ``ifft`` of complex64 held 1.2
    times the budget while the copy was not counted.
    """
    numpy = _NUMPY[name]

    def transform(x: Value, *args: Value, **kwargs: Value) -> ShapeArray:
        result = numpy(x, *args, **kwargs)
        single = lifted(x)._name in ("float32", "complex64")
        if single and result._trace.profile.dtype_rules.fft_single_copies:
            copy = made(result._trace, result.shape, result._name, (result,))
            del result
            return copy
        return result

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = numpy.__doc__
    return transform


fft, ifft, rfft, irfft, hfft, ihfft = (
    _standard(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
)
fftn, ifftn, rfftn, irfftn = (
    _standard(n) for n in ("fftn", "ifftn", "rfftn", "irfftn")
)

#: ``numpy.fft`` function name -> its handler on shape-only arrays.
FUNCTIONS: dict[str, Callable[..., object]] = {
    **_NUMPY,
    "fft2": _two("fftn"),
    "ifft2": _two("ifftn"),
    "rfft2": _two("rfftn"),
    "irfft2": _two("irfftn"),
    "fftshift": fftshift,
    "ifftshift": ifftshift,
}


def __getattr__(name: str) -> object:
    """A name the library's ``fft`` has and this one has no rule for: refused."""
    raise missing_name(name, "fft")
