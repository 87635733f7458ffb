"""Fault injection: make torch believe it has CUDA or MPS devices.

Only the device *queries* are faked (``torch.cuda.is_available``,
``device_count``, ``torch.backends.mps.is_available``); nothing allocates on
the fake device, so tests using these exercise xpkit's decisions, not torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

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
    _fake_device_dtypes(monkeypatch)


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
) -> None:
    """CuPy (really installed, CPU-only host) believing it sees ``count`` GPUs."""
    cupy = pytest.importorskip("cupy")
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: count)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", lambda: (free, total))
    monkeypatch.setattr(cupy.cuda, "Device", FakeCupyDevice)
    pool = type("Pool", (), {"free_bytes": lambda self: pooled})()
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
