"""Measuring the peak memory a call allocates: the meters adapters choose from.

`map_batches` runs ``fn`` on a few probe rows and asks the adapter of the
backend's device for a meter (`Adapter.peak_meter`). A meter runs a callable
and returns its result with the peak bytes allocated while it ran, above what
was allocated before. Every meter here is library-agnostic; an adapter picks
the one that sees its library's allocations (NumPy reports its buffers to
`tracemalloc`; torch's CPU allocator does not, so the process's peak RSS is
the honest measure there), or writes its own (torch CUDA's allocator peak).

Meters are process-wide instruments, so one measurement runs at a time. A
call made inside a measurement of the same thread (``fn`` itself calls
`map_batches`) runs unmeasured: the outer measurement counts it. A thread
whose measurement finds another thread's under way waits for it, at most
`WAIT_SECONDS` (so a ``fn`` that waits on that thread cannot deadlock), then
runs unmeasured. Unmeasured calls report None.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["PeakMeter", "rss_meter", "tracemalloc_meter"]

T = TypeVar("T")

#: One measurement at a time in this process (tracemalloc, VmHWM and the
#: allocators' peaks are global).
_LOCK = threading.Lock()
#: Whether this thread is inside a measurement.
_HERE = threading.local()
#: How long a measurement waits for another thread's to end.
WAIT_SECONDS = 30.0


class PeakMeter:
    """Runs a callable and reports the peak bytes it allocated.

    Attributes
    ----------
    name : str
        How the peak is measured, for logs and `BatchPlan.source`.
    """

    name: str = ""

    def measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        """``run()``'s result and the peak bytes allocated while it ran.

        The peak is None when ``run`` ran unmeasured: inside this thread's
        own measurement, or after `WAIT_SECONDS` waiting for another
        thread's.
        """
        if getattr(_HERE, "measuring", False) or not _LOCK.acquire(
            timeout=WAIT_SECONDS
        ):
            return run(), None
        _HERE.measuring = True
        try:
            return self._measure(run)
        finally:
            _HERE.measuring = False
            _LOCK.release()

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        """Measure one call (the lock is held)."""
        raise NotImplementedError


class _Tracemalloc(PeakMeter):
    """`tracemalloc`'s peak: every Python allocation, and NumPy's buffers.

    NumPy reports its data buffers to tracemalloc, so this counts exactly the
    bytes a NumPy computation holds at its peak, on every platform. Tracing
    is started for the measurement and stopped after it, unless it was
    already on (then its peak is reset, which the code that started it sees).
    """

    name = "tracemalloc"

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        started = not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            result = run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            if started:
                tracemalloc.stop()
        return result, max(peak - base, 0)


class _PeakRss(PeakMeter):
    """Linux: growth of the process's resident high-water mark (VmHWM).

    Before the run, glibc's ``malloc_trim(0)`` hands freed heap pages back to
    the system (so the run's allocations show up as new resident pages, not
    as reuse of pages already counted), and writing ``5`` to
    ``/proc/self/clear_refs`` resets VmHWM to the current RSS. The peak is
    then VmHWM after the run minus RSS before it: page-granular, and it
    counts what other threads allocate meanwhile (an overestimate, the safe
    side). It resets the VmHWM that other code may read.
    """

    name = "peak RSS"

    def __init__(self, trim: Callable[[int], int]) -> None:
        self._trim = trim

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        self._trim(0)
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:  # noqa: PTH123
            fh.write("5")
        base = _status_bytes("VmRSS")
        result = run()
        peak = _status_bytes("VmHWM")
        return result, max(peak - base, 0)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:  # noqa: PTH123
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    msg = f"/proc/self/status has no {field}"  # pragma: no cover - every Linux has it
    raise OSError(msg)


_TRACEMALLOC = _Tracemalloc()
_RSS: list[PeakMeter | None] = []


def tracemalloc_meter() -> PeakMeter:
    """The `tracemalloc` meter (NumPy-backed libraries, any platform)."""
    return _TRACEMALLOC


def rss_meter() -> PeakMeter | None:
    """The peak-RSS meter, or None where it cannot measure honestly.

    Needs Linux's ``/proc/self/clear_refs`` (writable) and ``/proc/self/status``,
    and glibc's ``malloc_trim``; found out once per process.
    """
    if not _RSS:
        _RSS.append(_make_rss_meter())
    return _RSS[0]


def _make_rss_meter() -> PeakMeter | None:
    if not sys.platform.startswith("linux"):
        return None
    if not os.access("/proc/self/clear_refs", os.W_OK):
        return None
    name = ctypes.util.find_library("c")
    try:
        libc: Any = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return _PeakRss(trim)
