"""The JAX adapter's GPU paths on a CPU-only host, by faking its device queries.

JAX's real exception classes are used; only the device queries are replaced
(``fakes.fake_jax_gpus``).
"""

from __future__ import annotations

import numpy as np
import pytest
from fakes import fake_jax_gpus

import xpkit
from xpkit import _memory

GB = 1024**3


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
