"""`Backend`: a typed facade over one library's Array-API namespace on one device.

Every method delegates to ``self.xp``, the namespace `array_api_compat`
resolves for the library; library facts come from the library's adapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

import numpy as np

from ._adapters import ADAPTERS, Adapter, FastOps, adapter_for_array
from ._args import (
    check_fill_fits,
    check_scalar,
    check_shape,
    fill_dtype_name,
    host_dtype_name,
)
from ._convert import ArrayT
from ._creation import Creation, creation_on
from ._dtypes import DTYPE_NAMES, dtype_name
from ._inputs import Inputs
from ._resolve import (
    BACKEND_NAMES,
    Unavailable,
    adapter_for_name,
    key_of,
    locate_arrays,
)

if TYPE_CHECKING:
    from ._adapters._types import (
        AutoName,
        BackendName,
        CupyArray,
        CupyName,
        DaskArray,
        DaskName,
        JaxArray,
        JaxName,
        NdonnxArray,
        NdonnxName,
        NumpyArray,
        NumpyName,
        StrictArray,
        StrictName,
        TorchArray,
        TorchName,
    )
    from ._namespace import Namespace

__all__ = ["BACKEND_NAMES", "Backend"]

#: Another array type, for methods that take any library's arrays.
_A = TypeVar("_A")


# (adapter, device key) -> Backend: `from_arrays` resolves each kind of array once.
_FROM_ARRAYS: dict[tuple[Adapter, Any, Any], Backend[Any]] = {}


class Backend(Inputs[ArrayT]):
    """Backend abstraction for numerical operations.

    A `Backend` is one array library on one device. Code written against its
    methods and its namespace `xp` runs unchanged on every supported library.

    ``Backend`` is generic in its library's array type, which type checkers
    follow from the name: ``Backend("torch")`` is a ``Backend[torch.Tensor]``,
    ``Backend("numpy")`` a ``Backend[numpy.ndarray]``, ``Backend("auto")`` a
    ``Backend[Any]``; its methods return (and its operations take) that type.

    Parameters
    ----------
    backend : BackendName, default "numpy"
        ``"numpy"``; ``"torch"`` (default device: cuda → xpu → mps → cpu,
        the first that exists); ``"auto"`` (torch when installed, else
        numpy); ``"array_api_strict"``; ``"cupy"``; ``"jax"``; ``"dask"``;
        ``"ndonnx"``. A type checker reports any other literal name as an
        error.
    device : str or device, optional
        Pin a device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"xpu"``,
        ``"mps"``, ...), or the library's own device object
        (``torch.device("cpu", 0)``); ``"cpu:0"`` is the CPU. A device that
        does not exist here raises `ValueError`; nothing falls back silently.

    Attributes
    ----------
    name : str
        Backend identifier: ``"numpy"``, ``"torch-cpu"``, ``"torch-cuda"``,
        ``"torch-xpu"``, ``"torch-mps"``, ``"array_api_strict"``,
        ``"cupy"``, ``"jax-cpu"``, ``"jax-gpu"``, ``"dask"``, ``"ndonnx"``.
    device : str
        The device arrays are placed on (``"cpu"``, ``"cuda"``, ``"xpu"``,
        ``"mps"``, ...).
    xp : Namespace
        The Array-API-compliant namespace (e.g. ``array_api_compat.torch``),
        typed for checkers as a `Namespace` of this backend's array type.
    is_gpu : bool
        Whether `device` is a GPU.
    library : str
        The library's key, as accepted by ``Backend(...)``.
    create : Creation[ArrayT]
        The namespace's creation functions (``zeros``, ``ones``, ``empty``,
        ``full``, ``arange``, ``linspace``, ``eye``, ``asarray``) with
        ``device=`` bound to this backend's device: ``b.create.zeros(3)``
        is ``b.xp.zeros(3, device=b.native_device)``.

    Raises
    ------
    ValueError
        Unknown ``backend`` name, or a ``device`` that does not exist.
    TypeError
        ``backend`` is not a string, or ``device`` neither a string nor a
        device of the library.
    ImportError
        The library is not installed (the message names the extra to install).

    Returns
    -------
    Backend
        One library on one device (``Backend(...)`` constructs it).

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> b = xpkit.Backend("numpy")
    >>> b.name, b.device
    ('numpy', 'cpu')
    >>> x = b.asarray([[1.0, 2.0], [3.0, 4.0]])
    >>> b.to_numpy(b.matmul(x, x))
    array([[ 7., 10.],
           [15., 22.]])
    """

    __slots__ = (
        "_adapter",
        "_bad_args",
        "_canon",
        "_concat",
        "_dtypes",
        "_expand_dims",
        "_f64",
        "_full_like",
        "_held",
        "_is_own",
        "_is_own_like",
        "_matmul",
        "_native",
        "_ones_like",
        "_plain",
        "_sort",
        "_unusable",
        "_zeros_like",
        "create",
        "device",
        "is_gpu",
        "name",
        "xp",
    )

    name: str
    device: str
    xp: Namespace[ArrayT]
    is_gpu: bool
    create: Creation[ArrayT]

    # The array type follows the name (the aliases are the type checker's
    # only: each library is imported under TYPE_CHECKING, in _adapters/_types).
    @overload
    def __init__(
        self: Backend[NumpyArray],
        backend: NumpyName = "numpy",
        *,
        device: Any = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[TorchArray], backend: TorchName, *, device: Any = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[StrictArray],
        backend: StrictName,
        *,
        device: Any = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[CupyArray], backend: CupyName, *, device: Any = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[JaxArray], backend: JaxName, *, device: Any = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[DaskArray], backend: DaskName, *, device: Any = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[NdonnxArray], backend: NdonnxName, *, device: Any = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[Any], backend: AutoName, *, device: Any = None
    ) -> None: ...
    def __init__(self, backend: BackendName = "numpy", *, device: Any = None) -> None:
        adapter = adapter_for_name(backend)
        if device is not None and not isinstance(device, str):
            if isinstance(device, (bool, int, float, complex, bytes)):
                msg = f"device must be a string or None, got {device!r}"
                raise TypeError(msg)
            adapter.require()
            device = _device_object_str(adapter, device)
        adapter.require()
        dev = (
            adapter.default_device()
            if device is None
            else adapter.validate_device(device)
        )
        self._setup(adapter, dev)

    def _setup(self, adapter: Adapter, dev: str) -> None:
        """Bind this Backend to ``adapter``'s library on the valid device ``dev``."""
        xp = adapter.namespace()
        native = adapter.native_device(dev)
        dtypes = adapter.supported_dtypes(dev)
        held = dtypes | adapter.extra_dtypes(dev)
        self._bind(adapter, dev, xp, native, adapter.fast_ops(xp), dtypes, held)
        self._is_own = adapter.own_check(native, held)
        self._is_own_like = adapter.own_check(native, held, any_device=True)

    def _bind(
        self,
        adapter: Adapter,
        device: str,
        xp: Any,
        native: Any,
        ops: FastOps,
        dtypes: frozenset[str],
        held: frozenset[str],
    ) -> None:
        self._adapter = adapter
        self._dtypes = dtypes
        self._held = held
        self._f64 = "float64" in dtypes
        # Operands are checked before the call only for libraries that would
        # convert another library's arrays silently (None: no check).
        self._plain = (
            adapter.operand_type()
            if adapter.precheck_operands and not isinstance(xp, Unavailable)
            else None
        )
        self._bad_args = (
            adapter.argument_errors
            if isinstance(xp, Unavailable)
            else adapter.argument_error_types()
        )
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
        self.xp = xp  # the library's namespace, which Namespace describes
        self.is_gpu = adapter.is_gpu(device)
        self.create = (
            Creation(*[xp.refuse] * len(Creation._fields))
            if isinstance(xp, Unavailable)
            else creation_on(xp, native)
        )

    def require_usable(self) -> None:
        """Raise `RuntimeError` when this Backend's device is not on this host.

        Only a Backend unpickled on a host without its device is unusable;
        every method raises then, and this says so up front.
        """
        if self._unusable is not None:
            raise RuntimeError(self._unusable)

    # -- identity --------------------------------------------------------
    @property
    def native_device(self) -> Any:
        """The library's own device object (``torch.device``, a JAX ``Device``, …).

        What the library's creation functions take: ``b.xp.zeros(3,
        device=b.native_device)`` lands on this backend's device.
        """
        return self._native

    @property
    def dtypes(self) -> frozenset[str]:
        """Names of the dtypes arrays can have on this backend's device."""
        return self._dtypes

    @property
    def capabilities(self) -> frozenset[str]:
        """What the library has of ``"linalg"`` and ``"data_dependent_shapes"``."""
        return self._adapter.capabilities

    @property
    def has_float64(self) -> bool:
        """Whether float64 (and complex128) arrays can live on this device."""
        return self._f64

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

    def __deepcopy__(self, memo: dict[int, Any]) -> Backend[ArrayT]:
        return self  # immutable: one library on one device

    def __copy__(self) -> Backend[ArrayT]:
        return self

    # -- construction from arrays ----------------------------------------
    @overload
    @classmethod
    def from_arrays(cls, *arrays: complex | None) -> Backend[NumpyArray]: ...
    @overload
    @classmethod
    def from_arrays(cls, *arrays: _A | complex | None) -> Backend[_A]: ...
    @classmethod
    def from_arrays(cls, *arrays: Any) -> Backend[Any]:
        """The backend (library and device) that ``arrays`` live on.

        Python scalars and None are skipped; with no arrays left, NumPy.
        Type checkers infer the array type from the arguments:
        ``Backend.from_arrays(t)`` with a ``torch.Tensor`` ``t`` is a
        ``Backend[torch.Tensor]``.

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
            if found_at < 0:
                cached = cls(key_of(found))
            else:
                # The device an array lives on exists: it is not looked up in
                # the library's device list, which torch.compile cannot trace
                # (torch asks whether MPS is available).
                found.require()
                cached = cls.__new__(cls)
                cached._setup(
                    found, found.device_str(found.device_of(arrays[found_at]))
                )
            _FROM_ARRAYS[cache_key] = cached
        return cached

    # -- creation and conversion ----------------------------------------------
    def asarray(self, x: Any, dtype: Any = None, device: Any = None) -> ArrayT:
        """Convert input to a backend array.

        Handles arrays of any supported library, lists and scalars. Places the
        result on the backend's device (or an explicit ``device``).

        Parameters
        ----------
        x : array_like
            Input data (array of any supported library, nested list, scalar).
            Any NumPy layout (reversed views, either byte order) is taken.
        dtype : str or dtype, optional
            Desired dtype as a string or any library's dtype; if None, inferred
            from the input (NumPy's rules: Python floats become float64).
        device : str or device, optional
            Target device; if None, the backend's device.

        Returns
        -------
        array
            An array of this backend's library. On devices without float64
            (MPS), float64 becomes float32 with one `PrecisionWarning`.

        Raises
        ------
        TypeError
            The device cannot hold the dtype (asked for, or the input's own:
            every dtype the library itself holds there passes, float16 and
            bfloat16 included); non-numeric data; a NumPy masked array (its
            mask would be lost).
        ValueError
            The cast to ``dtype`` would change a value of ``x`` (300 to uint8,
            NaN or 0.5 to an integer dtype, a non-zero imaginary part to a
            real one, a finite value to inf). Lazy (Dask) and traced (JAX
            under ``jit``) arrays of this library are cast unchecked.
        """
        if dtype is None and device is None and self._is_own(x):
            same: ArrayT = x  # already here, in a dtype the device has: a no-op
            return same
        dev_str, native = self._target(device)
        return self._convert(x, "x", dtype, dev_str, native)

    def asarray_like(self, x: Any, ref: Any) -> ArrayT:
        """Convert ``x`` to an array matching ``ref``'s dtype and device.

        Raises ValueError, as `asarray`, when the cast would change a value.
        """
        target, xp_dtype, native = self._ref(ref, None, None, "ref")
        x = self._traced(x)
        if self._adapter.owns(x):
            self._refuse_lossy(self._adapter, x, "x")
            x = self._castable(x, self._own_dtype(x, "x"), target, "x", host=False)
            return self.xp.asarray(x, dtype=xp_dtype, device=native)
        host = self._host(x, "x")
        host = self._castable(host, host_dtype_name(host), target, "x", host=True)
        return cast("ArrayT", self._adapter.from_host(self.xp, host, xp_dtype, native))

    def copy(self, array: Any) -> ArrayT:
        """Return an independent copy of the array.

        An array of this library is copied where it lives, in its dtype;
        anything else (another library's array, host data) is converted as
        by `asarray`, onto this backend's device.

        Raises
        ------
        TypeError
            ``array`` is not numeric data (a string, None), a NumPy masked
            array, or of a dtype its device cannot hold.
        """
        if self._is_own_like(array):
            return self.xp.asarray(array, copy=True)
        if self._adapter.owns(array):
            self._refuse_lossy(self._adapter, array, "array")
            own = self._own_dtype(array, "array")
            dev = self._adapter.device_str(self._adapter.device_of(array))
            self._dtype_pair(own, dev, f"array has dtype {own}")
            return self.xp.asarray(array, copy=True)
        host = self._host(array, "array")
        own = host_dtype_name(host)
        _, xp_dtype = self._dtype_pair(own, None, f"array has dtype {own}")
        if not host.flags.owndata or host.base is not None or host is array:
            host = host.copy()  # the result must not share memory with the input
        return cast(
            "ArrayT", self._adapter.from_host(self.xp, host, xp_dtype, self._native)
        )

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

    def full(self, shape: Any, fill_value: Any, dtype: Any = None) -> ArrayT:
        """Create an array filled with ``fill_value``.

        With ``dtype=None`` the dtype follows NumPy's rules for the fill value
        (float → float64 where the device has it, int → int64, bool → bool).

        Raises
        ------
        ValueError
            ``fill_value`` does not fit the dtype (out of an integer dtype's
            range, not whole, not finite, overflowing to inf), or, with
            ``dtype=None``, fits no dtype at all (``2**64``).
        TypeError
            The device cannot hold ``dtype``; ``fill_value`` is not a scalar.
        """
        shape = check_shape(shape)
        check_scalar(fill_value)
        name: str | None
        if dtype is None:
            name = fill_dtype_name(fill_value)
            source = f"the dtype of fill_value={fill_value!r}"
        else:
            name, source = dtype_name(dtype), f"dtype={dtype!r}"
        assert name is not None
        target, xp_dtype = self._dtype_pair(name, None, source)
        check_fill_fits(fill_value, target)
        return self.xp.full(shape, fill_value, dtype=xp_dtype, device=self._native)

    def full_like(
        self,
        array: Any,
        fill_value: Any,
        shape: Any = None,
        dtype: Any = None,
        device: Any = None,
    ) -> ArrayT:
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
    ) -> ArrayT:
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
    ) -> ArrayT:
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

    # -- transfers -----------------------------------------------------------
    def to_cpu(self, array: _A) -> _A | NumpyArray:
        """Transfer an array to its library's CPU device. No-op for NumPy.

        CuPy has no CPU device: its arrays come back as NumPy arrays (so the
        type is the input's or NumPy's); host data comes back as NumPy.
        """
        adapter = adapter_for_array(array)
        if adapter is None:
            return self._host(array, "array")
        on_cpu: _A | NumpyArray = adapter.to_cpu(array)
        return on_cpu

    def to_device(self, arr: Any) -> ArrayT:
        """Transfer an array (NumPy or any supported library) to the backend's device."""
        if self._is_own(arr):
            same: ArrayT = arr
            return same
        return self._convert(arr, "arr", None, None, self._native)

    def to_gpu(self, array: Any, device: Any = None) -> ArrayT:
        """Transfer an array to the GPU, by default the backend's device.

        A no-op where the backend's device is the CPU; an explicit ``device``
        that does not exist raises `ValueError`.
        """
        if device is None and self._is_own(array):
            same: ArrayT = array
            return same
        dev_str, native = self._target(device)
        return self._convert(array, "array", None, dev_str, native)

    def to_numpy(self, arr: Any) -> np.ndarray[Any, Any]:
        """Convert an array of any supported library to a NumPy array.

        Zero-copy where the library allows it (NumPy, CPU torch tensors, CPU
        array-api-strict and JAX arrays); device arrays are copied to the host.
        """
        adapter = adapter_for_array(arr)
        if adapter is not None:
            self._refuse_lossy(adapter, arr, "arr")
            return adapter.to_numpy(arr)
        return self._host(arr, "arr")


def _restore(key: str, device: str) -> Backend[Any]:
    """Unpickle: the same library and device, or a Backend that refuses to run."""
    try:
        return Backend(cast("BackendName", key), device=device)
    except (ImportError, ValueError, RuntimeError) as exc:
        adapter = ADAPTERS[key]
        reason = (
            f"this Backend was pickled on a host with {adapter.label} device "
            f"{device!r}, which this host does not have ({exc})"
        )
        unavailable = Unavailable(reason)
        refuse = unavailable.refuse
        b: Backend[Any] = Backend.__new__(Backend)
        b._bind(
            adapter,
            device,
            unavailable,
            unavailable,
            FastOps(*[refuse] * len(FastOps._fields)),
            DTYPE_NAMES,
            DTYPE_NAMES,
        )
        b._is_own = b._is_own_like = _never  # every call takes the refusing path
        return b


def _never(x: Any) -> bool:  # noqa: ARG001
    return False


def _device_object_str(adapter: Adapter, device: Any) -> str:
    """The device string of a library device object (``torch.device("cpu", 0)``)."""
    try:
        return adapter.validate_device(adapter.device_str(device))
    except (AttributeError, TypeError, ValueError):
        msg = (
            f"device must be a string or None, got {device!r}, which is not a "
            f"{adapter.label} device on this machine"
        )
        raise TypeError(msg) from None
