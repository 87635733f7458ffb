"""The operations of `Backend`: concatenate, expand_dims, flatnonzero, matmul, sort, svd.

Each calls the library first and checks its arguments only when the library
raises one of the adapter's "bad argument" exceptions (or, for libraries
that silently convert other libraries' arrays, when an operand is not one of
its own arrays), so the fast path pays nothing. A fault the checks find
becomes one ValueError/TypeError on every backend; anything else (an OOM, a
library bug) propagates unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ._args import (
    check_axis,
    concat_shape_error,
    matmul_shape_error,
    raise_if_axis_out_of_range,
    shape_of,
)
from ._convert import ArrayT
from ._dtypes import DTYPE_KINDS, dtype_name
from ._moves import Moves

__all__ = ["Operations"]

#: The dtypes `Backend.svd` takes: the standard's floating dtypes.
_SVD_DTYPES = ("float32", "float64", "complex64", "complex128")

#: The complex dtypes, which the standard's ``sort`` does not take.
_COMPLEX = frozenset(DTYPE_KINDS["complex floating"])

#: Array type -> dtype object -> whether the dtype is complex: what
#: `Backend.sort` checks on every call, learnt once per (type, dtype). Keyed
#: by the array's type first, so that dtype objects of two libraries (which
#: may hash alike and warn when compared) never meet in one table.
_IS_COMPLEX: dict[type, dict[Any, bool]] = {}


def _shape(x: Any) -> tuple[Any, ...]:
    """``x``'s shape as a plain tuple (``torch.Size`` prints differently)."""
    return tuple(shape_of(x))


class Operations(Moves[ArrayT]):
    """`Backend`'s operations (its attributes are set by `Backend`)."""

    __slots__ = ()

    # -- operations ----------------------------------------------------------
    # Each operation calls the library first and checks its arguments only
    # when the library raises one of the adapter's "bad argument" exceptions
    # (or, for libraries that silently convert other libraries' arrays, when
    # an operand is not one of its own arrays), so the fast path pays nothing.
    # A fault the checks find becomes one ValueError/TypeError on every
    # backend; anything else (an OOM, a library bug) propagates unchanged.
    def concatenate(self, arrays: Sequence[ArrayT], axis: int = 0) -> ArrayT:
        """Concatenate a non-empty sequence of arrays along ``axis``.

        Raises
        ------
        TypeError
            ``arrays`` is not a sequence, or holds something that is not an
            array of this backend's library (another library's array, a list).
        ValueError
            ``arrays`` is empty, ``axis`` is out of range, or the shapes differ
            other than along ``axis`` (the message gives them).
        """
        if not (type(arrays) in (list, tuple) and arrays and type(axis) is int):
            if isinstance(arrays, (str, bytes)) or not isinstance(arrays, Sequence):
                msg = (
                    "arrays must be a sequence of arrays, got "
                    f"{type(arrays).__qualname__}"
                )
                raise TypeError(msg)
            if len(arrays) == 0:
                msg = "arrays must not be empty"
                raise ValueError(msg)
            arrays, axis = list(arrays), check_axis(axis)
        plain = self._plain
        if plain is not None:
            for a in arrays:
                if type(a) is not plain:
                    self._check_operands(arrays)
                    break
        try:
            return self._concat(arrays, axis=axis)
        except self._bad_args:
            self._check_operands(arrays)
            raise_if_axis_out_of_range(arrays[0], axis)
            problem = concat_shape_error([_shape(a) for a in arrays], axis)
            if problem is not None:
                raise ValueError(problem) from None
            raise

    def _check_operands(self, arrays: Sequence[Any]) -> None:
        for i, a in enumerate(arrays):
            self._check_operand(a, f"arrays[{i}]")

    def expand_dims(self, array: ArrayT, axis: int) -> ArrayT:
        """Insert a new axis at position ``axis``."""
        if type(axis) is not int:
            axis = check_axis(axis)
        plain = self._plain
        if plain is not None and type(array) is not plain:
            self._check_operand(array, "array")
        try:
            return self._expand_dims(array, axis=axis)
        except self._bad_args:
            self._check_operand(array, "array")
            raise_if_axis_out_of_range(array, axis, extra=1)
            raise

    def flatnonzero(self, array: ArrayT) -> ArrayT:
        """Indices of the non-zero elements of the flattened array."""
        if not self._is_own_like(array):
            self._check_operand(array, "array")
        return self.xp.nonzero(self.xp.reshape(array, (-1,)))[0]

    def at(self, x: ArrayT, idx: Any = slice(None)) -> Any:
        """Functional updates of ``x[idx]`` that work on every library, traced too.

        ``b.at(x, idx).set(v)``, ``.add(v)``, ``.subtract(v)``,
        ``.multiply(v)``, ``.divide(v)``, ``.power(v)``, ``.min(v)``,
        ``.max(v)`` return the updated array: a new one where the library's
        arrays are immutable (JAX, also inside ``jax.jit``). Their ``copy``
        argument is array-api-extra's: ``None`` (the default) may update
        ``x`` in place where the library allows it, so do not use ``x``
        afterwards; ``True`` never touches ``x``; ``False`` updates in place
        or raises. array-api-extra's ``at``, with ``x`` checked first.

        Parameters
        ----------
        x : array
            An array of this backend's library.
        idx : index, default ``slice(None)``
            What ``x[idx]`` would select (integers, slices, a boolean mask).

        Returns
        -------
        array-api-extra's ``at`` object, whose methods return the updated array.

        Raises
        ------
        TypeError
            ``x`` is not an array of this backend's library.
        ImportError
            array-api-extra is not installed (``pip install array-api-extra``;
            the ``test`` and ``all`` extras have it).

        Examples
        --------
        >>> import xpkit
        >>> b = xpkit.Backend("numpy")
        >>> x = b.asarray([1.0, 2.0, 3.0])
        >>> b.at(x, 1).set(9.0, copy=True)
        array([1., 9., 3.])
        >>> x
        array([1., 2., 3.])
        >>> b.at(x, slice(0, 2)).add(1.0, copy=True)
        array([2., 3., 3.])
        """
        self._check_operand(x, "x")
        try:
            from array_api_extra import at
        except ImportError as exc:
            msg = (
                "Backend.at needs array-api-extra: pip install array-api-extra "
                "(or 'xpkit[test]')"
            )
            raise ImportError(msg) from exc
        target: Any = x
        return at(target, idx)

    def matmul(self, A: ArrayT, B: ArrayT) -> ArrayT:
        """Matrix multiplication ``A @ B``.

        Raises
        ------
        TypeError
            ``A`` or ``B`` is not an array of this backend's library (arrays
            of two libraries do not mix, as in `from_arrays`).
        ValueError
            The shapes do not fit (the message names ``A`` and ``B`` and gives
            their shapes).
        """
        plain = self._plain
        if plain is not None and (type(A) is not plain or type(B) is not plain):
            self._check_operand(A, "A")
            self._check_operand(B, "B")
        try:
            return self._matmul(A, B)
        except self._bad_args:
            self._check_operand(A, "A")
            self._check_operand(B, "B")
            problem = matmul_shape_error(_shape(A), _shape(B))
            if problem is not None:
                raise ValueError(problem) from None
            raise

    def sort(self, array: ArrayT, axis: int = -1) -> ArrayT:
        """Sort along ``axis``, returning values only.

        A non-array (a list) is a TypeError naming ``array`` on every backend,
        and so is a complex array: the standard's ``sort`` takes real dtypes
        only (NumPy and JAX would order complex numbers lexicographically,
        torch refuses them); sort ``b.xp.real(array)`` or ``b.xp.abs(array)``.
        """
        if type(axis) is not int:
            axis = check_axis(axis)
        plain = self._plain
        if plain is not None and type(array) is not plain:
            self._check_operand(array, "array")
        try:  # the hot path: two dict lookups, learnt on the first call
            is_complex = _IS_COMPLEX[type(array)][array.dtype]
        except (KeyError, AttributeError, TypeError):
            is_complex = self._learn_complex(array)
        if is_complex:
            self._refuse_complex(array)
        if axis != -1:  # lazy libraries (Dask) would not notice a bad axis here
            raise_if_axis_out_of_range(array, axis)
        try:
            return self._sort(array, axis=axis)
        except self._bad_args:
            self._check_operand(array, "array")
            raise_if_axis_out_of_range(array, axis)
            raise

    def _learn_complex(self, array: Any) -> bool:
        """Whether ``array`` (an array of this library, else a TypeError) is complex.

        Remembered in `_IS_COMPLEX` for its type and dtype object, where the
        dtype object can be a dict key.
        """
        self._check_operand(array, "array")
        dtype = array.dtype
        try:
            is_complex = dtype_name(dtype) in _COMPLEX
        except TypeError:  # not a dtype of the standard: the library decides
            return False
        with contextlib.suppress(TypeError):  # unhashable: asked again next time
            _IS_COMPLEX.setdefault(type(array), {})[dtype] = is_complex
        return is_complex

    def _refuse_complex(self, array: Any) -> None:
        self._check_operand(array, "array")  # another library's array first
        msg = (
            f"array has dtype {self._own_dtype(array, 'array')}, but sort takes "
            "real dtypes only (the standard's sort does not order complex "
            "numbers); sort xp.real(array) or xp.abs(array) instead"
        )
        raise TypeError(msg)

    def svd(
        self, X: ArrayT, full_matrices: bool = False
    ) -> tuple[ArrayT, ArrayT, ArrayT]:
        """Singular Value Decomposition, reduced by default.

        Parameters
        ----------
        X : array
            An array of this backend's library, of at least two dimensions
            (a matrix, or a stack of them) and a floating dtype of the
            standard: float32, float64, complex64 or complex128. Integer,
            boolean and half-precision arrays are refused rather than cast
            (as the standard's ``linalg.svd`` and torch refuse them): choose
            the precision with ``Backend.asarray(X, dtype=...)``.
        full_matrices : bool, default False
            Full (square) ``U`` and ``Vt`` rather than reduced ones.

        Returns
        -------
        tuple
            ``(U, s, Vt)``: left singular vectors, singular values (descending)
            and right singular vectors (transposed), with ``U * s @ Vt == X``.

        Raises
        ------
        TypeError
            ``X`` is not an array of this library, or not of a floating dtype;
            ``full_matrices`` is not a bool.
        ValueError
            ``X`` has fewer than two dimensions.
        NotImplementedError
            The library has no ``linalg`` extension (``"linalg"`` is not in
            `Backend.capabilities`).
        """
        if not isinstance(full_matrices, bool):
            msg = f"full_matrices must be a bool, got {full_matrices!r}"
            raise TypeError(msg)
        self._check_operand(X, "X")
        shape = _shape(X)
        if len(shape) < 2:
            msg = (
                "X must have at least 2 dimensions (a matrix or a stack of "
                f"matrices), got shape {shape}"
            )
            raise ValueError(msg)
        name = self._own_dtype(X, "X")
        if name not in _SVD_DTYPES:
            msg = (
                f"X must have a floating dtype ({', '.join(_SVD_DTYPES)}), got "
                f"{name}; convert it with Backend.asarray(X, dtype=...)"
            )
            raise TypeError(msg)
        if "linalg" not in self._adapter.capabilities:
            msg = (
                f"Backend.svd needs the linalg extension, which backend "
                f"{self.name!r} lacks (capabilities: "
                f"{', '.join(sorted(self._adapter.capabilities)) or 'none'})"
            )
            raise NotImplementedError(msg)
        u, s, vt = self.xp.linalg.svd(X, full_matrices=full_matrices)
        return u, s, vt
