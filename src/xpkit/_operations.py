"""The operations of `Backend`: at, concatenate, expand_dims, flatnonzero, matmul, sort, svd.

Each calls the library first and checks its arguments only when the library
raises one of the adapter's "bad argument" exceptions (or, for libraries
that silently convert other libraries' arrays, when an operand is not one of
its own arrays), so the fast path pays nothing. A fault the checks find
becomes one ValueError/TypeError on every backend; anything else (an OOM, a
library bug) propagates unchanged.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, cast

import numpy as np
from array_api_compat import array_namespace

from ._adapters import adapter_for_array
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

if TYPE_CHECKING:
    from ._backend import Backend

__all__ = ["At", "Operations"]

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

    def at(self, x: ArrayT, idx: Any = slice(None)) -> At[ArrayT]:
        """Functional updates of ``x[idx]`` that work on every library, traced too.

        ``b.at(x, idx).set(v)``, ``.add(v)``, ``.subtract(v)``,
        ``.multiply(v)``, ``.divide(v)``, ``.power(v)``, ``.min(v)``,
        ``.max(v)`` return the updated array: a new one where the library's
        arrays are immutable (JAX, also inside ``jax.jit``). Their ``copy``
        argument is array-api-extra's: ``None`` (the default) may update
        ``x`` in place where the library allows it, so do not use ``x``
        afterwards; ``True`` never touches ``x``; ``False`` updates in place
        or raises. `At` checks the index and the value alike on every
        library, then hands them to array-api-extra's ``at``.

        Parameters
        ----------
        x : array
            An array of this backend's library.
        idx : index, default ``slice(None)``
            What ``x[idx]`` would select (integers, slices, ``None``,
            ``...``, a boolean mask, or a tuple of them). An integer out of
            range for its axis is an `IndexError` on every library (JAX and
            ndonnx would drop the update silently), checked where ``x``'s
            shape is known: always but for Dask's unknown chunk sizes,
            inside ``jax.jit`` too. An integer array's values are checked
            where they are at hand; traced or lazy ones (inside
            ``jax.jit``, Dask) cannot be, and there JAX drops the updates
            out of range.

        Returns
        -------
        At
            Its methods (``set``, ``add``, ...) return the updated array.

        Raises
        ------
        TypeError
            ``x`` is not an array of this backend's library.
        IndexError
            An integer in ``idx`` is out of range for its axis (the message
            gives the index, the axis and its size), or ``idx`` indexes more
            axes than ``x`` has.
        ImportError
            array-api-extra, a dependency of xpkit, is missing (an install
            without dependencies): ``pip install array-api-extra``.

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
        >>> b.at(x, 3).set(0.0)
        Traceback (most recent call last):
        ...
        IndexError: idx=3 is out of range for axis 0 of x, which has size 3
        """
        return At(cast("Backend[ArrayT]", self), x, idx)

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
        any_array: Any = array  # (ArrayT promises no .dtype to type checkers)
        try:  # the hot path: two dict lookups, learnt on the first call
            is_complex = _IS_COMPLEX[type(array)][any_array.dtype]
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


# -- at ---------------------------------------------------------------------------
#: Python's scalar types: update values that every library takes as they are.
_PY_SCALARS = (bool, int, float, complex)


def _check_copy(copy: Any) -> None:
    if copy is not None and not isinstance(copy, bool):
        msg = f"copy must be True, False or None, got {copy!r}"
        raise TypeError(msg)


class At(Generic[ArrayT]):
    """Functional updates of ``x[idx]``: what `Backend.at` returns.

    Each method applies one update and returns the updated array: ``set``
    (``x[idx] = y``), ``add`` (``+=``), ``subtract`` (``-=``), ``multiply``
    (``*=``), ``divide`` (``/=``), ``power`` (``**=``), ``min`` and
    ``max`` (``x[idx] = minimum(x[idx], y)``, ``maximum``). They check
    ``y`` and then call array-api-extra's ``at`` (``xpx.at(x, idx)``), with
    its semantics for the two other arguments every method takes:

    - ``copy``: None (the default) may update ``x`` in place where its
      library allows it, so do not use ``x`` afterwards; True never
      touches ``x``; False updates in place or raises ValueError (JAX,
      whose arrays are immutable);
    - ``xp``: the namespace of ``x``; None infers it.

    Parameters
    ----------
    backend : Backend
        The backend whose library ``x`` belongs to.
    x : array
        The array to update.
    idx : index
        What ``x[idx]`` would select; integers in it are checked against
        ``x``'s shape (see `Backend.at`).

    Raises
    ------
    TypeError
        ``x`` is not an array of ``backend``'s library. From the methods:
        ``y`` is an array of another library (a NumPy array given to a
        torch update, say: convert it with `Backend.asarray`) or not a
        number; ``copy`` is not a bool or None. A NumPy scalar or 0-d
        NumPy array ``y`` is taken as the Python number it holds.
    IndexError
        An integer in ``idx`` is out of range for its axis.
    ImportError
        array-api-extra is not installed.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> b = xpkit.Backend("numpy")
    >>> x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
    >>> update = b.at(x, (1, -1))
    >>> update.max(9.0, copy=True)
    array([[1., 2.],
           [3., 9.]])
    >>> update.multiply(np.float32(0.5), copy=True)
    array([[1., 2.],
           [3., 2.]])
    """

    __slots__ = ("_at", "_backend", "_x")

    def __init__(self, backend: Backend[ArrayT], x: ArrayT, idx: Any) -> None:
        backend._check_operand(x, "x")
        idx = _plain_index(idx)
        _check_index(x, idx)
        try:
            from array_api_extra import at
        except ImportError as exc:
            msg = (
                "Backend.at needs array-api-extra, a dependency of xpkit that "
                "is missing here: pip install array-api-extra"
            )
            raise ImportError(msg) from exc
        target: Any = x  # an array of any library, which array-api-extra takes
        self._backend = backend
        self._x = x
        self._at = at(target, idx)

    def _apply(self, name: str, y: Any, copy: bool | None, xp: Any) -> ArrayT:
        _check_copy(copy)
        update = getattr(self._at, name)
        value = self._value(y)
        if name in ("min", "max") and not self._backend._adapter.owns(value):
            # array-api-extra makes a number an array without device=: on
            # the default device, which array-api-strict's device1 refuses.
            ns = self._backend.xp if xp is None else xp
            value = ns.asarray(value, device=self._backend._adapter.device_of(self._x))
        result: ArrayT = update(value, copy=copy, xp=xp)
        return result

    def _value(self, y: Any) -> Any:
        """``y`` as array-api-extra takes it: this library's array or a number."""
        adapter = self._backend._adapter
        numpy_value = isinstance(y, (np.generic, np.ndarray))
        if numpy_value and y.dtype.kind not in "biufc":
            msg = f"y has non-numeric dtype {y.dtype} (value {y!r:.60})"
            raise TypeError(msg)
        if adapter.owns(y):
            return y
        if numpy_value and y.ndim == 0:
            return y.item()  # a NumPy number: the Python number it holds
        if isinstance(y, _PY_SCALARS):
            return y
        other = adapter_for_array(y)
        if other is not None:
            msg = (
                f"y is an array of {other.label}, but x is an array of "
                f"{adapter.label} (backend {self._backend.name!r}): libraries "
                "do not mix; convert y with Backend.asarray"
            )
        else:
            msg = (
                f"y must be an array of {adapter.label} or a number, got "
                f"{type(y).__qualname__}"
            )
        raise TypeError(msg)

    def set(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] = y``, returning the updated array."""
        return self._apply("set", y, copy, xp)

    def add(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] += y``, returning the updated array."""
        return self._apply("add", y, copy, xp)

    def subtract(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] -= y``, returning the updated array."""
        return self._apply("subtract", y, copy, xp)

    def multiply(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] *= y``, returning the updated array."""
        return self._apply("multiply", y, copy, xp)

    def divide(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] /= y``, returning the updated array."""
        return self._apply("divide", y, copy, xp)

    def power(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] **= y``, returning the updated array."""
        return self._apply("power", y, copy, xp)

    def min(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] = minimum(x[idx], y)``, returning the updated array."""
        return self._apply("min", y, copy, xp)

    def max(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Any = None
    ) -> ArrayT:
        """``x[idx] = maximum(x[idx], y)``, returning the updated array."""
        return self._apply("max", y, copy, xp)


def _plain_index(idx: Any) -> Any:
    """``idx`` with NumPy integers and bools as Python's (every library takes those)."""
    if type(idx) is tuple:
        return tuple(_plain_part(p) for p in idx)
    return _plain_part(idx)


def _plain_part(part: Any) -> Any:
    if isinstance(part, np.integer):
        return operator.index(part)
    if isinstance(part, np.bool_):
        return bool(part)
    return part


def _check_index(x: Any, idx: Any) -> None:
    """IndexError where an integer in ``idx`` is out of range for ``x``'s shape.

    The same check on every library, where the shape is static (JAX under
    ``jit`` included); an axis of unknown size (Dask's unknown chunks, a
    symbolic size) and an index of a kind not known here are not checked.
    """
    parts = idx if type(idx) is tuple else (idx,)
    shape = tuple(x.shape)
    widths = [_width(p) for p in parts]
    if sum(p is Ellipsis for p in parts) > 1:
        return  # an index the library must judge
    counted = [w for w in widths if w is not None]
    if len(counted) < len(widths):
        return
    if sum(counted) > len(shape):
        msg = f"idx indexes {sum(counted)} axes, but x has {len(shape)} (shape {shape})"
        raise IndexError(msg)
    ellipsis = next((k for k, p in enumerate(parts) if p is Ellipsis), len(parts))
    axis = 0
    for k, (part, width) in enumerate(zip(parts, counted, strict=True)):
        if k == ellipsis:
            axis = len(shape) - sum(counted[k + 1 :])
            continue
        if width == 1:
            name = "idx" if type(idx) is not tuple else f"idx[{k}]"
            _check_in_range(part, name, axis, shape[axis])
        axis += width


def _width(part: Any) -> int | None:
    """How many axes of ``x`` an index part uses; None where not known here."""
    if part is None or part is Ellipsis or isinstance(part, (bool, np.bool_)):
        return 0
    if isinstance(part, (int, np.integer, slice)):
        return 1
    adapter = adapter_for_array(part)
    if adapter is None:
        return None  # a list, or an object with __index__: the library judges
    try:
        name = dtype_name(part.dtype)
    except (AttributeError, TypeError):
        return None
    if name == "bool":
        return len(tuple(part.shape))
    return 1 if name is not None and name.startswith(("int", "uint")) else None


def _check_in_range(part: Any, name: str, axis: int, size: Any) -> None:
    """IndexError where the integer (or integer array) ``part`` misses the axis."""
    if isinstance(size, bool) or not isinstance(size, int):
        return  # an unknown (None, NaN) or symbolic size
    if isinstance(part, slice):
        return
    if isinstance(part, (int, np.integer)):
        i = operator.index(part)
        if not -size <= i < size:
            msg = f"{name}={i} is out of range for axis {axis} of x, which has size {size}"
            raise IndexError(msg)
        return
    adapter = adapter_for_array(part)
    if adapter is None or not adapter.values_at_hand(part):
        return  # traced (jax.jit) or lazy (Dask) values: not at hand
    if math.prod(part.shape) == 0:
        return
    # The extremes, computed where the index lives: two numbers travel.
    ixp = array_namespace(part)
    low = int(adapter.to_numpy(ixp.min(part)))
    high = int(adapter.to_numpy(ixp.max(part)))
    for value in (low, high):
        if not -size <= value < size:
            msg = (
                f"{name} holds {value}, out of range for axis {axis} of x, "
                f"which has size {size}"
            )
            raise IndexError(msg)
