"""Fault injection: make torch believe it has CUDA, XPU or MPS devices.

Only the device *queries* are faked (``torch.cuda.is_available``,
``device_count``, ``torch.backends.mps.is_available``); nothing allocates on
the fake device, so tests using these exercise xpkit's decisions, not torch.
`fake_nvml` puts a stand-in ``pynvml`` module in ``sys.modules``.
`HerePool` is an executor's pool that runs each task here.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, Self

import pytest


def _fake_device_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's dtype probe cannot reach a fake device: answer as a real one would."""
    from xpkit._adapters import ADAPTERS
    from xpkit._dtypes import DTYPE_NAMES

    adapter = ADAPTERS["torch"]
    real = type(adapter).supported_dtypes

    def supported(self, device: str) -> frozenset[str]:
        if device.startswith("cpu"):
            return real(self, device)
        names = set(DTYPE_NAMES) - {"bfloat16", "float16"}
        if not self.supports_float64(device):
            names -= {"float64", "complex128"}
        return frozenset(names)

    monkeypatch.setattr(type(adapter), "supported_dtypes", supported)


def fake_cuda(monkeypatch: pytest.MonkeyPatch, count: int = 2) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: f"Fake GPU {i}")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    no_nvml(monkeypatch)  # a real NVML would answer for real GPUs, not these
    _fake_device_dtypes(monkeypatch)


def fake_xpu(
    monkeypatch: pytest.MonkeyPatch,
    count: int = 2,
    fp64: tuple[bool | None, ...] | None = None,
    memory: tuple[int, int] | None = None,
) -> None:
    """torch (a CPU build) believing it sees ``count`` Intel XPUs and no CUDA.

    ``fp64[i]`` is device i's ``has_fp64`` property (None: a torch whose
    properties lack it); ``memory`` is what ``torch.xpu.mem_get_info`` says.
    """
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "xpu"):
        pytest.skip("this torch build has no torch.xpu")
    flags = fp64 if fp64 is not None else (True,) * count

    def properties(i: int = 0) -> Any:
        props = types.SimpleNamespace(name=f"Fake Arc {i}", total_memory=16 * 1024**3)
        if flags[i] is not None:
            props.has_fp64 = flags[i]
        return props

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "device_count", lambda: count)
    monkeypatch.setattr(torch.xpu, "get_device_name", lambda i=0: f"Fake Arc {i}")
    monkeypatch.setattr(torch.xpu, "get_device_properties", properties)
    if memory is not None:
        monkeypatch.setattr(torch.xpu, "mem_get_info", lambda i=0: memory)
    _fake_device_dtypes(monkeypatch)


class FakeNvml(types.ModuleType):
    """A stand-in ``pynvml``: physical GPUs, their memory, and who asked.

    ``gpus`` are ``(name, uuid, free, total)`` in NVML (PCI bus) order.
    """

    class NVMLError(Exception):
        pass

    def __init__(self, gpus: list[tuple[str, str, int, int]], init_fails: bool) -> None:
        super().__init__("pynvml")
        self.gpus = gpus
        self.init_fails = init_fails
        self.init_calls = 0
        self.asked: list[int] = []

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_fails:
            msg = "NVML Shared Library Not Found"
            raise self.NVMLError(msg)

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.gpus):
            msg = "Invalid Argument"
            raise self.NVMLError(msg)
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        for i, gpu in enumerate(self.gpus):
            if gpu[1] == uuid:
                return i
        msg = "Not Found"
        raise self.NVMLError(msg)

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return self.gpus[handle][0].encode()

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        self.asked.append(handle)
        _name, _uuid, free, total = self.gpus[handle]
        return types.SimpleNamespace(free=free, total=total, used=total - free)


def fake_nvml(
    monkeypatch: pytest.MonkeyPatch,
    gpus: list[tuple[str, str, int, int]] | None = None,
    *,
    init_fails: bool = False,
) -> FakeNvml:
    """Install a `FakeNvml` as ``pynvml`` for this test (``None`` gpus: none)."""
    module = FakeNvml(list(gpus or []), init_fails)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import pynvml`` fail, as where nvidia-ml-py is not installed."""
    monkeypatch.setitem(sys.modules, "pynvml", None)


def fake_mps(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    _fake_device_dtypes(monkeypatch)


def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide every GPU (real ones too) from every library."""
    from xpkit._adapters import ADAPTERS

    for adapter in ADAPTERS.values():
        real = adapter.devices
        monkeypatch.setattr(
            adapter,
            "devices",
            lambda real=real, adapter=adapter: tuple(
                d for d in real() if not adapter.is_gpu(d)
            ),
        )


class FakeCupyDevice:
    """Stands in for ``cupy.cuda.Device`` where no CUDA driver exists."""

    def __init__(self, device: int = 0) -> None:
        self.id = device

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def fake_cupy_gpus(
    monkeypatch: pytest.MonkeyPatch,
    count: int = 2,
    free: int = 0,
    total: int = 0,
    pooled: int = 0,
    used: int = 0,
    limit: int = 0,
) -> None:
    """CuPy (really installed, CPU-only host) believing it sees ``count`` GPUs.

    Device 0 is current; its default pool holds ``used`` bytes in arrays and
    ``pooled`` free, under ``limit`` (0: none).
    """
    cupy = pytest.importorskip("cupy")
    no_nvml(monkeypatch)  # a real NVML would answer for real GPUs, not these
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: count)
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (free, total))
    monkeypatch.setattr(cupy.cuda, "Device", FakeCupyDevice)
    pool = type(
        "Pool",
        (),
        {
            "free_bytes": lambda self: pooled,
            "used_bytes": lambda self: used,
            "total_bytes": lambda self: used + pooled,
            "get_limit": lambda self: limit,
        },
    )()
    monkeypatch.setattr(cupy, "get_default_memory_pool", lambda: pool)


class FakeJaxGpu:
    """A JAX GPU device as ``jax.devices('gpu')`` would list it."""

    platform = "gpu"
    device_kind = "Fake H100"

    def __init__(self, index: int, stats: dict[str, int] | None) -> None:
        self.id = index
        self._stats = stats

    def memory_stats(self) -> dict[str, int] | None:
        return self._stats


def fake_jax_gpus(
    monkeypatch: pytest.MonkeyPatch, count: int = 2, stats: dict[str, int] | None = None
) -> list[FakeJaxGpu]:
    jax = pytest.importorskip("jax")
    real = jax.devices
    gpus = [FakeJaxGpu(i, stats) for i in range(count)]

    def devices(backend: str | None = None):
        if backend in (None, "gpu", "cuda"):
            return list(gpus)
        return real(backend)

    monkeypatch.setattr(jax, "devices", devices)
    return gpus


def write_file(root: Path, rel: str, text: str) -> None:
    """Write ``text`` to ``root/rel`` (fake /proc and /sys trees for cgroup tests)."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class HerePool:
    """An executor's pool (`xpkit._executors.Pool`) that runs each task here, as submitted.

    Subclasses choose the order `wait` hands finished tasks back in.
    """

    where = "this thread"

    def __init__(self, slots: int) -> None:
        self.slots, self.per_slot = slots, 1
        self.starts: dict[object, int] = {}

    def start(self, job, arrays):
        self.job, self.arrays = job, arrays

    def submit(self, start, stop, *, pad=True):
        from concurrent.futures import Future

        from xpkit._rows import run_rows

        future: Future = Future()
        try:
            future.set_result(run_rows(self.job, start, stop, *self.arrays, pad=pad))
        except Exception as exc:  # noqa: BLE001 - the task's error, for the driver
            future.set_exception(exc)
        self.starts[future] = start
        return future

    def wait(self, futures):
        return [
            (f, None if f.exception() else f.result(), f.exception()) for f in futures
        ]

    def lost_worker(self, exc):  # noqa: ARG002 - no worker dies here
        return False

    def close(self):
        pass

    def abandon(self, futures):
        pass
