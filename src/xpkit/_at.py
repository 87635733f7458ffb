"""`At`, what `Backend.at` returns: functional updates of ``x[idx]``.

`At` checks the index (`_plain_index`, `_check_index`, `_completed`: the
same rules on every library) and the update's value (`_fitted`), then
hands both to array-api-extra's ``at``. A slice with a negative step is
updated as the forward slice of the same elements, the value reversed to
match (`_forward`): torch's slices take no negative step, and ndonnx's and
Dask's updates through one failed (a shape error; an empty one, a row and
columns stepping back).
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING, Generic

import numpy as np
from array_api_compat import array_namespace

from ._adapters._registry import adapter_for_array
from ._args import check_copy
from ._cast_checks import scalar_cast_loss
from ._dtypes import dtype_name
from ._facts import ArrayT
from ._operations import check_operand, refuse_operand, stands_in

if TYPE_CHECKING:
    from ._backend import Backend
    from ._typing import Array, Namespace, Value

__all__ = ["At"]

#: Python's scalar types: update values that every library takes as they are.
_PY_SCALARS = (bool, int, float, complex)


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
        number; ``copy`` is not a bool or None; ``divide`` of an integer
        or bool ``x``. A NumPy scalar or 0-d NumPy array ``y`` is taken as
        the Python number it holds.
    ValueError
        From the methods: a number ``y`` that would change in ``x``'s dtype
        (`_fitted`); a negative ``power`` of an integer ``x``.
    IndexError
        An integer in ``idx`` is out of range for its axis; ``idx`` holds
        two ``...``.
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

    __slots__ = ("_at", "_facts", "_idx", "_reversed", "_x")

    def __init__(self, backend: Backend[ArrayT], x: ArrayT, idx: Value) -> None:
        facts = backend._facts
        check_operand(facts, x, "x")
        idx = _plain_index(idx)
        _check_index(x, idx)  # (before narrow integers become positions)
        idx = (
            tuple(map(_as_positions, idx)) if type(idx) is tuple else _as_positions(idx)
        )
        if type(idx) is tuple and not facts.adapter.ints_join_arrays:
            idx = _ints_as_arrays(idx)
        idx = _completed(x, idx)
        idx, reversed_axes = _forward(x, idx)
        try:
            from array_api_extra import at
        except ImportError as exc:
            msg = (
                "Backend.at needs array-api-extra, a dependency of xpkit that "
                "is missing here: pip install array-api-extra"
            )
            raise ImportError(msg) from exc
        target: Array = x  # an array of any library, which array-api-extra takes
        self._facts = facts
        self._x = x
        self._idx = idx
        self._reversed = reversed_axes
        self._at = at(target, idx)

    def _apply(
        self, name: str, y: Value, copy: bool | None, xp: Namespace | None
    ) -> ArrayT:
        check_copy(copy)
        update = getattr(self._at, name)
        value = self._value(y)
        if name in ("divide", "power"):
            _refuse_integer_quotient(name, value, self._x)
        adapter = self._facts.adapter
        if copy is None and adapter.is_read_only(self._x):
            copy = True  # (may update in place: where it cannot, a copy)
        if name in ("min", "max") and not adapter.owns(value):
            # array-api-extra makes a number an array without device=: on
            # the default device, which array-api-strict's device1 refuses.
            ns = self._facts.xp if xp is None else xp
            value = ns.asarray(value, device=adapter.device_of(self._x))
        result: ArrayT = update(value, copy=copy, xp=xp)
        return result

    def _value(self, y: Value) -> Value:
        """``y`` as array-api-extra takes it: this library's array or a number."""
        adapter = self._facts.adapter
        refuse_operand(y, "y")
        numpy_value = isinstance(y, (np.generic, np.ndarray))
        if numpy_value and y.dtype.kind not in "biufc":
            msg = f"y has non-numeric dtype {y.dtype} (value {y!r:.60})"
            raise TypeError(msg)
        if (numpy_value and y.ndim == 0) or isinstance(y, _PY_SCALARS):
            # A number (a NumPy one as the Python number it holds), as x's kind.
            return _fitted(y.item() if numpy_value else y, self._x)
        owned = adapter.owns(y)
        if owned or stands_in(self._facts, y):
            # (a stand-in of a trace of fn: its own namespace follows it)
            ns: Namespace = self._facts.xp if owned else y.__array_namespace__()
            y = _reversed(y, self._reversed, ns)
            shape = tuple(y.shape)
            broadcast = not adapter.updates_broadcast
            if broadcast or (shape and shape[0] == 1):  # (JAX refused (1, 3) for (3,))
                y = _to_selection(y, self._x, self._idx, ns, broadcast=broadcast)
            return y
        other = adapter_for_array(y)
        if other is not None:
            msg = (
                f"y is an array of {other.label}, but x is an array of "
                f"{adapter.label} (backend {self._facts.name!r}): libraries "
                "do not mix; convert y with Backend.asarray"
            )
        else:
            msg = (
                f"y must be an array of {adapter.label} or a number, got "
                f"{type(y).__qualname__}"
            )
        raise TypeError(msg)

    def set(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] = y``, returning the updated array."""
        return self._apply("set", y, copy, xp)

    def add(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] += y``, returning the updated array."""
        return self._apply("add", y, copy, xp)

    def subtract(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] -= y``, returning the updated array."""
        return self._apply("subtract", y, copy, xp)

    def multiply(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] *= y``, returning the updated array."""
        return self._apply("multiply", y, copy, xp)

    def divide(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] /= y``, returning the updated array."""
        return self._apply("divide", y, copy, xp)

    def power(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] **= y``, returning the updated array."""
        return self._apply("power", y, copy, xp)

    def min(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] = minimum(x[idx], y)``, returning the updated array."""
        return self._apply("min", y, copy, xp)

    def max(
        self, y: ArrayT | complex, /, copy: bool | None = None, xp: Namespace = None
    ) -> ArrayT:
        """``x[idx] = maximum(x[idx], y)``, returning the updated array."""
        return self._apply("max", y, copy, xp)


def _fitted(value: complex, x: Array) -> complex:
    """The number ``value`` as ``x``'s dtype's kind of Python number, unchanged.

    Every library casts an update's number to ``x``'s dtype, each its own
    way (300 into uint8: JAX 44, NumPy OverflowError; -1: torch 255; NaN
    into an integer: JAX 0; 0.5: 0; 1+2j into a float: 1.0; 1e300 into
    complex64: inf), and some refuse a number of another kind
    (array-api-strict: 2.0 or True into an integer array). A ValueError
    where the value would change, by the fills' rule (`scalar_cast_loss`):
    an integer dtype takes the integers it holds, a bool dtype 0 and 1, a
    float dtype (each part of a complex one) any number that neither
    overflows to inf nor underflows to 0 (rounded to its precision). The
    value comes back as an int, a bool, a float or a complex, as the dtype
    is.
    """
    try:
        target = np.dtype(dtype_name(x.dtype))
    except (TypeError, ValueError, AttributeError):
        return value  # (a dtype NumPy has no name for: bfloat16, say)
    reason = scalar_cast_loss(value, target.name)
    if reason is not None:
        msg = f"y={value!r:.60} does not fit x's dtype {target} {reason}"
        raise ValueError(msg)
    if target.kind == "c":
        return complex(value)
    if isinstance(value, complex):
        value = value.real
    if target.kind == "f":
        return float(value)
    return bool(value) if target.kind == "b" else int(value)


def _refuse_integer_quotient(name: str, value: Value, x: Array) -> None:
    """An update whose result an integer ``x`` cannot hold, refused on every library.

    ``divide`` (a true quotient) and ``power`` by a negative number: NumPy
    and torch raised their own errors, JAX, Dask and ndonnx wrote truncated
    quotients (``divide(0)``: INT32_MAX, INT64_MIN) or garbage.
    """
    try:
        kind = dtype_name(x.dtype)
    except (AttributeError, TypeError):
        return
    if kind is None or not kind.startswith(("int", "uint", "bool")):
        return
    if name == "divide":
        msg = (
            f"divide on x of dtype {kind}: a quotient is a float, which x cannot "
            "hold; convert x to a floating dtype first"
        )
        raise TypeError(msg)
    if isinstance(value, (int, float)) and value < 0:
        msg = f"y={value!r}: x of dtype {kind} takes no negative power"
        raise ValueError(msg)


def _plain_index(idx: Value) -> Value:
    """``idx`` with NumPy integers as Python's (every library takes those).

    A bool or a float is no index: TypeError (NumPy reads a bool as a new
    axis, ndonnx as 0 or 1; Dask took a float); so is a masked array, and
    None: the standard's ``__setitem__`` takes no new axis (Dask raised
    AttributeError, array-api-strict IndexError).
    """
    if type(idx) is tuple:
        return tuple(_plain_part(p, f"idx[{k}]") for k, p in enumerate(idx))
    return _plain_part(idx, "idx")


def _plain_part(part: Value, name: str) -> Value:
    if part is None:
        msg = (
            f"{name}=None adds an axis, which an update's index cannot take "
            "(the standard's __setitem__ takes none): leave it out"
        )
        raise TypeError(msg)
    if isinstance(part, (bool, np.bool_, float, np.floating)):
        msg = (
            f"{name}={part!r} is not an index: give an integer, a slice, "
            "..., an integer array or a boolean mask array"
        )
        raise TypeError(msg)
    if isinstance(part, np.integer):
        return operator.index(part)
    refuse_operand(part, name)
    return part


#: Integer index dtypes every library takes as positions.
_POSITIONS = frozenset({"int64", "int32"})


def _as_positions(part: Value) -> Value:
    """An integer index array of a narrower dtype as the library's index dtype.

    torch read a uint8 array as a mask (``[0, 1, 1, 0]`` updated position
    2, which it does not hold) and refused int8 and int16 ones.
    """
    if adapter_for_array(part) is None:
        return part
    try:
        name = dtype_name(part.dtype)
    except (AttributeError, TypeError):
        return part
    if name is None or name in _POSITIONS or not name.startswith(("int", "uint")):
        return part
    ns = array_namespace(part)
    try:  # (the standard's: int32 for JAX without 64-bit types)
        indexing = ns.__array_namespace_info__().default_dtypes()["indexing"]
    except (AttributeError, KeyError, TypeError):
        indexing = ns.int64
    return ns.astype(part, indexing)


def _check_index(x: Array, idx: Value) -> None:
    """IndexError where an integer in ``idx`` is out of range for ``x``'s shape.

    The same check on every library, where the shape is static (JAX under
    ``jit`` included); an axis of unknown size (Dask's unknown chunks, a
    symbolic size) and an index of a kind not known here are not checked.
    """
    parts = idx if type(idx) is tuple else (idx,)
    shape = tuple(x.shape)
    widths = [_width(p) for p in parts]
    if sum(p is Ellipsis for p in parts) > 1:  # (torch and ndonnx took it)
        msg = f"idx={idx!r:.80} holds more than one ...: an index takes one at most"
        raise IndexError(msg)
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
        if width == 1 and not _is_mask(part):
            name = "idx" if type(idx) is not tuple else f"idx[{k}]"
            _check_in_range(part, name, axis, shape[axis])
        axis += width


def _completed(x: Array, idx: Value) -> Value:
    """``idx`` with a trailing ``...`` where it indexes fewer axes than ``x`` has.

    NumPy's rule, which the standard leaves unspecified and array-api-strict
    and ndonnx refuse: ``at(x, 0)`` on a matrix updates its first row on
    every library. An index whose width is not known here is left alone.
    """
    parts = idx if type(idx) is tuple else (idx,)
    if any(p is Ellipsis or _is_mask(p) for p in parts):
        return idx  # (the standard takes a boolean mask only as the whole index)
    widths = [_width(p) for p in parts]
    if None in widths or sum(w for w in widths if w is not None) >= len(x.shape):
        return idx
    return (*parts, Ellipsis)


def _width(part: Value) -> int | None:
    """How many axes of ``x`` an index part uses; None where not known here."""
    if part is None or part is Ellipsis:
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


def _is_mask(part: Value) -> bool:
    """Whether the index part ``part`` is a boolean mask array (it holds no positions)."""
    if isinstance(part, (int, np.integer, slice)) or adapter_for_array(part) is None:
        return False
    try:
        return dtype_name(part.dtype) == "bool"
    except (AttributeError, TypeError):
        return False


def _check_in_range(part: Value, name: str, axis: int, size: object) -> None:
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
    # The extremes, computed where the index lives: two numbers travel
    # (the whole index, where the library has no min of its dtype: torch's
    # uint16, uint32 and uint64).
    ixp = array_namespace(part)
    try:
        low = int(adapter.to_numpy(ixp.min(part)))
        high = int(adapter.to_numpy(ixp.max(part)))
    except (NotImplementedError, RuntimeError, TypeError):
        on_host = adapter.to_numpy(part)
        low, high = int(on_host.min()), int(on_host.max())
    for value in (low, high):
        if not -size <= value < size:
            msg = (
                f"{name} holds {value}, out of range for axis {axis} of x, "
                f"which has size {size}"
            )
            raise IndexError(msg)


def _ints_as_arrays(parts: tuple[Value, ...]) -> tuple[Value, ...]:
    """Each integer beside integer arrays (or a mask) as a one-element array.

    NumPy's rule: an integer beside arrays is one of them, its axis among
    theirs, first where they are not adjacent. torch's and Dask's integer is
    a basic index, and ``x[0, :, arange(4)]`` put the arrays' axis last: a
    square update wrote its values transposed. A one-element array
    broadcasts as the integer does (Dask, which takes one array at most,
    then refuses the index). Adjacent, both rules place the axes alike.
    """
    advanced = [k for k, p in enumerate(parts) if not _is_basic(p)]
    arrays = [parts[k] for k in advanced if not isinstance(parts[k], int)]
    if (
        not arrays
        or any(_width(a) is None or not tuple(a.shape) for a in arrays)
        or advanced == list(range(advanced[0], advanced[-1] + 1))  # (adjacent: alike)
        or not any(isinstance(parts[k], int) for k in advanced)
    ):
        return parts
    ns = array_namespace(arrays[0])
    where = adapter_for_array(arrays[0])
    device = None if where is None else where.device_of(arrays[0])
    return tuple(
        ns.asarray([p], device=device) if isinstance(p, int) else p for p in parts
    )


def _forward(x: Array, idx: Value) -> tuple[Value, tuple[int, ...]]:
    """``idx`` with each negative-step slice as the forward one of the same elements.

    ``x[8:2:-2]`` is ``x[4:9:2]`` read backwards, on every library (see the
    module's docstring for why). Returns the index and the axes of
    ``x[idx]`` that run backwards, counted from its last (-1): an update's
    array value is reversed along them (`_reversed`). The axes follow
    NumPy's rule, which torch keeps: a slice or ``...`` keeps its axes in
    order; the axes of integer arrays (a mask: one) and, beside them,
    integers stand where the first of them does if they are adjacent, else
    before all others. An index whose widths are not known here is left to
    the library.
    """
    parts = idx if type(idx) is tuple else (idx,)
    if not any(_steps_back(p) for p in parts):
        return idx, ()
    widths = [_width(p) for p in parts]
    if None in widths or sum(p is Ellipsis for p in parts) > 1:
        return idx, ()
    counted = [w for w in widths if w is not None]
    shape = tuple(x.shape)
    rest = len(shape) - sum(counted)  # the axes ``...`` (or the end) stands for
    advanced = [k for k, p in enumerate(parts) if not _is_basic(p)]
    block = _advanced_ndim(parts, advanced)
    together = (
        advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    )
    out: list[int | None] = (
        [] if together else [None] * block
    )  # result axes: a slice's k
    axis, forward = 0, list(parts)
    for k, (part, width) in enumerate(zip(parts, counted, strict=True)):
        if part is Ellipsis:
            out += [None] * rest
            axis += rest
            continue
        if isinstance(part, slice):
            out.append(k)
            forward[k] = _forward_slice(part, shape[axis])
        elif advanced and together and k == advanced[0]:
            out += [None] * block
        axis += width
    if not any(p is Ellipsis for p in parts):
        out += [None] * rest
    if any(f is None for f in forward):
        return idx, ()  # (a size not known here)
    backwards = tuple(
        r - len(out)
        for r, k in enumerate(out)
        if k is not None and _steps_back(parts[k])
    )
    return (tuple(forward) if type(idx) is tuple else forward[0]), backwards


def _steps_back(part: Value) -> bool:
    """Whether ``part`` is a slice with a negative step."""
    if not isinstance(part, slice) or part.step is None:
        return False
    try:
        return operator.index(part.step) < 0
    except TypeError:
        return False


def _is_basic(part: Value) -> bool:
    """Whether ``part`` is a slice or ``...`` (an integer joins the arrays' block if any)."""
    return isinstance(part, slice) or part is Ellipsis


def _advanced_ndim(parts: tuple[Value, ...], advanced: list[int]) -> int:
    """How many axes the integer arrays and masks of ``parts`` make, broadcast together.

    Integers alone make none (an integer drops its axis); a mask makes one.
    """
    ndims = [
        1 if _is_mask(parts[k]) else len(tuple(parts[k].shape))
        for k in advanced
        if not isinstance(parts[k], int)
    ]
    return max(ndims, default=0)


def _forward_slice(part: slice, size: object) -> slice | None:
    """The slice with a positive step that selects ``part``'s elements (None: size unknown)."""
    if not _steps_back(part):
        return part
    if isinstance(size, bool) or not isinstance(size, int):
        return None
    chosen = range(*part.indices(size))
    if not chosen:
        return slice(0, 0)
    return slice(chosen[-1], chosen[0] + 1, -chosen.step)


def _to_selection(
    y: Array, x: Array, idx: Value, xp: Namespace, *, broadcast: bool
) -> Array:
    """``y`` as NumPy's ``x[idx] = y`` takes it.

    Its leading axes of one element are dropped where it has more axes than
    ``x[idx]`` (JAX refused them), and with ``broadcast`` (for ndonnx, whose
    update did not) it is broadcast to that shape. Left as it is where a size is not known (a symbolic axis) or it does
    not broadcast (the library's error says so).
    """
    selected = tuple(x[idx].shape)
    shape = tuple(y.shape)
    if not all(isinstance(d, int) for d in (*selected, *shape)):
        return y
    extra = len(shape) - len(selected)
    if extra > 0 and all(d == 1 for d in shape[:extra]):
        y, shape = xp.reshape(y, shape[extra:]), shape[extra:]
    if not broadcast or shape == selected or len(shape) > len(selected):
        return y
    return xp.broadcast_to(y, selected)


def _reversed(y: Array, axes: tuple[int, ...], xp: Namespace) -> Array:
    """``y`` reversed along each of ``axes`` (from its last) where it has more than one element."""
    for axis in axes:
        shape = tuple(y.shape)
        if len(shape) >= -axis and shape[axis] != 1:
            y = xp.flip(y, axis=axis)
    return y
