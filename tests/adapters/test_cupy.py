"""The CuPy adapter's GPU paths on a CPU-only host, by faking its device queries.

CuPy is really installed (its CPU-importable wheel), so its real exception
classes are used; only the driver queries are replaced (``fakes.fake_cupy_gpus``).
"""

from __future__ import annotations

import pytest
from fakes import fake_cupy_gpus

import xpkit
from xpkit import _memory

GB = 1024**3


def test_cupy_without_a_gpu_refuses_to_start():
    pytest.importorskip("cupy")
    from xpkit._adapters import ADAPTERS

    if ADAPTERS["cupy"].devices():
        pytest.skip("a real CUDA device is present")
    with pytest.raises(RuntimeError, match="CuPy sees no usable device"):
        xpkit.Backend("cupy")


def test_cupy_backend_on_fake_gpus(monkeypatch):
    fake_cupy_gpus(monkeypatch, count=2)
    b = xpkit.Backend("cupy")
    assert (b.name, b.device, b.is_gpu) == ("cupy", "cuda", True)
    assert xpkit.Backend("cupy", device="cuda:1").device == "cuda:1"
    with pytest.raises(
        ValueError, match=r"device='cuda:2' does not exist .* cuda, cuda:0, cuda:1"
    ):
        xpkit.Backend("cupy", device="cuda:2")
    assert b.xp.__name__ == "array_api_compat.cupy"


def test_cupy_budget_adds_pool_free_bytes(monkeypatch):
    fake_cupy_gpus(monkeypatch, free=10 * GB, total=40 * GB, pooled=2 * GB)
    b = xpkit.Backend("cupy")
    assert xpkit.device_memory_budget(b) == pytest.approx(12 * _memory.HEADROOM)
    assert xpkit.device_memory_budget(b, cap_for_batching=True) == min(
        12 * _memory.HEADROOM, xpkit.BATCH_WORKING_SET_CEILING_GB
    )


def test_cupy_real_oom_classes():
    pytest.importorskip("cupy")
    from cupy.cuda.memory import OutOfMemoryError
    from cupy_backends.cuda.api.runtime import CUDARuntimeError

    assert xpkit.is_oom_error(OutOfMemoryError(1024, 2048))
    assert xpkit.is_oom_error(CUDARuntimeError(2))  # cudaErrorMemoryAllocation
    assert not xpkit.is_oom_error(CUDARuntimeError(1))  # cudaErrorInvalidValue


def test_gpu_spec_finds_cupy_when_torch_has_none(monkeypatch):
    from xpkit._adapters import ADAPTERS

    monkeypatch.setattr(ADAPTERS["torch"], "devices", lambda: ("cpu",))
    monkeypatch.setattr(ADAPTERS["jax"], "devices", lambda: ("cpu",))
    fake_cupy_gpus(monkeypatch, count=1)
    b = xpkit.resolve_backend("gpu")
    assert b.name == "cupy"
    available, info = xpkit.check_gpu_available()
    assert available
    assert info["backend"] == "cupy"


def test_cupy_device_keys_are_hashable_indices():
    """``Backend.from_arrays`` caches by device key; CuPy's Device is unhashable."""
    from types import SimpleNamespace

    from xpkit._adapters import ADAPTERS

    cupy = ADAPTERS["cupy"]
    on_one = SimpleNamespace(device=SimpleNamespace(id=1))  # an array's .device
    assert cupy.device_key(on_one) == 1
    assert cupy.native_device_key(SimpleNamespace(id=1)) == 1
    assert hash(cupy.device_key(on_one)) == hash(1)
