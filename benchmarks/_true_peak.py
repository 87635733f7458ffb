"""Independent peak meters for the child processes of ``bench_meter.py``.

A meter runs a callable once and returns its result with the peak bytes in
use while it ran, above what was in use when it started. None of them is
xpkit's meter, and none reads anything xpkit's meters read or reset:

- `TracemallocMeter`: Python's tracemalloc (``reset_peak`` then
  ``get_traced_memory``). It sees every Python object and every buffer
  NumPy allocates (NumPy reports its data buffers to tracemalloc's domain
  389047), in every thread (Dask's scheduler threads too). It does not see
  torch's or XLA's allocators. Tracing is started in the child, before the
  measured run; a call of ``tracemalloc.reset_peak``, ``clear_traces`` or
  ``stop`` by anyone else while it measures is recorded
  (`TracemallocGuard`), and a ``reset_peak`` is folded into the peak.
- `CounterMeter`: a counting malloc, `COUNTER_C`, compiled here
  (`build_counter`) and preloaded into the child (``LD_PRELOAD``): malloc,
  calloc, realloc, free and the aligned allocators forward to glibc's own
  (``__libc_malloc``, ...) and add or subtract ``malloc_usable_size`` of each
  block to one atomic count whose peak it keeps. It sees what `MtraceMeter`
  sees (every block malloc hands out, in every thread) at the cost of two
  atomic operations a call, and counts the bytes malloc hands out
  (``malloc_usable_size``: the request rounded up to 16 bytes, or to a page
  for a mapped block) where mtrace counts the request. torch's and JAX's
  cells use it: glibc's mtrace, below, resolves each call's caller with
  ``dladdr``, which scans the caller's library's symbols: about 1 ms a free
  called from ``libtorch_cpu.so`` (74,000 symbols), 32 s for one torch
  ``sort`` of 18,750 rows. Frees of blocks allocated before the start count
  too (the bytes in use drop), so its peak is that of the bytes in use.
- `MtraceMeter`: glibc's malloc trace. The child runs with
  ``LD_PRELOAD=`` `MALLOC_DEBUG` and ``MALLOC_TRACE=<file>``; ``mtrace()``
  and ``muntrace()`` (looked up by version with ``dlvsym``: the debug
  library exports them only as ``mtrace@GLIBC_2.2.5``, and an unversioned
  lookup finds libc's empty stub) bracket the run, and `replay` adds up the
  trace (``+`` malloc, calloc, memalign and posix_memalign; ``-`` free;
  ``<`` and ``>`` realloc's old and new block) to the exact peak of the bytes
  allocated during the run and not yet freed. It sees every allocation that
  goes through malloc in any thread: torch's CPU allocator
  (``posix_memalign``), XLA's buffers, NumPy's; not what a library maps
  with ``mmap`` itself, nor Python's small objects from pymalloc's arenas
  (``mmap``-ed), so the children of both malloc meters run with
  ``PYTHONMALLOC=malloc`` (`preload_env`). It and `CounterMeter` cannot run
  in one process (each replaces malloc; the first preloaded wins), and it
  crashes now and then where other threads allocate while ``muntrace``
  closes the trace (JAX's; it waits `QUIET_S` after the run first, and
  ``bench_meter.py`` runs a child that a signal killed again).
- `HwmMeter`: the process's resident high-water mark: glibc's
  ``malloc_trim(0)``, then ``5`` written to ``/proc/self/clear_refs`` (this
  is the benchmark's own child, not the library's process), then VmHWM after
  the run minus VmRSS before it. Page-granular, and blind to what the heap
  serves from pages it already holds; the fallback where a sentinel shows
  that the child's meter does not see its library's arrays (`sees`).
"""

from __future__ import annotations

import ctypes
import gc
import os
import subprocess
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: One page: the slack the acceptance allows above the budget.
PAGE = 4096
#: glibc's malloc debugging library (Debian/Ubuntu x86-64 path), which
#: implements mtrace since glibc 2.34.
MALLOC_DEBUG = "/lib/x86_64-linux-gnu/libc_malloc_debug.so.0"


#: Seconds `MtraceMeter` waits after a run before it stops tracing, and
#: `CounterMeter` before it starts.
QUIET_S = 0.05
#: The counting malloc (see `CounterMeter`).
COUNTER_C = r"""
#include <errno.h>
#include <malloc.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

static long current, peak;

static void add(void *p) {
    if (p == NULL) return;
    long now = __atomic_add_fetch(&current, (long)malloc_usable_size(p), __ATOMIC_RELAXED);
    long seen = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (now > seen && !__atomic_compare_exchange_n(&peak, &seen, now, 1,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static void sub(void *p) {
    if (p != NULL) __atomic_sub_fetch(&current, (long)malloc_usable_size(p), __ATOMIC_RELAXED);
}

void *malloc(size_t n) { void *p = __libc_malloc(n); add(p); return p; }
void *calloc(size_t k, size_t n) { void *p = __libc_calloc(k, n); add(p); return p; }
void free(void *p) { sub(p); __libc_free(p); }
void *realloc(void *old, size_t n) {
    size_t before = old != NULL ? malloc_usable_size(old) : 0;
    void *p = __libc_realloc(old, n);
    if (p != NULL || n == 0) {  /* (NULL with n > 0: failed, old kept) */
        __atomic_sub_fetch(&current, (long)before, __ATOMIC_RELAXED);
        add(p);
    }
    return p;
}
void *memalign(size_t a, size_t n) { void *p = __libc_memalign(a, n); add(p); return p; }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
void *valloc(size_t n) { void *p = __libc_valloc(n); add(p); return p; }
void *pvalloc(size_t n) { void *p = __libc_pvalloc(n); add(p); return p; }
int posix_memalign(void **out, size_t a, size_t n) {
    if (a == 0 || a % sizeof(void *) != 0 || (a & (a - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(a, n);
    if (p == NULL) return ENOMEM;
    add(p);
    *out = p;
    return 0;
}

long xpk_current(void) { return __atomic_load_n(&current, __ATOMIC_RELAXED); }
long xpk_peak(void) { return __atomic_load_n(&peak, __ATOMIC_RELAXED); }
void xpk_reset_peak(void) {
    __atomic_store_n(&peak, __atomic_load_n(&current, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}
"""
#: The environment variable naming the compiled counter in a child.
COUNTER_ENV = "XPK_BENCH_COUNTER"


def build_counter(directory: str) -> str | None:
    """Compile `COUNTER_C` into ``directory``; the library's path, or None.

    None where there is no C compiler (``$CC``, else ``cc``) or it fails.
    """
    source = Path(directory) / "xpk_count.c"
    library = Path(directory) / "libxpk_count.so"
    source.write_text(COUNTER_C, encoding="ascii")
    cc = os.environ.get("CC", "cc")
    try:
        done = subprocess.run(
            [cc, "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
            capture_output=True,
            check=False,
        )
    except OSError:
        return None
    return str(library) if done.returncode == 0 else None


def preload_env(
    meter: str, env: dict[str, str], counter: str | None, trace: str | None
) -> dict[str, str]:
    """``env`` for a child whose meter is ``meter`` (preloads, trace file)."""
    env = dict(env)
    env.pop("MALLOC_TRACE", None)
    env.pop(COUNTER_ENV, None)
    if meter == "counter" and counter is not None:
        first = counter
        env[COUNTER_ENV] = counter
    elif meter == "mtrace" and trace is not None:
        first = MALLOC_DEBUG
        env["MALLOC_TRACE"] = trace
    else:
        return env
    env["LD_PRELOAD"] = " ".join(p for p in (first, env.get("LD_PRELOAD")) if p)
    # Python's small objects from malloc too (not pymalloc's mmap'ed arenas),
    # so that the malloc meters see them as tracemalloc does.
    env["PYTHONMALLOC"] = "malloc"
    return env


class TracemallocGuard:
    """Records calls of tracemalloc's process-wide resets by anyone else.

    Installed in a child before xpkit is imported, so that a meter of
    xpkit's that resets tracemalloc's peak (or stops it) while the
    benchmark measures is seen: the peak so far is kept (``folded``), and
    the call is named in ``calls``.
    """

    def __init__(self) -> None:
        import _tracemalloc

        self.calls: list[str] = []
        self.folded = 0
        self.base = 0
        self.active = False
        self._reset_peak = _tracemalloc.reset_peak
        modules = (tracemalloc, _tracemalloc)
        for name in ("reset_peak", "clear_traces", "stop"):
            original = getattr(_tracemalloc, name)
            wrapper = self._wrap(name, original)
            for module in modules:
                setattr(module, name, wrapper)

    def _wrap(self, name: str, original: Callable[[], None]) -> Callable[[], None]:
        def call() -> None:
            if self.active:
                self.calls.append(name)
                if _tracemalloc_is_tracing():
                    peak = _tracemalloc_traced()[1] - self.base
                    self.folded = max(self.folded, peak)
            original()

        return call

    def own_reset_peak(self) -> None:
        """The benchmark's own ``reset_peak``, not recorded."""
        self._reset_peak()


def _tracemalloc_is_tracing() -> bool:
    import _tracemalloc

    return bool(_tracemalloc.is_tracing())


def _tracemalloc_traced() -> tuple[int, int]:
    import _tracemalloc

    return _tracemalloc.get_traced_memory()


class TracemallocMeter:
    """Peak bytes tracemalloc traces during one run (see the module docstring)."""

    name = "tracemalloc"

    def __init__(self, guard: TracemallocGuard | None = None) -> None:
        self.guard = guard
        if not tracemalloc.is_tracing():
            tracemalloc.start()

    def measure(self, run: Callable[[], Any]) -> tuple[Any, int]:
        gc.collect()
        guard = self.guard
        if guard is not None:
            guard.own_reset_peak()
        else:
            tracemalloc.reset_peak()
        base = _tracemalloc_traced()[0]
        if guard is not None:
            guard.base, guard.folded, guard.active = base, 0, True
        try:
            result = run()
        finally:
            if guard is not None:
                guard.active = False
        if not _tracemalloc_is_tracing():  # someone stopped it
            return result, -1
        peak = _tracemalloc_traced()[1] - base
        if guard is not None:
            peak = max(peak, guard.folded)
        return result, max(peak, 0)


class CounterMeter:
    """Peak bytes in use by malloc during one run, from the preloaded counter."""

    name = "malloc counter"

    def __init__(self) -> None:
        path = os.environ.get(COUNTER_ENV, "")
        if not path or path not in os.environ.get("LD_PRELOAD", ""):
            msg = f"the counter needs LD_PRELOAD and {COUNTER_ENV}"
            raise RuntimeError(msg)
        lib = ctypes.CDLL(path)  # (preloaded: the same library)
        self._current = lib.xpk_current
        self._peak = lib.xpk_peak
        self._current.restype = self._peak.restype = ctypes.c_long
        self._reset = lib.xpk_reset_peak

    def measure(self, run: Callable[[], Any]) -> tuple[Any, int]:
        gc.collect()
        # Frees count here, so let other threads finish theirs first (JAX
        # frees an earlier run's buffers asynchronously: one freed during
        # the run hid that run's own (b, b) buffer of the same size).
        time.sleep(QUIET_S)
        self._reset()
        base = self._current()
        result = run()
        return result, max(self._peak() - base, 0)


class MtraceMeter:
    """Peak bytes malloc'ed (and not freed) during one run, from glibc's trace."""

    name = "mtrace"

    def __init__(self) -> None:
        self.path = os.environ.get("MALLOC_TRACE", "")
        if not self.path or MALLOC_DEBUG not in os.environ.get("LD_PRELOAD", ""):
            msg = f"mtrace needs LD_PRELOAD={MALLOC_DEBUG} and MALLOC_TRACE"
            raise RuntimeError(msg)
        libc = ctypes.CDLL("libc.so.6")
        dlvsym = libc.dlvsym
        dlvsym.restype = ctypes.c_void_p
        dlvsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        handle = ctypes.CDLL(MALLOC_DEBUG)._handle
        on = dlvsym(handle, b"mtrace", b"GLIBC_2.2.5")
        off = dlvsym(handle, b"muntrace", b"GLIBC_2.2.5")
        if not on or not off:
            msg = f"{MALLOC_DEBUG} has no mtrace@GLIBC_2.2.5"
            raise RuntimeError(msg)
        self._on = ctypes.CFUNCTYPE(None)(on)
        self._off = ctypes.CFUNCTYPE(None)(off)
        self.records = 0

    def measure(self, run: Callable[[], Any]) -> tuple[Any, int]:
        gc.collect()
        self._on()
        try:
            result = run()
        finally:
            # glibc's hooks test whether tracing is on before they take its
            # lock: a thread that allocates while muntrace closes the trace
            # writes to a closed stream. Let the run's threads go quiet first.
            time.sleep(QUIET_S)
            self._off()
        peak, _live, self.records = replay(self.path)
        return result, peak


def replay(path: str) -> tuple[int, int, int]:
    """(peak, still live, records) of the bytes an mtrace file allocated.

    Frees of blocks allocated before the trace started are ignored (their
    bytes were never counted), so the peak is that of the bytes allocated
    during the run.
    """
    live: dict[bytes, int] = {}
    current = peak = records = 0
    with open(path, "rb") as fh:
        for line in fh:
            tokens = line.split()
            if len(tokens) >= 3 and tokens[-3] in (b"+", b">"):
                try:
                    size = int(tokens[-1], 16)
                except ValueError:  # (a line two threads wrote at once)
                    continue
                old = live.get(tokens[-2])
                if old is not None:  # (an address reused without a free seen)
                    current -= old
                live[tokens[-2]] = size
                current += size
                peak = max(peak, current)
                records += 1
            elif len(tokens) >= 2 and tokens[-2] in (b"-", b"<"):
                current -= live.pop(tokens[-1], 0)
                records += 1
    return peak, current, records


class HwmMeter:
    """Growth of the child's resident high-water mark during one run."""

    name = "VmHWM"

    def __init__(self) -> None:
        self._trim = ctypes.CDLL("libc.so.6").malloc_trim
        self._trim.argtypes = [ctypes.c_size_t]

    def measure(self, run: Callable[[], Any]) -> tuple[Any, int]:
        gc.collect()
        self._trim(0)
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        base = status_bytes("VmRSS")
        result = run()
        return result, max(status_bytes("VmHWM") - base, 0)


def settle() -> None:
    """Collect garbage, then freeze what is left out of later collections.

    Each meter collects garbage before it measures (so that a collection of
    older garbage does not fall inside the run); with torch imported a full
    collection takes about 0.2 s, after a freeze only the objects made since.
    """
    gc.collect()
    gc.freeze()


def status_bytes(field: str) -> int:
    """A field of ``/proc/self/status`` (kB there) in bytes."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    msg = f"/proc/self/status has no {field}"
    raise OSError(msg)


def sees(meter: Any, make: Callable[[], Any], nbytes: int) -> tuple[bool, int]:
    """Whether ``meter`` sees an array of ``nbytes`` that ``make`` allocates.

    ``make`` runs once unmeasured (a compiling library compiles it), then
    measured; the meter sees it when its peak is within ``[nbytes, 1.25 x
    nbytes + 1 MiB]``. Returns (sees, the peak it read).
    """
    warm = make()
    del warm
    made, peak = meter.measure(make)
    del made
    return nbytes <= peak <= 1.25 * nbytes + 2**20, peak
