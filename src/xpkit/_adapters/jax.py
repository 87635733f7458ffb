"""Adapter for JAX: its CPU device and GPUs/TPUs."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Hashable
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING

import array_api_compat
import numpy as np

from ._base import Adapter
from ._caps import jax_arena
from ._device_memory import MemoryCap, MemoryInfo
from ._jax_memory import (
    CUMULATIVE_BLOCK,
    HELD_THROUGH,
    EagerCosts,
    JaxprTracer,
    StatsPeak,
    XlaTracer,
    warmed_host_meter,
)
from ._jax_workspace import cpu_workspace
from ._layout import Extent, Unshareable, dlpack_place, extent
from ._lazy_tags import Replace, Tagged, patched_by_array_api_extra
from ._trace import DtypeRules, Workspace

if TYPE_CHECKING:
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
    from ._peak import PeakMeter
    from ._top_k import TopK
    from ._trace import Tracer, Traits

__all__ = ["JaxAdapter"]

#: JAX's dtypes where the standard leaves them open: a floating function of
#: an integer is a float as wide as it (at least float32), a bool operand of
#: arithmetic is int32, ``x ** <int>`` keeps the base's dtype, and so does
#: ``cumulative_prod`` of an integer; ``searchsorted`` gives int32.
_DTYPE_RULES = DtypeRules(
    float_as_wide_as_int=True,
    bool_arithmetic="int32",
    int_power_keeps_base=True,
    index_dtype="int32",
    cumulative_prod_keeps_int=True,
)
#: Bytes a CPU array holds beyond its data (its PjRt buffer and Python object).
_CPU_ARRAY_BYTES = 2600
#: Bytes dispatching one eager operation holds while it runs, on the CPU
#: (one ``multiply`` of 16 to 128 rows held 4.4 to 4.7 kB beyond its
#: result's data, the array's own bytes included).
_CPU_DISPATCH_BYTES = 2000
#: The most bytes a CPU matrix product packs its operands into while it
#: runs (Eigen's blocks), where they are larger: it held up to their bytes
#: (0.5-1.0 times at 78 to 1,085 rows by 32, float32 and float64), and at
#: most 536 kB at any size measured (2,000 x 1,024 by 1,024 x 2,000), on a
#: machine with 1 MiB of L2 cache a core; Eigen sizes its blocks to the
#: caches, so this bounds machines with up to twice that.
CPU_MATMUL_PACKING = 2**20
#: A CPU sort's scratch: bytes an element of a row of each operand, and more
#: (`_jax_memory._sort_scratch`).
_CPU_SORT_SCRATCH = (16, 5_120)

_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def _float64_enabled() -> bool:
    """Whether JAX makes float64 arrays now (its x64 switch, read)."""
    return bool(_jax().config.read("jax_enable_x64"))


@functools.cache
def _xla_narrowing() -> Narrowing:
    """`JaxAdapter.float64_narrowing` of its own arrays, measured (see there)."""
    jax = _jax()
    with jax.ensure_compile_time_eval():  # (a value, even under a trace)
        near = jax.numpy.asarray(np.array([65520.0 - 2.0**-9]))
        once = bool(np.isfinite(np.asarray(near.astype(jax.numpy.float16)))[0])
    return "flushed, float16 once" if once else "via float32, flushed"


def _jax() -> ModuleType:
    import jax

    module: ModuleType = jax  # typed whether installed or not
    return module


class JaxAdapter(Adapter):
    """JAX through ``jax.numpy`` (Array-API-compliant since JAX 0.4.32).

    Devices are spelled ``"<platform>"`` or ``"<platform>:<n>"``, the n-th
    device of that platform: ``"cpu"``, ``"gpu"``, ``"gpu:1"``. ``"cuda"`` is
    accepted as an alias of ``"gpu"``.
    """

    key = "jax"
    module = "jax"
    extra = "jax"
    label = "JAX"
    dtype_prefixes = ("jax.numpy", "jnp")
    gpu_kinds = "GPUs"
    #: JAX's platforms (``"cuda"`` and ``"rocm"`` are its ``"gpu"``).
    device_kinds = ("cpu", "gpu", "tpu")
    #: Immutable arrays: a device result is assembled on the host, moved once.
    writable_rows = False
    #: ``jnp.matmul(jax_array, ndarray)`` converts the NumPy array.
    precheck_operands = True

    def namespace(self) -> ModuleType:
        """``jax.numpy``."""
        import jax.numpy as jnp

        namespace: ModuleType = jnp  # typed whether or not JAX is installed
        return namespace

    def owns(self, x: object) -> bool:
        """``jax.Array`` instances (tracers included).

        array-api-compat reads ``x.dtype`` of any object (for JAX's
        zero-gradient arrays): an object whose attributes raise (a proxy) is
        no JAX array, whatever it raised.
        """
        try:
            return bool(array_api_compat.is_jax_array(x))
        except Exception:  # noqa: BLE001 - see above
            return False

    def to_numpy(self, x: Array) -> HostArray:
        """``np.asarray``: zero-copy (read-only) on the CPU, a copy from GPUs."""
        return np.asarray(x)

    def unshareable(self, x: Array) -> Unshareable | None:
        """Always read-only: JAX arrays are immutable, and may share their buffers."""
        return Unshareable("is a JAX array, which must never change", read_only=True)

    def memory_extent(self, x: Array) -> Extent | None:
        """The buffer of an array on one device, in C order (the host's for the CPU).

        Its place is DLPack's device (`dlpack_place`: "cuda:0" where torch's
        tensor on that GPU says so). None for a tracer, and where JAX gives
        no one buffer's address (an array sharded over devices, a deleted one).
        """
        if isinstance(x, _jax().core.Tracer):
            return None
        try:
            address = int(x.unsafe_buffer_pointer())
            device_type, device_id = x.__dlpack_device__()
        except Exception:  # noqa: BLE001 - JAX's errors for these vary by version
            return None
        place = dlpack_place(int(device_type), int(device_id))  # (as torch's)
        size = int(x.dtype.itemsize)
        strides, step = [], size
        for n in reversed(x.shape):
            strides.append(step)
            step *= int(n)
        return extent(place, address, x.shape, strides[::-1], size)

    def traced_by(self, x: Array) -> str | None:
        """The transform tracing ``x`` (JAX's transformations trace their inputs).

        Named by the tracer's class: ``jax.grad`` (and the other autodiff
        transforms), ``jax.vmap``, else ``jax.jit`` (and the transforms that
        stage a program: ``eval_shape``, a ``lax`` control-flow body).
        """
        if not isinstance(x, _jax().core.Tracer):
            return None
        kind = type(x).__name__
        if kind in ("JVPTracer", "LinearizeTracer"):
            return "jax.grad (or another autodiff transform)"
        if kind == "BatchTracer":
            return "jax.vmap"
        return "jax.jit (or a traced lax.scan, fori_loop or cond body)"

    def tracing_to_reuse(self) -> str | None:
        """While JAX traces the caller to a program it may reuse (JAX's own check).

        ``jax.jit``, and ``lax.scan``, ``lax.cond`` or ``jax.checkpoint``
        bodies, whose traces JAX caches too.
        """
        core = sys.modules.get("jax._src.core")  # (imported with jax)
        under_jit = getattr(core, "unsafe_am_i_under_a_jit", None)
        if under_jit is None or not under_jit():
            return None
        return "a JAX trace (jax.jit, or a lax.scan, lax.cond or checkpoint body)"

    def values_at_hand(self, x: Array) -> bool:
        """Not for a tracer (under ``jax.jit``), whose values do not exist yet."""
        return not isinstance(x, _jax().core.Tracer)

    #: Its own float64 arrays: XLA's CPU converts to float32 with float32's
    #: subnormals flushed to 0 (2**-130 became 0.0), and to float16 and
    #: bfloat16 through float32 (rounding twice), or to float16 once where
    #: the processor converts it (`float64_narrowing`); host data and
    #: numbers by NumPy's casts. (A GPU's converts are held to the CPU's
    #: rule: not measured here.)
    own_narrowing = "via float32, flushed"

    def float64_narrowing(self, *, on_host: bool) -> Narrowing:
        """How JAX's own float64 arrays narrow, as XLA's CPU does it on this processor.

        A float64 just under float16's overflow threshold, cast by JAX:
        through float32 it becomes inf (rounded twice), on a processor with
        AVX512-FP16 it stays finite (once). Asked once, where float64 is
        enabled; else (no float64 array of its own to narrow) the rule.
        """
        if on_host:
            return self.host_narrowing
        if not _float64_enabled():
            return self.own_narrowing
        return _xla_narrowing()

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """float16 and bfloat16, on every device."""
        return frozenset({"float16", "bfloat16"})

    def to_cpu(self, x: Array) -> Array:
        """``jax.device_put`` onto the first CPU device."""
        jax = _jax()
        return jax.device_put(x, jax.devices("cpu")[0])

    def onto_device(
        self,
        xp: Namespace,
        x: Array,
        native: NativeDevice,
        dtype: DType,
        copy: bool | None,
    ) -> Array:
        """``jax.device_put`` first, then the dtype on ``native``.

        ``jnp.asarray(x, dtype=..., device=...)`` of an array committed to
        another device raised "Received incompatible devices for jitted
        computation". The transfer is new memory: ``copy=True`` copies no
        more.
        """
        jax = _jax()
        if isinstance(x, jax.core.Tracer):  # (under jit: no device of its own)
            return xp.asarray(x, dtype=dtype, device=native, copy=copy)
        moved = jax.device_put(x, native)
        again = None if copy else copy
        return xp.asarray(moved, dtype=dtype, device=native, copy=again)

    def devices(self) -> tuple[str, ...]:
        """The default platform's devices first, then the CPU."""
        jax = _jax()
        found = [self.device_str(d) for d in jax.devices()]
        if "cpu" not in found:
            found.append("cpu")
        return tuple(found)

    def canonical_device(self, device: str) -> str:
        """``"<platform>:<n>"`` with aliases resolved."""
        platform, _, index = device.strip().lower().partition(":")
        platform = _ALIASES.get(platform, platform)
        return f"{platform}:{index or 0}"

    def native_device(self, device: str) -> NativeDevice:
        """The ``jax.Device`` object."""
        platform, _, index = self.canonical_device(device).partition(":")
        return _jax().devices(platform)[int(index)]

    def device_str(self, native: NativeDevice) -> str:
        """``"cpu"``, ``"gpu"``, ``"gpu:1"`` (index 0 is implicit).

        A tracer under ``jax.jit`` has no device yet (``None``): JAX will run
        it on the default device. An array sharded over several devices has
        no one device: a ValueError says to choose one.
        """
        jax = _jax()
        if native is None:
            return self.default_device()
        if not hasattr(native, "platform"):  # a Sharding, not a Device
            devices = list(getattr(native, "device_set", ()))
            if len(devices) != 1:
                msg = (
                    f"arrays sharded over {len(devices)} devices have no single "
                    "device; choose one with Backend('jax', device=...)"
                )
                raise ValueError(msg)
            native = devices[0]
        platform = str(native.platform)
        position = list(jax.devices(platform)).index(native)
        return platform if position == 0 else f"{platform}:{position}"

    def backend_name(self, device: str) -> str:
        """``"jax-cpu"``, ``"jax-gpu"``, ``"jax-tpu"``."""
        return f"jax-{self.canonical_device(device).split(':', 1)[0]}"

    def is_gpu(self, device: str) -> bool:
        """Anything but the CPU platform is an accelerator."""
        return not self.canonical_device(device).startswith("cpu:")

    def device_name(self, device: str) -> str:
        """JAX's ``device_kind``."""
        return str(self.native_device(device).device_kind)

    def config_token(self) -> Hashable:
        """``jax_enable_x64`` decides the 64-bit dtypes."""
        return bool(_jax().config.jax_enable_x64)

    def supports_float64(self, device: str) -> bool:
        """Only with ``jax_enable_x64`` switched on (JAX's global setting)."""
        return bool(_jax().config.jax_enable_x64)

    def memory_info(self, device: str) -> MemoryInfo | None:
        """``Device.memory_stats()`` where the device reports them."""
        if not self.is_gpu(device):
            return None
        stats = self.native_device(device).memory_stats()
        if not stats or "bytes_limit" not in stats:
            return None
        total = int(stats["bytes_limit"])
        used = int(stats.get("bytes_in_use", 0))
        return MemoryInfo(free=max(total - used, 0), total=total)

    def memory_cap(self, device: str) -> MemoryCap | None:
        """The arena of JAX's allocator on a GPU: ``memory_stats()["bytes_limit"]``.

        Its size is set by ``XLA_CLIENT_MEM_FRACTION`` (or the deprecated
        ``XLA_PYTHON_CLIENT_MEM_FRACTION``; 75% by default), preallocated
        unless ``XLA_PYTHON_CLIENT_PREALLOCATE=false``; the source names
        them. ``held`` is ``bytes_in_use``. None on the CPU, and where the
        device reports no limit (``XLA_PYTHON_CLIENT_ALLOCATOR=platform``).
        """
        if not self.is_gpu(device):
            return None
        stats = self.native_device(device).memory_stats()
        if not stats or "bytes_limit" not in stats:
            return None
        return MemoryCap(
            limit=int(stats["bytes_limit"]),
            held=int(stats.get("bytes_in_use", 0)),
            source=f"{jax_arena()} (memory_stats bytes_limit)",
        )

    numpy_dtypes = True

    def shape_traits(self, device: str) -> Traits | None:
        """Every operation a new buffer (no views; a row slice is a copy).

        On the CPU each array also holds its PjRt buffer and Python object,
        and some functions' programs hold more than their results
        (`xpkit._adapters._jax_workspace`: the CPU's only). Dispatch is
        asynchronous: an array dropped is held through the next
        `HELD_THROUGH` allocations, as JAX's own trace holds it.
        """
        traits: Traits = {
            "mixed_kinds": "float",
            "views": False,
            "slices_copy": True,
            "deferred_frees": HELD_THROUGH,
            "dtype_rules": _DTYPE_RULES,
            "norms": "eager",
            "argsort_values": True,
            "cumulative_block": CUMULATIVE_BLOCK,  # (as JAX's own trace counts it)
        }
        if self.is_gpu(device):
            traits["granule"] = 256
        else:
            traits["granule"] = 64
            traits["array_bytes"] = _CPU_ARRAY_BYTES
            traits["matmul_packing"] = CPU_MATMUL_PACKING
            traits["sort_scratch"] = _CPU_SORT_SCRATCH
            traits["vecdot_copies"] = 2  # (`_shapes._linalg.vecdot`)
            traits["centred_spread"] = True  # (measured on the CPU only)
            traits["workspace"] = self._cpu_workspace(device)
        return traits

    def _cpu_workspace(self, device: str) -> Workspace:
        """What the CPU's programs hold beside their results (`_jax_workspace`)."""
        wide = "float64" if self.supports_float64(device) else "float32"
        return functools.partial(cpu_workspace, default_float=wide)

    def library_tracer(
        self,
        fn: UserFunction,
        inputs: tuple[tuple[tuple[int, ...], str], ...],
        whole: tuple[tuple[object, ...], dict[str, object]],
        device: str,
    ) -> Tracer | None:
        """XLA's memory analysis of a jitted ``fn`` (one with ``lower``), else JAX's trace.

        `XlaTracer` is exact for the compiled program; `JaxprTracer` stands
        in for an eager ``fn`` written with ``jax.numpy`` directly.
        """
        costs = None
        if not self.is_gpu(device):
            costs = EagerCosts(
                _CPU_ARRAY_BYTES,
                _CPU_DISPATCH_BYTES,
                CPU_MATMUL_PACKING,
                _CPU_SORT_SCRATCH,
                self._cpu_workspace(device),
            )
        if callable(getattr(fn, "lower", None)):
            return XlaTracer(fn, inputs, whole, self.native_device(device), costs)
        return JaxprTracer(fn, inputs, whole, costs)

    def peak_meters(self, device: str) -> tuple[PeakMeter, ...]:
        """CPU: the host meter, each shape run once first; GPUs: ``memory_stats``.

        XLA compiles each new shape on first use, and on the CPU the
        compiler's memory would dominate the process's memory: each probe
        size runs once unmeasured first (`warmed_host_meter`), and the run
        after it, at the same shape, reads the arrays' own peak. On a GPU,
        ``peak_bytes_in_use`` is read where a run raised it (`StatsPeak`).
        """
        if self.is_gpu(device):
            return (StatsPeak(lambda: self.native_device(device)),)
        meter = warmed_host_meter()
        return () if meter is None else (meter,)

    test_modes = ("jit",)
    has_64_bit_switch = True

    def switch_on_64_bit(self) -> Callable[[], None] | None:
        """``jax_enable_x64`` on, where it was off; what turns it off again."""
        config = _jax().config
        if config.jax_enable_x64:
            return None
        config.update("jax_enable_x64", True)

        def undo() -> None:
            config.update("jax_enable_x64", False)

        return undo

    module_fixture = "jnp"
    module_fixture_mode = "jit"

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """The array type's ``__array__`` and ``jax.device_get``.

        On the CPU, NumPy takes a JAX array's buffer directly (no
        ``__array__`` call): only the NumPy functions the NumPy adapter
        lists (``np.asarray`` and its kin) see it; ``np.dot(x, x)``,
        ``np.stack`` or a ufunc copy it unseen.
        """
        jax = _jax()
        array_type = type(jax.numpy.zeros((), device=jax.devices("cpu")[0]))
        return ((array_type, "__array__"), (jax, "device_get"))

    def pads_batches(self, fn: UserFunction) -> bool:
        """Always: JAX compiles a jitted ``fn``, and each eager operation, per shape."""
        return True

    def lazy_context(
        self,
        mode: str,
        request: pytest.FixtureRequest,
        xp: Namespace,
        tagged: Tagged,
        replace: Replace,
    ) -> AbstractContextManager[None]:
        """``jit``: each declared function under ``jax.jit``, through array-api-extra.

        Its ``patch_lazy_xp_functions`` jits every argument that is not an
        array as static, as a user's own jitted code would call the function.
        """
        if mode != "jit":
            return super().lazy_context(mode, request, xp, tagged, replace)
        return patched_by_array_api_extra(
            request, xp, tagged, lambda tags: {"jax_jit": tags.jit}
        )

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """``jax.lax.top_k`` along the last axis (moved there and back).

        The smallest integers are the largest of ``~x`` (no overflow, signed
        or not); the smallest floats go by the stable sort, where NaN sorts
        last (``-x`` would keep NaN the largest). ``lax.top_k`` orders floats
        totally, a NaN with its sign bit set (``inf - inf``) below ``-inf``:
        it ranks a copy whose NaNs are all positive, so that every NaN is the
        largest, as on the other libraries; the values are ``x``'s own.
        """
        import jax

        floating = xp.isdtype(x.dtype, "real floating")
        if not largest and floating:
            return super().top_k(xp, x, k, axis, largest=largest)
        last = x.ndim - 1
        moved = x if axis == last else xp.moveaxis(x, axis, -1)
        if floating:
            ranked = xp.where(xp.isnan(moved), xp.asarray(xp.nan, dtype=x.dtype), moved)
        else:
            ranked = moved if largest else ~moved
        _, found = jax.lax.top_k(ranked, k)  # (int32 indices, with x64 too)
        index_dtype = xp.__array_namespace_info__().default_dtypes()["indexing"]
        indices = xp.astype(found, index_dtype)
        values = xp.take_along_axis(moved, indices, axis=-1)
        if axis != last:
            values = xp.moveaxis(values, -1, axis)
            indices = xp.moveaxis(indices, -1, axis)
        return values, indices

    def is_oom(self, exc: BaseException) -> bool:
        """XLA's ``RESOURCE_EXHAUSTED`` status, as ``JaxRuntimeError``."""
        if "jax" not in sys.modules or not isinstance(exc, RuntimeError):
            return False
        module = type(exc).__module__ or ""
        if not module.startswith(("jax", "jaxlib")):
            return False
        return "RESOURCE_EXHAUSTED" in str(exc)
