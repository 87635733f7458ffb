"""`Backend`: a typed facade over one library's Array-API namespace on one device.

Every method delegates to ``self.xp``, the namespace `array_api_compat`
resolves for the library; library facts come from the library's adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import array_api_compat
import numpy as np

from ._adapters import ADAPTERS, Adapter, FastOps, adapter_for_array
from ._args import (
    check_axis,
    check_fill_fits,
    check_scalar,
    check_shape,
    host_dtype_name,
    is_array_list,
    raise_if_axis_out_of_range,
    shape_of,
)
from ._dtypes import DTYPE_NAMES, dtype_name, narrow_for_device
from ._resolve import BACKEND_NAMES, Unavailable, adapter_for_name, locate_arrays

__all__ = ["BACKEND_NAMES", "Backend"]


# (adapter, device key) -> Backend: `from_arrays` resolves each kind of array once.
_FROM_ARRAYS: dict[tuple[Adapter, Any, Any], Backend] = {}


class Backend:
    """Backend abstraction for numerical operations.

    A `Backend` is one array library on one device. Code written against its
    methods and its namespace `xp` runs unchanged on every supported library.

    Parameters
    ----------
    backend : str, default "numpy"
        ``"numpy"``; ``"torch"`` (device detection cuda → mps → cpu);
        ``"auto"`` (torch when installed, else numpy); ``"array_api_strict"``;
        ``"cupy"``; ``"jax"``; ``"dask"``.
    device : str, optional
        Pin a device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``, ...). A
        device that does not exist here raises `ValueError`; nothing falls
        back silently.

    Attributes
    ----------
    name : str
        Backend identifier: ``"numpy"``, ``"torch-cpu"``, ``"torch-cuda"``,
        ``"torch-mps"``, ``"array_api_strict"``, ``"cupy"``, ``"jax-cpu"``,
        ``"jax-gpu"``, ``"dask"``.
    device : str
        The device arrays are placed on (``"cpu"``, ``"cuda"``, ``"mps"``, ...).
    xp : module
        The Array-API-compliant namespace (e.g. ``array_api_compat.torch``).
    is_gpu : bool
        Whether `device` is a GPU.
    library : str
        The library's key, as accepted by ``Backend(...)``.

    Raises
    ------
    ValueError
        Unknown ``backend`` name, or a ``device`` that does not exist.
    TypeError
        ``backend`` or ``device`` is not a string.
    ImportError
        The library is not installed (the message names the extra to install).
    """

    __slots__ = (
        "_adapter",
        "_canon",
        "_concat",
        "_dtypes",
        "_expand_dims",
        "_f64",
        "_full_like",
        "_is_own",
        "_is_own_like",
        "_matmul",
        "_native",
        "_ones_like",
        "_sort",
        "_unusable",
        "_zeros_like",
        "device",
        "is_gpu",
        "name",
        "xp",
    )

    name: str
    device: str
    xp: Any
    is_gpu: bool

    def __init__(self, backend: str = "numpy", *, device: str | None = None) -> None:
        adapter = adapter_for_name(backend)
        if device is not None and not isinstance(device, str):
            msg = f"device must be a string or None, got {device!r}"
            raise TypeError(msg)
        adapter.require()
        dev = (
            adapter.default_device()
            if device is None
            else adapter.validate_device(device)
        )
        xp = adapter.namespace()
        native = adapter.native_device(dev)
        dtypes = adapter.supported_dtypes(dev)
        self._bind(adapter, dev, xp, native, adapter.fast_ops(xp), dtypes)
        self._is_own = adapter.own_check(native, dtypes)
        self._is_own_like = adapter.own_check(native, dtypes, any_device=True)

    def _bind(
        self,
        adapter: Adapter,
        device: str,
        xp: Any,
        native: Any,
        ops: FastOps,
        dtypes: frozenset[str],
    ) -> None:
        self._adapter = adapter
        self._dtypes = dtypes
        self._f64 = "float64" in dtypes
        self._matmul = ops.matmul
        self._sort = ops.sort
        self._expand_dims = ops.expand_dims
        self._concat = ops.concat
        self._zeros_like = ops.zeros_like
        self._ones_like = ops.ones_like
        self._full_like = ops.full_like
        self._unusable = xp.reason if isinstance(xp, Unavailable) else None
        self._canon = adapter.canonical_device(device)
        self._native = native
        self.name = adapter.backend_name(device)
        self.device = device
        self.xp = xp
        self.is_gpu = adapter.is_gpu(device)

    def _require_usable(self) -> None:
        """Raise RuntimeError when this Backend's device is not on this host."""
        if self._unusable is not None:
            raise RuntimeError(self._unusable)

    # -- identity --------------------------------------------------------
    @property
    def library(self) -> str:
        """The library's key (``"numpy"``, ``"torch"``, ...)."""
        return self._adapter.key

    def __repr__(self) -> str:
        return f"Backend({self._adapter.key!r}, device={self.device!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Backend):
            return NotImplemented
        return self._adapter is other._adapter and self._canon == other._canon

    def __hash__(self) -> int:
        return hash((self._adapter.key, self._canon))

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (_restore, (self._adapter.key, self.device))

    def __deepcopy__(self, memo: dict[int, Any]) -> Backend:
        return self  # immutable: one library on one device

    def __copy__(self) -> Backend:
        return self

    # -- construction from arrays ----------------------------------------
    @classmethod
    def from_arrays(cls, *arrays: Any) -> Backend:
        """The backend (library and device) that ``arrays`` live on.

        Python scalars and None are skipped; with no arrays left, NumPy.

        Raises
        ------
        TypeError
            Arrays of two libraries, or an object that is not an array.
        ValueError
            Arrays of one library on two devices.
        """
        found, found_key, found_at = locate_arrays(arrays)
        if found is None:
            found, found_key = ADAPTERS["numpy"], None
        cache_key = (found, found_key, found.config_token())
        cached = _FROM_ARRAYS.get(cache_key)
        if cached is None:
            dev = (
                found.default_device()
                if found_at < 0
                else found.device_str(array_api_compat.device(arrays[found_at]))
            )
            cached = cls(found.key, device=dev)
            _FROM_ARRAYS[cache_key] = cached
        return cached

    # -- helpers -----------------------------------------------------------
    def _xp_dtype(self, name: str, device: str | None = None) -> Any:
        where = self._adapter.backend_name(device or self.device)
        supported = (
            self._dtypes if device is None else self._adapter.supported_dtypes(device)
        )
        chosen = narrow_for_device(name, supported, where)
        if chosen not in supported:
            msg = (
                f"dtype {name!r} is not supported by {where} on device "
                f"{device or self.device!r}; supported: {', '.join(sorted(supported))}"
            )
            raise TypeError(msg)
        return getattr(self.xp, chosen)

    def _target(self, device: Any, param: str = "device") -> tuple[str | None, Any]:
        """(device string or None for the backend's own, native device)."""
        if device is None:
            return None, self._native
        if isinstance(device, str):
            dev = self._adapter.validate_device(device)
            return dev, self._adapter.native_device(dev)
        try:
            dev = self._adapter.validate_device(self._adapter.device_str(device))
        except (AttributeError, TypeError, ValueError):
            msg = f"{param}={device!r} is not a device of backend {self.name!r}"
            raise TypeError(msg) from None
        return dev, self._adapter.native_device(dev)

    def _host(self, x: Any, param: str) -> np.ndarray[Any, Any]:
        """Foreign data (other libraries, lists, scalars) as a numeric host array."""
        adapter = adapter_for_array(x)
        if adapter is not None:
            host = adapter.to_numpy(x)
        else:
            try:
                host = np.asarray(x)
            except (ValueError, TypeError) as exc:
                msg = f"{param} is not array-like (ragged or mixed nesting?): {exc}"
                raise ValueError(msg) from None
        if host.dtype.kind not in "biufc":
            msg = f"{param} has non-numeric dtype {host.dtype} (value {x!r:.60})"
            raise TypeError(msg)
        if not host.flags.writeable:  # read-only views (e.g. of JAX arrays)
            host = host.copy()
        return host

    def _ref(self, array: Any, dtype: Any, device: Any) -> tuple[Any, Any]:
        """Dtype and native device for a ``*_like`` call on ``array``."""
        if self._adapter.owns(array):
            ref_dtype = array.dtype
            dev_str, native = self._target(device)
            if device is None:
                native = array_api_compat.device(array)
                dev_str = self._adapter.device_str(native)
        else:
            ref_dtype = self._host(array, "array").dtype
            dev_str, native = self._target(device)
        name = dtype_name(ref_dtype if dtype is None else dtype)
        assert name is not None
        return self._xp_dtype(name, dev_str), native

    def _like_args(
        self, array: Any, shape: Any, dtype: Any, device: Any
    ) -> tuple[tuple[int, ...], Any, Any]:
        """Shape, dtype and native device of a ``*_like`` call's slow path."""
        xp_dtype, native = self._ref(array, dtype, device)
        out_shape = shape_of(array) if shape is None else check_shape(shape)
        return out_shape, xp_dtype, native

    # -- creation and conversion ----------------------------------------------
    def asarray(self, x: Any, dtype: Any = None, device: Any = None) -> Any:
        """Convert input to a backend array.

        Handles arrays of any supported library, lists and scalars. Places the
        result on the backend's device (or an explicit ``device``).

        Parameters
        ----------
        x : array_like
            Input data (array of any supported library, nested list, scalar).
        dtype : str or dtype, optional
            Desired dtype as a string or any library's dtype; if None, inferred
            from the input (NumPy's rules: Python floats become float64).
        device : str, optional
            Target device; if None, the backend's device.

        Returns
        -------
        array
            An array of this backend's library. On devices without float64
            (MPS), float64 becomes float32 with one `PrecisionWarning`.
        """
        if dtype is None and device is None and self._is_own(x):
            return x  # already here, in a dtype the device has: asarray is a no-op
        dev_str, native = self._target(device)
        name = dtype_name(dtype)
        if self._adapter.owns(x):
            if name is None:
                name = dtype_name(x.dtype)
                assert name is not None
            return self.xp.asarray(
                x, dtype=self._xp_dtype(name, dev_str), device=native
            )
        host = self._host(x, "x")
        target = self._xp_dtype(name or host_dtype_name(host), dev_str)
        return self.xp.asarray(host, dtype=target, device=native)

    def asarray_like(self, x: Any, ref: Any) -> Any:
        """Convert ``x`` to an array matching ``ref``'s dtype and device."""
        xp_dtype, native = self._ref(ref, None, None)
        if self._adapter.owns(x):
            return self.xp.asarray(x, dtype=xp_dtype, device=native)
        return self.xp.asarray(self._host(x, "x"), dtype=xp_dtype, device=native)

    def check_arrays(self, *inputs: Any) -> list[Any]:
        """Coerce all inputs to the same dtype (and device) as the first.

        None values are passed through. Lists of arrays are converted
        element-wise. Host data (NumPy arrays, lists, scalars) is moved to the
        first array's device; arrays of this backend's library on another
        device raise `ValueError`, arrays of another library `TypeError`.

        Returns
        -------
        list
            Converted arrays in the same order as inputs.
        """
        ref: list[Any] = []  # [xp dtype, native device, device string]
        out: list[Any] = []
        for i, item in enumerate(inputs):
            if item is None:
                out.append(None)
            elif is_array_list(item):
                out.append(
                    [
                        self._check_one(v, f"inputs[{i}][{j}]", ref)
                        for j, v in enumerate(item)
                    ]
                )
            else:
                out.append(self._check_one(item, f"inputs[{i}]", ref))
        return out

    def _check_one(self, x: Any, param: str, ref: list[Any]) -> Any:
        adapter = adapter_for_array(x)
        host_lib = ADAPTERS["numpy"]
        if (
            adapter is not None
            and adapter is not self._adapter
            and adapter is not host_lib
        ):
            msg = (
                f"{param} is a {adapter.label} array but this backend is {self.name!r}; "
                f"convert it explicitly with Backend.asarray"
            )
            raise TypeError(msg)
        if adapter is self._adapter:
            dev = self._adapter.device_str(array_api_compat.device(x))
            if ref and self._adapter.canonical_device(
                dev
            ) != self._adapter.canonical_device(ref[2]):
                msg = (
                    f"{param} is on device {dev!r} but the first input is on {ref[2]!r}"
                )
                raise ValueError(msg)
            if not ref:
                name = dtype_name(x.dtype)
                assert name is not None
                ref += [self._xp_dtype(name, dev), array_api_compat.device(x), dev]
            return self.xp.asarray(x, dtype=ref[0], device=ref[1])
        host = self._host(x, param)
        if not ref:
            ref += [self._xp_dtype(host_dtype_name(host)), self._native, self.device]
        return self.xp.asarray(host, dtype=ref[0], device=ref[1])

    def copy(self, array: Any) -> Any:
        """Return an independent copy of the array."""
        return self.xp.asarray(array, copy=True)

    @staticmethod
    def dtype_to_str(dtype: Any) -> str | None:
        """Normalize a dtype (numpy, torch, strict, jax, or string) to its name.

        Returns
        -------
        str or None
            e.g. ``"float32"``, ``"float64"``, or None if ``dtype`` is None.

        Raises
        ------
        TypeError
            ``dtype`` is not a numeric or boolean dtype.
        """
        return dtype_name(dtype)

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> Any:
        """Create an array filled with ``fill_value``.

        With ``dtype=None`` the dtype follows NumPy's rules for the fill value
        (float → float64 where the device has it, int → int64, bool → bool).
        """
        shape = check_shape(shape)
        check_scalar(fill_value)
        name = dtype_name(dtype) or dtype_name(np.result_type(fill_value))
        assert name is not None
        check_fill_fits(fill_value, name)
        return self.xp.full(
            shape, fill_value, dtype=self._xp_dtype(name), device=self._native
        )

    def full_like(
        self,
        array: Any,
        fill_value: Any,
        shape: Any = None,
        dtype: Any = None,
        device: Any = None,
    ) -> Any:
        """Create an array filled with ``fill_value``, optionally another shape.

        Parameters
        ----------
        array : array
            Reference array for dtype (and device) inference.
        fill_value : scalar
            Fill value.
        shape : int or tuple of int, optional
            Output shape; if None, ``array.shape``.
        dtype : str or dtype, optional
            Output dtype; if None, ``array.dtype``.
        device : str, optional
            Target device; if None, ``array``'s device (the backend's device
            for host data).
        """
        check_scalar(fill_value)
        if (
            shape is None
            and dtype is None
            and device is None
            and self._is_own_like(array)
        ):
            check_fill_fits(fill_value, array.dtype)
            return self._full_like(array, fill_value)
        out_shape, xp_dtype, native = self._like_args(array, shape, dtype, device)
        check_fill_fits(fill_value, xp_dtype)
        return self.xp.full(out_shape, fill_value, dtype=xp_dtype, device=native)

    def ones_like(
        self, array: Any, shape: Any = None, dtype: Any = None, device: Any = None
    ) -> Any:
        """Create a ones array like ``array``, optionally of another shape."""
        if (
            shape is None
            and dtype is None
            and device is None
            and self._is_own_like(array)
        ):
            return self._ones_like(array)
        out_shape, xp_dtype, native = self._like_args(array, shape, dtype, device)
        return self.xp.ones(out_shape, dtype=xp_dtype, device=native)

    def zeros_like(
        self, array: Any, shape: Any = None, dtype: Any = None, device: Any = None
    ) -> Any:
        """Create a zeros array like ``array``, optionally of another shape."""
        if (
            shape is None
            and dtype is None
            and device is None
            and self._is_own_like(array)
        ):
            return self._zeros_like(array)
        out_shape, xp_dtype, native = self._like_args(array, shape, dtype, device)
        return self.xp.zeros(out_shape, dtype=xp_dtype, device=native)

    # -- operations ----------------------------------------------------------
    def concatenate(self, arrays: Sequence[Any], axis: int = 0) -> Any:
        """Concatenate a non-empty sequence of arrays along ``axis``."""
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
        try:
            return self._concat(arrays, axis=axis)
        except (IndexError, ValueError):  # AxisError is both
            raise_if_axis_out_of_range(arrays[0], axis)
            raise

    def expand_dims(self, array: Any, axis: int) -> Any:
        """Insert a new axis at position ``axis``."""
        if type(axis) is not int:
            axis = check_axis(axis)
        try:
            return self._expand_dims(array, axis=axis)
        except (IndexError, ValueError):  # AxisError is both
            raise_if_axis_out_of_range(array, axis, extra=1)
            raise

    def flatnonzero(self, array: Any) -> Any:
        """Indices of the non-zero elements of the flattened array."""
        return self.xp.nonzero(self.xp.reshape(array, (-1,)))[0]

    def matmul(self, A: Any, B: Any) -> Any:
        """Matrix multiplication ``A @ B``."""
        return self._matmul(A, B)

    def sort(self, array: Any, axis: int = -1) -> Any:
        """Sort along ``axis``, returning values only."""
        if type(axis) is not int:
            axis = check_axis(axis)
        if axis != -1:  # lazy libraries (Dask) would not notice a bad axis here
            raise_if_axis_out_of_range(array, axis)
        try:
            return self._sort(array, axis=axis)
        except (IndexError, ValueError):  # AxisError is both
            raise_if_axis_out_of_range(array, axis)
            raise

    def svd(self, X: Any, full_matrices: bool = False) -> tuple[Any, Any, Any]:
        """Singular Value Decomposition, reduced by default.

        Returns
        -------
        tuple
            ``(U, s, Vt)``: left singular vectors, singular values (descending)
            and right singular vectors (transposed), with ``U * s @ Vt == X``.
        """
        if not isinstance(full_matrices, bool):
            msg = f"full_matrices must be a bool, got {full_matrices!r}"
            raise TypeError(msg)
        u, s, vt = self.xp.linalg.svd(X, full_matrices=full_matrices)
        return u, s, vt

    # -- transfers -----------------------------------------------------------
    def to_cpu(self, array: Any) -> Any:
        """Transfer an array to its library's CPU device. No-op for NumPy.

        CuPy has no CPU device: its arrays come back as NumPy arrays.
        """
        adapter = adapter_for_array(array)
        if adapter is None:
            return self._host(array, "array")
        return adapter.to_cpu(array)

    def to_device(self, arr: Any) -> Any:
        """Transfer an array (NumPy or any supported library) to the backend's device."""
        return self.asarray(arr)

    def to_gpu(self, array: Any, device: Any = None) -> Any:
        """Transfer an array to the GPU, by default the backend's device.

        A no-op where the backend's device is the CPU; an explicit ``device``
        that does not exist raises `ValueError`.
        """
        return self.asarray(array, device=device)

    def to_numpy(self, arr: Any) -> np.ndarray[Any, Any]:
        """Convert an array of any supported library to a NumPy array.

        Zero-copy where the library allows it (NumPy, CPU torch tensors, CPU
        array-api-strict and JAX arrays); device arrays are copied to the host.
        """
        adapter = adapter_for_array(arr)
        if adapter is not None:
            return adapter.to_numpy(arr)
        return self._host(arr, "arr")


def _restore(key: str, device: str) -> Backend:
    """Unpickle: the same library and device, or a Backend that refuses to run."""
    try:
        return Backend(key, device=device)
    except (ImportError, ValueError, RuntimeError) as exc:
        adapter = ADAPTERS[key]
        reason = (
            f"this Backend was pickled on a host with {adapter.label} device "
            f"{device!r}, which this host does not have ({exc})"
        )
        unavailable = Unavailable(reason)
        refuse = unavailable.refuse
        b = Backend.__new__(Backend)
        b._bind(
            adapter,
            device,
            unavailable,
            unavailable,
            FastOps(*[refuse] * len(FastOps._fields)),
            DTYPE_NAMES,
        )
        b._is_own = b._is_own_like = _never  # every call takes the refusing path
        return b


def _never(x: Any) -> bool:  # noqa: ARG001
    return False
