"""Hypothesis: split-and-retry gives exactly the unsplit result, for random
capacities, shapes and libraries' real OOM exception classes."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xpkit
from xpkit._adapters._shapes import ShapeArray
from xpkit.testing import assert_equal


def _oom_factories() -> dict[str, Callable[[], BaseException]]:
    try:
        np.empty(10**15)
    except MemoryError as exc:
        numpy_oom = type(exc)
    factories: dict[str, Callable[[], BaseException]] = {
        "numpy _ArrayMemoryError": lambda: numpy_oom((10**12,), np.dtype("float64")),
    }
    if importlib.util.find_spec("torch") is not None:
        import torch

        factories["torch.OutOfMemoryError"] = lambda: torch.OutOfMemoryError(
            "CUDA out of memory."
        )
        factories["torch.AcceleratorError"] = lambda: torch.AcceleratorError(
            "CUDA error: out of memory"
        )
        factories["torch CPU allocator"] = lambda: RuntimeError(
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"
        )
    if importlib.util.find_spec("jax") is not None:
        from jax.errors import JaxRuntimeError

        factories["JaxRuntimeError"] = lambda: JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory"
        )
    return factories


FACTORIES = _oom_factories()


@pytest.fixture(scope="module", autouse=True)
def _cheap_release():
    """Skip the full ``gc.collect()`` between retries (~0.15 s each here).

    These properties are about the *results* of splitting; that the failed
    attempt's buffers are released is proven in tests/memory/test_oom.py with weak
    references, against the real release step.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("xpkit._oom.empty_device_cache", lambda: None)
        yield


class Capacity:
    def __init__(self, capacity: int, make: Callable[[], BaseException]) -> None:
        self.capacity = capacity
        self.make = make
        self.rows_done = 0

    def __call__(self, x, y):
        if x.shape[0] > self.capacity:
            raise self.make()
        if not isinstance(x, ShapeArray):  # (the plan's trace computes nothing)
            self.rows_done += int(x.shape[0])
        return x * y + 1.0


@pytest.mark.xpkit_requires("float64")  # equal to a float64 reference
@pytest.mark.parametrize("kind", sorted(FACTORIES))
@given(
    n=st.integers(1, 200),
    cols=st.integers(1, 4),
    capacity=st.integers(1, 250),
    seed=st.integers(0, 2**32 - 1),
)
def test_recovery_is_exact(xpkit_backend, kind, n, cols, capacity, seed):
    b = xpkit_backend
    # Where each call costs milliseconds (ndonnx builds and runs a graph, JAX
    # and Dask dispatch), fewer rows keep the same kinds of split (capacity
    # below, at and above n) at a fraction of the calls.
    most = {"ndonnx": 12, "jax": 48, "dask": 48}.get(b.library)
    if most is not None:
        n, capacity = min(n, most), min(capacity, most + most // 4)
    rng = np.random.default_rng(seed)
    a, c = rng.standard_normal((n, cols)), rng.standard_normal((n, cols))
    fn = Capacity(capacity, FACTORIES[kind])
    got = xpkit.compute_oom_safe(fn, b.asarray(a), b.asarray(c))
    assert_equal(got, a * c + 1.0, check_namespace=False)
    assert fn.rows_done == n  # no row lost or computed twice


@given(
    n=st.integers(1, 300), capacity=st.integers(1, 300), budget_rows=st.integers(1, 300)
)
def test_map_batches_is_exact(n, capacity, budget_rows):
    a = np.arange(n, dtype=np.float64)[:, None]
    fn = Capacity(capacity, MemoryError)
    got = xpkit.map_batches(fn, a, a, budget_gb=budget_rows * 16 / 1024**3)
    assert_equal(got, a * a + 1.0)
    assert fn.rows_done == n
