"""Adapter for array-api-strict, the reference implementation of the standard."""

from __future__ import annotations

import dataclasses
import sys
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ._base import Adapter
from ._layout import Unshareable, host_unshareable, native_layout
from ._trace import DtypeRules, WrappedArrays

if TYPE_CHECKING:
    from .._typing import (
        Array,
        DType,
        HostArray,
        Namespace,
        NativeDevice,
        UserFunction,
    )
    from ._trace import Traits

__all__ = ["StrictAdapter"]

_CPU = "CPU_DEVICE"
#: Bytes of one of its arrays beyond the data: the NumPy array it wraps and
#: its own object (as ``tracemalloc`` counts them).
_WRAPPED_ARRAY_BYTES = 224


class StrictAdapter(Adapter):
    """array-api-strict: the namespace is the module itself.

    Its devices are the CPU (``"cpu"``, its ``CPU_DEVICE``) and the simulated
    devices it ships for testing device handling (``"device1"``,
    ``"device2"``, ``"no_float64"``, ...).
    """

    key = "array_api_strict"
    module = "array_api_strict"
    extra = "strict"
    label = "array-api-strict"
    dtype_prefixes = ("array_api_strict",)
    dtype_repr_module = "array_api_strict"
    #: Its functions read ``.dtype`` of what they get before checking it.
    argument_errors = (TypeError, ValueError, IndexError, AttributeError)
    #: Its functions warn (comparing dtypes) before refusing another
    #: library's array.
    precheck_operands = True

    def operand_type(self) -> type:
        """``array_api_strict``'s ``Array`` (the class `owns` tests for)."""
        from array_api_strict._array_object import Array

        array_type: type = Array
        return array_type

    def from_host(
        self, xp: Namespace, host: HostArray, dtype: DType, device: NativeDevice
    ) -> Array:
        """``asarray`` of a copy where strides are not whole items.

        Its arrays wrap the NumPy buffer they are given, and leave through
        DLPack, which refuses such strides (fields of structured arrays).
        """
        return xp.asarray(native_layout(host), dtype=dtype, device=device)

    def unshareable(self, x: Array) -> Unshareable | None:
        """What NumPy's rule says of the NumPy memory it wraps.

        Its arrays wrap NumPy arrays (read-only ones stay read-only: a
        write raises), which ``numpy.from_dlpack`` views on any of its
        devices.
        """
        return host_unshareable(np.from_dlpack(x))

    def host_view(self, x: Array) -> HostArray | None:
        """The NumPy array it wraps, viewed through DLPack."""
        view: HostArray = np.from_dlpack(x)
        return view

    def host_owner(self, x: Array) -> object | None:
        """The ``base`` of the NumPy array it wraps (its DLPack view's is a capsule)."""
        return getattr(getattr(x, "_array", None), "base", None)

    def is_read_only(self, x: Array) -> bool:
        """An array over read-only memory (a move of a read-only NumPy array)."""
        return not np.from_dlpack(x).flags.writeable

    def unwritable(self, x: Array) -> str | None:
        """An array over read-only memory (`is_read_only`)."""
        if not self.is_read_only(x):
            return None
        return "an array over read-only memory (made from a read-only NumPy array)"

    def contiguous_copy(self, x: Array) -> Array:
        """``asarray(x, copy=True)``: a C-ordered copy on ``x``'s device."""
        return self.namespace().asarray(x, copy=True)

    def namespace(self) -> ModuleType:
        """The ``array_api_strict`` module."""
        import array_api_strict

        namespace: ModuleType = array_api_strict  # typed whether installed or not
        return namespace

    def owns(self, x: object) -> bool:
        """Arrays of array-api-strict."""
        module = sys.modules.get("array_api_strict._array_object")
        return module is not None and isinstance(x, module.Array)

    def devices(self) -> tuple[str, ...]:
        """``"cpu"`` first, then the simulated devices."""
        info = self.namespace().__array_namespace_info__()
        return tuple(self.device_str(d) for d in info.devices())

    def canonical_device(self, device: str) -> str:
        """``CPU_DEVICE`` (and ``"cpu:0"``) is spelled ``"cpu"``; other names are kept."""
        name = device.strip()
        return "cpu" if name.lower() in {"cpu", "cpu:0", _CPU.lower()} else name

    def native_device(self, device: str) -> NativeDevice:
        """An ``array_api_strict.Device``."""
        name = _CPU if device == "cpu" else device
        return self.namespace().Device(name)

    def device_str(self, native: NativeDevice) -> str:
        """Inverse of `native_device`."""
        text = str(native)
        if text.startswith("array_api_strict.Device("):
            text = text[len("array_api_strict.Device(") : -1].strip("'\"")
        return self.canonical_device(text)

    #: Its simulated devices, run by the pytest plugin: ``device1`` (arrays
    #: made without ``device=`` land on the CPU, and mixing the two raises)
    #: and ``no_float64`` (no float64 or complex128, as on MPS).
    test_devices = ("device1", "no_float64")

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """Its array's ``__array__`` (NumPy's ``from_dlpack`` is NumPy's own exit)."""
        from array_api_strict._array_object import Array

        return ((Array, "__array__"),)

    strictest_lacks = frozenset({"data_dependent_shapes", "linalg"})
    test_strictest = True

    def capabilities_now(self) -> frozenset[str]:
        """What its flags leave on: data-dependent shapes, the linalg extension."""
        flags = self.namespace().get_array_api_strict_flags()
        has = set()
        if flags.get("data_dependent_shapes", True):
            has.add("data_dependent_shapes")
        if "linalg" in flags.get("enabled_extensions", ("linalg",)):
            has.add("linalg")
        return frozenset(has)

    def strictest_mode(self) -> AbstractContextManager[object]:
        """Boolean indexing, data-dependent shapes and the extensions off.

        ``linalg`` and ``fft`` are optional extensions of the standard: code
        that needs them must say so (as array-api-extra's strictest
        backend). Restored on exit.
        """
        flags: AbstractContextManager[object] = self.namespace().ArrayAPIStrictFlags(
            boolean_indexing=False, data_dependent_shapes=False, enabled_extensions=()
        )
        return flags

    def supports_float64(self, device: str) -> bool:
        """Asks the library's inspection API about this device's dtypes."""
        info = self.namespace().__array_namespace_info__()
        return "float64" in info.dtypes(device=self.native_device(device))

    def to_cpu(self, x: Array) -> Array:
        """Move to ``CPU_DEVICE``."""
        return x.to_device(self.native_device("cpu"))

    def shape_traits(self, device: str) -> Traits | None:
        """NumPy's allocations, each array wrapped in one of its own (no elision)."""
        return {
            "dtype_rules": DtypeRules(numpy_tables=True, fft_single_copies=True),
            "numpy_internals": True,
            "norms": "numpy",
            "array_bytes": _WRAPPED_ARRAY_BYTES,
            "dim_bytes": 16,
            "view_bytes": _WRAPPED_ARRAY_BYTES,
        }

    def library_tracer(
        self,
        fn: UserFunction,
        inputs: tuple[tuple[tuple[int, ...], str], ...],
        whole: tuple[tuple[object, ...], dict[str, object]],
        device: str,
    ) -> WrappedArrays | None:
        """Its own functions, on its arrays wrapping shape-only NumPy arrays.

        Its arrays wrap NumPy's, and its functions call NumPy's on them: a
        shape-only NumPy array in each of its arrays lets ``fn`` run its own
        code, and NumPy's functions are traced. The shape-only namespace
        stands in for ``x.__array_namespace__()``; this follows a ``fn``
        that calls the library it imported itself (``xs.diff(x)``, after
        ``import array_api_strict as xs``), which refuses any other array.
        """
        profile = self.shape_profile(device)
        if profile is None:
            return None
        inner = dataclasses.replace(
            profile,
            dtypes={name: np.dtype(name) for name in profile.dtypes},
            native_device="cpu",
            key=(profile.key, "NumPy's arrays inside"),
        )
        array, native = self.operand_type(), self.native_device(device)

        def wrap(x: object) -> object:
            return array._new(x, device=native)  # type: ignore[attr-defined]

        def unwrap(leaf: object) -> object:
            return leaf._array if isinstance(leaf, array) else leaf  # type: ignore[attr-defined]

        name = "array-api-strict's own functions over shape-only NumPy arrays"
        return WrappedArrays(inner, wrap, unwrap, name)

    def is_oom(self, exc: BaseException) -> bool:
        """Host memory: a MemoryError."""
        return isinstance(exc, MemoryError)
