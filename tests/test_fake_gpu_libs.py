"""CuPy and JAX GPU paths on a CPU-only host, by faking their device queries.

CuPy is really installed (its CPU-importable wheel), so its real exception
classes are used; only the driver queries are replaced.
"""

from __future__ import annotations

import numpy as np
import pytest
from fakes import fake_cupy_gpus, fake_jax_gpus

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


def test_jax_backend_on_fake_gpus(monkeypatch):
    gpus = fake_jax_gpus(
        monkeypatch, count=2, stats={"bytes_limit": 16 * GB, "bytes_in_use": 4 * GB}
    )
    b = xpkit.Backend("jax")
    assert (b.name, b.device, b.is_gpu) == ("jax-gpu", "gpu", True)
    assert b.native_device is gpus[0]
    b1 = xpkit.Backend("jax", device="cuda:1")  # "cuda" is an alias of "gpu"
    assert (b1.device, b1.native_device) == ("gpu:1", gpus[1])
    assert xpkit.Backend("jax", device="cpu").name == "jax-cpu"
    assert xpkit.device_memory_budget(b1) == pytest.approx(12 * _memory.HEADROOM)


def test_jax_gpu_without_memory_stats_uses_host_memory(monkeypatch, host_memory):
    fake_jax_gpus(monkeypatch, count=1, stats=None)
    host_memory(3)
    assert xpkit.device_memory_budget(xpkit.Backend("jax")) == pytest.approx(
        3 * _memory.HEADROOM
    )


def test_jax_real_resource_exhausted():
    pytest.importorskip("jax")
    from jax.errors import JaxRuntimeError

    assert xpkit.is_oom_error(
        JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory allocating 8589934592 bytes."
        )
    )
    assert not xpkit.is_oom_error(JaxRuntimeError("INVALID_ARGUMENT: shapes differ"))


def test_jax_asarray_lands_on_cpu_when_pinned(monkeypatch):
    fake_jax_gpus(monkeypatch, count=1)
    b = xpkit.Backend("jax", device="cpu")
    x = b.asarray(np.arange(3.0))
    assert xpkit.Backend.from_arrays(x).device == "cpu"


def test_cupy_device_keys_are_hashable_indices():
    """``Backend.from_arrays`` caches by device key; CuPy's Device is unhashable."""
    from types import SimpleNamespace

    from xpkit._adapters import ADAPTERS

    cupy = ADAPTERS["cupy"]
    on_one = SimpleNamespace(device=SimpleNamespace(id=1))  # an array's .device
    assert cupy.device_key(on_one) == 1
    assert cupy.native_device_key(SimpleNamespace(id=1)) == 1
    assert hash(cupy.device_key(on_one)) == hash(1)
