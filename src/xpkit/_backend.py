"""`Backend`: a typed facade over one library's Array-API namespace on one device.

One class, no base of xpkit's. Its construction binds the library's facts
once (`Facts`: adapter, namespace, native device, dtypes, fast functions);
each method is its fast path, and hands the rest to the module of its
concern, a plain function of those facts:

- `_convert`: conversion in and out (``asarray``, ``asarray_like``,
  ``copy``, ``to_device``, ``to_gpu``, ``to_numpy``, ``to_cpu``);
- `_creation`: creation on the device (``create``, ``full``, ``*_like``);
- `_moves`: moves between libraries (``move``);
- `_operations`: operations (``at``, ``concatenate``, ``expand_dims``,
  ``flatnonzero``, ``matmul``, ``sort``, ``svd``);
- `_inputs`: the inputs check (``check_arrays``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar, cast, overload

from . import _convert, _creation, _inputs, _moves, _operations, _top_k
from ._adapters._registry import ADAPTERS
from ._args import check_axis, check_scalar, raise_if_axis_out_of_range
from ._at import At
from ._cast_checks import check_fill_fits
from ._dtypes import dtype_name
from ._facts import ArrayT, Facts, bind, unavailable
from ._resolve import (
    BACKEND_NAMES,
    adapter_for_name,
    device_object_str,
    key_of,
    locate_arrays,
    specified_backend,
)

if TYPE_CHECKING:
    from ._adapters._base import Adapter
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
    from ._creation import Creation
    from ._inputs import HostData
    from ._namespace import Namespace
    from ._typing import Array, Device, DType, HostArray, NativeDevice, Value

__all__ = ["BACKEND_NAMES", "Backend", "coerce_backend"]

#: Another array type, for methods that take any library's arrays.
_A = TypeVar("_A")


# (adapter, device key, config token) -> Backend: `from_arrays` resolves each
# kind of array once.
_FROM_ARRAYS: dict[tuple[Adapter, object, object], Backend[Array]] = {}


class Backend(Generic[ArrayT]):
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
        "_concat",
        "_expand_dims",
        "_facts",
        "_full_like",
        "_is_own",
        "_is_own_like",
        "_matmul",
        "_ones_like",
        "_plain",
        "_sort",
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
    # What the methods read on every call, copied out of `_facts` once.
    _facts: Facts[ArrayT]
    _adapter: Adapter
    _is_own: Callable[[object], bool]
    _is_own_like: Callable[[object], bool]
    _plain: type | None
    _bad_args: tuple[type[Exception], ...]
    _matmul: Callable[[ArrayT, ArrayT], ArrayT]
    _sort: Callable[..., ArrayT]
    _expand_dims: Callable[..., ArrayT]
    _concat: Callable[..., ArrayT]
    _zeros_like: Callable[[ArrayT], ArrayT]
    _ones_like: Callable[[ArrayT], ArrayT]
    _full_like: Callable[[ArrayT, Value], ArrayT]

    # The array type follows the name (the aliases are the type checker's
    # only: each library is imported under TYPE_CHECKING, in _adapters/_types).
    @overload
    def __init__(
        self: Backend[NumpyArray],
        backend: NumpyName = "numpy",
        *,
        device: Device = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[TorchArray], backend: TorchName, *, device: Device = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[StrictArray],
        backend: StrictName,
        *,
        device: Device = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[CupyArray], backend: CupyName, *, device: Device = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[JaxArray], backend: JaxName, *, device: Device = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[DaskArray], backend: DaskName, *, device: Device = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[NdonnxArray], backend: NdonnxName, *, device: Device = None
    ) -> None: ...
    @overload
    def __init__(
        self: Backend[Array], backend: AutoName, *, device: Device = None
    ) -> None: ...
    def __init__(
        self, backend: BackendName = "numpy", *, device: Device = None
    ) -> None:
        adapter = adapter_for_name(backend)
        if device is not None and not isinstance(device, str):
            if isinstance(device, (bool, int, float, complex, bytes)):
                msg = f"device must be a string or None, got {device!r}"
                raise TypeError(msg)
            adapter.require()
            device = device_object_str(adapter, device)
        adapter.require()
        dev = (
            adapter.default_device()
            if device is None
            else adapter.validate_device(device)
        )
        self._bind(bind(adapter, dev))

    def _bind(self, facts: Facts[ArrayT]) -> None:
        """Bind this Backend to ``facts``: one library on one device."""
        self._facts = facts
        self._adapter = facts.adapter
        self._is_own = facts.is_own
        self._is_own_like = facts.is_own_like
        self._plain = facts.plain
        self._bad_args = facts.bad_args
        ops = facts.ops
        self._matmul = ops.matmul
        self._sort = ops.sort
        self._expand_dims = ops.expand_dims
        self._concat = ops.concat
        self._zeros_like = ops.zeros_like
        self._ones_like = ops.ones_like
        self._full_like = ops.full_like
        self.name = facts.name
        self.device = facts.device
        self.xp = facts.xp  # the library's namespace, which Namespace describes
        self.is_gpu = facts.adapter.is_gpu(facts.device)
        self.create = _creation.creation_for(facts)

    @classmethod
    def _of(cls, facts: Facts[ArrayT]) -> Backend[ArrayT]:
        """A Backend bound to ``facts`` (no name or device to look up)."""
        b = cls.__new__(cls)
        b._bind(facts)
        return b

    def require_usable(self) -> None:
        """Raise `RuntimeError` when this Backend's device is not on this host.

        Only a Backend unpickled on a host without its device is unusable;
        every method raises then, and this says so up front.
        """
        if self._facts.unusable is not None:
            raise RuntimeError(self._facts.unusable)

    # -- identity --------------------------------------------------------
    @property
    def native_device(self) -> NativeDevice:
        """The library's own device object (``torch.device``, a JAX ``Device``, …).

        What the library's creation functions take: ``b.xp.zeros(3,
        device=b.native_device)`` lands on this backend's device.
        """
        return self._facts.native

    @property
    def dtypes(self) -> frozenset[str]:
        """Names of the dtypes arrays can have on this backend's device.

        Under the library's settings in force now (JAX's x64).
        """
        return self._facts.dtypes_now()

    @property
    def capabilities(self) -> frozenset[str]:
        """What the library has of ``"linalg"`` and ``"data_dependent_shapes"``.

        Under its settings in force now (array-api-strict's flags switch both
        off).
        """
        return self._adapter.capabilities_now()

    @property
    def has_float64(self) -> bool:
        """Whether float64 (and complex128) arrays can live on this device (now)."""
        return "float64" in self._facts.dtypes_now()

    @property
    def library(self) -> str:
        """The library's key (``"numpy"``, ``"torch"``, ...)."""
        return self._adapter.key

    @property
    def _held(self) -> frozenset[str]:
        """Every dtype name an array can have on this device (`dtypes` and more)."""
        return self._facts.held

    def _xp_dtype(self, name: str, device: str | None = None) -> DType:
        """The dtype object ``name`` becomes on ``device`` (None: this backend's)."""
        return self._facts.dtype_pair(name, device)[1]

    def __repr__(self) -> str:
        return f"Backend({self._adapter.key!r}, device={self.device!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Backend):
            return NotImplemented
        return (
            self._adapter is other._adapter and self._facts.canon == other._facts.canon
        )

    def __hash__(self) -> int:
        return hash((self._adapter.key, self._facts.canon))

    def __reduce__(
        self,
    ) -> tuple[Callable[[str, str], Backend[Array]], tuple[str, str]]:
        return (_restore, (self._adapter.key, self.device))

    def __deepcopy__(self, memo: dict[int, object]) -> Backend[ArrayT]:
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
    def from_arrays(cls, *arrays: Value) -> Backend[Array]:
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
                device = found.device_str(found.device_of(arrays[found_at]))
                cached = cls._of(bind(found, device))
            _FROM_ARRAYS[cache_key] = cached
        return cached

    # -- creation and conversion ----------------------------------------------
    def asarray(self, x: Value, dtype: DType = None, device: Device = None) -> ArrayT:
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
            An array of this backend's library. ``x`` itself when it is one
            already, on this device, in the dtype asked for (as the
            standard's ``asarray`` with ``copy=None``; `copy` makes an
            independent one). On devices without float64 (MPS), float64
            becomes float32 with one `PrecisionWarning`. Another library's
            bfloat16, float8 or complex32 array, where this device lacks
            its dtype, comes as its host copy does: float32 (complex64),
            every value kept (`move` refuses it instead).

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
        if (
            device is None
            and self._is_own(x)
            and (dtype is None or _convert.keeps_dtype(x, dtype))
        ):
            same: ArrayT = x  # already here, in a dtype the device has: a no-op
            return same
        return _convert.asarray(self._facts, x, dtype, device, "x")

    def asarray_like(self, x: Value, ref: Value) -> ArrayT:
        """Convert ``x`` to an array matching ``ref``'s dtype and device.

        Raises ValueError, as `asarray`, when the cast would change a value.
        """
        return _convert.asarray_like(self._facts, x, ref)

    def copy(self, array: Value) -> ArrayT:
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
        return _convert.copy(self._facts, array)

    @staticmethod
    def dtype_to_str(dtype: DType) -> str | None:
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

    def full(self, shape: Value, fill_value: Value, dtype: DType = None) -> ArrayT:
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
        return _creation.full(self._facts, shape, fill_value, dtype)

    def full_like(
        self,
        array: Value,
        fill_value: Value,
        shape: Value = None,
        dtype: DType = None,
        device: Device = None,
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
        # (all three None: the library's own *_like, without a check)
        if shape is dtype is device is None and self._is_own_like(array):
            narrowing = self._facts.adapter.float64_narrowing(on_host=True)
            check_fill_fits(fill_value, array.dtype, narrowing)
            number = _creation.python_number(fill_value, array.dtype)
            return self._full_like(array, number)
        return _creation.full_like(self._facts, array, fill_value, shape, dtype, device)

    def ones_like(
        self,
        array: Value,
        shape: Value = None,
        dtype: DType = None,
        device: Device = None,
    ) -> ArrayT:
        """Create a ones array like ``array``, optionally of another shape."""
        # (all three None: the library's own *_like, without a check)
        if shape is dtype is device is None and self._is_own_like(array):
            return self._ones_like(array)
        return _creation.ones_like(self._facts, array, shape, dtype, device)

    def zeros_like(
        self,
        array: Value,
        shape: Value = None,
        dtype: DType = None,
        device: Device = None,
    ) -> ArrayT:
        """Create a zeros array like ``array``, optionally of another shape."""
        # (all three None: the library's own *_like, without a check)
        if shape is dtype is device is None and self._is_own_like(array):
            return self._zeros_like(array)
        return _creation.zeros_like(self._facts, array, shape, dtype, device)

    # -- transfers -----------------------------------------------------------
    def to_cpu(self, array: _A) -> _A | NumpyArray:
        """Transfer an array to its library's CPU device. No-op for NumPy.

        CuPy has no CPU device: its arrays come back as NumPy arrays (so the
        type is the input's or NumPy's); host data comes back as NumPy.
        """
        on_cpu: _A | NumpyArray = _convert.to_cpu(array)
        return on_cpu

    def to_device(self, arr: Value) -> ArrayT:
        """Transfer an array (NumPy or any supported library) to the backend's device."""
        if self._is_own(arr):
            same: ArrayT = arr
            return same
        return _convert.asarray(self._facts, arr, None, None, "arr")

    def to_gpu(self, array: Value, device: Device = None) -> ArrayT:
        """Transfer an array to the GPU, by default the backend's device.

        A no-op where the backend's device is the CPU; an explicit ``device``
        that does not exist raises `ValueError`.
        """
        if device is None and self._is_own(array):
            same: ArrayT = array
            return same
        return _convert.asarray(self._facts, array, None, device, "array")

    def to_numpy(self, arr: Value) -> HostArray:
        """Convert an array of any supported library to a NumPy array.

        Zero-copy where the library allows it (NumPy, CPU torch tensors, CPU
        array-api-strict and JAX arrays); device arrays are copied to the host.
        """
        return _convert.to_numpy(arr, "arr")

    def move(self, x: Value, *, copy: bool | None = None) -> ArrayT:
        """``x``, an array of any supported library, as an array of this backend.

        On the backend's device, with ``x``'s dtype (narrowed as `asarray`
        narrows where the device lacks it). The values travel by DLPack
        where both libraries speak it (zero-copy between NumPy, torch CPU,
        array-api-strict and JAX on the CPU; between torch CUDA, CuPy and
        JAX on one GPU), else through a host (NumPy) copy.

        Parameters
        ----------
        x : array
            An array of any supported library (NumPy included), on any
            device.
        copy : bool or None, default None
            None: copy only where needed. True: always return new memory.
            False: never copy; a `ValueError` where the array cannot arrive
            without one (another device, a library without DLPack).

        Returns
        -------
        array
            An array of this backend's library on its device.

        Raises
        ------
        TypeError
            ``x`` is not an array of a supported library (use `asarray` for
            lists and scalars), or its dtype is one the device cannot hold;
            ``copy`` is not a bool or None.
        ValueError
            ``copy=False`` and no zero-copy path exists.
        """
        return _moves.move(self._facts, x, copy)

    # -- the inputs check ----------------------------------------------------
    @overload
    def check_arrays(
        self, *inputs: ArrayT | HostData, convert: bool = False
    ) -> list[ArrayT]: ...
    @overload
    def check_arrays(
        self, *inputs: ArrayT | HostData | None, convert: bool = False
    ) -> list[ArrayT | None]: ...
    @overload
    def check_arrays(
        self, *inputs: Value, convert: bool = False
    ) -> list[ArrayT | list[ArrayT] | None]: ...
    def check_arrays(self, *inputs: Value, convert: bool = False) -> list[Array]:
        """Coerce all inputs to the same dtype (and device) as the first.

        None values are passed through. Lists of arrays are converted
        element-wise. Host data (NumPy arrays, lists, scalars) is moved to the
        first array's device; arrays of this backend's library on another
        device raise `ValueError`, arrays of another library `TypeError`.
        A cast that would change a value (a float ``y`` of 0.5 to an integer
        first input's dtype) raises `ValueError` naming the input; rounding
        to the nearest float is not such a change (an int64 ``2**53 + 1``
        into float64 is ``2**53``, as float64 into float32 rounds). A lazy
        Dask array's values are not at hand: its casts are unchecked, as
        `asarray`'s (reading them would compute the graph).

        Parameters
        ----------
        *inputs : array, list, scalar or None
            The arrays to coerce; the first array sets dtype and device.
        convert : bool, default False
            Follow the first array: arrays of other libraries, and of this
            one on other devices, are moved there (as `move` moves them:
            DLPack first) instead of refused. Off by default, so that mixed
            inputs never convert silently.

        Returns
        -------
        list
            Converted arrays in the same order as inputs. Type checkers see
            ``list[ArrayT]`` when every input is an array of this backend or
            host data, ``list[ArrayT | None]`` when some may be None, and
            ``list[ArrayT | list[ArrayT] | None]`` otherwise (lists of arrays,
            other libraries' arrays).

        Examples
        --------
        >>> import numpy as np
        >>> import xpkit
        >>> b = xpkit.Backend("numpy")
        >>> X, y = b.check_arrays(np.ones((2, 2), dtype=np.float32), [1, 2])
        >>> y.dtype
        dtype('float32')
        """
        return _inputs.check_inputs(self._facts, inputs, convert)

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
            arrays, axis = _operations.concat_args(arrays, axis)
        plain = self._plain
        if plain is not None:
            for a in arrays:
                if type(a) is not plain:
                    _operations.check_operands(self._facts, arrays)
                    break
        try:
            return self._concat(arrays, axis=axis)
        except self._bad_args as exc:
            _operations.explain_concat(self._facts, arrays, axis, exc)
            raise

    def expand_dims(self, array: ArrayT, axis: int) -> ArrayT:
        """Insert a new axis at position ``axis``."""
        if type(axis) is not int:
            axis = check_axis(axis)
        plain = self._plain
        if plain is not None and type(array) is not plain:
            _operations.check_operand(self._facts, array, "array")
        try:
            return self._expand_dims(array, axis=axis)
        except self._bad_args:
            _operations.explain_expand_dims(self._facts, array, axis)
            raise

    def flatnonzero(self, array: ArrayT) -> ArrayT:
        """Indices of the non-zero elements of the flattened array."""
        if not self._is_own_like(array):
            _operations.check_operand(self._facts, array, "array")
        return _operations.flatnonzero(self._facts, array)

    def at(self, x: ArrayT, idx: Value = slice(None)) -> At[ArrayT]:
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
            What ``x[idx]`` would select (integers, slices, ``...``, a
            boolean mask, or a tuple of them; fewer than ``x``'s axes leave
            the rest whole, as in NumPy, on every library). An integer out of
            range for its axis is an `IndexError` on every library (JAX and
            ndonnx would drop the update silently), checked where ``x``'s
            shape is known: always but for Dask's unknown chunk sizes,
            inside ``jax.jit`` too. An integer array's values are checked
            where they are at hand; traced or lazy ones (inside
            ``jax.jit``, Dask) cannot be, and there JAX and Dask drop the updates
            out of range. A slice may step back (``x[::-1]``) on every
            library: torch's slices take no negative step, so the forward
            slice of the same elements is updated, with an array value
            reversed to match (Dask's own update of an empty slice by an
            array fails; a list in ``idx`` is the library's to judge). An
            integer beside an integer array places its axes as NumPy
            does (torch's and Dask's were placed as basic indices: where
            they are apart, Dask, which takes one array, refuses it). Where an integer array holds one position
            twice, the libraries differ, as array-api-extra says: ``add``
            applies the value once on NumPy, torch and Dask, and once per
            occurrence on JAX.

        Returns
        -------
        At
            Its methods (``set``, ``add``, ...) return the updated array.

        Raises
        ------
        TypeError
            ``x`` is not an array of this backend's library; a part of
            ``idx`` is a bool or a float (NumPy would read a bool as a new
            axis, ndonnx as 0 or 1) or None (an update takes no new axis); ``x``, ``idx`` or the methods' value
            is a NumPy masked array (its mask would be ignored) or ``x`` a
            NumPy matrix; ``divide`` of an integer or bool ``x`` (a
            quotient is a float).
        IndexError
            An integer in ``idx`` is out of range for its axis (the message
            gives the index, the axis and its size), ``idx`` indexes more
            axes than ``x`` has, or holds two ``...``. (An integer array of
            a narrow dtype, uint8 say, holds positions on every library:
            torch read uint8 as a mask.)
        ValueError
            From the methods: a number that would change in ``x``'s dtype
            (300 into uint8, 0.5 or NaN into an integer dtype, an imaginary
            part into a real one, a value that overflows a float or a
            complex part to inf or underflows to 0, as the fills refuse);
            a negative ``power`` of an integer ``x``. A number that fits
            arrives as ``x``'s kind (2.0 into an integer array as 2) on
            every library. An array value is the library's to cast.
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
        return At(self, x, idx)

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
            _operations.check_operand(self._facts, A, "A")
            _operations.check_operand(self._facts, B, "B")
        try:
            return self._matmul(A, B)
        except self._bad_args as exc:
            _operations.explain_matmul(self._facts, A, B, exc)
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
            _operations.check_operand(self._facts, array, "array")
        _operations.check_sortable(self._facts, array)
        if axis != -1:  # lazy libraries (Dask) would not notice a bad axis here
            raise_if_axis_out_of_range(array, axis)
        try:
            return self._sort(array, axis=axis)
        except self._bad_args as exc:
            _operations.explain_sort(self._facts, array, axis, exc)
            raise

    def top_k(
        self, x: ArrayT, k: int, /, *, axis: int = -1, mode: str = "largest"
    ) -> tuple[ArrayT, ArrayT]:
        """The ``k`` largest (or smallest) values along ``axis``, and their indices.

        The standard's ``top_k`` (data-apis/array-api#722), on every backend
        through its library's fastest path: ``torch.topk``,
        ``jax.lax.top_k``, NumPy's ``top_k`` (else, along long contiguous
        rows, the few elements past a threshold that a sample of each row
        sets, sorted; or ``argpartition`` and a sort of the k),
        ``dask.array.argtopk``, and a stable sort elsewhere.

        Parameters
        ----------
        x : array
            An array of this backend's library, of one of the standard's
            integer or real floating dtypes (float32 and float64: not
            float16 or bfloat16, which the standard does not have).
        k : int
            How many values, ``0 <= k <= x.shape[axis]``.
        axis : int, default -1
            The axis to search along.
        mode : {"largest", "smallest"}, default "largest"
            The largest values, in descending order, or the smallest, in
            ascending order.

        Returns
        -------
        tuple
            ``(values, indices)``, each of ``x``'s shape with ``k`` along
            ``axis``: the values, sorted, and where they are in ``x``
            (``take_along_axis(x, indices, axis) == values``), of the
            namespace's default index dtype, as ``argsort``'s. Among equal
            values, which indices come, and in which order, is the
            library's; the values are the same on every backend, compared
            by ``==``: 0.0 and -0.0 are equal, and which of the two a
            backend gives where both are in ``x`` is the library's too.
            NaN counts as the largest value on NumPy, torch, JAX and Dask.

        Raises
        ------
        TypeError
            ``x`` is not an array of this library or has a boolean,
            complex, float16 or bfloat16 dtype; ``k`` or ``axis`` is not an
            int.
        ValueError
            ``k`` is negative or more than ``x.shape[axis]``; ``axis`` is out
            of range; ``mode`` is neither ``"largest"`` nor ``"smallest"``.

        Examples
        --------
        >>> import xpkit
        >>> b = xpkit.Backend("numpy")
        >>> values, indices = b.top_k(b.asarray([3, 1, 4, 1, 5]), 2)
        >>> values.tolist(), indices.tolist()
        ([5, 4], [4, 2])
        """
        _operations.check_operand(self._facts, x, "x")
        return _top_k.top_k(self._facts, x, k, axis, mode)

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
            `Backend.capabilities`), or its ``svd`` lacks what is asked:
            Dask's takes a matrix chunked along one axis, reduced
            (``full_matrices=False``), not a stack.
        """
        return _operations.svd(self._facts, X, full_matrices)


def _restore(key: str, device: str) -> Backend[Array]:
    """Unpickle: the same library and device, or a Backend that refuses to run."""
    try:
        return Backend(cast("BackendName", key), device=device)
    except (ImportError, ValueError, RuntimeError) as exc:
        adapter = ADAPTERS[key]
        reason = (
            f"this Backend was pickled on a host with {adapter.label} device "
            f"{device!r}, which this host does not have ({exc})"
        )
        return Backend._of(unavailable(adapter, device, reason))


def coerce_backend(parallel: Value, param: str) -> Backend:
    """`resolve_backend`, with errors naming the caller's parameter ``param``."""
    if isinstance(parallel, Backend):
        return parallel
    key, device = specified_backend(parallel, param)
    return Backend(key, device=device)
