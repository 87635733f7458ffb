"""The questions every adapter answers about its array library.

An adapter knows one library and nothing else. The facade (`xpkit.Backend`) and
the memory layer ask adapters; they never branch on a library's name and never
import an optional library themselves.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Mapping
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import array_api_compat
import numpy as np

from .._dtypes import dtype_name
from ._device_memory import MemoryCap, MemoryInfo, MemoryProbe
from ._fast_ops import FastOps
from ._installed import installed, missing_library, version_of
from ._layout import host_extent
from ._peak import PeakMeter, host_meter
from ._top_k import sorted_top_k
from ._trace import Profile, Tracer, Traits, WrappedArrays, public_names

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import pytest

    from .._typing import (
        Array,
        DType,
        HostArray,
        Namespace,
        Narrowing,
        NativeDevice,
        UserFunction,
    )
    from ._layout import Extent, Unshareable
    from ._lazy_tags import Replace, Tagged
    from ._top_k import TopK

__all__ = [
    "CAPABILITIES",
    "HOST_BATCH_WORKING_SET_BYTES",
    "Adapter",
    "FastOps",
    "MemoryCap",
    "MemoryInfo",
    "MemoryProbe",
]

#: What a library may lack and code may need: ``"linalg"`` (the standard's
#: ``linalg`` extension) and ``"data_dependent_shapes"`` (``nonzero``,
#: ``unique_*``, boolean masks).
CAPABILITIES = ("linalg", "data_dependent_shapes")

#: A callable handed back as it came, or wrapped with its signature kept.
F = TypeVar("F", bound=Callable[..., object])

#: Batch working-set ceiling on CPU devices: 16 MiB, half a typical last-level
#: cache (`device_memory_budget` with ``cap_for_batching=True`` applies it).
HOST_BATCH_WORKING_SET_BYTES = 16 * 1024**2


class Adapter:
    """Base adapter: the defaults of a host-memory, CPU-only library.

    Subclasses set the class attributes and override what differs. Methods
    that need the library import it on first use, never at import time.

    A method takes the same arguments in every adapter, so that the facade
    and the memory layer ask each library alike; a library that needs fewer
    ignores the rest (NumPy's arrays all live on the CPU: its `device_key`
    reads nothing of ``x``), and so do the defaults here.
    """

    #: Key used in ``Backend(key)`` and in the registry.
    key: ClassVar[str] = ""
    #: Top-level module whose presence decides "installed" / "imported".
    module: ClassVar[str] = ""
    #: The optional-dependency extra that installs the library.
    extra: ClassVar[str] = ""
    #: Human name used in messages.
    label: ClassVar[str] = ""
    #: Module names its dtypes may be written with ("torch.float32", "jnp.int8").
    dtype_prefixes: ClassVar[tuple[str, ...]] = ()
    #: The module whose dtype objects print as their name, bare ("float32") or
    #: as "<prefix>.<name>" ("torch.float32"); "" if they print otherwise.
    dtype_repr_module: ClassVar[str] = ""
    #: Where ``Backend("auto")`` ranks this library (lowest first; None: never).
    auto_rank: ClassVar[int | None] = None
    #: The accelerators a GPU search looks for with this library ("" for none).
    gpu_kinds: ClassVar[str] = ""
    #: The kinds of device its backends run on, on any machine, as
    #: `backend_name` takes them (torch's ``"cpu"``, ``"cuda"``, ``"xpu"``,
    #: ``"mps"``): what the variant ids of the pytest plugin can name.
    device_kinds: ClassVar[tuple[str, ...]] = ("cpu",)
    #: Which of `CAPABILITIES` the library has: `xpkit check`, the
    #: conformance suite and the plugin's ``xpkit_requires`` skip the rest.
    capabilities: ClassVar[frozenset[str]] = frozenset(CAPABILITIES)
    #: Dtypes (by name) that `to_numpy` gives as another (torch's bfloat16
    #: as float32); every other dtype comes to the host as itself.
    host_dtypes: ClassVar[Mapping[str, str]] = MappingProxyType({})

    # -- presence (asked without importing the library) -------------------
    def is_installed(self) -> bool:
        """Whether the library can be imported, without importing it (`installed`)."""
        return installed(self.module)

    def is_imported(self) -> bool:
        """Whether the library has already been imported by someone."""
        return sys.modules.get(self.module) is not None

    def version(self) -> str | None:
        """The library's version, or None when it is not installed."""
        return version_of(self.distributions()) if self.is_installed() else None

    def distributions(self) -> tuple[str, ...]:
        """Names of the distributions that may install the library."""
        return (self.module.replace("_", "-"),)

    def require(self) -> None:
        """Raise ImportError naming the extra when the library is missing."""
        if not self.is_installed():
            raise missing_library(self.key, self.label, self.extra)

    # -- namespace and arrays --------------------------------------------
    def namespace(self) -> ModuleType:
        """The Array-API-compliant namespace of the library."""
        raise NotImplementedError

    def owns(self, x: object) -> bool:
        """Whether ``x`` is an array of this library (checked via sys.modules)."""
        raise NotImplementedError

    def stands_in_for(self, x: object, library: str, device: str) -> bool:
        """Whether ``x`` stands in for an array of ``library`` on ``device``.

        A shape-only array of a trace that impersonates them does (the
        facade's methods then run on it as on the library's own); no
        library's own array does.
        """
        return False

    def is_plain(self, x: Array) -> bool:
        """Whether ``x`` is a plain array (no subclass or layout with other semantics)."""
        return True

    def unwritable(self, x: Array) -> str | None:
        """Why rows of ``x`` cannot be written in place (``x[a:b] = v``), or None.

        The answer completes "<parameter> is ...". By default every array of
        a library whose arrays are (`writable_rows`) can be.
        """
        return None

    def lost_in_conversion(self, x: Array) -> str | None:
        """Why converting ``x`` to a plain array would drop information, or None.

        The answer completes "<parameter> is ...": a NumPy masked array would
        silently lose its mask, so the facade refuses it by name.
        """
        return None

    def refused_operand(self, x: Array) -> str | None:
        """Why an operation of the facade must not take ``x``, or None.

        The answer completes "<parameter> is ...": the library's functions
        would ignore or drop what ``x`` holds beyond its values (a NumPy
        masked array's mask). By default none.
        """
        return None

    #: Whether the library's arrays leave by DLPack (``__dlpack__``), and
    #: whether its namespace's ``from_dlpack(x, device=, copy=)`` takes
    #: other libraries' arrays. `Backend.move` tries DLPack only where the
    #: source exports and the target imports; otherwise it copies through
    #: the host.
    dlpack_export: ClassVar[bool] = True
    dlpack_import: ClassVar[bool] = True
    #: Whether an array of this library made over another array's memory
    #: can always be written in place (torch and CuPy have no read-only
    #: arrays): a read-only source is then copied before it is shared.
    always_writable: ClassVar[bool] = False
    #: Whether ``x[idx] = y`` broadcasts an array ``y`` to the selection
    #: (ndonnx's failed to: `Backend.at` broadcasts it there first).
    updates_broadcast: ClassVar[bool] = True
    #: Whether an integer beside an integer array in an index joins the
    #: arrays' block, as NumPy's does (torch's and Dask's are basic indices).
    ints_join_arrays: ClassVar[bool] = True
    #: Whether ``x[idx] = y`` is right where ``idx`` holds an integer beside
    #: an integer array (Dask's wrote wrong values or failed: `Backend.at`
    #: gives it one-element slices instead, and ``y`` their axes).
    sets_ints_beside_arrays: ClassVar[bool] = True
    #: Whether ``x[idx] = y`` takes an array ``y`` of no elements where a
    #: basic index selects none (Dask's refused ``x[0, :, 0:0] = y`` of a
    #: ``(2, 0)`` ``y``: "could not be broadcast to ... (2, 0)"; `Backend.at`
    #: leaves ``x`` as it is there, as NumPy's does).
    sets_empty_values: ClassVar[bool] = True
    #: Whether ``x[idx]`` takes a NumPy boolean mask (in ``idx`` or as it):
    #: ndonnx's raised "unexpected key type", torch's "too many indices" for
    #: a 0-d one of a 0-d tensor (`Backend.at` gives them their own).
    reads_numpy_masks: ClassVar[bool] = True

    def unshareable(self, x: Array) -> Unshareable | None:
        """Why ``x``'s memory must not be handed to another library as it is.

        None when any library may view it zero-copy. Layouts another
        library cannot view as they are (negative or zero strides, swapped
        bytes, torch's lazy conjugate and negative bits) call for
        `contiguous_copy` first; a read-only (or immutable) array may be
        shared only with a library that keeps it read-only. By default:
        nothing stands in the way (libraries without DLPack never share).
        """
        return None

    def narrowed_back(self, x: Array, dtype: DType) -> Array:
        """``x``, widened from ``dtype`` on a trip through the host, in it again.

        Exactly: every value of ``x`` is one of ``dtype``'s. By default the
        namespace's ``astype``.
        """
        return self.namespace().astype(x, dtype)

    #: An update's value over the updated array's own memory is read whole
    #: first (NumPy's assignment buffers it; a graph's is a new array);
    #: False: `Backend.at` copies such a value first (torch refuses it).
    reads_overlapping_values: ClassVar[bool] = True

    def is_missing_kernel(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised by an operation whose operands and shapes fit, means no kernel.

        The library has no kernel for these dtypes, or cannot promote them
        to one: a TypeError naming the operands' dtypes is raised instead
        (`xpkit._operations.refuse_missing_kernel`). By default a
        ``NotImplementedError``.
        """
        return isinstance(exc, NotImplementedError)

    def update_refusal(self, x: Array) -> str | None:
        """Why ``Backend.at`` cannot update ``x`` in place, or None (completes "x is ...").

        By default: read-only, or its elements share memory (`is_read_only`).
        """
        shared = "read-only or its elements share memory (a broadcast or expanded view)"
        return shared if self.is_read_only(x) else None

    def copy_to_update(self, x: Array) -> Array | None:
        """``x`` copied for ``Backend.at``'s ``copy=True``, where the library copies otherwise.

        None (by default): array-api-extra copies it, by the standard's
        ``asarray(copy=True)``.
        """
        return None

    def own_copy(self, x: Array) -> Array:
        """A copy of ``x`` in memory of its own: its library, device and dtype.

        What a result is held as while ``fn`` runs again (a buffer ``fn``
        reuses would overwrite it). By default ``asarray(copy=True)`` on
        ``x``'s device.
        """
        return self.namespace().asarray(x, copy=True, device=self.device_of(x))

    def contiguous_copy(self, x: Array) -> Array:
        """A copy of ``x`` in its own library that any library can view.

        On ``x``'s device, C-contiguous, in native byte order, with no lazy
        bits, in memory of its own. Asked only of arrays `unshareable`
        finds a layout reason for.
        """
        msg = f"{self.label} arrays have no contiguous copy for DLPack"
        raise NotImplementedError(msg)

    #: Whether the library compiles Python functions by tracing their code
    #: (torch.compile's dynamo), so that `eager_only` has work to do.
    traces_python: ClassVar[bool] = False

    def eager_only(self, fn: F, reason: str) -> F:
        """``fn``, marked so that this library's compiler runs it eagerly.

        Where the library compiles Python code by tracing it (torch.compile),
        a call of the result from compiled code breaks the graph and runs
        eagerly, and under ``fullgraph=True`` fails with ``reason``. ``fn``
        itself by default.
        """
        return fn

    def compiler_imported(self) -> bool:
        """Whether this library's compiler is imported (it can be tracing).

        Before that `compiling` is False and `eager_only` has nothing to do
        (importing the compiler to make its marks can cost seconds).
        """
        return self.is_imported()

    def compiling(self) -> bool:
        """Whether this library's compiler is tracing the calling code now.

        Where it is, `eager_only` marks what must run eagerly. False by default.
        """
        return False

    def traced_by(self, x: Array) -> str | None:
        """The compiler tracing ``x`` now (``"jax.jit"``, ``"torch.compile"``), or None.

        Code that must see values (`map_batches`, an eager loop on the host)
        refuses traced arrays by naming it. None by default.
        """
        return None

    def tracing_to_reuse(self) -> str | None:
        """The compiler tracing the caller once to run it again (``"jax.jit"``), or None."""
        return None

    def values_at_hand(self, x: Array) -> bool:
        """Whether ``x``'s values can be read now, cheaply and without side effects.

        False for lazy graphs (Dask: reading computes them) and traced values
        (JAX under ``jit``): the facade then casts without checking that the
        cast keeps every value.
        """
        return True

    def from_host(
        self, xp: Namespace, host: HostArray, dtype: DType, device: NativeDevice
    ) -> Array:
        """A host (NumPy) array as an array of this library, of ``dtype`` on ``device``.

        By default ``xp.asarray``; adapters whose library refuses some NumPy
        layouts (negative strides, swapped bytes) copy to one it takes.
        """
        return xp.asarray(host, dtype=dtype, device=device)

    #: How a float64 from the host (a NumPy array, a number) and one of this
    #: library's arrays become float32, float16 or bfloat16 here (`Narrowing`).
    host_narrowing: ClassVar[Narrowing] = "exact"
    own_narrowing: ClassVar[Narrowing] = "exact"

    def float64_narrowing(self, *, on_host: bool) -> Narrowing:
        """How a float64 value becomes float32, float16 or bfloat16 here.

        ``on_host``: from a NumPy array or a Python number (else from an
        array of this library). NumPy's casts round once ("exact"); the
        value checks hold a cast to what the library's does
        (`xpkit._cast_checks`).
        """
        return self.host_narrowing if on_host else self.own_narrowing

    def creation_options(self, shape: tuple[int, ...]) -> dict[str, object]:
        """Keywords the namespace's ``full``, ``zeros`` and ``ones`` need for ``shape``.

        None by default; Dask's automatic chunking divides by zero on some
        shapes of no elements (`DaskAdapter.creation_options`).
        """
        return {}

    #: Whether the facade checks operands before calling the library's
    #: functions rather than after they fail: where those silently convert
    #: other libraries' arrays (NumPy through ``__array__``, Dask, JAX), or
    #: warn about them before refusing (array-api-strict).
    precheck_operands: ClassVar[bool] = False

    def operand_type(self) -> type:
        """The exact class of this library's usual arrays.

        Where the library needs `precheck_operands`, the facade tests each operand
        with ``type(x) is operand_type()`` (the cheapest test there is) and
        checks the others fully. ``object``, the exact class of no array,
        sends every operand to the full check.
        """
        return object

    #: Native exception types that may mean "bad argument" (a shape mismatch,
    #: a non-array, a dtype the function refuses). The facade catches only
    #: these, and turns them into its own ValueError/TypeError only when its
    #: own check of the arguments finds the fault; otherwise they propagate.
    argument_errors: ClassVar[tuple[type[Exception], ...]] = (
        TypeError,
        ValueError,
        IndexError,
    )

    def argument_error_types(self) -> tuple[type[Exception], ...]:
        """The exception types the facade catches as a possible bad argument.

        `argument_errors`, and those of the library's own classes that cannot
        be named before it is imported (an adapter adds them here). Asked
        once per Backend, with the library imported.
        """
        return self.argument_errors

    def to_numpy(self, x: Array) -> HostArray:
        """Bring an array of this library to the host as a NumPy array."""
        return np.from_dlpack(x)

    def to_cpu(self, x: Array) -> Array:
        """Move an array of this library to its CPU device (same library)."""
        return x

    def onto_device(
        self,
        xp: Namespace,
        x: Array,
        native: NativeDevice,
        dtype: DType,
        copy: bool | None,
    ) -> Array:
        """``x``, an array of this library on another device, onto ``native`` in ``dtype``."""
        return xp.asarray(x, dtype=dtype, device=native, copy=copy)

    def over_read_only_memory(self, x: Array) -> bool:
        """Whether ``x``, writable as its library holds it, lies over read-only pages.

        (torch's tensor over a read-only memmap, and a NumPy array over it.)
        """
        return False

    def host_owner(self, x: Array) -> object | None:
        """What owns the host memory ``x`` views (a NumPy array's ``base``), or None."""
        return getattr(self.host_view(x), "base", None)

    def host_view(self, x: Array) -> HostArray | None:
        """A NumPy view of ``x``'s own memory, where that is writable host memory.

        None where it is not (device memory, immutable or lazy arrays): what
        `map_batches` compares a result with before keeping it uncopied.
        """
        return None

    def memory_extent(self, x: Array) -> Extent | None:
        """Where ``x``'s elements lie in memory (`Extent`); None: not known.

        What `map_batches` compares an ``out`` with its inputs by. By default
        the extent of `host_view` (host memory only); a library whose arrays
        live in device memory too says where they lie there.
        """
        view = self.host_view(x)
        return None if view is None else host_extent(view)

    def device_of(self, x: Array) -> NativeDevice:
        """The library's device object that the array ``x`` lives on.

        array-api-compat's, or the array's own ``device`` while another
        thread imports Dask: its checks read ``dask.array.Array`` of the
        half-made module (AttributeError for a tensor that was never Dask's).
        """
        try:
            return array_api_compat.device(x)
        except AttributeError:
            return x.device

    def device_key(self, x: Array) -> Hashable:
        """A cheap hashable key of the device ``x`` lives on (for caching)."""
        return cast("Hashable", self.device_of(x))

    #: Whether the library has modes that change what a call costs
    #: (`cost_mode`; the plan memory asks only where it has).
    has_cost_mode: ClassVar[bool] = False

    def cost_mode(self) -> Hashable:
        """The library's modes in force now that change what a call costs.

        A part of every input's key in the plan memory: torch's grad and
        inference modes (autograd keeps what a backward pass would need).
        None where it has none.
        """
        return None

    def config_token(self) -> Hashable:
        """Library settings that change what a Backend supports (cache key)."""
        return None

    def input_key(self, x: Array) -> Hashable:
        """``x`` by library, device, library settings, shape and dtype.

        Two arrays with one key differ only in their values (what a call
        repeated in a loop compares: one call, on every input).
        """
        return (self.key, self.device_key(x), self.config_token(), x.shape, x.dtype)

    def layout_key(self, x: Array) -> Hashable:
        """What of ``x``'s storage changes a call's cost: its `rows_contiguous`."""
        return self.rows_contiguous(x)

    def rows_contiguous(self, x: Array) -> bool:
        """Whether ``x``'s rows lie contiguous in memory, as a trace's inputs do.

        By default they do (libraries whose arrays have no strides to see).
        """
        return True

    def row_blocks(self, x: Array, rows: int) -> int:
        """How many blocks of ``x``'s storage ``rows`` consecutive rows span at most.

        A chunked library's chunks, whose tasks a graph holds one set of
        each; by default one (an array in one piece).
        """
        return 1

    def strictest_mode(self) -> Any:
        """A context manager for this library's strictest mode, or None."""
        return None

    #: Which of `CAPABILITIES` the strictest mode switches off.
    strictest_lacks: ClassVar[frozenset[str]] = frozenset()

    def svd_refusal(self, x: Array, full_matrices: bool) -> str | None:
        """What of ``svd(x, full_matrices)`` the library's ``linalg.svd`` lacks, or None."""
        return None

    def capabilities_now(self) -> frozenset[str]:
        """`capabilities` under the library's settings in force now.

        The same by default; a library whose settings switch capabilities
        off (array-api-strict's flags) reads them.
        """
        return self.capabilities

    #: Whether a process-wide setting of the library holds its 64-bit dtypes
    #: off (JAX's ``jax_enable_x64``): the plugin's ``xpkit_x64`` ini option
    #: switches it on for a test session (`switch_on_64_bit`).
    has_64_bit_switch: ClassVar[bool] = False

    def switch_on_64_bit(self) -> Callable[[], None] | None:
        """Switch the library's 64-bit dtypes on; what switches them back.

        None where they were on already (or the library has no such switch):
        nothing was changed, nothing is to be undone.
        """
        return None

    #: Whether the library has a process-wide default floating dtype that
    #: arrays made from Python floats get (torch's ``set_default_dtype``):
    #: the plugin's ``xpkit_default_float`` ini option sets it for a test
    #: session (`set_default_float`).
    has_default_float: ClassVar[bool] = False

    def set_default_float(self, name: str) -> Callable[[], None] | None:
        """Make ``name`` (``"float32"``, ``"float64"``) the default floating dtype.

        Returns what sets the one before back; None where ``name`` was the
        default already (or the library has no such setting): nothing was
        changed, nothing is to be undone.
        """
        return None

    #: Whether the pytest plugin runs a ``<backend>-readonly`` variant
    #: (`read_only_namespace`; known without importing the library).
    test_read_only: ClassVar[bool] = False
    #: Whether the pytest plugin runs a ``<backend>-strictest`` variant
    #: (`strictest_mode`; known without importing the library).
    test_strictest: ClassVar[bool] = False

    def is_read_only(self, x: Array) -> bool:
        """Whether ``x`` of this library refuses writes (NumPy's flag)."""
        return False

    def read_only_namespace(self, xp: Namespace) -> Namespace | None:
        """``xp`` with every array its functions return read-only, or None.

        The pytest plugin's ``<backend>-readonly`` variant, where the
        library has read-only arrays (NumPy's; libraries whose arrays are
        immutable, JAX's, need none).
        """
        return None

    def pads_batches(self, fn: UserFunction) -> bool:
        """Whether `map_batches` pads the last batch for ``fn`` by default.

        True where the library compiles ``fn`` (or each of its operations)
        once per input shape, so that a last, shorter batch would compile
        again. False by default.
        """
        return False

    #: The modes the pytest plugin offers as ``<backend>-<mode>`` variants
    #: to test modules that declare lazy functions: ``"jit"``, ``"lazy"``,
    #: ``"compile"``.
    test_modes: ClassVar[tuple[str, ...]] = ()
    #: The pytest plugin's fixture of this library's namespace alone
    #: (``torch``, ``jnp``, ``da``, as peer suites name them), or None.
    module_fixture: ClassVar[str | None] = None
    #: The test mode that fixture runs a module's declared functions in
    #: (``"jit"``, ``"lazy"``: as array-api-extra's harness runs them for
    #: that library's namespace), or None: as written.
    module_fixture_mode: ClassVar[str | None] = None

    def lazy_context(
        self,
        mode: str,
        request: pytest.FixtureRequest,
        xp: Namespace,
        tagged: Tagged,
        replace: Replace,
    ) -> AbstractContextManager[None]:
        """A context in which a test module's declared functions run in ``mode``.

        ``request`` is the test's pytest request, ``xp`` the namespace,
        ``tagged`` the declared functions with their `LazyTags`, and
        ``replace(wrap)`` a context that swaps each declared function ``f``
        for ``wrap(f, tags)`` (None: left as is) in the test module.
        """
        msg = f"{self.label} has no test mode {mode!r} (its modes: {self.test_modes})"
        raise ValueError(msg)

    # -- what the pytest plugin asks -----------------------------------------
    #: Emulated devices the pytest plugin also runs every test on, each as
    #: the variant `variant_name` names (array-api-strict's ``"device1"``,
    #: where anything created without ``device=`` lands elsewhere, and
    #: ``"no_float64"``, which holds no float64 as MPS does).
    test_devices: ClassVar[tuple[str, ...]] = ()
    #: Devices whose arrays have a shape and a dtype but no values (torch's
    #: ``"meta"``): nothing computes there, so the plugin offers them only to
    #: tests marked ``xpkit_shapes_only``. `validate_device` takes them;
    #: `devices` does not list them.
    shape_only_devices: ClassVar[tuple[str, ...]] = ()

    def variant_name(self, device: str) -> str:
        """`backend_name`, with the device added where the name does not say it.

        ``"array_api_strict-device1"``; the default device adds nothing
        (``"array_api_strict"``), nor does a name that carries its device
        (``"torch-cpu"``, ``"torch-meta"``). What the pytest plugin's test ids
        and the narrowing messages call a library on a device.
        """
        name = self.backend_name(device)
        if name != self.key:
            return name
        if self.canonical_device(device) == self.canonical_device(
            self.default_device()
        ):
            return name
        return f"{name}-{self.canonical_device(device)}"

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """Where an array of this library becomes a NumPy array, to be watched.

        ``(owner, attribute)`` pairs: methods of the library's array type
        (``__array__``, torch's ``numpy``, Dask's ``compute``) and functions
        (``dask.compute``), each taking the array as its first argument. The
        testing tools count calls of these for ``lazy_xp_function(...,
        host_copies=N)``. NumPy's adapter lists NumPy's own functions
        (``asarray``, ``from_dlpack``, ...), through which any library's
        array may leave; its own arrays are host arrays already. Empty
        where no exit can be watched. Asked with the library imported.
        """
        return ()

    def traced_host_array(self, x: object) -> Array | None:
        """``x`` as an array of this library, while the library compiles the caller.

        For host data (a NumPy array) handed to the facade inside code the
        library traces, where its tracer cannot read the NumPy array's
        attributes (torch.compile has no ``ndarray.dtype``). None when the
        library is not tracing or ``x`` is not such data: the facade then
        converts ``x`` its usual way.
        """
        return None

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """The ``k`` largest (or smallest) values along ``axis``, sorted, and their indices.

        Arguments checked by the facade (``axis`` non-negative, ``0 <= k``
        ``<= x.shape[axis]``, a real dtype). Default: the namespace's own
        ``top_k`` where it has one (the standard's, data-apis/array-api#722),
        else a stable sort of the axis (`sorted_top_k`).
        """
        own = getattr(xp, "top_k", None)
        if own is not None:
            mode = "largest" if largest else "smallest"
            values, indices = own(x, k, axis=axis, mode=mode)
            return values, indices
        return sorted_top_k(xp, x, k, axis, largest=largest)

    def fast_ops(self, xp: Namespace) -> FastOps:
        """The hot-path functions `Backend` binds once.

        By default the compliant namespace's own functions; an adapter may
        return the library's native functions where, for the inputs the
        function checks, they give the same result with less overhead.
        """
        return FastOps(
            matmul=xp.matmul,
            sort=xp.sort,
            expand_dims=xp.expand_dims,
            concat=xp.concat,
            zeros_like=xp.zeros_like,
            ones_like=xp.ones_like,
            full_like=xp.full_like,
        )

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """`device_key` of the arrays that live on the native device ``native``."""
        return cast("Hashable", native)

    def own_check(
        self, native: NativeDevice, dtypes: frozenset[str], *, any_device: bool = False
    ) -> Callable[[object], bool]:
        """A predicate for the facade's fast paths, built once per Backend.

        ``own(x)`` is True when ``x`` is a plain array of this library whose
        dtype is one of ``dtypes`` and which lives on the native device
        ``native`` (on any device with ``any_device``). It runs on every
        facade call, so adapters specialise it; this default caches what can
        be cached per array type and dtype.
        """
        key = self.native_device_key(native)
        by_type: dict[type, bool] = {}
        by_dtype: dict[DType, bool] = {}

        def own(x: Array) -> bool:
            cls = type(x)
            mine = by_type.get(cls)
            if mine is None:
                mine = by_type[cls] = self.owns(x)
            if not mine or not self.is_plain(x):
                return False
            if not any_device and self.device_key(x) != key:
                return False
            ok = by_dtype.get(x.dtype)
            if ok is None:  # first array of this dtype
                try:
                    ok = dtype_name(x.dtype) in dtypes
                except TypeError:  # a dtype outside the standard's vocabulary
                    ok = False
                by_dtype[x.dtype] = ok
            return ok

        return own

    # -- devices -----------------------------------------------------------
    def devices(self) -> tuple[str, ...]:
        """Device strings usable here, default first."""
        return ("cpu",)

    def default_device(self) -> str:
        """The device a Backend uses when none is pinned."""
        found = self.devices()
        if not found:
            msg = f"{self.label} sees no usable device on this machine"
            raise RuntimeError(msg)
        return found[0]

    def canonical_device(self, device: str) -> str:
        """Normalise a device string (aliases, implicit indices).

        The CPU is one device: ``"cpu:0"`` is ``"cpu"``.
        """
        name = device.strip().lower()
        return "cpu" if name == "cpu:0" else name

    def validate_device(self, device: str) -> str:
        """Return how ``device`` is listed by `devices`, or raise ValueError.

        The `shape_only_devices` are valid too, though `devices` does not
        list them (nothing runs there).
        """
        listed = (*self.devices(), *self.shape_only_devices)
        text = device.strip()
        if text in listed:
            return text
        canon = self.canonical_device(text)
        for candidate in listed:
            if self.canonical_device(candidate) == canon:
                return candidate
        devices = self.devices()  # (not the shape-only ones: nothing runs there)
        msg = (
            f"device={device!r} does not exist for backend {self.key!r} on this "
            f"machine; available devices: {', '.join(devices) or 'none'}"
        )
        raise ValueError(msg)

    def native_device(self, device: str) -> NativeDevice:
        """The library's own device object for a device string."""
        return device

    def device_str(self, native: NativeDevice) -> str:
        """The device string of a library device object (inverse of native)."""
        return self.canonical_device(str(native))

    def backend_name(self, device: str) -> str:
        """``Backend.name`` for this library on ``device``."""
        return self.key

    def is_gpu(self, device: str) -> bool:
        """Whether ``device`` is a GPU (or other accelerator)."""
        return False

    def device_name(self, device: str) -> str:
        """A human-readable name of the device."""
        return device

    def unified_memory(self, device: str) -> bool:
        """Whether ``device`` shares the host's memory (CPU, Apple MPS)."""
        return not self.is_gpu(device)

    def supports_float64(self, device: str) -> bool:
        """Whether float64 (and complex128) arrays can live on ``device``."""
        return True

    def batch_ceiling_bytes(self, device: str) -> int | None:
        """Largest working set worth giving one batch, or None for no ceiling.

        On the CPU, past about half a last-level cache (the other half holds
        the function's other operands) a bigger batch adds cache misses,
        allocation and page-fault cost without throughput; GPUs are capped by
        ``BATCH_WORKING_SET_CEILING_GB`` alone.
        """
        return None if self.is_gpu(device) else HOST_BATCH_WORKING_SET_BYTES

    def supported_dtypes(self, device: str) -> frozenset[str]:
        """Names of the dtypes arrays can have on ``device``.

        From the namespace's inspection API (``__array_namespace_info__``),
        without float64/complex128 where `supports_float64` says no. A library
        that cannot answer is an error (`RuntimeError`), never "all of them":
        an adapter whose library lacks the inspection API overrides this.
        """
        try:
            info = self.namespace().__array_namespace_info__()
            names = set(info.dtypes(device=self.native_device(device)))
        except Exception as exc:
            msg = (
                f"{self.label} could not list the dtypes of device {device!r} "
                f"({type(exc).__name__}: {exc})"
            )
            raise RuntimeError(msg) from exc
        if not names:
            msg = f"{self.label} lists no dtype for device {device!r}"
            raise RuntimeError(msg)
        if not self.supports_float64(device):
            names -= {"float64", "complex128"}
        return frozenset(names)

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """Dtypes beyond the standard's that the library holds on ``device``.

        float16, bfloat16, torch's uint16/32/64: arrays of these pass through
        the facade as they are, and may be asked for by name. None by default.
        """
        return frozenset()

    def held_dtypes(self, device: str) -> frozenset[str]:
        """Every dtype name an array can have on ``device``.

        `supported_dtypes` and `extra_dtypes`: the facade refuses only dtypes
        outside this set.
        """
        return self.supported_dtypes(device) | self.extra_dtypes(device)

    def dtype_object(self, xp: Namespace, name: str) -> DType:
        """The dtype object of ``xp`` named ``name`` (one of `held_dtypes`)."""
        return getattr(xp, name)

    # -- memory (used by xpkit._memory and xpkit._plan) ---------------------
    #: Whether the library's threads keep the host memory they free (glibc's
    #: per-thread arenas do, for torch's intra-op threads): `map_batches`
    #: then hands it back after each large host batch (``malloc_trim``),
    #: which costs page faults in the next batch but keeps its peak in the
    #: budget.
    keeps_freed_host_memory: ClassVar[bool] = False

    #: Whether arrays of this library can be written row by row in place
    #: (``out[a:b] = v``). `map_batches` assembles a device result in place
    #: only then; otherwise on the host, moved to the device once at the end.
    writable_rows: ClassVar[bool] = True

    #: dtypes whose values the library's ``where`` rounds (ndonnx's uint64,
    #: through float64: every element, selected or not). ``Backend.at``
    #: updates through a boolean mask by ``where`` where rows are not
    #: writable (array-api-extra's), and refuses these.
    where_rounds: ClassVar[frozenset[str]] = frozenset()

    def asarray_keeps_mask(self, dtype: DType | None) -> bool:
        """Whether the namespace's own ``asarray`` of a NumPy masked array keeps its mask.

        Given alone, into ``dtype`` (None: not given): ndonnx's does, into
        its nullable dtypes, which ``b.create.asarray`` then takes. None
        by default.
        """
        return False

    #: What to do about an array whose axis-0 length is not known (a lazy
    #: library's), said where `map_batches` needs it.
    unknown_length_advice: ClassVar[str] = "give arrays whose length is known"

    #: Whether the library's arrays report NumPy's dtype objects as their
    #: ``dtype`` (JAX, CuPy, Dask), rather than the namespace's own objects.
    numpy_dtypes: ClassVar[bool] = False

    def shape_traits(self, device: str) -> Traits | None:
        """How the library allocates on ``device``, for a shape-only trace.

        None (the default): ``fn`` is not traced on shape-only arrays for
        this library; `map_batches` measures a real run instead.
        """
        return None

    def shape_profile(self, device: str) -> Profile | None:
        """The `Profile` a shape-only trace impersonates on ``device``, or None.

        The library's dtypes held on ``device`` and its default dtypes (from
        its inspection API), with `shape_traits`. Asked with the library
        imported (its arrays are the inputs).
        """
        traits = self.shape_traits(device)
        if traits is None:
            return None
        xp = self.namespace()
        native = self.native_device(device)
        held = self.held_dtypes(device)
        defaults = xp.__array_namespace_info__().default_dtypes(device=native)
        return Profile(
            library=self.key,
            device=device,
            native_device=native,
            key=(self.key, device, self.config_token()),
            dtypes={name: self._array_dtype(xp, name) for name in sorted(held)},
            default_float=dtype_name(defaults.get("real floating")) or "float64",
            default_int=dtype_name(defaults.get("integral")) or "int64",
            default_complex=(
                dtype_name(defaults.get("complex floating")) or "complex128"
            ),
            namespace_names=public_names(xp),
            **traits,
        )

    def _array_dtype(self, xp: Namespace, name: str) -> DType:
        """The dtype object an array of dtype ``name`` reports (`numpy_dtypes`)."""
        if self.numpy_dtypes:
            try:
                return np.dtype(name)
            except TypeError:  # bfloat16 where ml_dtypes has not registered it
                pass
        return self.dtype_object(xp, name)

    def library_tracer(
        self,
        fn: UserFunction,
        inputs: tuple[tuple[tuple[int, ...], str], ...],
        whole: tuple[tuple[object, ...], dict[str, object]],
        device: str,
    ) -> Tracer | WrappedArrays | None:
        """The library's own account of what ``fn`` allocates, without running it.

        Tried after the shape-only trace (a compiler's memory analysis of a
        compiled ``fn``, the library's own trace of code written with its
        functions, or `WrappedArrays`: its own code run on shape-only
        arrays of the library it wraps). ``inputs`` are the batched inputs'
        row shapes and dtype names, ``whole`` the whole operands (positional,
        keyword). None by default: a measured run stands for ``fn``.
        """
        return None

    def peak_meters(self, device: str) -> tuple[PeakMeter, ...]:
        """The meters of a real run on ``device``, best first.

        `map_batches` measures ``fn``'s cost with the first of them where the
        shape-only trace cannot follow ``fn``. By default, on a CPU device,
        the host meter (`host_meter`: the process's memory, sampled; nothing
        reset), and none on accelerators. Adapters whose library reports its
        allocations better put their own first.
        """
        meter = None if self.is_gpu(device) else host_meter()
        return () if meter is None else (meter,)

    def memory_info(self, device: str) -> MemoryInfo | None:
        """Free/total bytes of a device; None when it is host memory."""
        return None

    def memory_cap(self, device: str) -> MemoryCap | None:
        """The limit this process runs under on ``device``, or None for none.

        Budgets take the smaller of `memory_info`'s free bytes and the cap's
        `MemoryCap.room`. Asked like `memory_info`: it creates no driver
        context that asking `memory_info` would not.
        """
        return None

    def memory_probe(self, device: str) -> MemoryProbe:
        """How `memory_info` reads ``device`` now, and what asking would cost.

        By default host memory (psutil, cgroup-aware) on CPU devices and the
        library's own report on accelerators, at no cost.
        """
        return MemoryProbe("psutil" if not self.is_gpu(device) else self.label)

    def empty_cache(self) -> None:
        """Release cached device memory, if the library is already imported."""
        return

    def is_oom(self, exc: BaseException) -> bool:
        """Whether ``exc`` (one link of a chain) is this library's OOM signal."""
        return False
