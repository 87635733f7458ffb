"""Measuring the peak memory of a real run: the meters adapters choose from.

Where ``fn`` cannot be traced on shape-only arrays (`xpkit._adapters._shapes`),
`map_batches` runs it on a few real rows under a meter its backend's adapter
offers (`Adapter.peak_meters`). A meter runs a callable and returns its
result with the peak bytes allocated while it ran, above what was allocated
before. Every meter is a guest in the caller's process: it reads statistics
and resets none (no peak-RSS record, no allocator peak, no tracemalloc
switch), so ``ru_maxrss``, VmHWM and the libraries' own peaks read what
they would have read without xpkit.

On the host that is `host_meter`: the process's resident memory sampled
every `SAMPLE_SECONDS` while the call runs (on Linux its anonymous part,
where buffers live, so that file pages the kernel evicts meanwhile do not
read as frees; page-granular; a peak shorter than the interval can be
missed, and what other threads allocate meanwhile is counted, the safe
side), beside it, where glibc counts them, the bytes its heap has handed
out (`heap_bytes`: blocks the heap hands out again, which the
resident size cannot see, and blocks whose pages are still being written;
the larger growth of the two is the call's), raised to the process's high-water mark (VmHWM on Linux, else
``ru_maxrss``) when the call set a new one; where the process already
traces with ``tracemalloc`` (NumPy reports its buffers to it), its
byte-exact count of allocated memory instead, sampled the same way. Off
Linux the resident memory comes from psutil, so the meter needs no
``/proc``.

A meter that reads process-wide statistics measures one call at a time
(`PeakMeter.process_wide`): a thread whose measurement finds another
thread's under way waits for it while that thread works, at most
`WAIT_SECONDS`. Where, over `STILL_SECONDS`, the measuring thread used
under `THREAD_SHARE` of a CPU (a poll loop's wake-ups stay under it) and
the whole process, but xpkit's own samplers and waiters, under
`PROCESS_SHARE` (so that no thread computes for it, as XLA's do while JAX's calling thread waits), and, where the threads'
states can be read (Linux), neither it nor another thread was runnable in
half the looks (a thread that computes on a loaded machine may find no CPU
free, and use little CPU time), it is waiting itself,
perhaps for this very thread (a ``fn`` that hands its rows to a thread
pool whose work calls `map_batches` again): this thread does not wait on,
it measures alongside (the still one's memory does not change meanwhile),
and the waiting measurement counts what it allocates too.
Where a thread's CPU time cannot be read (no ``pthread_getcpuclockid``:
macOS, Windows), the process's alone decides. A call made inside a
measurement of the same context (``fn`` itself calls `map_batches`, in its
thread or in a copy of its context, such as ``asyncio.to_thread`` makes)
runs unmeasured: the outer measurement counts it. Unmeasured calls report
None. Meters that follow one thread's own
allocations (torch's dispatch mode, CuPy's memory hooks) measure in every
thread at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = [
    "PROCESS_SHARE",
    "SAMPLE_SECONDS",
    "STILL_SECONDS",
    "THREAD_SHARE",
    "WAIT_SECONDS",
    "PeakMeter",
    "after_fork_in_child",
    "host_meter",
    "release_freed_host_memory",
]

T = TypeVar("T")

#: How often the host meter reads the process's memory while a call runs.
SAMPLE_SECONDS = 0.0005

# -- Whose turn it is to measure ---------------------------------------------------

#: One process-wide measurement at a time in this process.
_LOCK = threading.Lock()
#: The longest a measurement waits for another thread's.
WAIT_SECONDS = 30.0
#: How long the measuring thread is watched before it is judged waiting.
STILL_SECONDS = 0.2
#: Below this share of one CPU over `STILL_SECONDS`, the measuring thread
#: waits (a poll loop's wake-ups stay under it)...
THREAD_SHARE = 0.05
#: ... and, below this share, no thread of the process works for it (XLA's
#: or a BLAS's threads compute while the measuring thread waits on them).
PROCESS_SHARE = 0.25
#: How often a waiting thread looks at the measuring one.
_POLL_SECONDS = 0.02


class _Holder:
    """The measurement under way: its thread's CPU clock, where it can be read."""

    __slots__ = ("native_id", "thread_cpu")

    def __init__(self) -> None:
        self.thread_cpu = _own_cpu_clock()
        self.native_id = threading.get_native_id()


#: States of a thread that computes or is about to (runnable, in a system call).
_WORKING = frozenset({b"R", b"D"})
#: This process's threads, each with its ``stat`` (Linux).
_TASKS = "/proc/self/task"


def _running_threads() -> frozenset[int] | None:
    """The native ids of this process's threads in state R or D; None where unknown.

    A thread that computes but finds no CPU free uses little CPU time, yet
    is ``R`` (running or runnable); one that waits on a lock, a join or an
    event is ``S``.
    """
    try:
        names = [entry.name for entry in os.scandir(_TASKS)]
    except OSError:
        return None
    running = set()
    for name in names:  # (os's own calls: a look costs about 12 us a thread)
        try:
            fd = os.open(f"{_TASKS}/{name}/stat", os.O_RDONLY)
        except OSError:  # (it ended meanwhile)
            continue
        try:
            stat = os.read(fd, 1024)
        except OSError:  # (it ended between the two: ESRCH)
            continue
        finally:
            os.close(fd)
        after = stat.rfind(b")") + 2  # (the name, in brackets, may hold anything)
        if stat[after : after + 1] in _WORKING:
            running.add(int(name))
    return frozenset(running)


class _Window:
    """One `STILL_SECONDS` of watching the measuring thread.

    Its CPU time and the process's, and, where the threads' states can be
    read (`_running_threads`), how often it and each other thread was
    running or runnable: a thread that computes on a loaded machine finds
    no CPU free and uses little time, but is runnable.
    """

    __slots__ = ("began", "looks", "process", "quiet", "runs", "thread")

    def __init__(self, began: float, thread: float, process: float) -> None:
        self.began, self.thread, self.process = began, thread, process
        self.quiet = _quiet_seconds()
        self.looks = 0
        self.runs: dict[int, int] = {}

    def look(self, watcher: int) -> None:
        """Note which threads run now (``watcher``, this one, always does)."""
        running = _running_threads()
        if running is None:
            return
        self.looks += 1
        for native_id in running.difference(_QUIET, (watcher,)):
            self.runs[native_id] = self.runs.get(native_id, 0) + 1

    def still(self, holder: int, thread: float, process: float, now: float) -> bool:
        """Whether the measuring thread waited all along, and no thread worked for it.

        The process's CPU time leaves out what xpkit's quiet threads used
        meanwhile (`_QUIET`: a sampler's heap readings cost up to 2 ms each
        on a heap of many free blocks, 40% of a CPU).
        """
        span = now - self.began
        busy = {i for i, n in self.runs.items() if 2 * n >= self.looks > 0}
        before = self.quiet
        quiet = sum(t - before[i] for i, t in _quiet_seconds().items() if i in before)
        return (
            thread - self.thread < THREAD_SHARE * span
            and process - self.process - quiet < PROCESS_SHARE * span
            and holder not in busy
            and not busy
        )


#: The measurement under way, or None.
_HOLDER: list[_Holder | None] = [None]
#: xpkit's own threads that do no work for a measurement, by native id, each
#: with a reader of its CPU seconds where one can be had: the meters'
#: samplers (awake every `SAMPLE_SECONDS`, so often runnable on a loaded
#: machine) and the threads waiting for their turn.
_QUIET: dict[int, Callable[[], float] | None] = {}


def _quiet_seconds() -> dict[int, float]:
    """The CPU seconds each quiet thread has used, where its clock can be read."""
    spent = {}
    for native_id, clock in list(_QUIET.items()):
        with contextlib.suppress(OSError):  # (it ended meanwhile)
            spent[native_id] = 0.0 if clock is None else clock()
    return spent


class _Measuring:
    """A measurement under way; closed when it ends (copies of its context live on)."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        self.open = True


#: The measurement the current context (thread, asyncio task) is inside.
_MEASURING: contextvars.ContextVar[_Measuring | None] = contextvars.ContextVar(
    "xpkit_peak_measuring", default=None
)


def _inside() -> bool:
    """Whether the current context is inside a measurement that has not ended."""
    measuring = _MEASURING.get()
    return measuring is not None and measuring.open


def _turn_taken() -> bool:
    """Whether another process-wide measurement is under way now."""
    return _LOCK.locked()


@contextmanager
def _measuring(process_wide: bool) -> Iterator[bool]:
    """Mark the current context as measuring; yield whether it measures.

    A process-wide measurement first takes its turn (`_take_turn`): it holds
    the lock, or measures alongside a measurement that is still (whose
    memory does not change meanwhile), or, after `WAIT_SECONDS`, runs
    unmeasured (False). Meters that follow their own thread's allocations
    always measure (True).
    """
    turn = _take_turn() if process_wide else _ALONGSIDE
    if turn is _NONE:
        yield False
        return
    mark = _Measuring()
    token = _MEASURING.set(mark)
    if turn is _TURN:
        _HOLDER[0] = _Holder()
    try:
        yield True
    finally:
        mark.open = False
        _MEASURING.reset(token)
        if turn is _TURN:
            _HOLDER[0] = None
            _LOCK.release()


#: What `_take_turn` gives: the lock, a measurement beside a still one, none.
_TURN, _ALONGSIDE, _NONE = "turn", "alongside", "none"


def _take_turn() -> str:
    """The measurement lock (`_TURN`), else how this thread measures.

    Waits while the measuring thread works, at most `WAIT_SECONDS` (then
    `_NONE`: unmeasured). Over each `STILL_SECONDS`, where that thread used
    under `THREAD_SHARE` of a CPU (where its clock can be read) and the
    process under `PROCESS_SHARE`, it waits itself, perhaps for this
    thread: this one measures alongside it (`_ALONGSIDE`), since its memory
    does not change while it waits (running unmeasured, a thread beside an
    idle one planned from its input rows: 64 times its budget).
    """
    me = threading.get_native_id()
    _QUIET[me] = _own_cpu_clock()
    try:
        return _wait_for_turn(me)
    finally:
        _QUIET.pop(me, None)


def _wait_for_turn(me: int) -> str:
    """`_take_turn`'s loop, in thread ``me``."""
    deadline = time.monotonic() + WAIT_SECONDS
    watched: _Holder | None = None
    window = _Window(0.0, 0.0, 0.0)
    while True:
        if _LOCK.acquire(timeout=_POLL_SECONDS):
            return _TURN
        now = time.monotonic()
        if now >= deadline:
            return _NONE
        holder = _HOLDER[0]
        if holder is None:
            continue
        try:
            thread = 0.0 if holder.thread_cpu is None else holder.thread_cpu()
        except OSError:  # it ended between two reads: the lock is free soon
            continue
        process = _process_seconds()
        if holder is not watched:
            watched, window = holder, _Window(now, thread, process)
            continue
        window.look(me)
        if now - window.began < STILL_SECONDS:
            continue
        if window.still(holder.native_id, thread, process, now):
            return _ALONGSIDE
        window = _Window(now, thread, process)


def _process_seconds() -> float:
    """The CPU seconds this process's threads have used."""
    return time.process_time()


def _own_cpu_clock() -> Callable[[], float] | None:
    """A reader of the calling thread's CPU seconds for other threads, or None."""
    get_clock = getattr(time, "pthread_getcpuclockid", None)
    if get_clock is None:  # pragma: no cover - Windows
        return None
    try:
        clock = get_clock(threading.get_ident())
        time.clock_gettime(clock)
    except (OSError, OverflowError):  # pragma: no cover - no per-thread clock
        return None

    def spent() -> float:
        return time.clock_gettime(clock)

    return spent


# -- The meters ---------------------------------------------------------------------


class PeakMeter:
    """Runs a callable and reports the peak bytes it allocated.

    Subclasses implement `_measure`, which runs with the process's
    measurement lock held where the meter is `process_wide`.

    Attributes
    ----------
    name : str
        How the peak is measured, for logs and `BatchPlan.source`.
    process_wide : bool
        Whether it reads statistics of the whole process (one measurement at
        a time), rather than following the calling thread's own allocations.
    cheap : bool
        Whether measuring costs little enough that `map_batches` measures its
        first full batch with it too, to check the plan.
    """

    name: str = ""
    process_wide: bool = True
    cheap: bool = False
    #: Whether each new shape must run once before it is measured (its
    #: library compiles per shape, and compiling would dominate the peak).
    warm_up: bool = False

    def measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        """``run()``'s result and the peak bytes allocated while it ran.

        The peak is None when ``run`` ran unmeasured: inside a measurement of
        the same context, or after `WAIT_SECONDS` waiting for another
        thread's (`_take_turn`), or where the meter could not see the call's
        memory.
        """
        if _inside():
            return run(), None
        with _measuring(self.process_wide) as measured:
            if not measured:
                return run(), None
            return self._measure(run)

    def try_measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        """`measure`, without waiting for another thread's measurement."""
        if self.process_wide and _turn_taken():
            return run(), None
        return self.measure(run)

    def _measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        """Measure one call (the lock is held where the meter is process-wide)."""
        raise NotImplementedError


class _Sampler:
    """A thread that reads ``read()`` every `SAMPLE_SECONDS` and keeps the largest.

    Made and running before the measurement reads its start (`begin`), so
    that the thread's own objects are not counted.
    """

    def __init__(self, read: Callable[[], int]) -> None:
        self.top = 0
        self._read = read
        self._stop = threading.Event()
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, args=(ready,), name="xpkit-memory-sampler", daemon=True
        )
        try:
            self._thread.start()
            ready.wait()
        except BaseException:  # a Ctrl-C: no one will stop it, so stop it here
            self._stop.set()
            raise

    def begin(self) -> int:
        """The reading the measurement starts from (the largest so far)."""
        self.top = self._read()
        return self.top

    def _loop(self, ready: threading.Event) -> None:
        me = threading.get_native_id()
        _QUIET[me] = _own_cpu_clock()  # (it does no work for the measurement)
        ready.set()
        try:
            while not self._stop.wait(SAMPLE_SECONDS):
                value = self._read()
                self.top = max(self.top, value)
        finally:
            _QUIET.pop(me, None)

    def stop(self) -> int:
        """Stop sampling; the largest reading."""
        self._stop.set()
        self._thread.join()
        return self.top


class _SampledHost(PeakMeter):
    """The host's memory, sampled while the call runs (see the module docstring)."""

    def __init__(
        self,
        reader: _Reader,
        trim: Callable[[], None],
        heap: Callable[[], int | None] | None = None,
    ) -> None:
        self._own, self._resident = reader
        self._trim = trim
        self._heap = heap
        self.name = "sampled RSS" if heap is None else "sampled RSS and heap"

    def _measure(self, run: Callable[[], T]) -> tuple[T, int]:
        if tracemalloc.is_tracing():  # the caller traces: byte-exact, heap reuse seen
            return _traced(run)
        heap = None if _SLOW_UNTIL[0] > time.monotonic() else self._heap
        if heap is None:  # (the heap's count sees what it hands out again)
            self._trim()  # freed heap pages back, so the call's show as new pages
        growth = _Growth(self._own, heap)
        sampler = _Sampler(growth)
        try:  # (from here: a Ctrl-C anywhere stops the thread, as the end does)
            high = _high_water()
            resident = self._resident()
            growth.start()  # (the sampler's thread and objects made: not counted)
            base = sampler.begin()
            result = run()
        finally:
            top = max(sampler.stop(), growth())
        grown = top - base
        new_high = _high_water()
        if new_high > high:  # the call set the process's high-water mark
            grown = max(grown, new_high - resident)
        return result, max(grown, 0)


class _Growth:
    """How far the host's memory grew since `start`: the larger of two readings.

    The process's own resident memory, and, where the C library counts it
    (`heap_bytes`), the bytes its heap has handed out: each reading is what
    the call holds at least, and each sees what the other misses (pages
    touched outside the heap; blocks the heap hands out again, or whose
    pages are not all written yet). 0 before `start`. Where the heap's
    reader gives none (it backs off, `heap_bytes`), the resident memory
    alone, for the rest of the measurement.
    """

    def __init__(
        self, own: Callable[[], int], heap: Callable[[], int | None] | None
    ) -> None:
        self._own = own
        self._heap = heap
        self._base: tuple[int, int] | None = None

    def start(self) -> None:
        """Take the readings the growth is counted from."""
        heap = None if self._heap is None else self._heap()
        if heap is None:
            self._heap = None
        self._base = (self._own(), heap or 0)

    def __call__(self) -> int:
        base = self._base
        if base is None:
            return 0
        grown = self._own() - base[0]
        heap = self._heap
        if heap is not None:
            used = heap()
            if used is None:
                self._heap = None
            else:
                grown = max(grown, used - base[1])
        return grown


def _traced(run: Callable[[], T]) -> tuple[T, int]:
    """``run()`` measured by tracemalloc's count, which the process keeps already.

    The traced peak is not reset (others read it): it is used where the call
    raised it, else the sampled count.
    """
    sampler = _Sampler(lambda: tracemalloc.get_traced_memory()[0])
    try:
        old_peak = tracemalloc.get_traced_memory()[1]
        base = sampler.begin()
        result = run()
    finally:
        top = sampler.stop()
    current, peak = tracemalloc.get_traced_memory()
    top = max(top, current)
    if peak > old_peak:
        top = max(top, peak)
    return result, max(top - base, 0)


def _high_water() -> int:
    """The process's resident high-water mark in bytes, read only; 0 if none.

    On Linux VmHWM, this address space's own mark: ``ru_maxrss`` also holds
    the mark of the program the process ran before ``exec``, so in a child
    started by a large process it stays above anything the child does.
    Elsewhere ``ru_maxrss`` (Windows has neither).
    """
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0
    high = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(high) if sys.platform == "darwin" else int(high) * 1024


# -- The C library's count of its heap's bytes --------------------------------------
#
# glibc's ``mallinfo2`` (2.33 and later): the bytes in use in every arena
# (``uordblks``) and in blocks mapped on their own (``hblkhd``). A block
# counts from its ``malloc`` to its ``free``, whether its pages were touched
# yet or not, and whether they were resident already. Read only: it resets
# nothing. It adds up every arena's free lists, holding that arena's lock
# meanwhile (about a microsecond on a common heap). Elsewhere (musl, macOS,
# Windows, an older glibc) there is no reading.

#: `SLOW_IN_A_ROW` heap readings in a row that each took more of their
#: thread's CPU time than this (a heap of very many free blocks: `mallinfo2`
#: holds each arena's lock while it adds up its free lists; 1M of them took
#: 0.2 s, every reading) make the reader give none for `SLOW_BACKOFF_SECONDS`.
#: A common heap takes 4 us; beside two threads that allocate, 9 us, and up to
#: 0.6 ms one reading in a hundred beside three busy processes on two cores.
SLOW_SECONDS = 0.002
#: One slow reading alone is the machine's, not the heap's: beside a test
#: run on a shared machine, one reading took over `SLOW_SECONDS` (its thread's
#: clock counts the time a virtual machine's core was taken away) and the
#: heap's count, switched off for a minute, left a call's unwritten 64 MiB
#: unseen. A heap slow to read is slow at every reading.
SLOW_IN_A_ROW = 3
SLOW_BACKOFF_SECONDS = 60.0
#: Until when (``time.monotonic``) the heap's reader gives none.
_SLOW_UNTIL = [0.0]

#: glibc's ``struct mallinfo2``: ten ``size_t`` fields, in order.
_FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _Mallinfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2``: ten ``size_t`` fields."""

    _fields_ = [(name, ctypes.c_size_t) for name in _FIELDS.split()]


@functools.cache
def heap_bytes() -> Callable[[], int | None] | None:
    """A reader of the bytes the heap has handed out and not taken back, or None.

    The bytes in use in every arena (``uordblks``) and in blocks mapped on
    their own (``hblkhd``). Found once per process. The reader gives None
    while it backs off after a slow reading (`SLOW_SECONDS`).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # (the process's own symbols: its C library's)
        info = libc.mallinfo2  # (glibc 2.33 and later)
    except (OSError, AttributeError, TypeError):  # musl, an older glibc
        return None
    info.argtypes = []
    info.restype = _Mallinfo2

    def read() -> int:
        now = info()
        return int(now.uordblks) + int(now.hblkhd)

    return backing_off(read)


def backing_off(
    read: Callable[[], int], clock: Callable[[], float] = time.thread_time
) -> Callable[[], int | None]:
    """``read``, giving None for `SLOW_BACKOFF_SECONDS` after slow readings.

    After `SLOW_IN_A_ROW` slow readings in a row: slow by the CPU time of
    the thread that reads (``clock``: the time ``read`` holds the
    allocator's locks), not by the wall clock: a sampling thread that waits
    for the GIL after the call is not slow. A reading in time starts the
    row again.
    """
    slow_in_a_row = [0]  # (a race between two readers loses a count: harmless)

    def guarded() -> int | None:
        if time.monotonic() < _SLOW_UNTIL[0]:
            return None
        began = clock()
        value = read()
        if clock() - began <= SLOW_SECONDS:
            slow_in_a_row[0] = 0
            return value
        slow_in_a_row[0] += 1
        if slow_in_a_row[0] >= SLOW_IN_A_ROW:
            slow_in_a_row[0] = 0
            _SLOW_UNTIL[0] = time.monotonic() + SLOW_BACKOFF_SECONDS
        return value

    return guarded


_HOST: list[PeakMeter | None] = []


def after_fork_in_child() -> None:
    """A forked child measures itself, and no measurement is under way in it.

    The host meter read the parent's ``/proc/self/statm`` through the file
    it opened (the parent's figures; ``ProcessLookupError`` once the parent
    exited), and a measurement another thread of the parent ran at the
    fork left the lock held, with a holder the child has no thread of:
    every measured probe waited `WAIT_SECONDS`, then planned from the input
    rows alone.
    """
    global _LOCK  # noqa: PLW0603 - (a new lock: the parent's may be held)
    _LOCK = threading.Lock()
    _HOLDER[0] = None
    _HOST.clear()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim``, or None (not glibc); found once per process."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # (the process's own C library's)
    except (OSError, AttributeError, TypeError):  # musl has no malloc_trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_freed_host_memory() -> None:
    """Hand the heap's freed pages back to the system (glibc's ``malloc_trim``).

    A no-op without glibc. It changes no setting: it returns memory nobody
    holds, and glibc does it thread-safely.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def host_meter() -> PeakMeter | None:
    """The host meter, or None where the process's memory cannot be read."""
    if not _HOST:
        reader = _statm_reader() or _psutil_reader()
        heap = heap_bytes()
        trim = release_freed_host_memory
        _HOST.append(None if reader is None else _SampledHost(reader, trim, heap))
    return _HOST[0]


#: A host reading: the process's own memory, sampled while a call runs, and
#: its whole resident size, which `_high_water` is the mark of.
_Reader = tuple[Callable[[], int], Callable[[], int]]


def _statm_reader() -> _Reader | None:
    """Linux: ``/proc/self/statm``, through one open file.

    The sampled figure is the anonymous resident memory (resident less
    shared), where every buffer ``fn`` allocates lives: pages of mapped files
    (the libraries' code) that the kernel evicts under memory pressure while
    the call runs would otherwise read as the call freeing memory. Shared
    memory ``fn`` makes (``shm``) is left out of the samples too; the
    high-water mark still counts it where the call raised the mark.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        return None
    page = os.sysconf("SC_PAGE_SIZE")

    def own() -> int:
        fields = os.pread(fd, 64, 0).split()
        return (int(fields[1]) - int(fields[2])) * page

    def resident() -> int:
        return int(os.pread(fd, 64, 0).split()[1]) * page

    return own, resident


def _psutil_reader() -> _Reader | None:
    """Elsewhere: psutil's resident size of this process, for both readings."""
    try:
        import psutil

        process = psutil.Process()
        process.memory_info()
    except Exception:  # noqa: BLE001 - no reading here: no meter
        return None

    def read() -> int:
        return int(process.memory_info().rss)

    return read, read
