"""`Facts`: what a `Backend` binds once, the record its collaborators take.

A `Backend` is one library on one device. What that fixes (the adapter,
the namespace, the native device, the dtypes held there, the fast
functions, the fast-path predicates) is computed once, here, into one
frozen record. The facade's collaborators (``_convert``, ``_creation``,
``_moves``, ``_operations``, ``_inputs``) are plain functions of that
record, so each can be tested without a `Backend`. The record also answers
the questions several of them ask: which dtype object a name becomes on a
device (`Facts.dtype_pair`), where a ``device=`` argument points
(`Facts.target`), and how host data becomes an array there (`Facts.from_host`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, NoReturn, TypeAlias, cast

from ._adapters._base import Adapter, FastOps
from ._dtypes import DTYPE_NAMES, narrow_for_device

if TYPE_CHECKING:
    from typing import Any

    from typing_extensions import TypeVar

    from ._namespace import Namespace
    from ._typing import Array, Device, DType, HostArray, NativeDevice

    #: The array type of a `Backend`'s library (``torch.Tensor`` for
    #: ``Backend("torch")``): what its methods return and its operations
    #: take. Its default is ``Any`` (PEP 696), so a bare ``Backend``
    #: annotation means ``Backend[Any]``; Python 3.11's TypeVar has none.
    ArrayT = TypeVar("ArrayT", default=Any)
else:
    from typing import TypeVar

    ArrayT = TypeVar("ArrayT")

__all__ = [
    "ArrayT",
    "Facts",
    "Source",
    "Unavailable",
    "bind",
    "read_only",
    "unavailable",
]

#: Where a dtype came from, for a message: the words themselves, or a
#: function that makes them (only when the message is raised: a dtype's
#: ``repr`` costs microseconds).
Source: TypeAlias = "str | Callable[[], str] | None"


@dataclass(frozen=True, slots=True)
class Facts(Generic[ArrayT]):
    """One library on one device: what a `Backend` binds once.

    ``is_own(x)``: ``x`` is a plain array of this library, on this device,
    in a dtype the device holds (the fast paths' test; ``is_own_like``
    allows any device of the library). ``plain``: the exact class operands
    are compared with before a call (None: the library is trusted to
    refuse foreign operands itself). ``bad_args``: the native exceptions
    that may mean a bad argument. ``unusable``: why the device is not on
    this host (a `Backend` unpickled elsewhere), else None.
    """

    adapter: Adapter
    device: str
    name: str
    xp: Namespace[ArrayT]
    native: NativeDevice
    dtypes: frozenset[str]
    held: frozenset[str]
    ops: FastOps
    plain: type | None
    bad_args: tuple[type[Exception], ...]
    canon: str
    unusable: str | None
    is_own: Callable[[object], bool]
    is_own_like: Callable[[object], bool]
    #: The library's settings when bound (`Adapter.config_token`; None: none
    #: that change its dtypes): JAX's x64, switched after a Backend was made.
    config: Hashable = None

    def dtypes_now(self) -> frozenset[str]:
        """`dtypes`, asked again where the library's settings changed since bound.

        (JAX's x64 switched after the Backend was made: float64 arrays are
        made, or no longer, whatever the bind found.)
        """
        if self.config is not None and self.adapter.config_token() != self.config:
            return self.adapter.supported_dtypes(self.device)
        return self.dtypes

    def dtype_pair(
        self, name: str, device: str | None = None, source: Source = None
    ) -> tuple[str, DType]:
        """(name, dtype object) of ``name`` on ``device``, or a TypeError.

        ``device`` None is the bound device. Narrowed where the device lacks
        64 bits; a TypeError when the device cannot hold it. ``source`` says
        where the dtype came from, for the message: the ``dtype`` argument
        or the input's own dtype.
        """
        adapter = self.adapter
        held = self.held if device is None else adapter.held_dtypes(device)
        if self.config is not None and adapter.config_token() != self.config:
            # (switched since: float64 asked of JAX after x64 was switched off
            # became float32 in JAX's hands, 1e300 inf, unchecked)
            held = adapter.held_dtypes(device or self.device)
        if name in held:
            return name, adapter.dtype_object(self.xp, name)
        where = device or self.device
        chosen = narrow_for_device(name, held, adapter.variant_name(where))
        if chosen not in held:
            said = source() if callable(source) else source
            origin = f" ({said})" if said else ""
            msg = (
                f"dtype {name!r} is not supported by {adapter.backend_name(where)} "
                f"on device {where!r}{origin}; supported: {', '.join(sorted(held))}"
            )
            raise TypeError(msg)
        return chosen, adapter.dtype_object(self.xp, chosen)

    def target(
        self, device: Device, param: str = "device"
    ) -> tuple[str | None, NativeDevice]:
        """(device string, or None for the bound device; native device)."""
        if device is None:
            return None, self.native
        adapter = self.adapter
        if isinstance(device, str):
            dev = adapter.validate_device(device)
            return dev, adapter.native_device(dev)
        try:
            dev = adapter.validate_device(adapter.device_str(device))
        except (AttributeError, TypeError, ValueError) as exc:
            if isinstance(exc, ValueError) and type(device) is type(self.native):
                # (a device object of the library that is not here, as
                # torch.device("cuda", 3) on a machine without it: the
                # ValueError its string gets)
                raise
            msg = f"{param}={device!r} is not a device of backend {self.name!r}"
            raise TypeError(msg) from None
        return dev, adapter.native_device(dev)

    def from_host(self, host: HostArray, dtype: DType, native: NativeDevice) -> ArrayT:
        """``host``, a NumPy array, as an array of ``dtype`` on ``native``."""
        # The adapter serves every library: its result is this library's array.
        arrived: ArrayT = self.adapter.from_host(self.xp, host, dtype, native)
        return arrived


def bind(adapter: Adapter, device: str) -> Facts[Array]:
    """The facts of ``adapter``'s library on ``device`` (a valid device string)."""
    xp = adapter.namespace()
    native = adapter.native_device(device)
    dtypes = adapter.supported_dtypes(device)
    held = dtypes | adapter.extra_dtypes(device)
    return Facts(
        adapter=adapter,
        device=device,
        name=adapter.backend_name(device),
        xp=xp,
        native=native,
        dtypes=dtypes,
        held=held,
        ops=adapter.fast_ops(xp),
        # Operands are checked before the call only for libraries that
        # would convert another library's arrays silently.
        plain=adapter.operand_type() if adapter.precheck_operands else None,
        # (and OverflowError: an axis past C's long, which NumPy converts)
        bad_args=(*adapter.argument_error_types(), OverflowError),
        canon=adapter.canonical_device(device),
        unusable=None,
        is_own=adapter.own_check(native, held),
        is_own_like=adapter.own_check(native, held, any_device=True),
        config=adapter.config_token(),
    )


def unavailable(adapter: Adapter, device: str, reason: str) -> Facts[Array]:
    """Facts for a device this host does not have: every use raises ``reason``.

    What a `Backend` unpickled on another host binds: its name and device
    stay; its namespace, native device and fast functions are `Unavailable`,
    and the fast-path predicates say no, so every call takes a path that
    raises `RuntimeError` saying why.
    """
    stand_in = Unavailable(reason)
    refuse = stand_in.refuse
    return Facts(
        adapter=adapter,
        device=device,
        name=adapter.backend_name(device),
        xp=cast("Namespace[Array]", stand_in),  # it refuses every attribute
        native=stand_in,
        dtypes=DTYPE_NAMES,
        held=DTYPE_NAMES,
        ops=FastOps(*[refuse] * len(FastOps._fields)),
        plain=None,
        bad_args=adapter.argument_errors,
        canon=adapter.canonical_device(device),
        unusable=reason,
        is_own=_never,
        is_own_like=_never,
    )


def _never(_x: object) -> bool:
    return False


class Unavailable:
    """Stands in for a namespace/device that this host does not have.

    A `Backend` unpickled on a machine without its device keeps its name and
    device; any use raises `RuntimeError` saying why, instead of silently
    running somewhere else.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __getattr__(self, attr: str) -> NoReturn:
        raise RuntimeError(self.reason)

    def refuse(self, *_args: object, **_kwargs: object) -> NoReturn:
        """Stand-in for any operation: raises with the reason."""
        raise RuntimeError(self.reason)

    def __reduce__(self) -> NoReturn:  # pragma: no cover - never pickled
        raise RuntimeError(self.reason)


def read_only(facts: Facts[ArrayT]) -> Facts[ArrayT]:
    """``facts`` whose namespace and creation functions return read-only arrays.

    The pytest plugin's ``<backend>-readonly`` variant binds these: ``b.xp``
    is `Adapter.read_only_namespace`'s, and ``b.asarray``, ``b.full``,
    ``b.zeros_like``, ``b.copy``, ... make their arrays through it (an array
    of the library that can be written, ``b.asarray`` and ``b.to_device``
    return as a read-only view); the computations (``matmul``, ``sort``,
    ``top_k``, ...) are the library's own. Such a Backend pickles as the
    library's plain one. A ValueError where the library has no read-only
    arrays.
    """
    xp = facts.adapter.read_only_namespace(facts.xp)
    if xp is None:
        msg = f"backend {facts.name!r} has no read-only arrays"
        raise ValueError(msg)
    likes = {
        name: getattr(xp, name) for name in ("zeros_like", "ones_like", "full_like")
    }
    ops = facts.ops._replace(**likes)  # (the standard's signatures, as FastOps')
    plain, adapter = facts.is_own, facts.adapter

    def is_own(x: object) -> bool:  # (a writeable one of its own gets a view)
        return plain(x) and adapter.is_read_only(cast("Array", x))

    return dataclasses.replace(facts, xp=xp, ops=ops, is_own=is_own)
