"""The meters of a real run that adapters offer, and which one each uses (issue #28).

A meter is a guest in the caller's process: it reads statistics and resets
none. The checks of what the process reports (``ru_maxrss``, VmHWM,
tracemalloc's peak) run in a child, where nothing else allocates.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import logging
import os
import sys
import threading
import time
import tracemalloc
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import run_python

import xpkit
from xpkit._adapters import _jax_memory, _peak, get_adapter

MIB = 2**20

needs_host_meter = pytest.mark.skipif(
    _peak.host_meter() is None, reason="this host's memory cannot be read"
)


def _allocate(mib: int) -> np.ndarray:
    """Hold ``mib`` MiB at once (pages touched), then return a small result."""
    scratch = np.ones(mib * MIB // 8)
    return scratch[:4].copy()


class _Fixed(_peak.PeakMeter):
    """A process-wide meter that reports what ``run`` returns as its peak."""

    name = "fixed"

    def _measure(self, run):
        result = run()
        return result, result


class _Local(_Fixed):
    """A meter that follows one thread's own allocations."""

    process_wide = False


# -- The host's meter -------------------------------------------------------------


# A child's prelude: the calls it measures wait (at most 10 s) until the
# meter's sampling thread has read what they hold, so that a test checks the
# reading, not the thread's timing on a loaded machine.
_WAITED = """
import json, mmap, sys, tempfile, time
import numpy as np
from xpkit._adapters import _jax_memory, _peak

MIB = 2**20
samplers = []

class Recorded(_peak._Sampler):
    def begin(self):
        samplers.append(self)
        self.base = super().begin()
        return self.base

_peak._Sampler = Recorded

def allocate(mib):  # hold mib MiB at once (pages touched), return a small result
    scratch = np.ones(mib * MIB // 8)
    sampler, deadline = samplers[-1], time.monotonic() + 10
    while sampler.top - sampler.base < 0.9 * mib * MIB and time.monotonic() < deadline:
        time.sleep(0.001)
    return scratch[:4].copy()
"""

_MAGNITUDES = (
    _WAITED
    + """
seen = {}
_, seen["32 warmed"] = _jax_memory.warmed_host_meter().measure(lambda: allocate(32))
_, seen["64"] = _peak.host_meter().measure(lambda: allocate(64))
_, seen["1 after 64"] = _peak.host_meter().measure(lambda: allocate(1))
_peak._statm_reader = lambda: None  # psutil's reading, as off Linux
_peak._HOST.clear()  # (a host meter made anew)
_, seen["96 psutil"] = _peak.host_meter().measure(lambda: allocate(96))
print(json.dumps(seen))
"""
)


@needs_host_meter
def test_host_meter_sees_touched_pages():
    # In a child: in a test worker, other threads free memory while a call runs
    # and a sampled RSS reads their frees against the call.
    done = run_python(_MAGNITUDES)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    seen = {k: v / MIB for k, v in json.loads(done.stdout).items()}
    assert 60 <= seen["64"] < 80, seen
    assert seen["1 after 64"] < 8, seen  # the 64 MiB of the last call not again
    assert 30 <= seen["32 warmed"] < 40, seen
    assert 90 <= seen["96 psutil"] < 130, seen


_UNSAMPLED = """
import numpy as np
from xpkit._adapters import _peak

_peak.SAMPLE_SECONDS = 3600.0  # the sampling thread never reads during the call
scratch = lambda: np.ones(64 * 2**20 // 8)[:4].copy()
_, seen = _peak.host_meter().measure(scratch)
print(seen / 2**20)
"""


@needs_host_meter
def test_a_peak_the_sampler_misses_is_read_from_the_high_water_mark():
    # The call sets the process's high-water mark: the meter reads it where
    # its thread missed the peak, as on a loaded machine. A child's ru_maxrss
    # holds its parent's mark from before exec and never rose: it read 0.06
    # of 64 MiB. Mapped files' pages the kernel evicts during the call lower
    # the mark's figure, hence the slack of the lower bound.
    done = run_python(_UNSAMPLED)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert 48 <= float(done.stdout) < 80, done.stdout


_EVICTED = (
    _WAITED
    + """
with tempfile.TemporaryFile() as fh:
    fh.write(b"x" * (32 * MIB))
    fh.flush()
    mapped = mmap.mmap(fh.fileno(), 32 * MIB, access=mmap.ACCESS_READ)
    total = sum(mapped[i] for i in range(0, 32 * MIB, 4096))  # its pages resident

    def call():  # 32 MiB of file pages leave the process, as evicted ones do
        mapped.close()
        return allocate(64)

    _, seen = _peak.host_meter().measure(call)
print(seen / MIB)
sys.exit(0 if 48 <= seen / MIB < 80 else 1)
"""
)


@pytest.mark.skipif(sys.platform != "linux", reason="statm is Linux's")
def test_file_pages_leaving_during_a_call_do_not_hide_its_buffers():
    # CI read 58 of 64 MiB when the whole resident size was sampled: under
    # memory pressure the kernel evicts the libraries' file pages meanwhile.
    # The anonymous part read 58.0 once too, in CI beside a test run: the
    # bound holds it well above the 32 MiB that a reading blind to the
    # buffer behind the file pages' departure would give.
    done = run_python(_EVICTED)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


_UNWRITTEN = (
    _WAITED
    + """
hold = np.ones(256 * MIB // 8)  # the process's high-water mark, set before
del hold

def unwritten():  # 64 MiB handed out by the heap, no page of it written yet
    busy = time.monotonic() + 0.02
    while time.monotonic() < busy:  # (Python holding the GIL, as fn's own code)
        pass
    scratch = np.empty(64 * MIB // 8)
    sampler, deadline = samplers[-1], time.monotonic() + 5
    while sampler.top - sampler.base < 0.9 * 64 * MIB and time.monotonic() < deadline:
        pass
    return scratch[:0].copy()

meter = _peak.host_meter()
seen = [meter.measure(unwritten)[1] / MIB for _ in range(5)]
print(json.dumps({"name": meter.name, "seen": seen}))
"""
)


@pytest.mark.skipif(
    _peak.heap_bytes() is None, reason="no count of the heap's bytes (glibc 2.33+)"
)
def test_a_block_counts_from_its_malloc_not_from_its_pages():
    # The resident size sees a block only as its pages are written: a
    # Fortran-order operand copied 10 MB and freed it at once, and the
    # sampled RSS saw 0.47-0.72 of the call's peak. The heap's count sees the
    # block from its malloc on. Here no page is written at all: the resident
    # size alone read 0 (and the high-water mark, set before, cannot help).
    # fn holds the GIL while it waits: the sampler's readings wait for it.
    done = run_python(_UNWRITTEN)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["name"] == "sampled RSS and heap", got
    assert all(60 <= seen < 80 for seen in got["seen"]), got


def test_the_growth_is_the_larger_of_the_two_readings():
    readings = {"own": 1000, "heap": 5000}
    growth = _peak._Growth(lambda: readings["own"], lambda: readings["heap"])
    assert growth() == 0  # (not started: the sampler's thread may read early)
    growth.start()
    readings.update(own=1010, heap=5030)
    assert growth() == 30  # the heap handed out memory already resident
    readings.update(own=1500, heap=5040)
    assert growth() == 500  # pages touched outside the heap (a mapping)
    readings.update(own=900, heap=4000)
    assert growth() == -100  # (freed: the sampler keeps the largest)


def _spinning(slow: list[bool]):
    """A heap reader that takes 2 * SLOW_SECONDS of its thread's CPU time
    where ``slow`` says so, one reading after another; and its calls."""
    calls = []

    def read() -> int:
        if slow[len(calls)]:
            began = time.thread_time()
            while time.thread_time() - began < 2 * _peak.SLOW_SECONDS:
                pass
        calls.append(1)
        return 7000 * len(calls)

    return read, calls


def test_a_slow_heap_reading_backs_off_for_every_measurement(monkeypatch):
    # A heap of very many free blocks: mallinfo2 walked 1M of them in 0.2 s,
    # holding each arena's lock meanwhile, and every new measurement read it
    # again. Slow is the reading thread's CPU time, not the clock's.
    monkeypatch.setattr(_peak, "_SLOW_UNTIL", [0.0])
    row = _peak.SLOW_IN_A_ROW
    read, calls = _spinning([True] * (row + 1))
    reader = _peak.backing_off(read)
    assert [reader() for _ in range(row)] == [7000 * (n + 1) for n in range(row)]
    growth = _peak._Growth(lambda: 0, reader)
    growth.start()
    assert growth() == 0  # (backing off: the resident memory alone)
    again = _peak._Growth(lambda: 0, reader)  # the next measurement
    again.start()
    assert again() == 0
    assert len(calls) == row
    assert _peak._SLOW_UNTIL[0] > time.monotonic() + _peak.SLOW_BACKOFF_SECONDS / 2


@pytest.mark.parametrize("slow", ["one", "all but one a row"])
def test_a_slow_reading_now_and_then_is_the_machines(monkeypatch, slow):
    # CI, beside a test run: one reading took over SLOW_SECONDS, the heap's
    # count was off for a minute, and a call's unwritten 64 MiB read 4 kB.
    # Slow readings with one in time between them are not a slow heap.
    # (A clock of the readings' own, so that this machine's load cannot make
    # a reading in time slow.)
    monkeypatch.setattr(_peak, "_SLOW_UNTIL", [0.0])
    row = _peak.SLOW_IN_A_ROW
    pattern = [True] if slow == "one" else ([True] * (row - 1) + [False]) * 3
    clock = [0.0]

    def read() -> int:
        clock[0] += 2 * _peak.SLOW_SECONDS if pattern[len(calls)] else 1e-6
        calls.append(1)
        return 7000 * len(calls)

    calls: list[int] = []
    pattern.append(False)
    reader = _peak.backing_off(read, clock=lambda: clock[0])
    got = [reader() for _ in range(len(pattern))]
    assert got == [7000 * (n + 1) for n in range(len(pattern))]
    assert _peak._SLOW_UNTIL == [0.0]
    assert len(calls) == len(got)


def test_a_reading_that_waits_for_the_gil_is_not_slow(monkeypatch):
    # The sampler's reading waited for fn's thread to let go of the GIL: the
    # clock said 2 ms, and one such wait switched the heap's count off.
    monkeypatch.setattr(_peak, "_SLOW_UNTIL", [0.0])
    reader = _peak.backing_off(lambda: (time.sleep(0.01), 5)[1])
    assert [reader(), reader(), reader()] == [5, 5, 5]


_STATISTICS = """
import resource, sys
import numpy as np
import xpkit
from xpkit._adapters import _peak

def vmhwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:"))

def maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

big = np.ones(400 * 2**20 // 8)  # a 400 MB temporary, then freed
del big
before = (maxrss(), vmhwm())
x = np.random.default_rng(0).standard_normal((20000, 32))
xpkit.map_batches(lambda r: np.tanh(r) * 3 - r**2, x, budget_gb=1e-3)
xpkit.plan_batches(lambda r: np.tanh(r) * 3 - r**2, x, budget_gb=1e-3, remember=False)

def reads(r):  # the trace cannot follow it: a real probe measures
    return r * 2 if float(r[0, 0]) < 100 else r

xpkit.map_batches(reads, x, budget_gb=1e-3)
_peak.host_meter().measure(lambda: np.ones(2**20).sum())
after = (maxrss(), vmhwm())
print(before, after)
sys.exit(0 if after >= before else 1)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="VmHWM is Linux's")
def test_no_meter_resets_the_processes_peak_statistics():
    done = run_python(_STATISTICS)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


_TRACED = """
import tracemalloc, sys
import numpy as np
from xpkit._adapters import _peak

tracemalloc.start()  # the caller traces; the meter reads its count
meter = _peak.host_meter()
_, small = meter.measure(lambda: np.ones(3000).sum())  # 24,000 bytes at once
_, none = meter.measure(lambda: 1 + 1)
still = tracemalloc.is_tracing()
print(small, none, still)
ok = 24_000 <= small < 28_000 and none < 1_000 and still
sys.exit(0 if ok else 1)
"""


@needs_host_meter
def test_the_host_meter_reads_tracemalloc_where_the_process_traces():
    done = run_python(_TRACED)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def _host_meters() -> list[_peak.PeakMeter]:
    """The meters of the libraries whose arrays are NumPy buffers on the host."""
    keys = ("numpy", "array_api_strict", "dask")
    meters = [get_adapter(k).peak_meters("cpu")[0] for k in keys]
    return [m for i, m in enumerate(meters) if m not in meters[:i]]


@needs_host_meter
def test_measuring_switches_no_process_wide_tracing_on_or_off():
    assert not tracemalloc.is_tracing()
    for meter in _host_meters():
        seen: list[bool] = []
        meter.measure(lambda seen=seen: seen.append(tracemalloc.is_tracing()))
        assert seen == [False], meter.name
    assert not tracemalloc.is_tracing()


@needs_host_meter
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
    assert not any(t.name == "xpkit-memory-sampler" for t in threading.enumerate())


@pytest.mark.parametrize("nth", [1, 2], ids=["in Thread.start", "for its ready"])
def test_a_ctrl_c_while_a_sampler_starts_leaves_no_sampler_running(monkeypatch, nth):
    """A Ctrl-C while the meter waits for its sampler to start (the ``nth``
    wait of the main thread's): the sampler, which no one holds to stop it,
    ends (it sampled on every half millisecond, for ever)."""
    waits = []
    real_wait = threading.Event.wait

    def interrupted(event, timeout=None):
        if threading.current_thread() is threading.main_thread():
            waits.append(event)
            if len(waits) == nth:
                real_wait(event, timeout)  # (started: it is there to leave behind)
                raise KeyboardInterrupt
        return real_wait(event, timeout)

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a Ctrl-C reaches the main thread only")
    monkeypatch.setattr(threading.Event, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _peak._Sampler(lambda: 0)
    assert len(waits) == nth
    monkeypatch.undo()
    deadline = time.monotonic() + 30
    while any(t.name == "xpkit-memory-sampler" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the sampler still runs after 30 s"
        time.sleep(0.01)


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


# -- One process-wide measurement at a time; nested ones unmeasured ---------------


def test_a_measurement_inside_one_of_the_same_context_runs_unmeasured():
    inner: list[object] = []

    def outer_call():
        inner.append(_Fixed().measure(lambda: 1))  # nested: runs unmeasured
        if _peak.host_meter() is not None:
            inner.append(_peak.host_meter().measure(lambda: _allocate(1)))
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
        copies.append(contextvars.copy_context())
        return 1

    _Fixed().measure(keep_a_copy)
    assert copies[0].run(_Fixed().measure, lambda: 3) == (3, 3)


@pytest.mark.parametrize("starved", [False, True])
def test_another_threads_process_wide_measurement_is_waited_for(monkeypatch, starved):
    """A thread that works while it measures is waited for, however long.

    ``starved``: on a loaded machine a computing thread may get no CPU for a
    while; its CPU time says still, its state says runnable, and it is
    waited for (it was measured beside, the two counting each other).
    """
    if starved:
        if _peak._running_threads() is None:
            pytest.skip("no thread states here (Linux's /proc)")
        monkeypatch.setattr(_peak, "_own_cpu_clock", lambda: lambda: 0.0)
        monkeypatch.setattr(_peak, "_process_seconds", lambda: 0.0)
    waiting = threading.Event()
    order: list[object] = []

    def busy():  # uses CPU until the other thread has waited 3x STILL_SECONDS
        waiting.wait(30)
        until = time.thread_time() + 3 * _peak.STILL_SECONDS
        while time.thread_time() < until:
            pass
        order.append("first")
        return 2

    first = threading.Thread(target=lambda: order.append(_Fixed().measure(busy)))
    first.start()
    while not _peak._turn_taken():
        time.sleep(0.001)
    waiting.set()
    assert _Fixed().measure(lambda: 8) == (8, 8)  # its own, after the first one
    order.append("second")
    first.join(30)
    assert order == ["first", (2, 2), "second"]


def test_a_sampler_always_runnable_does_not_keep_a_still_measurement_working(
    monkeypatch,
):
    """On a loaded machine a meter's sampler, awake every half millisecond,
    is runnable in most looks: counted as a thread working for the
    measurement, a waiter beside an idle one waited its 30 s and ran
    unmeasured (34 s in CI)."""
    if _peak._running_threads() is None:
        pytest.skip("no thread states here (Linux's /proc)")
    samplers: list[int] = []
    release, sampling = threading.Event(), threading.Event()

    def idle():  # holds the turn, still, while its sampler runs
        sampler = _peak._Sampler(lambda: 0)
        samplers.append(sampler._thread.native_id)
        sampling.set()
        release.wait(30)
        sampler.stop()
        return 1

    monkeypatch.setattr(_peak, "_running_threads", lambda: frozenset(samplers))
    first = threading.Thread(target=lambda: _Fixed().measure(idle))
    first.start()
    sampling.wait(30)
    began = time.monotonic()
    assert _Fixed().measure(lambda: 8) == (8, 8)  # beside it, measured
    waited = time.monotonic() - began
    release.set()
    first.join(30)
    assert waited < _peak.WAIT_SECONDS / 2, waited


def test_a_samplers_costly_reads_do_not_keep_a_still_measurement_working(
    monkeypatch,
):
    """A heap of tens of thousands of free blocks makes each of the sampler's
    readings cost up to 2 ms of CPU: the sampler alone used 40% of a CPU, the
    process looked busy, and a waiter beside an idle measurement waited all
    its WAIT_SECONDS (a worker thread of ``map_batches`` in CI, >120 s)."""
    monkeypatch.setattr(_peak, "WAIT_SECONDS", 20.0)
    burn = os.urandom(1 << 25)
    release, sampling = threading.Event(), threading.Event()

    def costly_read() -> int:  # (hashing releases the GIL, as mallinfo2 does)
        hashlib.sha256(burn).digest()
        return 0

    def idle():  # holds the turn, still, while its sampler burns CPU
        sampler = _peak._Sampler(costly_read)
        sampling.set()
        release.wait(120)
        sampler.stop()
        return 1

    first = threading.Thread(target=lambda: _Fixed().measure(idle))
    first.start()
    sampling.wait(30)
    try:
        # measured beside it; waiting out WAIT_SECONDS, it ran unmeasured: (8, None)
        assert _Fixed().measure(lambda: 8) == (8, 8)
    finally:
        release.set()
        first.join(30)


def test_a_thread_that_ends_while_its_state_is_read_is_left_out(monkeypatch):
    """A thread that ended between the open and the read of its ``stat``
    raised ProcessLookupError out of a waiting ``map_batches`` (seen under
    load)."""
    if _peak._running_threads() is None:
        pytest.skip("no thread states here (Linux's /proc)")

    def gone(fd, size):
        raise ProcessLookupError(3, "No such process")

    names = ("scandir", "open", "close", "O_RDONLY")
    ended = types.SimpleNamespace(read=gone, **{n: getattr(os, n) for n in names})
    monkeypatch.setattr(_peak, "os", ended)
    assert _peak._running_threads() == frozenset()


@pytest.mark.parametrize("clock", ["read", "none"])
def test_the_process_working_for_a_still_thread_is_waited_for(monkeypatch, clock):
    """JAX's calling thread waits while XLA's threads compute: the process's
    CPU says the measurement works (without a thread clock, it alone)."""
    if clock == "none":
        monkeypatch.setattr(_peak, "_own_cpu_clock", lambda: None)
    waiting = threading.Event()
    order: list[object] = []

    def spin():
        waiting.wait(30)
        until = time.thread_time() + 3 * _peak.STILL_SECONDS
        while time.thread_time() < until:
            pass

    def waits_on_a_busy_thread():
        helper = threading.Thread(target=spin)
        helper.start()
        helper.join(60)
        order.append("first")
        return 2

    first = threading.Thread(
        target=lambda: order.append(_Fixed().measure(waits_on_a_busy_thread))
    )
    first.start()
    while not _peak._turn_taken():
        time.sleep(0.001)
    waiting.set()
    assert _Fixed().measure(lambda: 8) == (8, 8)  # its own, after the first one
    first.join(30)
    assert order == ["first", (2, 2)]


@pytest.mark.parametrize(
    ("waits", "clock"), [("join", True), ("poll", True), ("join", False)]
)
def test_a_measuring_thread_that_waits_for_this_one_is_measured_beside(
    monkeypatch, waits, clock
):
    """fn hands work to another thread that measures: no wait on the lock fn
    holds, whether fn joins it or polls it (joblib's threading backend sleeps
    10 ms a round: it read as working, 30 s a probe), and without a thread
    clock (macOS, Windows: the process's CPU decides)."""
    monkeypatch.setattr(_peak, "WAIT_SECONDS", 600.0)  # (the old wait: 30 s)
    if not clock:
        monkeypatch.setattr(_peak, "_own_cpu_clock", lambda: None)
    inner: list[object] = []

    def hands_off():
        worker = threading.Thread(
            target=lambda: inner.append(_Fixed().measure(lambda: 1)), daemon=True
        )
        worker.start()
        if waits == "join":
            worker.join(120)
        for _ in range(12_000):  # 120 s at most
            if not worker.is_alive():
                return 5
            time.sleep(0.01)
        return 0

    assert _Fixed().measure(hands_off) == (5, 5)
    assert inner == [(1, 1)]  # measured beside the still one (which counts it too)


_IDLE_HOLDER = """
import json, threading, time, tracemalloc
tracemalloc.start()
import numpy as np
import xpkit

held, finished = threading.Event(), threading.Event()

def idle(x):  # reads a value (measured), then waits (as on I/O), measured
    float(x.sum())
    if not held.is_set():  # its first call waits until wide's run is done
        held.set()
        finished.wait(120)
    return x[:, :1] * 1.0

def wide(x):  # reads a value (measured): 16 kB a row
    float(x.sum())
    return (x[:, :, None] * np.ones(200)).sum(axis=(1, 2))[:, None]

waiting = threading.Thread(
    target=lambda: xpkit.map_batches(idle, np.random.rand(100, 10), remember=False)
)
waiting.start()
held.wait(60)
tracemalloc.reset_peak()
start = tracemalloc.get_traced_memory()[0]
out = xpkit.map_batches(wide, np.random.rand(20000, 10), budget_gb=0.05 / 1.073741824)
peak = tracemalloc.get_traced_memory()[1] - start - out.nbytes
finished.set()
waiting.join()
print(json.dumps({"peak": peak, "budget": 50_000_000}))
"""


def test_a_probe_beside_an_idle_measurement_keeps_its_budget():
    """A thread whose probe found another's measurement idle (waiting on
    I/O) ran unmeasured, planned from its input rows: 64 times its budget.
    It measures beside it. True peak by tracemalloc in a child."""
    done = run_python(_IDLE_HOLDER, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["peak"] <= 1.5 * got["budget"], got


def test_a_meter_of_one_threads_allocations_never_waits():
    assert _peak._LOCK.acquire(timeout=1)  # as if another thread measured
    try:
        began = time.perf_counter()
        assert _Local().measure(lambda: 9) == (9, 9)
        assert _Local().try_measure(lambda: 4) == (4, 4)
        assert _Fixed().try_measure(lambda: 6) == (6, None)  # no wait: unmeasured
    finally:
        _peak._LOCK.release()
    assert time.perf_counter() - began < 5


def test_a_measurement_that_waited_too_long_runs_unmeasured(monkeypatch):
    monkeypatch.setattr(_peak, "WAIT_SECONDS", 0.05)
    assert _peak._LOCK.acquire(timeout=1)  # as if another thread measured
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


def test_map_batches_in_a_pool_thread_of_a_measured_fn_does_not_wait(monkeypatch):
    """fn, which the trace cannot follow, maps its rows in a thread pool."""
    monkeypatch.setattr(_peak, "WAIT_SECONDS", 600.0)
    pool = ThreadPoolExecutor(2)
    x = np.arange(4000.0).reshape(2000, 2)

    def inner(block):
        return block * 2.0 if float(block.sum()) > -1 else block  # a value read

    def outer(block):
        return pool.submit(xpkit.map_batches, inner, block).result() + 1.0

    done: list[np.ndarray] = []
    worker = threading.Thread(
        target=lambda: done.append(xpkit.map_batches(outer, x)), daemon=True
    )
    worker.start()
    worker.join(timeout=120)  # each probe of the old code waited WAIT_SECONDS
    assert not worker.is_alive(), "a pool thread waited for the lock fn holds"
    pool.shutdown()
    np.testing.assert_array_equal(done[0], x * 2.0 + 1.0)


# -- Which meters each adapter offers ---------------------------------------------


def test_each_adapter_names_the_meters_that_see_its_allocations():
    host = _peak.host_meter()
    hosts = () if host is None else (host,)
    for key in ("numpy", "array_api_strict", "dask", "ndonnx"):
        assert get_adapter(key).peak_meters("cpu") == hosts, key
    torch = get_adapter("torch")
    names = [m.name for m in torch.peak_meters("cpu")]
    assert names[0] == "torch dispatch (live tensors)"
    assert names[1:] == [m.name for m in hosts]
    for device in ("cuda:1", "mps", "xpu"):
        (meter,) = torch.peak_meters(device)
        assert meter.name == "torch dispatch (live tensors)"
        assert not meter.process_wide
    jax = get_adapter("jax")
    assert jax.peak_meters("cpu") == (_jax_memory.warmed_host_meter(),)
    (gpu,) = jax.peak_meters("gpu")
    assert gpu.name.startswith("memory_stats peak_bytes_in_use")
    (cupy,) = get_adapter("cupy").peak_meters("cuda:0")
    assert cupy.name.startswith("CuPy memory hooks")
    assert not cupy.process_wide


@needs_host_meter
def test_the_warmed_meter_asks_for_a_run_before_it_measures():
    warmed = _jax_memory.warmed_host_meter()
    assert warmed is not None
    assert warmed.warm_up
    assert not _peak.host_meter().warm_up
    assert warmed.name == f"{_peak.host_meter().name} (each shape run once first)"
    assert warmed.name.startswith("sampled RSS")
    # its figure: test_host_meter_sees_touched_pages, in a child


def test_without_a_meter_or_a_trace_the_input_rows_stand_for_an_item(
    caplog, monkeypatch
):
    adapter = type(get_adapter("numpy"))
    monkeypatch.setattr(adapter, "peak_meters", lambda self, device: ())

    def reads(r):  # a value read: the shape-only trace cannot follow it
        return r * 2.0 if float(r[0, 0]) < 1e9 else r

    x = np.ones((64, 16))  # 128 bytes per row
    with caplog.at_level(logging.INFO, logger="xpkit"):
        plan = xpkit.plan_batches(reads, x, budget_gb=1.0)
    assert plan.source.startswith("input rows (")
    assert "could not follow fn" in plan.source
    assert plan.bytes_per_item == 128.0
    assert plan.probe_rows == 0
    assert any("input rows (" in r.getMessage() for r in caplog.records)


def _samplers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "xpkit-memory-sampler"]


def _interrupted_in_the_calling_thread(result: object) -> types.FunctionType:
    """A reading that raises KeyboardInterrupt in the main thread (a Ctrl-C
    landing there), and gives ``result`` in the sampler's."""
    main = threading.current_thread()

    def read(*_: object) -> object:
        if threading.current_thread() is main:
            raise KeyboardInterrupt
        return result

    return read


def test_a_ctrl_c_before_the_call_runs_stops_the_sampler(monkeypatch):
    """An interrupt between the sampler's start and the call's (at a reading
    of the high-water mark or the resident memory) left the thread reading
    the heap every half millisecond, for the life of the process."""
    before = set(_samplers())
    meter = _peak._SampledHost(
        (lambda: 1000, _interrupted_in_the_calling_thread(1000)), lambda: None
    )
    with pytest.raises(KeyboardInterrupt):
        meter.measure(lambda: None)
    assert set(_samplers()) <= before
    monkeypatch.setattr(
        _peak.tracemalloc,
        "get_traced_memory",
        _interrupted_in_the_calling_thread((0, 0)),
    )
    with pytest.raises(KeyboardInterrupt):
        _peak._traced(lambda: None)
    assert set(_samplers()) <= before
