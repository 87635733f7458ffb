"""The peak-memory meters adapters offer `map_batches`' probe, and which one each uses."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import tracemalloc

import numpy as np
import pytest

import xpkit
from xpkit._adapters import _peak, get_adapter

MIB = 2**20

needs_rss = pytest.mark.skipif(
    _peak.rss_meter() is None, reason="needs Linux /proc and glibc"
)


def _allocate(mib: int) -> np.ndarray:
    """Hold ``mib`` MiB at once (pages touched), then return a small result."""
    scratch = np.ones(mib * MIB // 8)
    return scratch[:4].copy()


class _Fixed(_peak.PeakMeter):
    """A meter that reports what ``run`` returns as its peak."""

    name = "fixed"

    def _measure(self, run):
        result = run()
        return result, result


# -- Peak RSS -------------------------------------------------------------------


@needs_rss
def test_rss_meter_sees_touched_pages():
    meter = _peak.rss_meter()
    assert meter is not None
    _, peak = meter.measure(lambda: _allocate(64))
    assert peak is not None
    assert 60 * MIB <= peak < 80 * MIB
    _, small = meter.measure(lambda: _allocate(1))
    assert small is not None
    assert small < 8 * MIB  # the 64 MiB of the last call are not counted again


def test_rss_meter_is_none_where_it_cannot_measure(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert _peak._make_rss_meter() is None
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(_peak.os, "access", lambda path, mode: False)
    assert _peak._make_rss_meter() is None


def _host_meters() -> list[_peak.PeakMeter]:
    """The meters of the libraries whose arrays are NumPy buffers on the host."""
    meters = [get_adapter(n).peak_meter("cpu") for n in ("numpy", "array_api_strict")]
    meters.append(get_adapter("dask").peak_meter("cpu"))
    return [m for i, m in enumerate(meters) if m is not None and m not in meters[:i]]


@needs_rss
def test_measuring_switches_no_process_wide_tracing_on_or_off():
    assert not tracemalloc.is_tracing()
    for meter in _host_meters():
        seen: list[bool] = []
        meter.measure(lambda seen=seen: seen.append(tracemalloc.is_tracing()))
        assert seen == [False], meter.name
    assert not tracemalloc.is_tracing()


@needs_rss
@pytest.mark.parametrize("error", [ValueError, MemoryError, KeyboardInterrupt])
def test_an_exception_passes_through_a_measurement_unchanged(error):
    def fails() -> np.ndarray:
        def stop() -> float:
            raise error("from fn")

        return np.ones(1000) * stop()  # a temporary is freed as it propagates

    for meter in _host_meters():
        with pytest.raises(error, match="from fn"):
            meter.measure(fails)
        _, peak = meter.measure(lambda: _allocate(2))  # not left inside one
        assert peak is not None, meter.name


def test_the_probe_recovers_from_a_memory_error_raised_over_temporaries():
    def fn(r):
        def fail_above_100_rows() -> float:
            if r.shape[0] > 100:
                raise MemoryError("too many rows")
            return 1.0

        return np.ones((r.shape[0], 4)) * fail_above_100_rows()

    x = np.arange(4000.0).reshape(1000, 4)
    got = xpkit.map_batches(fn, x, budget_gb=1.0)
    np.testing.assert_array_equal(got, np.ones((1000, 4)))


# -- One measurement at a time; nested ones unmeasured --------------------------


def test_a_measurement_inside_one_of_the_same_context_runs_unmeasured():
    inner: list[object] = []

    def outer_call():
        inner.append(_Fixed().measure(lambda: 1))  # nested: runs unmeasured
        if _peak.rss_meter() is not None:
            inner.append(_peak.rss_meter().measure(lambda: _allocate(1)))
        return 5

    assert _Fixed().measure(outer_call) == (5, 5)
    assert [peak for _, peak in inner] == [None] * len(inner)


def test_a_copy_of_the_measuring_context_runs_unmeasured_without_waiting():
    inner: list[object] = []

    def in_thread() -> int:
        started = time.perf_counter()
        inner.append(_Fixed().measure(lambda: 1))
        inner.append(time.perf_counter() - started)
        return 7

    async def main() -> int:
        return await asyncio.to_thread(in_thread)  # a copy of the context

    assert _Fixed().measure(lambda: asyncio.run(main())) == (7, 7)
    assert inner[0] == (1, None)
    assert inner[1] < 5  # it did not wait for the lock its caller holds


def test_a_measurement_after_the_measuring_context_ended_is_measured():
    copies: list[object] = []

    def keep_a_copy() -> int:
        import contextvars

        copies.append(contextvars.copy_context())
        return 1

    _Fixed().measure(keep_a_copy)
    assert copies[0].run(_Fixed().measure, lambda: 3) == (3, 3)


def test_another_threads_measurement_is_waited_for():
    started = threading.Event()
    seen: list[object] = []

    def slow():
        started.set()
        time.sleep(0.3)
        return 2

    first = threading.Thread(target=lambda: seen.append(_Fixed().measure(slow)))
    first.start()
    started.wait(5)
    began = time.perf_counter()
    assert _Fixed().measure(lambda: 8) == (8, 8)  # its own, after the first one
    assert time.perf_counter() - began >= 0.1
    first.join(5)
    assert seen == [(2, 2)]


def test_a_measurement_that_waited_too_long_runs_unmeasured(monkeypatch):
    monkeypatch.setattr(_peak, "WAIT_SECONDS", 0.05)
    assert _peak._LOCK.acquire(timeout=1)  # as if another thread were measuring
    try:
        result, peak = _Fixed().measure(lambda: "ran")
    finally:
        _peak._LOCK.release()
    assert (result, peak) == ("ran", None)


def test_map_batches_inside_fn_of_map_batches_does_not_deadlock():
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


# -- Which meter each adapter uses ------------------------------------------------


def test_each_adapter_names_the_meter_that_sees_its_allocations():
    assert get_adapter("numpy").peak_meter("cpu") is _peak.rss_meter()
    assert get_adapter("array_api_strict").peak_meter("cpu") is _peak.rss_meter()
    assert get_adapter("dask").peak_meter("cpu") is _peak.rss_meter()
    torch = get_adapter("torch")
    assert torch.peak_meter("cpu") is _peak.rss_meter()
    assert torch.peak_meter("mps") is None
    assert torch.peak_meter("cuda:1").name == "torch.cuda.max_memory_allocated"
    assert get_adapter("jax").peak_meter("cpu") is _peak.warmed_rss_meter()
    assert get_adapter("jax").peak_meter("gpu") is None
    assert get_adapter("cupy").peak_meter("cuda:0") is None


@pytest.mark.skipif(_peak.rss_meter() is None, reason="needs Linux /proc and glibc")
def test_the_warmed_meter_asks_for_a_run_before_it_measures():
    warmed = _peak.warmed_rss_meter()
    assert warmed is not None
    assert warmed.warm_up
    assert not _peak.rss_meter().warm_up
    assert warmed.name == "peak RSS (each shape run once first)"
    _, peak = warmed.measure(lambda: _allocate(32))
    assert 30 * MIB <= peak < 40 * MIB


def test_map_batches_probe_on_numpy_names_its_meter():
    x = np.ones((4096, 16))
    plan = xpkit.plan_batches(lambda r: r * 2.0, x, budget_gb=1.0)
    if _peak.rss_meter() is None:
        assert plan.source.startswith("input rows (")
    else:
        assert plan.source == "measured by peak RSS"


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
