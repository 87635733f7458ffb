"""The conversions every `Backend` method shares: targets, dtypes, host data.

`Conversions` is `Backend`'s base: it knows how to turn an argument (an
array of any library, a list, a scalar) into the backend's library on a
device in a dtype, refusing what would change values or lose information.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, cast

import numpy as np
from array_api_compat import numpy as _np_xp

from ._adapters import Adapter, adapter_for_array
from ._args import (
    check_cast_keeps_values,
    check_shape,
    host_dtype_name,
    shape_of,
)
from ._dtypes import DTYPE_KINDS, DTYPE_NAMES, dtype_name, narrow_for_device

if TYPE_CHECKING:
    from ._namespace import Namespace

__all__ = ["ArrayT", "Conversions"]

#: The array type of a `Backend`'s library (``torch.Tensor`` for
#: ``Backend("torch")``): what its methods return and its operations take.
#: For type checkers its default is ``Any`` (PEP 696), so a bare ``Backend``
#: annotation means ``Backend[Any]``; Python 3.11's TypeVar has no default.
if TYPE_CHECKING:
    from typing_extensions import TypeVar

    ArrayT = TypeVar("ArrayT", default=Any)
else:
    from typing import TypeVar

    ArrayT = TypeVar("ArrayT")

_COMPLEX = frozenset(DTYPE_KINDS["complex floating"])


class Conversions(Generic[ArrayT]):
    """How `Backend` reads its arguments (its attributes are set by `Backend`)."""

    __slots__ = ()

    _adapter: Adapter
    _bad_args: Any
    _canon: str
    _concat: Callable[..., ArrayT]
    _dtypes: frozenset[str]
    _expand_dims: Callable[..., ArrayT]
    _f64: bool
    _full_like: Callable[..., ArrayT]
    _held: Any
    _is_own: Callable[[Any], bool]
    _is_own_like: Callable[[Any], bool]
    _matmul: Callable[[Any, Any], ArrayT]
    _native: Any
    _ones_like: Callable[..., ArrayT]
    _plain: Any
    _sort: Callable[..., ArrayT]
    _unusable: str | None
    _zeros_like: Callable[..., ArrayT]
    device: str
    is_gpu: bool
    name: str
    xp: Namespace[ArrayT]

    # -- helpers -----------------------------------------------------------
    def _xp_dtype(self, name: str, device: str | None = None) -> Any:
        return self._dtype_pair(name, device)[1]

    def _dtype_pair(
        self, name: str, device: str | None = None, source: str | None = None
    ) -> tuple[str, Any]:
        """(name, dtype object) of ``name`` on ``device``, or a TypeError.

        Narrowed where the device lacks 64 bits; a TypeError when the device
        cannot hold it. ``source`` says where the dtype came from, for the
        message: the ``dtype`` argument or the input's own dtype.
        """
        held = self._held if device is None else self._adapter.held_dtypes(device)
        if name in held:
            return name, self._adapter.dtype_object(self.xp, name)
        where = self._adapter.variant_name(device or self.device)
        chosen = narrow_for_device(name, held, where)
        if chosen not in held:
            origin = f" ({source})" if source else ""
            backend = self._adapter.backend_name(device or self.device)
            msg = (
                f"dtype {name!r} is not supported by {backend} on device "
                f"{device or self.device!r}{origin}; supported: "
                f"{', '.join(sorted(held))}"
            )
            raise TypeError(msg)
        return chosen, self._adapter.dtype_object(self.xp, chosen)

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

    def _refuse_lossy(self, adapter: Adapter, x: Any, param: str) -> None:
        """TypeError when converting ``x`` would drop information (a mask)."""
        reason = adapter.lost_in_conversion(x)
        if reason is not None:
            msg = f"{param} is {reason}"
            raise TypeError(msg)

    def _traced(self, x: Any) -> Any:
        """``x``, or, while the library compiles the caller, host data as its array.

        Inside ``torch.compile`` a NumPy array's attributes cannot be read;
        the adapter converts it (`Adapter.traced_host_array`) and the
        caller goes on as with an array of this library.
        """
        traced = self._adapter.traced_host_array(x)
        return x if traced is None else traced

    def _host(self, x: Any, param: str) -> np.ndarray[Any, Any]:
        """Foreign data (other libraries, lists, scalars) as a numeric host array."""
        adapter = adapter_for_array(x)
        if adapter is not None:
            self._refuse_lossy(adapter, x, param)
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

    def _own_dtype(self, x: Any, param: str) -> str:
        """The dtype name of an array of this backend's library."""
        try:
            name = dtype_name(x.dtype)
        except TypeError:
            msg = (
                f"{param} has dtype {x.dtype}, which is not a numeric or boolean "
                f"dtype of the standard ({', '.join(sorted(DTYPE_NAMES))})"
            )
            raise TypeError(msg) from None
        assert name is not None
        return name

    def _castable(
        self, x: Any, source: str, target: str, param: str, *, host: bool
    ) -> Any:
        """``x``, ready to cast to ``target``: a ValueError if a value would change.

        ``x`` is a host (NumPy) array with ``host``, else an array of this
        library, checked where it lives unless its values are not at hand.
        A complex ``x`` bound for a real dtype comes back as its real part
        (its imaginary parts are zero), which libraries cast without warning.
        """
        if source == target:
            return x
        if host:
            check_cast_keeps_values(_np_xp, x, source, target, param, np.asarray)
        elif self._adapter.values_at_hand(x):
            check_cast_keeps_values(
                self.xp, x, source, target, param, self._adapter.to_numpy
            )
        if source in _COMPLEX and target not in _COMPLEX:
            return x.real if host else self.xp.real(x)
        return x

    def _convert(
        self,
        x: Any,
        param: str,
        dtype: Any,
        dev_str: str | None,
        native: Any,
    ) -> ArrayT:
        """``x`` (any array, list or scalar) as an array of this backend.

        The slow path of `asarray` and `copy`: the dtype is ``dtype`` (None:
        the input's own), refused when the device cannot hold it and when
        the cast would change a value.
        """
        name = dtype_name(dtype)
        source = None if dtype is None else f"dtype={dtype!r}"
        x = self._traced(x)
        if self._adapter.owns(x):
            self._refuse_lossy(self._adapter, x, param)
            own = self._own_dtype(x, param)
            target, xp_dtype = self._dtype_pair(
                name or own, dev_str, source or f"{param} has dtype {own}"
            )
            x = self._castable(x, own, target, param, host=False)
            return self.xp.asarray(x, dtype=xp_dtype, device=native)
        host = self._host(x, param)
        own = host_dtype_name(host)
        target, xp_dtype = self._dtype_pair(
            name or own, dev_str, source or f"{param} has dtype {own}"
        )
        host = self._castable(host, own, target, param, host=True)
        return cast("ArrayT", self._adapter.from_host(self.xp, host, xp_dtype, native))

    def _ref(
        self, array: Any, dtype: Any, device: Any, param: str = "array"
    ) -> tuple[str, Any, Any]:
        """Dtype name and object, and native device, of a ``*_like`` call.

        ``param`` names ``array`` in messages.
        """
        array = self._traced(array)
        if self._adapter.owns(array):
            ref_name = self._own_dtype(array, param)
            dev_str, native = self._target(device)
            if device is None:
                native = self._adapter.device_of(array)
                dev_str = self._adapter.device_str(native)
        else:
            ref_name = host_dtype_name(self._host(array, param))
            dev_str, native = self._target(device)
        name: str | None = ref_name
        source = f"{param} has dtype {ref_name}"
        if dtype is not None:
            name, source = dtype_name(dtype), f"dtype={dtype!r}"
        assert name is not None
        target, xp_dtype = self._dtype_pair(name, dev_str, source)
        return target, xp_dtype, native

    def _like_args(
        self, array: Any, shape: Any, dtype: Any, device: Any
    ) -> tuple[tuple[int, ...], Any, Any]:
        """Shape, dtype and native device of a ``*_like`` call's slow path."""
        _, xp_dtype, native = self._ref(array, dtype, device)
        out_shape = shape_of(array) if shape is None else check_shape(shape)
        return out_shape, xp_dtype, native

    def _check_operand(self, x: Any, param: str) -> None:
        """TypeError unless ``x`` is an array of this backend's library.

        Operations take arrays, not host data: arrays of another library
        are refused (as `from_arrays` refuses mixing), and lists or scalars
        too, on every backend alike.
        """
        if self._adapter.owns(x):
            return
        adapter = adapter_for_array(x)
        if adapter is not None:
            msg = (
                f"{param} is an array of {adapter.label} but this backend is "
                f"{self.name!r}: libraries do not mix; convert it with "
                "Backend.asarray"
            )
        else:
            msg = (
                f"{param} must be an array of {self._adapter.label}, got "
                f"{type(x).__qualname__}; convert it with Backend.asarray"
            )
        raise TypeError(msg)
