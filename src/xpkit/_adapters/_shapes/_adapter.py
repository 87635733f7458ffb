"""The adapter of shape-only arrays: what xpkit's own code asks of them.

Registered as a guest (`xpkit._adapters._registry.register_guest`): code in
``fn`` that asks which library an array is of (``Backend.from_arrays(x)``,
``array_api_compat.array_namespace(x)``) reaches the shape-only namespace,
on the device of the running trace, while the backends a user can name do
not change. Nothing of it can become a host array.
"""

from __future__ import annotations

from collections.abc import Hashable
from types import ModuleType
from typing import TYPE_CHECKING, cast

from .._base import Adapter
from .._trace import active_trace
from ._array import NAMESPACE, ShapeArray

if TYPE_CHECKING:
    from ..._typing import Array, DType, HostArray, Namespace, NativeDevice

__all__ = ["ShapesAdapter"]


class ShapesAdapter(Adapter):
    """Shape-only arrays, on the device of the trace that runs them."""

    key = "shapes"
    module = "xpkit"
    label = "shape-only arrays"

    def namespace(self) -> ModuleType:
        """The shape-only namespace."""
        return cast("ModuleType", NAMESPACE[0])

    def owns(self, x: object) -> bool:
        """Shape-only arrays."""
        return type(x) is ShapeArray

    def stands_in_for(self, x: object, library: str, device: str) -> bool:
        """A shape-only array of a trace impersonating ``library`` on ``device``."""
        if not isinstance(x, ShapeArray):
            return False
        profile = x._trace.profile
        return bool(profile.library == library and profile.device == device)

    def device_key(self, x: Array) -> Hashable:
        """The profile's key: one device per impersonated library and settings."""
        key: Hashable = x._trace.profile.key
        return key

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """`device_key` of the running trace's arrays."""
        return active_trace().profile.key

    def device_of(self, x: Array) -> NativeDevice:
        """The library's device object the array stands on."""
        return x.device

    def device_str(self, native: NativeDevice) -> str:
        """The running trace's device."""
        return active_trace().profile.device

    def devices(self) -> tuple[str, ...]:
        """The running trace's device."""
        return (active_trace().profile.device,)

    def native_device(self, device: str) -> NativeDevice:
        """The library's device object of the running trace."""
        return active_trace().profile.native_device

    def backend_name(self, device: str) -> str:
        """``shapes-<library>``."""
        return f"shapes-{active_trace().profile.library}"

    def supported_dtypes(self, device: str) -> frozenset[str]:
        """The dtypes the impersonated device holds."""
        return frozenset(active_trace().profile.dtypes)

    def dtype_object(self, xp: Namespace, name: str) -> DType:
        """The impersonated library's dtype object."""
        return active_trace().profile.dtype(name)

    def to_numpy(self, x: Array) -> HostArray:
        """Refused: a shape-only array has no values."""
        msg = "fn converted an array to a host array"
        raise active_trace().refuse(msg)
