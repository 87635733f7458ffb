"""The standard's named results of ``linalg``, as the shape-only namespace returns them.

``eigh(a).eigenvectors``, ``slogdet(a).logabsdet``, ``qr(a).R`` and
``svd(a).S`` read a field by name, as NumPy's, torch's and JAX's results
let them: a plain tuple raised AttributeError, and the trace gave up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ._array import ShapeArray

__all__ = ["EighResult", "QRResult", "SVDResult", "SlogdetResult"]


class EighResult(NamedTuple):
    """``eigh``'s eigenvalues and eigenvectors."""

    eigenvalues: ShapeArray
    eigenvectors: ShapeArray


class SlogdetResult(NamedTuple):
    """``slogdet``'s signs and logarithms of the determinants' magnitudes."""

    sign: ShapeArray
    logabsdet: ShapeArray


class QRResult(NamedTuple):
    """``qr``'s orthonormal and upper-triangular factors."""

    Q: ShapeArray
    R: ShapeArray


class SVDResult(NamedTuple):
    """``svd``'s left singular vectors, singular values and right singular vectors."""

    U: ShapeArray
    S: ShapeArray
    Vh: ShapeArray
