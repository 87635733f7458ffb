"""The real and imaginary parts of shape-only arrays, as NumPy's arrays give them.

``x.real`` and ``x.imag`` of a complex array are views of it (every other
item of its buffer); of a real array, ``x.real`` is ``x`` itself and
``x.imag`` a new array of zeros. ``x.conj()`` of a real array is ``x``
(NumPy, torch and CuPy alike); of a complex one, a new array. ``np.real``,
``np.imag`` and ``np.angle`` (``arctan2`` of the two parts) read the same
parts. `ShapeArray` takes `ATTRIBUTES` where the package registers its
modules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .._trace import active_trace
from . import _rules as rules
from ._array import ShapeArray, lift, made, unary, view_of
from ._numpy_composites import ufunc

if TYPE_CHECKING:
    from ..._typing import Value

__all__ = ["ATTRIBUTES", "FUNCTIONS"]


def _part(x: ShapeArray, imaginary: bool) -> ShapeArray:
    """``x.real`` (``imaginary`` False) or ``x.imag``."""
    name = rules.REAL.get(x._name)
    if name is None:  # (a real array: itself, or zeros of its shape)
        return made(x._trace, x.shape, x._name, (x,)) if imaginary else x
    if not x._trace.profile.views:
        return made(x._trace, x.shape, name, (x,))
    part = view_of(x, x.shape, contiguous=False)
    part._name = name
    return part


def real_part(x: ShapeArray) -> ShapeArray:
    """``x.real``: a view of a complex array; a real array itself."""
    return _part(x, imaginary=False)


def imaginary_part(x: ShapeArray) -> ShapeArray:
    """``x.imag``: a view of a complex array; zeros for a real one."""
    return _part(x, imaginary=True)


def conj(x: ShapeArray) -> ShapeArray:
    """``x.conj()``: a real array itself, a complex one's new conjugate."""
    if rules.REAL.get(x._name) is None:
        return x
    return unary(x, x._name)


def _array(v: Value) -> ShapeArray:
    return lift(v._trace if isinstance(v, ShapeArray) else active_trace(v), v)


def _angle(z: Value, deg: Value = False) -> Value:
    """``np.angle``: ``arctan2`` of the imaginary and the real part."""
    x = _array(z)
    if rules.REAL.get(x._name) is None:
        result = ufunc("arctan2")(0, x)
    else:
        result = ufunc("arctan2")(imaginary_part(x), real_part(x))
    if deg:
        result *= 180 / np.pi
    return result


#: `ShapeArray`'s attributes defined here: name -> property or method.
ATTRIBUTES: dict[str, object] = {
    "real": property(real_part),
    "imag": property(imaginary_part),
    "conj": conj,
    "conjugate": conj,
}

#: NumPy function name -> its handler on shape-only arrays.
FUNCTIONS: dict[str, Callable[..., object]] = {
    "real": lambda val: real_part(_array(val)),
    "imag": lambda val: imaginary_part(_array(val)),
    "angle": _angle,
}
