"""Measuring the peak memory a call allocates: the meters adapters choose from.

`map_batches` runs ``fn`` on a few probe rows and asks the adapter of the
backend's device for a meter (`Adapter.peak_meter`). A meter runs a callable
and returns its result with the peak bytes allocated while it ran, above what
was allocated before. An adapter picks the meter that sees its library's
allocations, or writes its own (torch CUDA's allocator peak). On the host,
that is `rss_meter`, the growth of the process's peak resident memory
(Linux): NumPy, array-api-strict, Dask and torch CPU use it.

The meters read process-wide statistics, so they measure one call at a time.
A call made inside a measurement of the same context (``fn`` itself calls
`map_batches`, in its thread or in a copy of its context, such as
``asyncio.to_thread`` makes) runs unmeasured: the outer measurement counts
it. A thread whose measurement finds another thread's under way waits for
it, at most `WAIT_SECONDS` (so a ``fn`` that waits on that thread cannot
deadlock), then runs unmeasured. Unmeasured calls report None.

A meter only reads statistics: it switches nothing on or off that another
thread may be using at the same moment. (Starting and stopping
``tracemalloc`` around a measurement crashed CPython 3.11 while other threads
allocated, gh-128679; and a NumPy allocator written in Python through
ctypes, NEP 49, cannot let an exception pass through an array's
deallocation, so it would turn the probe's MemoryError into a SystemError.)
"""

from __future__ import annotations

import contextvars
import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "PeakMeter",
    "release_freed_host_memory",
    "rss_meter",
    "warmed_rss_meter",
]

T = TypeVar("T")

#: One measurement at a time in this process (VmHWM and the allocators'
#: peaks are global).
_LOCK = threading.Lock()
#: How long a measurement waits for another thread's to end.
WAIT_SECONDS = 30.0


class _Measuring:
    """A measurement under way; closed when it ends (copies of its context live on)."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


#: The measurement the current context (thread, asyncio task) is inside.
_MEASURING: contextvars.ContextVar[_Measuring | None] = contextvars.ContextVar(
    "xpkit_peak_measuring", default=None
)


def _inside_a_measurement() -> bool:
    """Whether the current context is inside a measurement that has not ended."""
    measuring = _MEASURING.get()
    return measuring is not None and measuring.open


class PeakMeter:
    """Runs a callable and reports the peak bytes it allocated.

    Subclasses implement `_measure`, which runs with the process's
    measurement lock held.

    Attributes
    ----------
    name : str
        How the peak is measured, for logs and `BatchPlan.source`.
    """

    name: str = ""
    #: Whether each new shape must run once before it is measured (its
    #: library compiles per shape, and compiling would dominate the peak).
    warm_up: bool = False

    def measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        """``run()``'s result and the peak bytes allocated while it ran.

        The peak is None when ``run`` ran unmeasured: inside a measurement of
        the same context, or after `WAIT_SECONDS` waiting for another
        thread's.
        """
        if _inside_a_measurement() or not _LOCK.acquire(timeout=WAIT_SECONDS):
            return run(), None
        measuring = _Measuring()
        token = _MEASURING.set(measuring)
        try:
            return self._measure(run)
        finally:
            measuring.open = False
            _MEASURING.reset(token)
            _LOCK.release()

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        """Measure one call (the lock is held)."""
        raise NotImplementedError


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

    def trim_heap(self) -> None:
        """``malloc_trim(0)``: the heap's freed pages go back to the system."""
        self._trim(0)

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        self._trim(0)
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        base = _status_bytes("VmRSS")
        result = run()
        peak = _status_bytes("VmHWM")
        return result, max(peak - base, 0)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    msg = f"/proc/self/status has no {field}"  # pragma: no cover - every Linux has it
    raise OSError(msg)


class _Warmed(PeakMeter):
    """Another meter, for a library that compiles each new shape it meets.

    The probe runs each shape once unmeasured before it measures it
    (`PeakMeter.warm_up`), so that the compiler's memory is not counted.
    """

    warm_up = True

    def __init__(self, inner: PeakMeter) -> None:
        self._inner = inner
        self.name = f"{inner.name} (each shape run once first)"

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        return self._inner._measure(run)


_RSS: list[PeakMeter | None] = []
_WARMED_RSS: list[PeakMeter | None] = []


def release_freed_host_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc's ``malloc_trim``).

    A no-op where the RSS meter cannot measure (no glibc). It changes no
    setting: it returns memory nobody holds, and glibc does it thread-safely.
    """
    meter = rss_meter()
    if isinstance(meter, _PeakRss):
        meter.trim_heap()


def warmed_rss_meter() -> PeakMeter | None:
    """`rss_meter` for libraries that compile per shape (JAX on the CPU)."""
    if not _WARMED_RSS:
        inner = rss_meter()
        _WARMED_RSS.append(None if inner is None else _Warmed(inner))
    return _WARMED_RSS[0]


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
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (musl has no malloc_trim)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return _PeakRss(trim)
