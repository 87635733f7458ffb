"""Adapter for PyTorch: CPU, CUDA, Intel XPU and Apple MPS devices."""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Hashable
from types import MappingProxyType, ModuleType
from typing import TYPE_CHECKING, TypeVar, cast

import array_api_compat
import numpy as np

from ._base import Adapter, FastOps
from ._device_memory import MemoryCap, MemoryInfo, MemoryProbe
from ._layout import overlaps_itself
from ._peak import PeakMeter, host_meter
from ._torch_compile import compiled_whole, eager_only, is_compiling
from ._torch_dispatch import DispatchPeak
from ._torch_layout import (
    indexed,
    narrowed_by_bits,
    tensor_extent,
    tensor_not_updatable,
    tensor_on_host,
    tensor_over_read_only_memory,
    tensor_refused,
    tensor_unconvertible,
    tensor_unshareable,
    tensor_unwritable,
    torch_takes,
    widened_on_host,
)
from ._torch_memory import (
    accelerator_cap,
    accelerator_memory,
    accelerator_probe,
    device_name,
    is_torch_oom,
)
from ._torch_ops import set_default_dtype, torch_fast_ops, torch_top_k
from ._torch_shapes import torch_traits

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import pytest

    from .._typing import Array, DType, HostArray, Namespace, NativeDevice, UserFunction
    from ._layout import Extent, Unshareable
    from ._lazy_tags import Replace, Tagged
    from ._top_k import TopK
    from ._trace import Traits

__all__ = ["TorchAdapter"]


#: A callable that `TorchAdapter.eager_only` hands back with its signature.
F = TypeVar("F", bound=Callable[..., object])

#: Device kinds with a caching allocator this adapter asks about memory.
_ALLOCATOR_KINDS = ("cuda", "xpu")


#: What ``torch.empty`` raises on a device that cannot hold a dtype: a
#: RuntimeError (NotImplementedError, AcceleratorError: the device lacks it
#: or cannot be reached), a TypeError (MPS and float64), an AssertionError
#: (a build without the device's kind: "Torch not compiled with XPU enabled").
_REFUSED = (RuntimeError, TypeError, AssertionError)

#: Dtypes torch has beyond the standard's (the unsigned ones since torch 2.3).
_EXTRA_DTYPES = ("float16", "bfloat16", "uint16", "uint32", "uint64")


def _torch() -> ModuleType:
    import torch

    module: ModuleType = torch  # typed whether installed or not
    return module


class TorchAdapter(Adapter):
    """PyTorch through ``array_api_compat.torch``; device order cuda → xpu → mps → cpu."""

    key = "torch"
    module = "torch"
    extra = "torch"
    label = "PyTorch"
    dtype_prefixes = ("torch",)
    dtype_repr_module = "torch"
    auto_rank = 0
    gpu_kinds = "CUDA/XPU/MPS"
    device_kinds = ("cpu", "cuda", "xpu", "mps")
    #: torch reports shape mismatches (and dtypes a function lacks) as
    #: RuntimeError; OOMs are RuntimeErrors too, which the facade's checks of
    #: the arguments find nothing wrong with, and so let through.
    argument_errors = (TypeError, ValueError, IndexError, RuntimeError)

    has_cost_mode = True

    def cost_mode(self) -> Hashable:
        """Whether autograd records (grad mode) and whether inference mode is on."""
        torch = _torch()
        return (torch.is_grad_enabled(), torch.is_inference_mode_enabled())

    def namespace(self) -> ModuleType:
        """``array_api_compat.torch``."""
        import array_api_compat.torch as xp

        return xp

    def owns(self, x: object) -> bool:
        """``torch.Tensor`` instances."""
        return bool(array_api_compat.is_torch_array(x))

    def device_key(self, x: Array) -> Hashable:
        """``tensor.device`` (a hashable ``torch.device``)."""
        return cast("Hashable", x.device)

    def fast_ops(self, xp: Namespace) -> FastOps:
        """Native torch calls where the compat wrapper only adds overhead (`torch_fast_ops`)."""
        return torch_fast_ops(xp, _torch())

    def is_missing_kernel(self, exc: BaseException) -> bool:
        """No kernel (``NotImplementedError``), or dtypes torch cannot promote.

        torch has no promotion of uint16, uint32 and uint64 with another
        integer type (a RuntimeError: "Promotion for uint16, uint32, uint64
        types is not supported"), where the standard's makes int64.
        """
        return isinstance(exc, NotImplementedError) or (
            isinstance(exc, RuntimeError) and "Promotion for" in str(exc)
        )

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """``torch.topk`` (sorted) on every device; a stable sort where it has no kernel."""
        return torch_top_k(x, k, axis, largest=largest)

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """``torch.device("cuda")`` means device 0, as tensors report it."""
        key: Hashable = indexed(native)
        return key

    def own_check(
        self, native: NativeDevice, dtypes: frozenset[str], *, any_device: bool = False
    ) -> Callable[[object], bool]:
        """A tensor (or parameter), strided, of a dtype in ``dtypes``, on ``native``.

        Quantized tensors fail the dtype test (their dtypes are not in
        ``dtypes``); a CPU device is tested with ``is_cpu``, the cheapest
        device attribute a tensor has.
        """
        torch = _torch()
        tensor, parameter, strided = torch.Tensor, torch.nn.Parameter, torch.strided
        ok = frozenset(getattr(torch, n) for n in dtypes if hasattr(torch, n))
        key = indexed(native)

        # Three closures rather than one with flags: this runs on every facade
        # call, so the device test is chosen once here, not branched on there.
        def own_anywhere(x: Array) -> bool:
            cls = type(x)
            return (
                (cls is tensor or cls is parameter)
                and x.dtype in ok
                and x.layout is strided
            )

        def own_cpu(x: Array) -> bool:
            cls = type(x)
            return (
                (cls is tensor or cls is parameter)
                and x.dtype in ok
                and x.layout is strided
                and x.is_cpu
            )

        def own_on(x: Array) -> bool:
            cls = type(x)
            return (
                (cls is tensor or cls is parameter)
                and x.dtype in ok
                and x.layout is strided
                and x.device == key
            )

        if any_device:
            return own_anywhere
        return own_cpu if key.type == "cpu" else own_on

    _strided: object = None

    def lost_in_conversion(self, x: Array) -> str | None:
        """A meta, sparse, nested, quantized or masked tensor (`tensor_unconvertible`)."""
        return tensor_unconvertible(x, x.layout is self._strided_layout(), _torch())

    def refused_operand(self, x: Array) -> str | None:
        """Nested, sparse, quantized and masked tensors (`tensor_refused`)."""
        return tensor_refused(x, x.layout is self._strided_layout(), _torch())

    def is_read_only(self, x: Array) -> bool:
        """A tensor whose elements share memory (``expand``): a write to one writes all."""
        if getattr(x, "layout", None) is not self._strided_layout():
            return False  # (sparse, or a shape-only stand-in of a trace)
        return overlaps_itself(tuple(x.shape), x.stride(), 1)

    def input_key(self, x: Array) -> Hashable:
        """`Adapter.input_key`, the layout (a sparse tensor is refused) and the strides."""
        return (
            super().input_key(x),
            x.layout,
            x.stride() if x.layout is self._strided_layout() else None,
        )

    def rows_contiguous(self, x: Array) -> bool:
        """``x.is_contiguous()`` (a sparse tensor is refused before)."""
        return x.layout is not self._strided_layout() or bool(x.is_contiguous())

    def _strided_layout(self) -> object:
        strided = self._strided
        if strided is None:
            strided = self._strided = _torch().strided
        return strided

    def is_plain(self, x: Array) -> bool:
        """A dense (strided) tensor or parameter, not a sparse or quantized one."""
        return x.layout is self._strided_layout() and not x.is_quantized

    def unwritable(self, x: Array) -> str | None:
        """Meta, sparse, grad, an inference tensor outside inference mode, overlapping elements."""
        strided = x.layout is self._strided_layout()
        return tensor_unwritable(x, _torch().is_inference_mode_enabled(), strided)

    #: `to_numpy` copies bfloat16 (and the 8-bit floats) as float32, and
    #: complex32 as complex64.
    host_dtypes = MappingProxyType({"bfloat16": "float32"})

    def to_numpy(self, x: Array) -> HostArray:
        """Detach, move to the CPU when needed, then share memory with NumPy."""
        return tensor_on_host(x, _torch())

    def host_view(self, x: Array) -> HostArray | None:
        """``x.numpy()`` of a plain CPU tensor (its memory); None elsewhere."""
        if (
            x.device.type != "cpu"
            or x.layout is not self._strided_layout()
            or x.is_conj()
            or x.is_neg()
            or widened_on_host(x.dtype, _torch()) is not None
        ):
            return None
        view: HostArray = x.detach().numpy()
        return view

    def host_owner(self, x: Array) -> object | None:
        """None: a tensor answers for its own memory (`over_read_only_memory`)."""
        return None

    def over_read_only_memory(self, x: Array) -> bool:
        """A CPU tensor over read-only pages (`tensor_over_read_only_memory`)."""
        return (
            x.layout is self._strided_layout()
            and x.device.type == "cpu"
            and tensor_over_read_only_memory(x)
        )

    def memory_extent(self, x: Array) -> Extent | None:
        """A strided tensor's extent on its device (the host's for the CPU)."""
        if x.layout is not self._strided_layout():
            return None
        return tensor_extent(x)

    def to_cpu(self, x: Array) -> Array:
        """``tensor.cpu()``; a meta tensor has no values to move (TypeError)."""
        if x.device.type == "meta":  # (torch: NotImplementedError)
            msg = "array is a meta tensor: it has a shape and a dtype but no values"
            raise TypeError(msg)
        return x.cpu()

    #: torch has no read-only tensors.
    always_writable = True
    ints_join_arrays = False
    #: A NumPy 0-d mask of a 0-d tensor: "too many indices" (torch 2.13).
    reads_numpy_masks = False

    def unshareable(self, x: Array) -> Unshareable | None:
        """Lazy conjugate and negative bits (DLPack drops them), zero strides."""
        return tensor_unshareable(x, x.layout is self._strided_layout())

    #: ``x[1:] = x[:-1]``: "unsupported operation: some elements of the
    #: input tensor and the written-to tensor refer to a single memory location".
    reads_overlapping_values = False

    def update_refusal(self, x: Array) -> str | None:
        """Why ``at`` cannot update ``x`` in place (`tensor_not_updatable`), or None."""
        torch, strided = _torch(), x.layout is self._strided_layout()
        modes = torch.is_inference_mode_enabled(), torch.is_grad_enabled()
        return tensor_not_updatable(x, modes[0], strided, modes[1])

    def copy_to_update(self, x: Array) -> Array | None:
        """``x.clone()`` of one that requires grad (in its graph; ``asarray`` warns of it)."""
        return x.clone() if x.requires_grad else None

    def own_copy(self, x: Array) -> Array:
        """``x.clone()`` (in its graph: ``asarray(copy=True)`` warns of one that requires grad)."""
        return x.clone()

    def contiguous_copy(self, x: Array) -> Array:
        """Detached, its lazy bits resolved, contiguous, in memory of its own."""
        t = x.detach()
        resolved = t.is_conj() or t.is_neg()  # resolving copies
        t = t.resolve_conj().resolve_neg()
        if resolved and t.is_contiguous():
            return t
        return t.clone(memory_format=_torch().contiguous_format)

    #: float64 to float16 or bfloat16 through float32 first, from a tensor,
    #: a NumPy array or a number alike: rounded twice (65520 - 2**-20 became
    #: inf in float16: 65520.0 in float32, the tie that rounds to inf).
    host_narrowing = own_narrowing = "via float32"
    #: bfloat16 back from float32 by its bits (torch's cast made NaNs 0xFFFF).
    narrowed_back = staticmethod(narrowed_by_bits)

    def from_host(
        self, xp: Namespace, host: HostArray, dtype: DType, device: NativeDevice
    ) -> Array:
        """``torch.asarray`` of the array in a layout torch takes (`torch_takes`)."""
        return xp.asarray(torch_takes(host), dtype=dtype, device=device)

    has_default_float = True

    def set_default_float(self, name: str) -> Callable[[], None] | None:
        """``torch.set_default_dtype``, where ``name`` is not the default already."""
        return set_default_dtype(_torch(), name)

    traces_python = True
    #: Its intra-op threads allocate in glibc's per-thread arenas, which keep
    #: what they free: a batch's peak would add to the last one's.
    keeps_freed_host_memory = True

    def compiler_imported(self) -> bool:
        """Whether dynamo (``torch._dynamo``) is imported: ``torch.compile`` ran.

        ``torch.compiler.disable``, which `eager_only` calls, imports it: 2.3
        s on a first `map_batches` call that nothing compiles.
        """
        return sys.modules.get("torch._dynamo") is not None

    def compiling(self) -> bool:
        """``torch.compiler.is_compiling()``: dynamo is tracing the caller."""
        return is_compiling(_torch)

    def eager_only(self, fn: F, reason: str) -> F:
        """``torch.compiler.disable(fn, reason=reason)``: dynamo never traces it.

        Called from ``torch.compile``-d code it runs eagerly (a graph break);
        under ``fullgraph=True`` compiling fails, and the error gives
        ``reason``. Made once per function, outside any trace: asked first
        while dynamo traces (which cannot trace ``disable``), it breaks the
        graph there, and makes it in the eager code after the break.
        """
        return eager_only(_torch(), fn, reason)

    def values_at_hand(self, x: Array) -> bool:
        """Not for meta tensors, which have no values."""
        return not x.is_meta

    _extra: dict[str, frozenset[str]] | None = None

    def supported_dtypes(self, device: str) -> frozenset[str]:
        """The inspection API's dtypes; on CUDA, the CPU's (CUDA holds them all).

        array-api-compat lists a device's dtypes by making an empty tensor of
        each there, which on CUDA would create a driver context (hundreds of
        MB on every device asked, `xpkit info` asks them all).
        """
        cuda = device.split(":", 1)[0] == "cuda"
        return super().supported_dtypes("cpu" if cuda else device)

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """float16, bfloat16 and (torch >= 2.3) uint16/32/64, where allocatable.

        Each is tried once per device with an empty tensor; on CUDA devices,
        which hold them all, none is tried (an empty tensor would create a
        CUDA context there).
        """
        if device.split(":", 1)[0] == "cuda":
            torch = _torch()
            return frozenset(n for n in _EXTRA_DTYPES if hasattr(torch, n))
        cache = self._extra
        if cache is None:
            cache = self._extra = {}
        found = cache.get(device)
        if found is None:
            torch = _torch()
            native = self.native_device(device)
            names = set()
            for name in _EXTRA_DTYPES:
                dtype = getattr(torch, name, None)
                if dtype is None:
                    continue
                try:
                    torch.empty((0,), dtype=dtype, device=native)
                except _REFUSED:  # the device lacks it, or is out of reach
                    continue
                names.add(name)
            found = frozenset(names)
            if found:  # none: the device is unreachable now; ask again next time
                cache[device] = found
        return found

    def devices(self) -> tuple[str, ...]:
        """``"cuda"`` and ``"cuda:N"``, ``"xpu"`` and ``"xpu:N"``, ``"mps"``, ``"cpu"``."""
        torch = _torch()
        found: list[str] = []
        for kind in _ALLOCATOR_KINDS:
            mod = getattr(torch, kind, None)  # builds without torch.xpu exist
            if mod is not None and mod.is_available():
                n = mod.device_count()
                found += [kind, *(f"{kind}:{i}" for i in range(n))]
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            found.append("mps")
        found.append("cpu")
        return tuple(found)

    def canonical_device(self, device: str) -> str:
        """``"cuda"`` means ``"cuda:0"`` (``"xpu"``, ``"xpu:0"``); ``"mps:0"`` is ``"mps"``."""
        name = device.strip().lower()
        if name in _ALLOCATOR_KINDS:
            return f"{name}:0"
        if name in {"mps:0", "cpu:0"}:
            return name[:-2]
        return name

    def native_device(self, device: str) -> NativeDevice:
        """A ``torch.device``."""
        return _torch().device(device)

    def device_str(self, native: NativeDevice) -> str:
        """``"cpu"``, ``"cuda:N"``, ``"xpu:N"`` or ``"mps"``."""
        return self.canonical_device(str(native))

    def backend_name(self, device: str) -> str:
        """``"torch-cpu"``, ``"torch-cuda"``, ``"torch-xpu"`` or ``"torch-mps"``."""
        return f"torch-{device.split(':', 1)[0]}"

    def is_gpu(self, device: str) -> bool:
        """CUDA (or ROCm, which torch also calls cuda), XPU and MPS devices."""
        return device.split(":", 1)[0] in {"cuda", "xpu", "mps"}

    def device_name(self, device: str) -> str:
        """The CUDA or XPU device name, "Apple MPS", or the CPU's name."""
        kind, _, index = self.canonical_device(device).partition(":")
        if kind in _ALLOCATOR_KINDS:
            return device_name(_torch(), kind, int(index or 0))
        if kind == "mps":
            return "Apple MPS"
        return platform.processor() or platform.machine() or "CPU"

    def unified_memory(self, device: str) -> bool:
        """The CPU and Apple's MPS share host memory; CUDA and XPU GPUs do not."""
        return device.split(":", 1)[0] not in _ALLOCATOR_KINDS

    def supports_float64(self, device: str) -> bool:
        """Read per device at run time on XPU and MPS; CPU and CUDA have it.

        XPU: the device's ``has_fp64`` property (devices of one name may
        differ), else whether a float64 tensor can be made there; MPS:
        whether a float64 tensor can be made there (Metal has none).
        """
        kind, _, index = self.canonical_device(device).partition(":")
        if kind not in {"xpu", "mps"}:
            return True
        torch = _torch()
        if kind == "xpu":
            props = torch.xpu.get_device_properties(int(index or 0))
            has = getattr(props, "has_fp64", None)
            if has is not None:
                return bool(has)
        try:
            torch.empty((1,), dtype=torch.float64, device=self.native_device(device))
        except _REFUSED:  # MPS: TypeError; other refusals mean no all the same
            return False
        return True

    def memory_probe(self, device: str) -> MemoryProbe:
        """CUDA: NVML for devices without a context, where installed; see `memory_info`."""
        kind, _, index = self.canonical_device(device).partition(":")
        if kind in _ALLOCATOR_KINDS:
            canon = self.canonical_device(device)
            return accelerator_probe(_torch(), kind, int(index or 0), canon)
        if kind == "mps":
            return MemoryProbe("torch.mps.recommended_max_memory")
        return super().memory_probe(device)

    def memory_info(self, device: str) -> MemoryInfo | None:
        """CUDA, XPU: free memory plus the caching allocator's idle blocks.

        A CUDA device this process holds no context on is read through NVML
        where ``nvidia-ml-py`` is installed (asking the runtime would create
        one). MPS: Metal's recommended working set minus what the driver
        holds. CPU: None (host memory).
        """
        torch = _torch()
        kind, _, index = self.canonical_device(device).partition(":")
        if kind in _ALLOCATOR_KINDS:
            return accelerator_memory(torch, kind, int(index or 0))
        if kind == "mps":
            total = int(torch.mps.recommended_max_memory())
            used = int(torch.mps.driver_allocated_memory())
            return MemoryInfo(free=max(total - used, 0), total=total)
        return None

    def memory_cap(self, device: str) -> MemoryCap | None:
        """CUDA and XPU: torch's per-process memory fraction, as a cap.

        Set by ``torch.cuda.set_per_process_memory_fraction`` (read back once
        torch has initialised CUDA) or ``per_process_memory_fraction`` in
        ``PYTORCH_CUDA_ALLOC_CONF`` / ``PYTORCH_ALLOC_CONF``; the smaller
        applies. XPU: ``torch.xpu.set_per_process_memory_fraction``.
        """
        kind, _, index = self.canonical_device(device).partition(":")
        if kind not in _ALLOCATOR_KINDS:
            return None
        idx = int(index or 0)
        torch = _torch()
        return accelerator_cap(
            torch, kind, idx, lambda: accelerator_memory(torch, kind, idx).total
        )

    def shape_traits(self, device: str) -> Traits | None:
        """Views (``flip`` copies), sorts that make their indices, the allocator's blocks.

        `torch_traits`: on the CPU each tensor also holds its C++ and
        Python objects; on an accelerator only the device's bytes count.
        """
        kind = self.canonical_device(device).partition(":")[0]
        return torch_traits(kind, kind in _ALLOCATOR_KINDS)

    def peak_meters(self, device: str) -> tuple[PeakMeter, ...]:
        """The tensors torch's operations make (`DispatchPeak`); on the CPU, then the host's.

        Every device has it: it follows the calling thread's aten operations
        and resets no statistic of the allocator's.
        """
        kind, _, index = self.canonical_device(device).partition(":")
        granule = 64 if kind == "cpu" else 512 if kind in _ALLOCATOR_KINDS else 256
        own = DispatchPeak(kind, int(index) if index else None, granule)
        host = host_meter() if kind == "cpu" else None
        return (own,) if host is None else (own, host)

    def empty_cache(self) -> None:
        """Empty the CUDA/XPU/MPS caching allocators, only where already in use."""
        torch = sys.modules.get("torch")
        if torch is None:
            return
        for kind in _ALLOCATOR_KINDS:
            mod = getattr(torch, kind, None)
            if mod is not None and mod.is_initialized():
                mod.empty_cache()
        mps_backend = getattr(getattr(torch, "backends", None), "mps", None)
        if mps_backend is not None and mps_backend.is_available():
            torch.mps.empty_cache()

    test_modes = ("compile",)
    module_fixture = "torch"

    #: Tensors with a shape and a dtype but no values (``device="meta"``).
    shape_only_devices = ("meta",)

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """``Tensor.__array__`` (``np.asarray``) and ``Tensor.numpy``."""
        tensor = _torch().Tensor
        return ((tensor, "__array__"), (tensor, "numpy"))

    def traced_host_array(self, x: object) -> Array | None:
        """A NumPy array as a CPU tensor while ``torch.compile`` traces the caller.

        Dynamo traces NumPy arrays as tensors but cannot read their
        attributes (``ndarray.dtype``); ``torch.as_tensor`` it can trace.
        """
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(x, np.ndarray):
            return None
        if not torch.compiler.is_compiling():
            return None
        return torch.as_tensor(x)

    def pads_batches(self, fn: UserFunction) -> bool:
        """For a ``torch.compile``-d ``fn``, which recompiles for a new shape."""
        return hasattr(fn, "_torchdynamo_orig_callable") or type(fn).__name__ == (
            "OptimizedModule"
        )

    def lazy_context(
        self,
        mode: str,
        request: pytest.FixtureRequest,
        xp: Namespace,
        tagged: Tagged,
        replace: Replace,
    ) -> AbstractContextManager[None]:
        """``compile``: each declared function under ``torch.compile(fullgraph=True)``.

        A graph break (a Python ``if`` on a tensor's value, ``float(x)``,
        ``.item()``) is then an error naming its cause. The ``aot_eager``
        backend captures the whole graph through AOTAutograd without
        generating kernels, so a test pays the capture, not a build.
        """
        if mode != "compile":
            return super().lazy_context(mode, request, xp, tagged, replace)
        return replace(compiled_whole)

    def is_oom(self, exc: BaseException) -> bool:
        """``torch.OutOfMemoryError`` and the OOM RuntimeErrors of torch.

        ``OutOfMemoryError`` is what the CUDA and XPU allocators raise; the
        messages cover CUDA, ROCm, XPU ("XPU out of memory" and the Level
        Zero runtime's ``UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY``), MPS and the
        CPU allocator.
        """
        return is_torch_oom(exc)
