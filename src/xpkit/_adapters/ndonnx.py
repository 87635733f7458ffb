"""Adapter for ndonnx, arrays that build ONNX graphs and run them eagerly."""

from __future__ import annotations

import sys
from collections.abc import Hashable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ._base import Adapter, FastOps
from ._top_k import along
from ._trace import DtypeRules

if TYPE_CHECKING:
    from .._typing import Array, DType, HostArray, Namespace, NativeDevice
    from ._top_k import TopK
    from ._trace import Traits

__all__ = ["NdonnxAdapter"]

#: What onnxruntime says when an allocation fails (its exceptions carry a
#: status code in the message, not a class of their own per cause).
_ORT_OOM_TEXT = ("failed to allocate memory", "bad allocation", "bad_alloc")
#: ndonnx's dtypes where they are not NumPy's: an 8-bit integer with float16
#: is float32, ``sqrt`` keeps an integer's dtype, an integer dividend makes
#: the default float; an int beside an index array is a basic index.
_DTYPE_RULES = DtypeRules(
    int8_with_float16="float32",
    keeps_dtype=frozenset({"sqrt"}),
    int_dividend_float=True,
    ints_advanced=False,
    numpy_scalars="refused",
)
#: Bytes an array holds beyond its values (its ONNX graph's objects).
_ARRAY_BYTES = 1024


def _uint64_key(xp: Namespace, x: Array) -> Array:
    """int64 values in the order of ``x``'s uint64 ones.

    ndonnx sorts uint64 as int64 (2**63 and above come before 0): the top
    bit flipped, then read as int64, keeps their order (0 is -2**63).
    """
    top = xp.asarray(np.uint64(2**63))
    return xp.astype(xp.bitwise_xor(x, top), xp.int64)


#: ndonnx's nullable (masked) dtypes, by name.
_NULLABLE = frozenset(
    f"n{name}"
    for name in (
        *("bool", "utf8", "float16", "float32", "float64"),
        *(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)),
    )
)


class NdonnxAdapter(Adapter):
    """ndonnx: the namespace is the module itself.

    Arrays hold the values onnxruntime computed for them (``unwrap_numpy``)
    and the ONNX graph that produced them. ONNX has one device, the host;
    ndonnx has no complex dtypes and no ``linalg`` extension.
    """

    key = "ndonnx"
    module = "ndonnx"
    extra = "ndonnx"
    label = "ndonnx"
    dtype_prefixes = ("ndonnx", "ndx")
    dtype_repr_module = "ndonnx"
    capabilities = frozenset({"data_dependent_shapes"})
    #: ``ndx.add(array, ndarray)`` takes the ndarray as a constant.
    precheck_operands = True
    updates_broadcast = False
    #: Shape inference refuses a bad axis or shape with onnx's
    #: ``InferenceError``, a direct subclass of Exception (see `argument_error_types`).
    argument_errors = (TypeError, ValueError, IndexError, AttributeError)

    def is_missing_kernel(self, exc: BaseException) -> bool:
        """No kernel: ``NotImplementedError``, or an operator its dtype's arrays lack.

        (A bool array has no ``__matmul__``: an AttributeError.)
        """
        return isinstance(exc, NotImplementedError) or (
            isinstance(exc, AttributeError) and "has no attribute '__" in str(exc)
        )

    def argument_error_types(self) -> tuple[type[Exception], ...]:
        """`argument_errors` and onnx's shape-inference error."""
        from onnx.shape_inference import InferenceError

        inference: type[Exception] = InferenceError
        return (*self.argument_errors, inference)

    def namespace(self) -> ModuleType:
        """The ``ndonnx`` module."""
        import ndonnx

        namespace: ModuleType = ndonnx  # typed whether installed or not
        return namespace

    def shape_traits(self, device: str) -> Traits | None:
        """Every operation a new array (ONNX has no views), with its graph's objects."""
        return {
            "views": False,
            "flip_views": False,
            "array_bytes": _ARRAY_BYTES,
            "dtype_rules": _DTYPE_RULES,
        }

    def owns(self, x: object) -> bool:
        """Arrays of ndonnx."""
        module = sys.modules.get("ndonnx")
        return module is not None and isinstance(x, module.Array)

    def operand_type(self) -> type:
        """``ndonnx.Array``."""
        array_type: type = self.namespace().Array
        return array_type

    def lost_in_conversion(self, x: Array) -> str | None:
        """An array of a nullable dtype (``ndx.nfloat64``): NumPy would drop its mask."""
        if str(x.dtype) not in _NULLABLE:
            return None
        return (
            f"an ndonnx array of the nullable dtype {x.dtype}, whose mask the "
            "conversion would drop; pass its values and its mask as two arrays"
        )

    def to_numpy(self, x: Array) -> HostArray:
        """The value onnxruntime propagated (ndonnx exports no DLPack).

        Value propagation swallows onnxruntime's errors (spox logs them at
        DEBUG level) and leaves the array without a value: an allocation that
        failed looks like a placeholder. Such an array's graph is run again
        here, so that onnxruntime's own error (which `is_oom` recognises)
        reaches the caller, or the value when the memory is there now. A
        placeholder (``ndx.argument``) has no value: ValueError.

        The value is the array's own buffer: it comes back as a read-only
        view (as JAX's does), so that writing into it cannot change the
        ndonnx array.
        """
        try:
            value = np.asarray(x.unwrap_numpy())
        except ValueError as exc:
            ran = self._run_graph(x)
            if ran is None:  # (ndonnx said "no propagated value available")
                msg = (
                    "an ndonnx array without values (a placeholder of a graph, "
                    "ndx.argument): there is nothing to read; give one with values"
                )
                raise ValueError(msg) from exc
            value = ran
        view = value.view()
        view.flags.writeable = False
        return view

    def _run_graph(self, x: Array) -> HostArray | None:
        """``x`` computed by onnxruntime directly; None for a placeholder's graph."""
        try:
            model = self.namespace().build({}, {"value": x})
        except KeyError:  # the graph has inputs (``ndx.argument``)
            return None
        try:
            import onnxruntime
        except ImportError:  # the reference implementation cannot do better
            return None
        session = onnxruntime.InferenceSession(model.SerializeToString())
        (value,) = session.run(None, {})
        return np.asarray(value)

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """``Array.unwrap_numpy``, which hands out the propagated value."""
        return ((self.namespace().Array, "unwrap_numpy"),)

    def values_at_hand(self, x: Array) -> bool:
        """Whether ``x`` has a propagated value (a graph input has none)."""
        try:
            x.unwrap_numpy()
        except ValueError:
            return False
        return True

    def device_of(self, x: Array) -> NativeDevice:
        """``x.device``: the one ONNX device."""
        return x.device

    def device_key(self, x: Array) -> Hashable:
        """All arrays live on the one device."""
        return None

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """All arrays live on the one device."""
        return None

    def native_device(self, device: str) -> NativeDevice:
        """The inspection API's default (and only) device."""
        return self.namespace().__array_namespace_info__().default_device()

    def device_str(self, native: NativeDevice) -> str:
        """``"cpu"`` for ndonnx's device object; TypeError for anything else."""
        if type(native) is not type(self.native_device("cpu")):
            msg = f"{native!r} is not an ndonnx device"
            raise TypeError(msg)
        return "cpu"

    def fast_ops(self, xp: Namespace) -> FastOps:
        """The namespace's functions; ``concat`` checks its axis first.

        ``ndx.concat([x], axis=5)`` returns ``x`` where the standard asks for
        an error: an out-of-range axis raises IndexError here, which the
        facade reports as its ValueError.
        """
        ops = super().fast_ops(xp)
        concat = ops.concat

        def checked_concat(
            arrays: Sequence[Array], /, *, axis: int | None = 0
        ) -> Array:
            if arrays and axis is not None:
                ndim = arrays[0].ndim
                if not -ndim <= axis < ndim:
                    msg = f"axis {axis} is out of range for {ndim} dimensions"
                    raise IndexError(msg)
            return concat(arrays, axis=axis)

        sort = ops.sort

        def checked_sort(
            x: Array,
            /,
            *,
            axis: int = -1,
            descending: bool = False,
            stable: bool = True,
        ) -> Array:
            if x.dtype == xp.uint64:
                key = _uint64_key(xp, x)
                order = xp.argsort(key, axis=axis, descending=descending, stable=stable)
                return xp.take_along_axis(x, order, axis=axis)
            return sort(x, axis=axis, descending=descending, stable=stable)

        return ops._replace(concat=checked_concat, sort=checked_sort)

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """A stable sort of the axis; uint64 ordered by `_uint64_key`."""
        if x.dtype != xp.uint64:
            return super().top_k(xp, x, k, axis, largest=largest)
        key = _uint64_key(xp, x)
        order = xp.argsort(key, axis=axis, descending=largest, stable=True)
        indices = order[along(axis, slice(0, k))]
        return xp.take_along_axis(x, indices, axis=axis), indices

    def supported_dtypes(self, device: str) -> frozenset[str]:
        """The inspection API's dtypes (its ``kind`` has no default)."""
        info = self.namespace().__array_namespace_info__()
        try:
            names = frozenset(info.dtypes(device=self.native_device(device), kind=None))
        except Exception as exc:
            msg = f"ndonnx could not list its dtypes ({type(exc).__name__}: {exc})"
            raise RuntimeError(msg) from exc
        if not names:
            msg = "ndonnx lists no dtype"
            raise RuntimeError(msg)
        return names

    #: Its own float64 arrays: ONNX Runtime's ``Cast`` rounds to float32
    #: first (65520 - 2**-20 became inf in float16); host data by NumPy's.
    own_narrowing = "via float32"

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """float16, which ONNX has and the standard does not."""
        return frozenset({"float16"})

    #: Its arrays export no DLPack and its namespace imports none.
    dlpack_export = False
    dlpack_import = False

    #: Writing rows builds a new graph node per write: a result is assembled
    #: on the host and converted once.
    writable_rows = False
    #: ``x[m]`` of a NumPy mask: "unexpected key type" (ndonnx 0.23).
    reads_numpy_masks = False
    #: ``where(m, x, x)`` of uint64's largest value gave 0 (ndonnx 0.23).
    where_rounds = frozenset({"uint64"})
    unknown_length_advice = "a symbolic axis (of ndx.argument) has no rows to batch: give arrays with values"

    def asarray_keeps_mask(self, dtype: DType | None) -> bool:
        """Into a nullable dtype (``nfloat64``, its choice where none is given).

        Into another (``float32``) ``ndx.asarray`` keeps the data alone.
        """
        if dtype is None:
            return True
        try:
            return bool(self.namespace().to_nullable_dtype(dtype) == dtype)
        except (KeyError, TypeError, ValueError):  # (not one of its dtypes)
            return False

    def batch_ceiling_bytes(self, device: str) -> int | None:
        """None: few, large batches, as each call costs about 0.3 s.

        A call builds a graph and onnxruntime runs it; the CPU cache ceiling
        would make hundreds of small ones.
        """
        return None

    def is_oom(self, exc: BaseException) -> bool:
        """A MemoryError, onnxruntime failing to allocate a buffer, or a graph too large.

        Value propagation serialises each node with its constant inputs:
        protobuf refuses (``EncodeError``) when the memory runs out or the
        message passes 2 GiB. Both mean "fewer rows".
        """
        if isinstance(exc, MemoryError):
            return True
        module = type(exc).__module__
        if module.startswith("google.protobuf") and type(exc).__name__ == "EncodeError":
            return True
        if not module.startswith("onnxruntime"):
            return False
        text = str(exc).lower()
        return any(t in text for t in _ORT_OOM_TEXT)
