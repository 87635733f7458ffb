"""The peak-memory meters adapters offer `map_batches`' probe, and which one each uses."""

from __future__ import annotations

import logging
import sys
import tracemalloc

import numpy as np
import pytest

import xpkit
from xpkit._adapters import _peak, get_adapter

MIB = 2**20


def _allocate(mib: int) -> np.ndarray:
    """Hold ``mib`` MiB at once (pages touched), then return a small result."""
    scratch = np.ones(mib * MIB // 8)
    return scratch[:4].copy()


def test_tracemalloc_meter_sees_numpy_buffers():
    meter = _peak.tracemalloc_meter()
    result, peak = meter.measure(lambda: _allocate(32))
    assert result.shape == (4,)
    assert 32 * MIB <= peak < 33 * MIB
    assert not tracemalloc.is_tracing()  # it stops what it started


def test_tracemalloc_meter_keeps_a_trace_it_did_not_start():
    tracemalloc.start()
    try:
        _, peak = _peak.tracemalloc_meter().measure(lambda: _allocate(8))
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()
    assert 8 * MIB <= peak < 9 * MIB


def test_tracemalloc_meter_reads_nothing_for_a_call_that_allocates_nothing():
    x = np.ones(1000)
    _, peak = _peak.tracemalloc_meter().measure(lambda: x)
    assert peak < 4 * 1024  # returning x allocates no buffer


@pytest.mark.skipif(_peak.rss_meter() is None, reason="needs Linux /proc and glibc")
def test_rss_meter_sees_touched_pages():
    meter = _peak.rss_meter()
    assert meter is not None
    _, peak = meter.measure(lambda: _allocate(64))
    assert 60 * MIB <= peak < 80 * MIB
    _, small = meter.measure(lambda: _allocate(1))
    assert small < 8 * MIB  # the 64 MiB of the last call are not counted again


def test_rss_meter_is_none_where_it_cannot_measure(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert _peak._make_rss_meter() is None
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(_peak.os, "access", lambda path, mode: False)
    assert _peak._make_rss_meter() is None


def test_each_adapter_names_the_meter_that_sees_its_allocations():
    assert get_adapter("numpy").peak_meter("cpu") is _peak.tracemalloc_meter()
    assert get_adapter("array_api_strict").peak_meter("cpu") is (
        _peak.tracemalloc_meter()
    )
    assert get_adapter("dask").peak_meter("cpu") is _peak.tracemalloc_meter()
    torch = get_adapter("torch")
    assert torch.peak_meter("cpu") is _peak.rss_meter()
    assert torch.peak_meter("mps") is None
    assert torch.peak_meter("cuda:1").name == "torch.cuda.max_memory_allocated"
    assert get_adapter("jax").peak_meter("cpu") is None
    assert get_adapter("cupy").peak_meter("cuda:0") is None


def test_torch_cuda_meter_reads_the_allocator_peak_above_the_start(monkeypatch):
    torch = pytest.importorskip("torch")
    calls: list[tuple[str, int]] = []
    state = {"allocated": 100, "peak": 100}

    def record(name, value=None):
        def fake(index):
            calls.append((name, index))
            if name == "reset":
                state["peak"] = state["allocated"]
            return value if value is None else state[value]

        return fake

    monkeypatch.setattr(torch.cuda, "synchronize", record("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", record("reset"))
    monkeypatch.setattr(
        torch.cuda, "memory_allocated", record("allocated", "allocated")
    )
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", record("peak", "peak"))

    def run():
        state["peak"] = 100 + 5000  # what the call allocated at its peak
        return "done"

    meter = get_adapter("torch").peak_meter("cuda:1")
    assert meter.measure(run) == ("done", 5000)
    assert calls == [
        ("sync", 1),
        ("reset", 1),
        ("allocated", 1),
        ("sync", 1),
        ("peak", 1),
    ]


def test_without_a_meter_the_input_rows_stand_for_an_item(caplog, monkeypatch):
    adapter = get_adapter("numpy")
    monkeypatch.setattr(type(adapter), "peak_meter", lambda self, device: None)
    x = np.ones((64, 16))  # 128 bytes per row
    with caplog.at_level(logging.INFO, logger="xpkit"):
        plan = xpkit.plan_batches(lambda r: r * 2.0, x, budget_gb=1.0)
    assert plan.source.startswith("input rows (")
    assert plan.bytes_per_item == 128.0
    assert plan.probe_rows == 0
    assert any("input rows (" in r.getMessage() for r in caplog.records)


def test_a_measurement_inside_one_of_the_same_thread_runs_unmeasured():
    meter = _peak.tracemalloc_meter()
    inner: list[object] = []

    def outer_call():
        inner.append(meter.measure(lambda: _allocate(1)))  # nested: runs unmeasured
        return _allocate(4)

    _, peak = meter.measure(outer_call)
    assert inner[0][1] is None
    assert 4 * MIB <= peak < 6 * MIB


def test_map_batches_inside_fn_of_map_batches_does_not_deadlock():
    import threading

    x = np.arange(40.0).reshape(20, 2)

    def per_row(block):
        return xpkit.map_batches(lambda r: r * 2.0, block) + 1.0

    done: list[np.ndarray] = []
    worker = threading.Thread(
        target=lambda: done.append(xpkit.map_batches(per_row, x)), daemon=True
    )
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "nested map_batches deadlocked"
    np.testing.assert_array_equal(done[0], x * 2.0 + 1.0)


def test_another_threads_measurement_is_waited_for():
    import threading
    import time

    meter = _peak.tracemalloc_meter()
    started = threading.Event()
    seen: list[object] = []

    def slow():
        started.set()
        time.sleep(0.3)
        return _allocate(2)

    first = threading.Thread(target=lambda: seen.append(meter.measure(slow)))
    first.start()
    started.wait(5)
    _, peak = meter.measure(lambda: _allocate(8))  # waits for the first one
    first.join(5)
    assert peak is not None
    assert 8 * MIB <= peak < 10 * MIB  # its own 8 MiB, not the other's 2
    assert seen[0][1] is not None


def test_a_measurement_that_waited_too_long_runs_unmeasured(monkeypatch):
    monkeypatch.setattr(_peak, "WAIT_SECONDS", 0.05)
    assert _peak._LOCK.acquire(timeout=1)  # as if another thread were measuring
    try:
        result, peak = _peak.tracemalloc_meter().measure(lambda: "ran")
    finally:
        _peak._LOCK.release()
    assert (result, peak) == ("ran", None)
