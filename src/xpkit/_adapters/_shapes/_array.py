"""`ShapeArray`: a shape, a dtype and a device, and the bytes it would hold.

An operation on shape-only arrays computes its result's shape and dtype by
the rules of `xpkit._adapters._shapes._rules` and charges the result's bytes
to the trace (`Trace.charge`); the bytes are released when Python frees the
array, as the library frees its own. A view (where the library makes views)
charges nothing and keeps its base alive; under NumPy's temporary elision
(`Profile.elides`) an operator whose operand is a temporary writes into it.

What a shape-only array cannot stand in for raises `CannotFollow`: reading a
value, a shape that depends on values, a conversion to a host array.
Functions of a library's own (``np.tanh``, ``torch.matmul``) reach the
handlers the package registers (`PROTOCOLS`), and `__array_namespace__`
returns the namespace it registers (`NAMESPACE`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NoReturn

import numpy as np

from .._trace import kept_from_trace
from . import _rules as rules
from . import _strides as strides

if TYPE_CHECKING:
    from ..._typing import DType, NativeDevice, Value
    from .._trace import Trace

__all__ = [
    "INDEXED",
    "MIN_ELIDE_BYTES",
    "NAMESPACE",
    "PROTOCOLS",
    "REDUCTION",
    "ShapeArray",
    "astype",
    "binary",
    "copy_of",
    "given",
    "lift",
    "made",
    "permuted",
    "reshape",
    "unary",
    "unowned",
    "view_of",
]

#: NumPy elides a temporary of at least this many bytes (NPY_MIN_ELIDE_BYTES).
MIN_ELIDE_BYTES = 256 * 1024

#: The namespace `ShapeArray.__array_namespace__` returns (the package's).
NAMESPACE: list[object] = []
#: Handlers of the libraries' own functions: ``"ufunc"``, ``"function"``
#: (NumPy's protocols) and ``"foreign"`` (another library's functions).
PROTOCOLS: dict[str, Callable[..., object]] = {}
#: ``x[key]``: `_indexing.indexed`.
INDEXED: list[Callable[[ShapeArray, Value], ShapeArray]] = []
#: The reductions of the methods (``x.sum(1)``): `_statistics.reduction`.
REDUCTION: list[Callable[[ShapeArray, str, Value, bool, str | None], ShapeArray]] = []

#: Python scalars: weak operands.
_SCALARS = (bool, int, float, complex)

#: A binary operator's method: ``(self, other) -> result``.
_Operator = Callable[["ShapeArray", "Value"], "ShapeArray"]


def _left(op: str) -> _Operator:
    """``self <op> other``, reading whether each operand is a temporary."""

    def operator(self: ShapeArray, other: Value) -> ShapeArray:
        refs = sys.getrefcount(self), sys.getrefcount(other)
        temps = (refs[0] <= rules.TEMP_REFS, refs[1] <= rules.OTHER_TEMP_REFS)
        return binary(op, self, other, temps)

    return operator


def _right(op: str, *, commutative: bool = False) -> _Operator:
    """``other <op> self`` (``self`` on the right: a temporary only counts if commutative)."""

    def operator(self: ShapeArray, other: Value) -> ShapeArray:
        refs = sys.getrefcount(self)
        return binary(op, other, self, (False, commutative and refs <= rules.TEMP_REFS))

    return operator


def _unary(func: str) -> Callable[[ShapeArray], ShapeArray]:
    """``-self``, ``+self``, ``~self`` or ``abs(self)``: the standard's ``func``."""

    def operator(self: ShapeArray) -> ShapeArray:
        refs = sys.getrefcount(self)
        name = rules.unary_dtype(self._trace, func, self._name)
        return unary(self, name, refs <= rules.TEMP_REFS)

    return operator


def _reducing(rule: str) -> Callable[..., ShapeArray]:
    """A reduction method, NumPy's (``x.sum(1)``) and torch's (``x.sum(dim=1)``).

    ``rule`` names the result's dtype (`reduction`).
    """

    def method(
        self: ShapeArray, axis: Value = None, dtype: Value = None, **kw: Value
    ) -> ShapeArray:
        axis = kw.pop("dim", axis)
        keepdims = bool(kw.pop("keepdims", kw.pop("keepdim", False)))
        if kw.get("out") is not None:
            msg = "a reduction into out="
            raise self._trace.refuse(msg)
        name = rules.dtype_name_of(self._trace, dtype)
        return REDUCTION[0](self, rule, axis, keepdims, name)

    return method


def _refusing(reason: str) -> Callable[..., NoReturn]:
    """A method that refuses, for ``reason``: a shape-only array cannot do it."""

    def method(self: ShapeArray, *args: Value, **kwargs: Value) -> NoReturn:
        raise self._trace.refuse(reason)

    return method


def _in_place_of(op: str) -> Callable[[ShapeArray, Value], ShapeArray]:
    """``x <op>= other``: nothing new, but where it is wider (`rules.hold_in_place`)."""

    def in_place(self: ShapeArray, other: Value) -> ShapeArray:
        self._written()
        trace = self._trace
        s, n, v = _operand(trace, other)  # (an operand it cannot read is refused)
        zero_d = (not self.shape, not s and n is not None)
        common = rules.result_dtype(trace, op, self._name, n, self, v, zero_d)
        rules.hold_in_place(trace, self.shape, self._name, common, (s, n))
        return self

    return in_place


class ShapeArray:
    """An array with a shape and a dtype but no values, charged to a trace.

    Made by the operations of the shape-only namespace, never by hand.

    Attributes
    ----------
    shape : tuple of int
        Its shape.
    """

    __slots__ = (
        "__weakref__",
        "_base",
        "_charged",
        "_contiguous",
        "_name",
        "_node",
        "_owned",
        "_trace",
        "_unit",
        "shape",
    )

    #: The axes reversed, and the last two swapped (`_manipulation.TRANSPOSES`).
    T: ShapeArray
    mT: ShapeArray

    __array_priority__ = 1000.0  # NumPy defers its operators to ours
    __hash__ = None  # type: ignore[assignment]  # (== makes arrays)

    def __init__(
        self,
        trace: Trace,
        shape: rules.Shape,
        name: str,
        charged: int,
        node: int,
        base: ShapeArray | None = None,
        contiguous: bool = True,
        owned: bool = True,
        unit: int = 1,
    ) -> None:
        self._trace = trace
        self.shape = shape
        self._name = name
        self._charged = charged
        self._node = node
        self._base = base
        self._contiguous = contiguous
        self._owned = owned  # (False: NumPy's view of a buffer it made, never elided)
        self._unit = unit  # (its axis of unit stride: `_strides`)

    def __del__(self) -> None:
        if getattr(
            self, "_charged", 0
        ):  # (torch's compiler makes some without __init__)
            self._trace.release(self._charged)

    # -- attributes -----------------------------------------------------------
    @property
    def dtype(self) -> DType:
        """The library's dtype object."""
        return self._trace.profile.dtype(self._name)

    @property
    def device(self) -> NativeDevice:
        """The library's device object the array stands on."""
        return self._trace.profile.native_device

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of its data."""
        return rules.nbytes(self.shape, self._name)

    @property
    def itemsize(self) -> int:
        """Bytes of one element."""
        return rules.itemsize(self._name)

    def __repr__(self) -> str:
        return (
            f"ShapeArray({self.shape}, {self._name}: xpkit's stand-in, without values)"
        )

    def __len__(self) -> int:
        if not self.shape:
            msg = "len() of a 0-d array"
            raise TypeError(msg)
        return self.shape[0]

    def __iter__(self) -> Iterator[ShapeArray]:
        for i in range(len(self)):
            yield self[i]

    def __array_namespace__(self, *, api_version: str | None = None) -> object:
        """The shape-only namespace."""
        return NAMESPACE[0]

    def to_device(self, device: Value, /, *, stream: Value = None) -> ShapeArray:
        """Itself: a copy on another device is not this device's memory."""
        if self._trace.closed:
            raise kept_from_trace()
        return self

    # -- what a shape-only array cannot do -------------------------------------
    __bool__ = _refusing("fn read a value (bool() of an array)")
    __int__ = _refusing("fn read a value (int() of an array)")
    __float__ = _refusing("fn read a value (float() of an array)")
    __complex__ = _refusing("fn read a value (complex() of an array)")
    __index__ = _refusing("fn read a value (an array as an index)")
    item = _refusing("fn read a value (item() of an array)")
    tolist = _refusing("fn read the values (tolist() of an array)")
    __array__ = _refusing("fn converted an array to a host array")
    __dlpack__ = _refusing("fn exported an array by DLPack")

    # -- protocols of the libraries' own functions -----------------------------
    def __array_ufunc__(
        self, ufunc: Value, method: str, *inputs: Value, **kwargs: Value
    ) -> object:
        return PROTOCOLS["ufunc"](ufunc, method, inputs, kwargs)

    def __array_function__(
        self, func: Value, types: Value, args: Value, kwargs: Value
    ) -> object:
        return PROTOCOLS["function"](func, args, kwargs)

    @classmethod
    def __torch_function__(
        cls, func: Value, types: Value, args: Value = (), kwargs: Value = None
    ) -> object:
        return PROTOCOLS["foreign"](func, args, kwargs or {})

    # -- indexing ---------------------------------------------------------------
    def __getitem__(self, key: Value) -> ShapeArray:
        return INDEXED[0](self, key)

    # -- operators (each left operand's temporariness read where it runs) -------
    __add__ = _left("+")
    __radd__ = _right("+", commutative=True)
    __sub__ = _left("-")
    __rsub__ = _right("-")
    __mul__ = _left("*")
    __rmul__ = _right("*", commutative=True)
    __truediv__ = _left("/")
    __rtruediv__ = _right("/")
    __floordiv__ = _left("//")
    __rfloordiv__ = _right("//")
    __mod__ = _left("%")
    __rmod__ = _right("%")
    __pow__ = _left("**")
    __rpow__ = _right("**")
    __and__ = _left("&")
    __rand__ = _right("&", commutative=True)
    __or__ = _left("|")
    __ror__ = _right("|", commutative=True)
    __xor__ = _left("^")
    __rxor__ = _right("^", commutative=True)
    __lshift__ = _left("<<")
    __rlshift__ = _right("<<")
    __rshift__ = _left(">>")
    __rrshift__ = _right(">>")
    __lt__ = _left("<")
    __le__ = _left("<=")
    __gt__ = _left(">")
    __ge__ = _left(">=")
    __eq__ = _left("==")  # type: ignore[assignment]
    __ne__ = _left("!=")  # type: ignore[assignment]
    __neg__ = _unary("negative")
    __pos__ = _unary("positive")
    __abs__ = _unary("abs")
    __invert__ = _unary("bitwise_invert")

    def _in_place(self, other: Value) -> ShapeArray:
        self._written()
        _operand(self._trace, other)  # (an operand it cannot read is refused)
        return self

    __iadd__ = _in_place_of("+")
    __isub__ = _in_place_of("-")
    __imul__ = _in_place_of("*")
    __itruediv__ = _in_place_of("/")
    __ifloordiv__ = _in_place_of("//")
    __imod__ = _in_place_of("%")
    __ipow__ = _in_place_of("**")
    __iand__ = __ior__ = __ixor__ = _in_place
    __ilshift__ = __irshift__ = __imatmul__ = _in_place

    # -- methods NumPy's and torch's arrays have --------------------------------
    def astype(self, dtype: DType, copy: bool = True, **_: Value) -> ShapeArray:
        """A copy in ``dtype``."""
        return astype(self, rules.dtype_name_of(self._trace, dtype), copy=copy)

    def copy(self) -> ShapeArray:
        """An independent copy."""
        return copy_of(self)

    def reshape(self, *shape: Value, **_: Value) -> ShapeArray:
        """``shape`` (one int per axis, or one sequence)."""
        target = shape[0] if len(shape) == 1 else shape
        return reshape(self, target)

    def transpose(self, *axes: Value) -> ShapeArray:
        """The axes in ``axes`` order (reversed without them)."""
        order = axes[0] if len(axes) == 1 else axes
        if not order:
            return self.T
        return permuted(self, tuple(rules.axes_of(a, self.ndim)[0] for a in order))

    def ravel(self) -> ShapeArray:
        """One axis (a view of a contiguous array)."""
        return reshape(self, (-1,))

    def flatten(self) -> ShapeArray:
        """One axis, copied."""
        return copy_of(reshape(self, (-1,)))

    sum = prod = _reducing("sum")
    mean = _reducing("mean")
    std = var = _reducing("spread")
    max = min = _reducing("max")
    any = all = _reducing("any")
    argmax = argmin = _reducing("arg")

    def cumsum(self, axis: Value = None, dtype: Value = None, **_: Value) -> ShapeArray:
        """Cumulative sums along ``axis``."""
        trace = self._trace
        base = self if axis is not None else reshape(self, (-1,))
        name = rules.dtype_name_of(trace, dtype) or rules.sum_dtype(
            trace.profile, self._name
        )
        # (into another dtype, the input is cast whole first: live till the end)
        cast = made(trace, base.shape, name, (base,)) if name != self._name else None
        return made(trace, base.shape, name, (base, cast))

    def squeeze(self, axis: Value = None) -> ShapeArray:
        """Without the axes of length 1 (``axis``: only those)."""
        drop = [i for i, d in enumerate(self.shape) if d == 1]
        if axis is not None:
            drop = list(rules.axes_of(axis, self.ndim))
        shape = tuple(d for i, d in enumerate(self.shape) if i not in drop)
        return view_of(self, shape, contiguous=self._contiguous)

    def swapaxes(self, a: int, b: int) -> ShapeArray:
        """Axes ``a`` and ``b`` swapped."""
        order = list(range(self.ndim))
        (a,), (b,) = rules.axes_of(a, self.ndim), rules.axes_of(b, self.ndim)
        order[a], order[b] = order[b], order[a]
        return permuted(self, tuple(order))

    def flip(self, *dims: Value) -> ShapeArray:
        """A reversed copy (torch's method, which array-api-compat's ``flip`` calls)."""
        return copy_of(self)

    def argsort(self, axis: int = -1, **_: Value) -> ShapeArray:
        """Indices that sort along ``axis``."""
        return made(self._trace, self.shape, "int64", (self,))

    def _elementwise(self, *args: Value, **kwargs: Value) -> ShapeArray:
        """A new array of its shape and dtype (``clip``, ``round``)."""
        return unary(self, self._name)

    def _written(self, *args: Value, **kwargs: Value) -> None:
        """Written in place: nothing is allocated (``sort``, ``fill``, ``x[i] = v``)."""
        if self._trace.closed:
            raise kept_from_trace()

    clip = round = _elementwise
    sort = fill = __setitem__ = _written


# -- making arrays -----------------------------------------------------------
def made(
    trace: Trace, shape: rules.Shape, name: str, inputs: tuple[Value, ...] = ()
) -> ShapeArray:
    """A new array, charged to ``trace``, made from ``inputs`` (for the tape)."""
    if name not in trace.profile.dtypes:
        msg = f"{trace.profile.library} has no {name} on this device"
        raise trace.refuse(msg)
    nodes: tuple[int, ...] = ()  # (the tape's inputs: only a graph's peak reads them)
    if trace.profile.lazy:
        nodes = tuple(i._node for i in inputs if isinstance(i, ShapeArray) and i._node)
    charged, node = trace.charge(rules.nbytes(shape, name), len(shape), nodes)
    return ShapeArray(trace, shape, name, charged, node)


def unowned(x: ShapeArray) -> ShapeArray:
    """``x``, made as NumPy's view of a buffer it made, which elision never reuses.

    (``x[:, idx]``, ``tensordot``, ``tile``, a copying ``reshape``: NumPy's
    temporary elision takes arrays that own their data only.)
    """
    x._owned = False
    return x


def given(trace: Trace, shape: rules.Shape, name: str) -> ShapeArray:
    """An array that exists already (an input): charged nothing."""
    return ShapeArray(trace, shape, name, 0, 0)


def view_of(
    base: ShapeArray, shape: rules.Shape, *, contiguous: bool, unit: int | None = None
) -> ShapeArray:
    """A view of ``base`` with ``shape``, or a copy where the library makes none.

    ``unit``: the view's axis of unit stride (`_strides`); by default, the
    last where it is contiguous, else none.
    """
    trace = base._trace
    if not trace.profile.views:
        return made(trace, shape, base._name, (base,))
    owner = base if base._base is None else base._base
    profile = trace.profile
    charged = trace.hold(profile.view_bytes + profile.dim_bytes * len(shape))
    unit = int(contiguous) if unit is None else unit
    node = owner._node
    return ShapeArray(
        trace, shape, base._name, charged, node, owner, contiguous, unit=unit
    )


def copy_of(x: ShapeArray) -> ShapeArray:
    """An independent copy of ``x``."""
    return made(x._trace, x.shape, x._name, (x,))


def astype(x: ShapeArray, name: str | None, *, copy: bool = True) -> ShapeArray:
    """``x`` in dtype ``name`` (itself when it has it and ``copy`` is False)."""
    if x._trace.closed:
        raise kept_from_trace()
    if name is None or (name == x._name and not copy):
        return x
    return made(x._trace, x.shape, name, (x,))


def reshape(x: ShapeArray, new: Value) -> ShapeArray:
    """``x`` reshaped: a view where the library makes one (`_strides`), else a copy."""
    shape = rules.reshaped(x.shape, new)
    if strides.reshape_is_view(x.shape, shape, x._contiguous, x._trace.profile.lazy):
        return view_of(x, shape, contiguous=x._contiguous)
    return unowned(made(x._trace, shape, x._name, (x,)))


def permuted(x: ShapeArray, order: tuple[int, ...]) -> ShapeArray:
    """``x`` with its axes in ``order`` (a view)."""
    if sorted(order) != list(range(x.ndim)):
        msg = f"axes {order} for a {x.ndim}-d array"
        raise x._trace.refuse(msg)
    shape = tuple(x.shape[i] for i in order)
    keeps = order == tuple(range(x.ndim))
    unit = strides.unit_after_permute(x._unit, order)
    return view_of(x, shape, contiguous=x._contiguous and keeps, unit=unit)


def lift(trace: Trace, x: Value) -> ShapeArray:
    """An operand as a shape-only array: an array of a library is an input."""
    if isinstance(x, ShapeArray):
        return x
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None or isinstance(x, type):
        msg = f"an operand of type {type(x).__qualname__}"
        raise trace.refuse(msg)
    name = rules.dtype_name_of(trace, dtype) or ""
    a = given(trace, rules.as_shape(tuple(shape)), name)
    trace.adopt(x)  # (where fn made it while traced)
    return a


def _operand(trace: Trace, x: Value) -> tuple[rules.Shape, str | None, Value]:
    """``(shape, dtype name, the array)`` of an operand; a scalar: ``((), None, it)``."""
    if isinstance(x, _SCALARS):
        return (), None, x
    a = lift(trace, x)
    return a.shape, a._name, a


# -- elementwise -----------------------------------------------------------------
def binary(
    op: str, a: Value, b: Value, temps: tuple[bool, bool] = (False, False)
) -> ShapeArray:
    """``a <op> b`` elementwise: ``op`` an operator or the standard's function.

    ``temps``: which operand is a temporary.
    """
    trace = a._trace if isinstance(a, ShapeArray) else b._trace
    a, b = rules.numpy_operands(trace, op, a, b)
    sa, na, av = _operand(trace, a)
    sb, nb, bv = _operand(trace, b)
    zero_d = (not sa and na is not None, not sb and nb is not None)
    name = rules.result_dtype(trace, op, na, nb, av, bv, zero_d)
    shape = rules.broadcast(sa, sb)
    result = casts = None  # (torch casts an array of another dtype whole first)
    if trace.profile.casts_whole:
        parts = ((sa, na, av), (sb, nb, bv))
        casts = [made(trace, s, name, (v,)) for s, n, v in parts if s and n != name]
    if trace.profile.elides and op not in rules.COMPARE:
        for temp, mine, other in ((temps[0], av, bv), (temps[1], bv, av)):
            if result is None and temp and (mine is av or op in rules.COMMUTATIVE):
                result = _elide(mine, other, shape, name)
    if result is None:
        result = made(trace, shape, name, (av, bv, casts))
    if trace.profile.numpy_internals:  # (held with the result: after it)
        loops = rules.loop_dtypes(op, na, nb, av, bv)
        operands = ((sa, na), (sb, nb))
        rules.buffer_operands(trace, shape, name, operands, (av, bv), loops)
    return result


def _elide(
    temp: Value, other: Value, shape: rules.Shape, name: str
) -> ShapeArray | None:
    """``temp`` reused for the result, where NumPy's temporary elision would."""
    if not isinstance(temp, ShapeArray) or temp._base is not None:
        return None
    if not (temp._owned and temp._charged) or temp._name == "bool":
        return None
    if temp._name != name or temp.shape != shape or temp.nbytes < MIN_ELIDE_BYTES:
        return None
    if isinstance(other, ShapeArray) and (
        other.shape not in ((), shape) or not np.can_cast(other._name, name)
    ):
        return None
    if isinstance(other, _SCALARS) and not np.can_cast(np.dtype(type(other)), name):
        return None  # (NumPy makes it an array first: an int is int64, ...)
    result = type(temp)(temp._trace, shape, name, temp._charged, temp._node)
    temp._charged = 0
    return result


def unary(x: ShapeArray, name: str, temp: bool = False) -> ShapeArray:
    """A new array of ``x``'s shape in dtype ``name`` (``temp``: elidable)."""
    if temp and x._trace.profile.elides:
        reused = _elide(x, None, x.shape, name)
        if reused is not None:
            return reused
    return made(x._trace, x.shape, name, (x,))
