"""`At`, what `Backend.at` returns: functional updates of ``x[idx]``.

`At` takes the index through `xpkit._at_index` (NumPy's rules, checked
and kept on every library) and checks the update's value (`_fitted`), then
hands both to array-api-extra's ``at``. An array value is laid out for
the index as the library reads it: reversed along the axes of a slice
that steps back (updated as the forward one: torch's slices take no
negative step, and ndonnx's and Dask's updates through one failed), its
leading axes of one element dropped, and its axes moved where torch and
Dask place them otherwise than NumPy (`xpkit._at_index.placement`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic

import numpy as np

from ._adapters._registry import adapter_for_array, over_read_only_memory
from ._args import check_copy
from ._at_index import (
    as_positions,
    check_index,
    completed,
    forward,
    ints_as_slices,
    is_basic_index,
    is_mask_part,
    is_positions,
    placement,
    plain_index,
)
from ._at_shape import (
    basic_selection,
    check_fits,
    refuse_shape,
    reversed_along,
    selection_shape,
    to_selection,
    with_sliced_axes,
)
from ._cast_checks import rounded_to_finite, scalar_cast_loss
from ._dtypes import dtype_name, own_dtype
from ._facts import ArrayT, Facts
from ._operations import check_operand, refuse_operand, stands_in
from ._shown import shown

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._backend import Backend
    from ._typing import Array, Namespace, Narrowing, Value

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

    An integer index array that names a position more than once updates it
    as its library does, which xpkit does not even out: JAX applies every
    update there (``add`` of 5 and 1 at position 0 adds 6, ``max`` keeps
    the largest of all); NumPy and Dask apply the last alone, as
    ``x[idx] += y`` does in NumPy (``add`` adds 1, ``max`` compares with 1
    only); torch applies one of them, which it leaves unspecified (on CPU
    threads it varies from run to run). Give each position once where the
    answer must agree across libraries.

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
        (`_fitted`); a negative ``power`` of an integer ``x`` (a number, or
        an array of this library whose values can be read now: not under
        ``jax.jit``; a Dask graph's tasks raise NumPy's error).
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

    __slots__ = (
        "_at",
        "_basic",
        "_facts",
        "_idx",
        "_index",
        "_kind",
        "_moved",
        "_reversed",
        "_sliced",
        "_x",
    )

    def __init__(self, backend: Backend[ArrayT], x: ArrayT, idx: Value) -> None:
        facts = backend._facts
        check_operand(facts, x, "x")
        kind = own_dtype(x, "x")  # (float8: torch saturated 1000 to 448, silently)
        idx = plain_index(idx)
        basic = is_basic_index(idx)  # (no array in it: nothing to convert or move)
        if not basic:
            _own_index(facts, idx)
        check_index(x, idx)  # (before narrow integers become positions)
        if not basic:
            idx = (
                tuple(map(as_positions, idx))
                if type(idx) is tuple
                else as_positions(idx)
            )
        idx = completed(x, idx)
        idx, reversed_axes = forward(x, idx)
        moved = sliced = None
        if not basic:
            if not facts.adapter.reads_numpy_masks:
                idx = _masks_as_own(facts, x, idx)
            idx = _masks_as_positions(facts, idx)
            if not facts.adapter.ints_join_arrays:
                moved = placement(x, idx)
            if not facts.adapter.sets_ints_beside_arrays:
                sliced = ints_as_slices(x, idx)
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
        self._basic = basic
        self._x = x
        self._kind = kind
        self._idx = idx
        self._reversed = reversed_axes
        self._moved = moved
        self._sliced = sliced
        self._index = idx if sliced is None else sliced
        self._at = at(target, self._index)

    def _apply(
        self, name: str, y: Value, copy: bool | None, xp: Namespace | None
    ) -> ArrayT:
        check_copy(copy)
        adapter = self._facts.adapter
        if self._kind in adapter.where_rounds and _holds_mask(self._index):
            msg = (
                f"x has dtype {self._kind}, whose values {adapter.label}'s where "
                "rounds (every element, selected or not), and an update by a "
                "boolean mask runs through it there: index by integers or "
                "slices, or convert x to a dtype it keeps"
            )
            raise TypeError(msg)
        update = getattr(self._at, name)
        value = self._value(y)
        if name in ("divide", "power"):
            _refuse_integer_quotient(self._facts, name, value, self._kind)
        x: Array = self._x  # (any library's array: its shape and dtype read)
        in_place = copy is not True and not stands_in(self._facts, x)
        why = adapter.update_refusal(x) if in_place else None
        if in_place and why is None and over_read_only_memory(x):
            why = "a view of read-only memory (a write into it ends the process)"
        if why is not None:
            if copy is False:
                msg = (
                    f"copy=False: x (shape {tuple(x.shape)}) is {why}: it cannot "
                    "be updated in place; pass copy=None or copy=True"
                )
                raise ValueError(msg)
            copy = True  # (None may update in place: where it cannot, a copy)
        elif (
            in_place
            and not adapter.reads_overlapping_values
            and _overlaps(adapter, x, value)
        ):
            value = adapter.own_copy(value)  # (read whole before x is written)
        index = self._index
        mask = self._mask_of_x(value)
        if mask is not None:
            from array_api_extra import at

            index = mask
            update = getattr(at(x, index), name)
        fresh = adapter.copy_to_update(x) if copy else None
        if fresh is not None:  # (copied as its library copies it, then updated)
            from array_api_extra import at

            update = getattr(at(fresh, index), name)
            copy = False
        if name in ("min", "max") and not adapter.owns(value):
            # array-api-extra makes a number an array without device= (on the
            # default device, which array-api-strict's device1 refuses) and
            # in the library's default dtype (0.1 rounded to float32 for a
            # float64 torch x; 0 as int64 made a uint64 x float64): x's own.
            ns = self._facts.xp if xp is None else xp
            value = ns.asarray(value, dtype=x.dtype, device=adapter.device_of(x))
        if not adapter.sets_empty_values and self._selects_nothing(value):
            # (y fits, `_value` said: NumPy's x, unchanged)
            kept: ArrayT = self._x if fresh is None else fresh
            return adapter.own_copy(kept) if copy else kept
        try:
            result: ArrayT = update(value, copy=copy, xp=xp)
        except Exception as exc:
            numpy_shape = None if self._moved is None else self._moved.shape
            refuse_shape(adapter, self._x, self._idx, numpy_shape, y, exc)
            raise
        return result

    def _selects_nothing(self, value: Value) -> bool:
        """Whether an array ``value`` goes into a basic index's selection of no elements."""
        if not self._basic or not self._facts.adapter.owns(value):
            return False
        whole: Array = self._x  # (any library's array: its shape read)
        selected = basic_selection(tuple(whole.shape), self._idx)
        return selected is not None and 0 in selected

    def _mask_of_x(self, value: Value) -> Array | None:
        """A boolean mask index as one of ``x``'s shape, where arrays are immutable.

        array-api-extra updates a Dask or JAX array through a mask by
        ``where(mask, op(x, y), x)`` only where the mask is the whole index
        and of ``x``'s shape, and ``y`` a number; else it reads ``x[mask]``,
        whose size Dask does not know ("chunk sizes are unknown"). A mask of
        ``x``'s leading axes, bare or alone in a tuple, is broadcast to
        ``x``'s shape: the same elements. None where nothing is to be done.
        """
        adapter = self._facts.adapter
        x: Array = self._x  # (any library's array: its shape read)
        idx: Array = self._index
        if type(idx) is tuple and len(idx) == 1:
            idx = idx[0]
        if adapter.writable_rows:
            return None
        converted = isinstance(idx, np.ndarray) and idx.dtype == np.bool_
        if converted:  # (every library's; Dask read it as ints)
            idx = _masks_as_own(self._facts, x, idx)
        elif not adapter.owns(idx):
            return None
        if adapter.owns(value) and tuple(value.shape) != ():
            # (values for the selected elements: as they are, by its own mask)
            return idx if converted else None
        try:
            if dtype_name(idx.dtype) != "bool":
                return None
        except TypeError:
            return None
        shape, lead = tuple(x.shape), tuple(idx.shape)
        if lead == shape:
            return idx  # (out of its tuple)
        if len(lead) > len(shape) or lead != shape[: len(lead)]:
            return None
        ns: Namespace = self._facts.xp  # (the standard's broadcast_to)
        axes = (*lead, *(1,) * (len(shape) - len(lead)))
        full: Array = ns.broadcast_to(ns.reshape(idx, axes), shape)
        return full

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
            narrowing = adapter.float64_narrowing(on_host=True)
            return _fitted(y.item() if numpy_value else y, self._kind, narrowing)
        owned = adapter.owns(y)
        if owned or stands_in(self._facts, y):
            # (a stand-in of a trace of fn: its own namespace follows it)
            ns: Namespace = self._facts.xp if owned else y.__array_namespace__()
            y = reversed_along(y, self._reversed, ns)
            shape = tuple(y.shape)
            whole: Array = self._x  # (any library's array: its shape read)
            if self._basic:  # (JAX took any value into a selection of nothing)
                selected = basic_selection(tuple(whole.shape), self._idx)
            elif _empty_array_in(self._idx):  # (an index array of no positions)
                numpy_shape = None if self._moved is None else self._moved.shape
                selected = selection_shape(whole, self._idx, numpy_shape)
            else:
                selected = None
            if selected is not None and 0 in selected:
                check_fits(shape, selected)
            broadcast = not adapter.updates_broadcast
            moved = self._moved
            if broadcast or (shape and shape[0] == 1):  # (JAX refused (1, 3) for (3,))
                numpy_shape = None if moved is None else moved.shape
                y = to_selection(
                    y,
                    self._x,
                    self._idx,
                    ns,
                    broadcast=broadcast,
                    numpy_shape=numpy_shape,
                )
            if moved is not None:  # (where torch and Dask place the axes)
                check_fits(tuple(y.shape), moved.shape)
                y = ns.permute_dims(ns.broadcast_to(y, moved.shape), moved.order)
            if self._sliced is not None:  # (each integer's axis, of one element)
                y = with_sliced_axes(y, self._x, self._idx, self._sliced, ns)
            return y
        other = adapter_for_array(y)
        if other is not None:
            msg = (
                f"y is an array of {other.label}, but x is an array of "
                f"{adapter.label} (backend {shown(self._facts.name)}): libraries "
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


def _masks_as_own(facts: Facts, x: Array, idx: Value) -> Value:
    """The NumPy boolean masks in ``idx`` (or it) as arrays of ``x``'s library."""

    def own(part: Value) -> Value:
        if isinstance(part, np.ndarray) and part.dtype == np.bool_:
            return facts.xp.asarray(part, device=facts.adapter.device_of(x))
        return part

    return tuple(map(own, idx)) if type(idx) is tuple else own(idx)


def _masks_as_positions(facts: Facts, idx: Value) -> Value:
    """Each boolean mask beside an integer or another index array as its positions.

    NumPy's rule: a mask stands for its ``nonzero`` positions, and joins the
    integers' and arrays' block. torch reads an integer as a basic index
    (`Adapter.ints_join_arrays`), and a ``...`` of no axes between two
    arrays as no parting: a mask beside either made a block placed as
    NumPy does not place it (a ``(3, 1)`` value was added along the wrong
    axis of ``x[0, :, mask]``; ``x[:, positions, ..., mask]`` was updated
    transposed). Positions are placed as NumPy places them (`placement`).
    A mask whose values are not at hand (Dask's, a trace's) or a 0-d one
    keeps the library's own answer.
    """
    adapter = facts.adapter
    if adapter.ints_join_arrays or type(idx) is not tuple or len(idx) < 2:
        return idx
    advanced = sum(is_mask_part(p) or is_positions(p) for p in idx)
    if not advanced or (advanced == 1 and not any(type(p) is int for p in idx)):
        return idx  # (a mask alone among slices: placed alike)
    parts: list[Value] = []
    for part in idx:
        if isinstance(part, np.ndarray) and part.dtype == np.bool_ and part.ndim:
            parts.extend(np.nonzero(part))  # (NumPy's, which every library takes)
            continue
        mask = is_mask_part(part) and tuple(part.shape) and adapter.owns(part)
        if mask and adapter.values_at_hand(part):
            parts.extend(facts.xp.nonzero(part))
            continue
        parts.append(part)
    return tuple(parts)


def _empty_array_in(idx: Value) -> bool:
    """Whether an index array in ``idx`` has no elements (it selects none)."""
    parts = idx if type(idx) is tuple else (idx,)
    return any(adapter_for_array(p) is not None and 0 in tuple(p.shape) for p in parts)


def _own_index(facts: Facts, idx: Value) -> None:
    """TypeError where an index array is of a library other than ``x``'s and NumPy's.

    Each library misread another's arrays in words of its own (torch's
    "too many indices" for a JAX array, Dask's "Boolean value of Tensor is
    ambiguous"); a NumPy array is taken by every library but
    array-api-strict, which says so (ndonnx takes a NumPy mask, and no
    integer index array of any library in an update).
    """
    parts = idx if type(idx) is tuple else (idx,)
    for k, part in enumerate(parts):
        adapter = adapter_for_array(part)
        if adapter is None or adapter is facts.adapter or adapter.key == "numpy":
            continue
        if stands_in(facts, part):  # (a trace's array of fn: x's library's)
            continue
        name = f"idx[{k}]" if type(idx) is tuple else "idx"
        msg = (
            f"{name} is an array of {adapter.label} but x is of "
            f"{facts.adapter.label}: libraries do not mix; convert it with "
            "Backend.asarray (or give a NumPy array)"
        )
        raise TypeError(msg)


def _fitted(value: complex, target: str, narrowing: Narrowing) -> complex:
    """The number ``value`` as dtype ``target``'s kind of Python number, unchanged.

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
    reason = scalar_cast_loss(value, target, narrowing)
    if reason is not None:
        msg = f"y={value!r:.60} does not fit x's dtype {target} {reason}"
        raise ValueError(msg)
    if target.startswith("complex"):  # (by name: NumPy's kind of bfloat16,
        return rounded_to_finite(complex(value), target)  # ml_dtypes' is "V")
    if isinstance(value, complex):
        value = value.real
    if target.startswith(("float", "bfloat")):
        return rounded_to_finite(float(value), target)
    if isinstance(value, np.floating):  # (exactly: int() of a longdouble rounds
        value = value.as_integer_ratio()[0]  # through a float64; it is whole here)
    return bool(value) if target == "bool" else int(value)


def _refuse_integer_quotient(
    facts: Facts[ArrayT], name: str, value: Value, kind: str
) -> None:
    """An update whose result an ``x`` of dtype ``kind`` (an integer) cannot hold.

    Refused on every library: ``divide`` (a true quotient) and ``power`` by
    a negative number, or an integer array holding one: NumPy and torch
    raised their own errors or wrote 0, JAX, Dask and ndonnx wrote
    truncated quotients (``divide(0)``: INT32_MAX, INT64_MIN) or garbage.
    An array's values are read where they are at hand (not under
    ``jax.jit``, not of a Dask graph, whose NumPy tasks raise).
    """
    if not kind.startswith(("int", "uint", "bool")):
        return
    if name == "divide":
        msg = (
            f"divide on x of dtype {kind}: a quotient is a float, which x cannot "
            "hold; convert x to a floating dtype first"
        )
        raise TypeError(msg)
    if isinstance(value, (int, float)) and value < 0:
        msg = f"y={shown(value)}: x of dtype {kind} takes no negative power"
        raise ValueError(msg)
    if facts.adapter.owns(value) and _negative_integers(facts, value):
        msg = f"y holds a negative value: x of dtype {kind} takes no negative power"
        raise ValueError(msg)


def _negative_integers(facts: Facts[ArrayT], y: Array) -> bool:
    """Whether the integer array ``y``, its values at hand, holds a negative one."""
    try:
        own = dtype_name(y.dtype)
    except (AttributeError, TypeError):
        return False
    if own is None or not own.startswith("int"):
        return False
    return facts.adapter.values_at_hand(y) and bool(facts.xp.any(y < 0))


def _holds_mask(idx: Value) -> bool:
    """Whether ``idx`` is a boolean array, or a tuple holding one."""
    for part in idx if type(idx) is tuple else (idx,):
        try:
            if dtype_name(part.dtype) == "bool":
                return True
        except (AttributeError, TypeError):
            continue
    return False


def _overlaps(adapter: Adapter, x: Array, value: Value) -> bool:
    """Whether ``value`` is an array over ``x``'s own memory (``x[1:]`` into ``x[:-1]``).

    NumPy reads such a value whole before it writes; torch refuses it
    (`Adapter.reads_overlapping_values`).
    """
    if not adapter.owns(value):
        return False
    mine, theirs = adapter.memory_extent(x), adapter.memory_extent(value)
    return mine is not None and theirs is not None and mine.overlaps(theirs)
