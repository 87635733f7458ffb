"""Adapter for NumPy (host memory, always installed)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable
from types import ModuleType
from typing import TYPE_CHECKING

import array_api_compat
import numpy as np

from ._base import Adapter, FastOps
from ._layout import (
    Unshareable,
    contiguous_host_copy,
    host_unshareable,
    overlaps_itself,
)
from ._top_k import filtered_top_k
from ._trace import DtypeRules

if TYPE_CHECKING:
    from .._typing import Array, HostArray, Namespace, NativeDevice
    from ._top_k import TopK
    from ._trace import Traits

__all__ = ["HOST_ARRAY_BYTES", "NumpyAdapter"]

#: Bytes of an array's shape and strides, per axis.
_DIM_BYTES = 16
#: Bytes of an ndarray's own object (without its shape and data), as
#: ``tracemalloc`` counts it.
HOST_ARRAY_BYTES = sys.getsizeof(np.empty((0,))) - _DIM_BYTES


class NumpyAdapter(Adapter):
    """NumPy through ``array_api_compat.numpy``."""

    key = "numpy"
    module = "numpy"
    #: NumPy is a core dependency: no extra installs it.
    extra = ""
    label = "NumPy"
    dtype_prefixes = ("numpy", "np")
    auto_rank = 1
    #: ``np.matmul(ndarray, tensor)`` converts the tensor through ``__array__``.
    precheck_operands = True

    def is_installed(self) -> bool:
        """NumPy is a core dependency."""
        return True

    def namespace(self) -> ModuleType:
        """``array_api_compat.numpy``."""
        import array_api_compat.numpy as xp

        return xp

    test_read_only = True

    def is_read_only(self, x: Array) -> bool:
        """An array whose ``writeable`` flag is off, or whose elements share memory.

        (A writable ``as_strided`` view: a write to one element writes all
        that share it.) A NumPy scalar.
        """
        flags = getattr(x, "flags", None)
        return (
            flags is None
            or not flags.writeable
            or overlaps_itself(x.shape, x.strides, x.itemsize)
        )

    def read_only_namespace(self, xp: Namespace) -> Namespace:
        """``xp`` returning read-only views (`ReadOnlyNamespace`)."""
        from ._read_only import ReadOnlyNamespace

        ro: Namespace = ReadOnlyNamespace(xp)
        return ro

    def owns(self, x: object) -> bool:
        """NumPy arrays and NumPy scalars."""
        return bool(array_api_compat.is_numpy_array(x))

    def device_key(self, x: Array) -> Hashable:
        """NumPy arrays all live on the CPU."""
        return None

    def input_key(self, x: Array) -> Hashable:
        """By class, shape, dtype and strides: one device, no settings (`Adapter.input_key`).

        The class tells a masked array (refused) from a plain one; the
        strides a Fortran-order array from a C-order one (reshaping its
        rows copies them).
        """
        return (self.key, x.__class__, x.shape, x.dtype, x.strides)

    def rows_contiguous(self, x: Array) -> bool:
        """C-contiguous (a row slice of it is too)."""
        return bool(x.flags.c_contiguous)

    def fast_ops(self, xp: Namespace) -> FastOps:
        """NumPy's own functions where they follow the standard for ndarrays."""
        return FastOps(
            matmul=np.matmul,
            sort=_stable_sort,
            expand_dims=np.expand_dims,
            concat=np.concatenate,
            zeros_like=np.zeros_like,
            ones_like=np.ones_like,
            full_like=np.full_like,
        )

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """``np.top_k`` (NumPy 2.5+), else the k among a threshold's candidates.

        (`filtered_top_k`: where that saves nothing, ``argpartition`` and a
        sort of the k.)
        """
        own = getattr(np, "top_k", None)
        if own is not None:
            values, indices = own(x, k, axis=axis, largest=largest, sorted=True)
            return values, indices
        return filtered_top_k(np, xp, x, k, axis, largest=largest)

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """NumPy arrays all live on the CPU."""
        return None

    def own_check(
        self,
        native: NativeDevice,
        dtypes: frozenset[str],
        *,
        any_device: bool = False,
    ) -> Callable[[object], bool]:
        """``type(x) is ndarray`` and a native-byte-order dtype in ``dtypes``."""
        ndarray = np.ndarray
        ok = frozenset(np.dtype(name) for name in dtypes if name != "bfloat16")

        def own(x: Array) -> bool:
            return type(x) is ndarray and x.dtype in ok

        return own

    def operand_type(self) -> type:
        """``numpy.ndarray``."""
        return np.ndarray

    def is_plain(self, x: Array) -> bool:
        """An ``ndarray`` itself: not a scalar, ``np.matrix`` or masked array."""
        return type(x) is np.ndarray

    def lost_in_conversion(self, x: Array) -> str | None:
        """A masked array: converting it would silently drop its mask."""
        if type(x) is np.ndarray:
            return None
        ma = sys.modules.get("numpy.ma")
        if ma is not None and isinstance(x, ma.MaskedArray):
            return (
                "a NumPy masked array, whose mask the conversion would drop; "
                "pass x.filled(value) or x.compressed() instead"
            )
        return None

    def unwritable(self, x: Array) -> str | None:
        """An array whose elements share memory (``as_strided``): each write clashes."""
        if not overlaps_itself(x.shape, x.strides, x.itemsize):
            return None
        return (
            f"an array whose elements share memory (strides {x.strides} for "
            f"shape {x.shape}, as as_strided makes); give one whose elements "
            "each have their own"
        )

    def refused_operand(self, x: Array) -> str | None:
        """A masked array (NumPy's functions would ignore its mask or drop it), a matrix.

        ``np.matrix`` is always 2-D and its ``*`` is a matrix product:
        ``flatnonzero`` of one read its rows, ``matmul`` kept a vector 2-D.
        """
        if type(x) is np.ndarray:
            return None
        if isinstance(x, np.matrix):
            return (
                "a NumPy matrix (always 2-D, its * a matrix product), which the "
                "standard's functions misread; pass np.asarray(x)"
            )
        return self.lost_in_conversion(x)

    def unshareable(self, x: Array) -> Unshareable | None:
        """Scalars, and arrays `host_unshareable` names a reason for."""
        if not isinstance(x, np.ndarray):
            return Unshareable("is a NumPy scalar, not an array", read_only=False)
        return host_unshareable(x)

    def contiguous_copy(self, x: Array) -> Array:
        """A writable, C-contiguous copy in native byte order (0-d for a scalar)."""
        return contiguous_host_copy(np.asarray(x))

    def host_view(self, x: Array) -> HostArray | None:
        """The array itself (scalars hold no memory another array could share)."""
        return x if isinstance(x, np.ndarray) else None

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """NumPy's functions that turn any library's array into a NumPy array.

        ``np.asarray`` and its kin (through ``__array__``, the buffer
        protocol or DLPack) and ``np.from_dlpack``. NumPy's own arrays are
        host arrays already: passing them never counts.
        """
        names = ("asarray", "array", "asanyarray", "ascontiguousarray", "from_dlpack")
        return tuple((np, name) for name in names)

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """float16 (NumPy has no bfloat16 of its own)."""
        return frozenset({"float16"})

    def to_numpy(self, x: Array) -> HostArray:
        """Zero-copy: the array itself (scalars become 0-d arrays)."""
        return np.asarray(x)

    numpy_dtypes = True

    def shape_traits(self, device: str) -> Traits | None:
        """Views, temporary elision, NumPy's buffers, and each array's own bytes."""
        return {
            "dtype_rules": DtypeRules(numpy_tables=True),
            "elides": True,
            "numpy_internals": True,
            "norms": "numpy",
            "array_bytes": HOST_ARRAY_BYTES,
            "dim_bytes": _DIM_BYTES,
            "view_bytes": HOST_ARRAY_BYTES,
        }

    def is_oom(self, exc: BaseException) -> bool:
        """Host allocation failures (``numpy._ArrayMemoryError`` included)."""
        return isinstance(exc, MemoryError)


def _stable_sort(x: Array, /, *, axis: int = -1) -> Array:
    """``np.sort(x, axis=axis, kind="stable")``, the standard's default.

    For an ndarray, the copy-and-sort that ``np.sort`` does, without its
    dispatch layer (half its cost on small arrays).
    """
    if type(x) is np.ndarray:
        out = x.copy()
        out.sort(axis, "stable")
        return out
    return np.sort(x, axis=axis, kind="stable")
