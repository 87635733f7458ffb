"""Memory budgets, batch sizing and memory-aware worker counts.

Every library fact (free device memory) comes from the adapters; host memory
(psutil and the process's cgroup limit) from `xpkit._host_memory`. Nothing
here imports or initialises a GPU library.
"""

from __future__ import annotations

import functools
import math
import os
import pickle
import sys
import time
import warnings
from collections.abc import (
    Callable,
    Iterable,
)
from contextlib import ContextDecorator
from fractions import Fraction
from typing import TYPE_CHECKING, Self, TypeVar, cast

import numpy as np

from ._adapters._base import HOST_BATCH_WORKING_SET_BYTES
from ._adapters._registry import adapter_for_array, get_adapter, refuse_lossy
from ._args import (
    MAX_GB,
    check_count,
    check_gb,
    check_overhead,
    check_positive,
    item_bytes,
)
from ._budget_stack import (
    ACTIVE_BUDGET,
    async_generator_in_budget,
    generator_in_budget,
)
from ._dtypes import dtype_name, external_stacklevel
from ._host_memory import host_available_bytes
from ._typing import Array, UserFunction

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._backend import Backend
    from ._typing import HostArray

T = TypeVar("T")
F = TypeVar("F", bound=UserFunction)

__all__ = [
    "BATCH_WORKING_SET_CEILING_GB",
    "BYTES_PER_GB",
    "FALLBACK_BUDGET_GB",
    "HEADROOM",
    "HOST_BATCH_WORKING_SET_BYTES",
    "MIN_BUDGET_GB",
    "TRIM_ABOVE_BYTES",
    "MemoryCapWarning",
    "array_nbytes",
    "auto_batch_size",
    "auto_n_jobs_for_arrays",
    "available_bytes",
    "batch_budgets",
    "batch_size_within",
    "configured_budget_gb",
    "configured_budget_origin",
    "fresh_host_reading",
    "gb_to_bytes",
    "host_available_bytes",
    "host_reading",
    "memory_budget",
    "recent_host_bytes",
]

#: Ceiling on a *measured* budget used to size batches: working sets beyond it
#: add allocation cost without throughput gain and starve unified-memory hosts.
BATCH_WORKING_SET_CEILING_GB = 8.0
#: A host batch with a larger working set, of a library that keeps freed
#: memory (`Adapter.keeps_freed_host_memory`), hands it back after it.
TRIM_ABOVE_BYTES = 2 * HOST_BATCH_WORKING_SET_BYTES
#: Budget used when nothing can be measured.
FALLBACK_BUDGET_GB = 4.0
#: Smallest measured budget: what a device with (almost) nothing free gets.
MIN_BUDGET_GB = 1 / 16
#: Fraction of measured free memory that a budget may use.
HEADROOM = 0.8

#: Bytes in a GB as budgets count them (2**30, as device memory is reported).
BYTES_PER_GB = 1024**3


class MemoryCapWarning(UserWarning):
    """Memory, not the CPU count, limited a worker count.

    Parameters
    ----------
    message : str
        What limited the count, and by how much.

    Raises
    ------
    Nothing: it is a warning category; catch or filter it with `warnings`.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> import xpkit
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     n = xpkit.auto_n_jobs_for_arrays([np.zeros(10**6)] * 8, max_memory_gb=0.01)
    >>> n, any(issubclass(w.category, xpkit.MemoryCapWarning) for w in seen)
    (1, True)
    """


def gb_to_bytes(gb: float) -> int:
    """Convert a GB budget to bytes — the package's one GB↔bytes conversion.

    A GB here is 2**30 bytes, as device memory is reported.

    Parameters
    ----------
    gb : float
        A size in GB (2**30 bytes); finite and not negative.

    Returns
    -------
    int
        The size in bytes, rounded down.

    Raises
    ------
    ValueError
        ``gb`` is negative, NaN or infinite.
    TypeError
        ``gb`` is not a number.

    Examples
    --------
    >>> import xpkit
    >>> xpkit.gb_to_bytes(1.5)
    1610612736
    """
    return int(check_gb("gb", gb, allow_zero=True) * BYTES_PER_GB)


# -- budgets -----------------------------------------------------------------
ENV_BUDGET = "XPKIT_MEMORY_BUDGET_GB"


class memory_budget(ContextDecorator):
    """Set the memory budget (GB) for every xpkit call inside a block.

    Works as a context manager and as a decorator. The setting lives in a
    `contextvars.ContextVar`, so concurrent threads and asyncio tasks each
    see their own budget; blocks nest, the innermost winning. Leaving a
    block removes the budget that block set, even when it is not the
    innermost one (a generator that held a block across a ``yield`` and is
    closed inside a later block leaves that later block's budget in force).
    One object may be entered in several threads or tasks at once, and
    nested. An explicit ``max_gpu_memory_gb`` / ``budget_gb`` argument still
    wins over it.

    Parameters
    ----------
    gb : float
        Budget in GB; a finite positive number.

    Returns
    -------
    memory_budget
        A context manager and decorator (``memory_budget.bind(fn)`` carries the
        budget into other threads).

    Raises
    ------
    ValueError
        ``gb`` is not a finite positive number.
    TypeError
        ``gb`` is not a number.

    Examples
    --------
    >>> import xpkit
    >>> with xpkit.memory_budget(2.0):
    ...     xpkit.device_memory_budget()
    2.0
    """

    def __init__(self, gb: float) -> None:
        self._gb = check_gb("gb", gb)

    @property
    def gb(self) -> float:
        """The budget in GB this block sets (read-only)."""
        return self._gb

    # The stack of budgets lives in the context, not in this object, so one
    # object can be entered in several threads or asyncio tasks at once. An
    # exit removes the entry its own enter pushed, wherever it is: a
    # generator that holds a block across a yield may leave it (close,
    # garbage collection) inside a block its caller entered later, which
    # must stay in force. A ``with`` statement calls __enter__ and __exit__
    # from one frame (a generator's frame outlives its suspensions), so the
    # entry is this object's innermost one pushed from the exiting frame;
    # else (entered and left from different frames, as an ExitStack does)
    # this object's innermost one; else (entered in another context) none.
    def __enter__(self) -> Self:
        entry = (self, self._gb, id(sys._getframe(1)))
        ACTIVE_BUDGET.set((*ACTIVE_BUDGET.get(), entry))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = ACTIVE_BUDGET.get()
        frame = id(sys._getframe(1))
        mine = [i for i, entry in enumerate(stack) if entry[0] is self]
        if not mine:
            return
        here = [i for i in mine if stack[i][2] == frame]
        i = (here or mine)[-1]
        ACTIVE_BUDGET.set(stack[:i] + stack[i + 1 :])

    def __call__(self, func: F) -> F:
        """Decorate a function, a coroutine function or a (sync or async) generator function.

        The budget holds across a coroutine's awaits, and while a generator's
        own code runs (each resumption), never in its caller between them;
        a budget block the generator holds across a ``yield`` is its own
        (its caller never sees it, and it is in force again at the next
        resumption). An object whose ``__call__`` is one of these is taken
        as one. A plain function's budget holds while it runs: a generator
        or coroutine it returns runs without it. A class is refused: its
        instances would no longer be of it.
        """
        import inspect

        _check_callable("func", func)
        if isinstance(func, type):
            msg = f"func must be a function, not a class (decorate its methods), got {func!r}"
            raise TypeError(msg)
        gb = self._gb
        target = inspect.unwrap(func)  # (through functools.wraps and partials)
        while isinstance(target, functools.partial):
            target = inspect.unwrap(target.func)
        kinds = (func, target, type(target).__call__)  # (an object's __call__)
        if any(inspect.iscoroutinefunction(k) for k in kinds):

            @functools.wraps(func)
            async def run(*args: object, **kwargs: object) -> object:
                with memory_budget(gb):
                    return await func(*args, **kwargs)

            return cast("F", run)
        if any(inspect.isgeneratorfunction(k) for k in kinds):
            return cast("F", generator_in_budget(func, gb))
        if any(inspect.isasyncgenfunction(k) for k in kinds):
            return cast("F", async_generator_in_budget(func, gb))

        @functools.wraps(func)
        def call(*args: object, **kwargs: object) -> object:
            with memory_budget(gb):
                return func(*args, **kwargs)

        return cast("F", call)

    @staticmethod
    def bind(fn: Callable[..., T]) -> Callable[..., T]:
        """``fn``, run under the budget in force now, wherever it is called.

        Threads do not inherit the caller's budget (each starts with an empty
        context); wrap what you hand to a thread pool:
        ``pool.submit(memory_budget.bind(fn), ...)``.
        """
        _check_callable("fn", fn)
        stack = ACTIVE_BUDGET.get()
        if not stack:
            return fn
        gb = stack[-1][1]

        @functools.wraps(fn)
        def run(*args: object, **kwargs: object) -> T:
            with memory_budget(gb):
                return fn(*args, **kwargs)

        return run


def _check_callable(param: str, value: object) -> None:
    if not callable(value):
        msg = f"{param} must be callable, got {value!r}"
        raise TypeError(msg)


def environment_variable(name: str) -> str | None:
    """``os.environ.get(name)``, at a quarter of its cost where ``name`` is unset.

    Read on every `map_batches` call. ``os.environ.get`` raises and catches
    two KeyErrors for a variable that is not set (about 1 us). The dict
    that ``os.environ`` reads and writes (its ``_data``: the variables,
    encoded; ``os.environ[name] = value`` and ``del os.environ[name]``
    change it) is read directly instead, as ``os.environ[name]`` does. A
    mapping of another class put in place of ``os.environ`` is read with
    its own ``get``.
    """
    environ = os.environ
    if type(environ) is not os._Environ:
        return environ.get(name)
    encode = environ.encodekey
    known = _ENCODED_NAMES.get(name)
    if known is None or known[0] is not encode:
        known = _ENCODED_NAMES[name] = (encode, encode(name))
    data: dict[object, str] = environ.__dict__["_data"]  # (bytes on POSIX)
    raw = data.get(known[1])
    return None if raw is None else environ.decodevalue(raw)


#: Variable names as an ``os.environ`` encodes them, with its encoder.
_ENCODED_NAMES: dict[str, tuple[Callable[[str], object], object]] = {}


def configured_budget_gb() -> float | None:
    """The budget of an enclosing `memory_budget` block, else of the env var."""
    active = ACTIVE_BUDGET.get()
    if active:
        return active[-1][1]
    raw = environment_variable(ENV_BUDGET)
    if raw is None:
        return None
    raw = raw.strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > MAX_GB:
        msg = (
            f"{ENV_BUDGET} must be a finite positive number of GB (at most "
            f"{MAX_GB:.0f}), got {raw!r}"
        )
        raise ValueError(msg)
    return value


def configured_budget_origin() -> str | None:
    """Where `configured_budget_gb` comes from, as an error names it (None: nowhere).

    The innermost `memory_budget` block in force, else ``XPKIT_MEMORY_BUDGET_GB``.
    """
    active = ACTIVE_BUDGET.get()
    if active:
        return f"the memory_budget({active[-1][1]!r}) in force"
    raw = environment_variable(ENV_BUDGET)
    if raw is None or not raw.strip():
        return None
    return f"{ENV_BUDGET}={raw.strip()!r}"


def batch_budgets(backend: Backend | None) -> tuple[float, float]:
    """``(budget, batch budget)`` in GB from one measurement of the device.

    The budget `device_memory_budget` gives, and the one it gives with
    ``cap_for_batching=True``: a configured budget (a `memory_budget` block,
    ``XPKIT_MEMORY_BUDGET_GB``) for both, else the measured one, and that
    capped at `BATCH_WORKING_SET_CEILING_GB` and the device's ceiling.
    """
    chosen = configured_budget_gb()
    if chosen is not None:
        return chosen, chosen
    if backend is None:
        adapter, device = get_adapter("numpy"), "cpu"
    else:
        backend.require_usable()  # an unpickled Backend without its device
        adapter, device = get_adapter(backend.library), backend.device
    try:
        free = _free_bytes(adapter, device)
    except Exception:  # noqa: BLE001 - any failed query means "can't measure"
        budget = FALLBACK_BUDGET_GB
    else:
        # Nothing free right now: a small budget (small batches, OOM recovery
        # behind them) rather than a guess that could exceed a container's limit.
        budget = max(free * HEADROOM / BYTES_PER_GB, MIN_BUDGET_GB)
    capped = min(budget, BATCH_WORKING_SET_CEILING_GB)
    ceiling = adapter.batch_ceiling_bytes(device)
    if ceiling is not None:
        capped = min(capped, ceiling / BYTES_PER_GB)
    return budget, capped


def available_bytes(backend: Backend | None) -> int:
    """Bytes the process may allocate now where ``backend`` keeps its arrays.

    The device's free memory (under its cap) where its library reports one,
    else the host's (`recent_host_bytes`). Raises what the query raises.
    """
    if backend is None:
        return recent_host_bytes()
    return _free_bytes(get_adapter(backend.library), backend.device)


def _free_bytes(adapter: Adapter, device: str) -> int:
    """`available_bytes` of ``adapter``'s ``device``."""
    free = device_free_bytes(adapter, device)
    return recent_host_bytes() if free is None else free


#: A host reading: ``(reader, when, available bytes)``.
HostReading = tuple[Callable[[], int] | None, float, int]


#: How long a reading of the host's available memory is reused (seconds):
#: memory does not change meaningfully in that time, and reading it (psutil
#: and the cgroup files) costs about 0.1 ms, more than a small batch.
HOST_READING_REUSED_FOR = 0.1
# (the reader, when it read, what it read): the last host reading.
_host_reading: HostReading = (None, -math.inf, 0)


def recent_host_bytes() -> int:
    """`host_available_bytes`, read at most every `HOST_READING_REUSED_FOR` s."""
    global _host_reading  # noqa: PLW0603 - one immutable tuple, swapped whole
    reader, when, value = _host_reading
    now = time.monotonic()
    # (Tests replace the reader: a new reader reads anew.)
    if reader is host_available_bytes and now - when < HOST_READING_REUSED_FOR:
        return value
    reader = host_available_bytes
    value = reader()
    _host_reading = (reader, now, value)
    return value


def host_reading() -> HostReading:
    """The reading `recent_host_bytes` gives now (taken anew if the last is stale)."""
    reading = fresh_host_reading()
    if reading is None:
        recent_host_bytes()
        reading = _host_reading
    return reading


def fresh_host_reading() -> HostReading | None:
    """The last host reading while `recent_host_bytes` would reuse it, else None.

    One reading stands for the host's memory for `HOST_READING_REUSED_FOR`
    seconds: a plan made from it holds as long as this returns the same
    reading (compared with ``is``).
    """
    reading = _host_reading
    reader, when, _ = reading
    if (
        reader is host_available_bytes
        and time.monotonic() - when < HOST_READING_REUSED_FOR
    ):
        return reading
    return None


def device_free_bytes(adapter: Adapter, device: str) -> int | None:
    """Bytes the process may allocate on ``device`` now; None for host memory.

    The device's free memory as the adapter reports it, or the room left
    under the adapter's `MemoryCap`, whichever is smaller.
    """
    info = adapter.memory_info(device)
    if info is None:
        return None
    cap = adapter.memory_cap(device)
    return info.free if cap is None else min(info.free, cap.room)


# -- batch sizing ---------------------------------------------------------------
def auto_batch_size(
    n_items: int,
    bytes_per_item: float,
    *,
    budget_gb: float,
    overhead: float = 1.0,
    min_batch: int = 1,
) -> tuple[int, int]:
    """Split ``n_items`` into batches that fit a memory budget.

    The one batch calculator of the package: callers give the per-item
    working set and their algorithm's allocation ``overhead``; the clamp and
    ceil policy lives here.

    Parameters
    ----------
    n_items : int
        Total number of items (permutations, targets, ...).
    bytes_per_item : float
        Dominant working-set size of one item in bytes.
    budget_gb : float
        Memory budget, e.g. from `device_memory_budget`.
    overhead : float, default 1.0
        Multiplier for intermediate allocations (3.0 when the computation
        holds about three times the input working set), between 1e-9 and
        1e9; times ``bytes_per_item`` a finite positive float.
    min_batch : int, default 1
        Smallest batch worth dispatching; never exceeds ``n_items``. It
        comes before the budget: where one item fits but ``min_batch`` do
        not, batches are ``min_batch`` items, over the budget.

    Returns
    -------
    tuple of int
        ``(batch_size, n_batches)`` with ``batch_size * n_batches >= n_items``.

    Raises
    ------
    ValueError
        A non-positive, NaN or infinite argument, or a single item that does
        not fit the budget (the message says how many GB one item requires).

    Examples
    --------
    >>> import xpkit
    >>> xpkit.auto_batch_size(1000, 1e6, budget_gb=0.1)  # 1 MB an item, 0.1 GB
    (107, 10)
    """
    n = check_count("n_items", n_items)
    per_item = check_positive("bytes_per_item", bytes_per_item)
    return batch_size_within(
        n,
        item_bytes("bytes_per_item", per_item, check_overhead(overhead)),
        check_gb("budget_gb", budget_gb),
        check_count("min_batch", min_batch),
    )


def batch_size_within(
    n: int, per_item: float, budget_gb: float, min_batch: int, origin: str = ""
) -> tuple[int, int]:
    """`auto_batch_size` of checked arguments (``per_item``: its overhead applied).

    ``origin``: where a budget that no ``budget_gb=`` gave comes from (a
    `memory_budget` block, the environment variable, a measurement), for
    the error that one item exceeds it.
    """
    floor = min(min_batch, n)
    budget = int(budget_gb * BYTES_PER_GB)
    if per_item > budget:
        over = f"budget_gb={budget_gb!r}"
        if origin:
            over = f"the budget is {budget_gb:.3g} GB ({origin})"
        msg = (
            f"one item requires {per_item / BYTES_PER_GB:.3g} GB "
            f"(bytes_per_item * overhead) but {over}"
        )
        raise ValueError(msg)
    # The epsilon keeps an exact fit (budget / per_item == k) from flooring to k - 1;
    # it adds at most budget * 1e-12 bytes, under a third of a byte for a budget
    # under 2**38 bytes (256 GB). Past that (a whole item over 1000 GB, and
    # float64's rounding of the quotient), the exact quotient. (A subnormal
    # per_item makes the float quotient infinite: clamp before int.)
    if budget < 2**38:
        fits = int(min(budget / per_item * (1 + 1e-12), n))
    else:
        fits = min(math.floor(Fraction(budget) / Fraction(per_item)), n)
    batch = min(max(fits, floor), n)
    return batch, -(-n // batch)


# -- worker counts ----------------------------------------------------------------
def array_nbytes(x: Array) -> int:
    """Bytes held by an array of any supported library (or array-like)."""
    nbytes = getattr(x, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        import numpy as np

        return int(np.asarray(x).nbytes)
    name = dtype_name(dtype) or "float64"
    itemsize = 1 if name == "bool" else int("".join(filter(str.isdigit, name))) // 8
    return math.prod(int(d) for d in shape) * itemsize


def auto_n_jobs_for_arrays(
    arrays: Iterable[Array | None],
    *,
    max_memory_gb: float | None = None,
    min_jobs: int = 1,
) -> int:
    """Memory-aware joblib worker count for a per-item map over ``arrays``.

    Sizes workers by the largest item (each worker receives a pickled copy of
    its item), within the same measured budget as `device_memory_budget`
    for the host. The CPU count is joblib's, which honours cgroup CPU quotas.
    None entries are ignored; an empty list returns ``min_jobs``. Warns
    (`MemoryCapWarning`) when memory, not CPUs, limits the count. Importing
    joblib (here, on the first call) sets ``KMP_INIT_AT_FORK=FALSE`` in
    ``os.environ`` where it is unset, joblib's own guard for Intel's OpenMP
    in forked workers: xpkit neither sets nor undoes it.

    Parameters
    ----------
    arrays : iterable of arrays
        Items of the map: arrays of any supported library (NumPy, torch,
        CuPy, JAX, ...) and dtype (strings count as their NumPy copy's
        bytes, a NumPy object array as its pickle's); None entries are
        ignored.
    max_memory_gb : float, optional
        Explicit memory budget in GB; None measures available host RAM.
    min_jobs : int, default 1
        Minimum number of workers.

    Returns
    -------
    int
        Worker count for ``joblib.Parallel(n_jobs=...)``.

    Raises
    ------
    ValueError
        ``max_memory_gb`` is not a finite positive number, or ``min_jobs`` is
        not positive.
    TypeError
        ``arrays`` is not iterable or is one array (whose rows would read as
        the items), or an item is neither None nor an array of a supported
        library (a list, a string, any other object), or is a symbolic
        array of a dtype outside the standard (no values to count); the
        message names it as ``arrays[i]``.

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> items = [np.zeros((1000, 1000)) for _ in range(4)]  # 8 MB each
    >>> xpkit.auto_n_jobs_for_arrays(items, max_memory_gb=0.02)  # room for 2
    2
    """
    floor = check_count("min_jobs", min_jobs)
    if max_memory_gb is not None:  # (checked with no arrays too)
        max_memory_gb = check_gb("max_memory_gb", max_memory_gb)
    if isinstance(arrays, (str, bytes)) or not isinstance(arrays, Iterable):
        msg = f"arrays must be an iterable of arrays, got {type(arrays).__qualname__}"
        raise TypeError(msg)
    if adapter_for_array(arrays) is not None:  # (its rows would read as the items)
        msg = (
            f"arrays must be an iterable of the map's items, got one array of "
            f"shape {tuple(cast('Array', arrays).shape)}: give [x] for one item"
        )
        raise TypeError(msg)
    sizes = [_item_bytes(i, a) for i, a in enumerate(arrays) if a is not None]
    if not sizes:
        return floor
    return n_jobs_for_item_bytes(max(*sizes, 1), max_memory_gb, floor)


def _item_bytes(i: int, item: Array) -> int:
    """The bytes of ``item`` (``arrays[i]``), where they can be counted.

    A TypeError unless it is a supported array whose conversion keeps what
    it holds (a sparse tensor's bytes are not its shape's); a ValueError
    where its shape is not known (a Dask array of unknown chunk sizes). An
    array of a dtype outside the standard whose library gives no ``nbytes``
    (ndonnx's strings) counts as its host copy (as NumPy's strings count).
    """
    adapter = adapter_for_array(item)
    if adapter is None:
        msg = (
            f"arrays[{i}] must be an array of a supported library (or None), "
            f"got {type(item).__qualname__}"
        )
        raise TypeError(msg)
    refuse_lossy(adapter, item, f"arrays[{i}]")
    if not all(isinstance(d, int) for d in tuple(item.shape)):
        msg = (
            f"arrays[{i}] has a shape that is not known, {tuple(item.shape)}: "
            "its bytes cannot be counted (compute its sizes first)"
        )
        raise ValueError(msg)
    if isinstance(item, np.ndarray) and item.dtype.kind == "O":
        return _pickled_bytes(i, item)  # (nbytes counts its pointers alone)
    try:
        return array_nbytes(item)
    except TypeError:  # (a dtype outside the standard, without nbytes: strings)
        pass
    try:  # (its host copy's, as a NumPy array of strings is counted)
        return int(adapter.to_numpy(item).nbytes)
    except Exception:  # noqa: BLE001 - a symbolic array: nothing to count
        msg = (
            f"arrays[{i}] has dtype {item.dtype}, outside the standard, and no "
            "values to count its bytes by"
        )
        raise TypeError(msg) from None


def _pickled_bytes(i: int, item: HostArray) -> int:
    """The bytes of ``item``'s pickle (``arrays[i]``), as a worker receives it.

    Pickled as joblib's and Dask's workers are sent their arguments
    (cloudpickle, which takes lambdas; the standard pickle where it is
    missing), into a counter, not a buffer; the arrays it holds are handed
    over out of band (protocol 5) and counted, not copied. A TypeError
    naming ``arrays[i]`` where it cannot be pickled: no worker could have it.
    """
    try:
        import cloudpickle  # (joblib's dependency)

        pickler: type[pickle.Pickler] = cloudpickle.CloudPickler
    except ImportError:
        pickler = pickle.Pickler
    buffers: list[pickle.PickleBuffer] = []
    counter = _Counter()
    try:
        pickler(counter, protocol=5, buffer_callback=buffers.append).dump(item)
    except Exception as exc:  # (pickle raises what its objects raise)
        msg = (
            f"arrays[{i}] is an object array whose items cannot be pickled "
            f"({type(exc).__name__}: {exc}): no worker could receive it"
        )
        raise TypeError(msg) from exc
    return counter.written + sum(b.raw().nbytes for b in buffers)


class _Counter:
    """A file that counts what is written to it, and keeps none of it."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        return len(data)


def n_jobs_for_item_bytes(item_bytes: int, budget_gb: float | None, floor: int) -> int:
    """`auto_n_jobs_for_arrays`' rule: workers that each hold ``item_bytes``."""
    if budget_gb is None:
        budget_gb = batch_budgets(None)[0]  # (device_memory_budget of the host)
    import joblib

    cpus = int(joblib.cpu_count())
    by_memory = int(gb_to_bytes(budget_gb) // max(item_bytes, 1))
    if by_memory < cpus:
        beyond = (
            f"; min_jobs={floor} runs more than the budget holds"
            if floor > by_memory
            else ""
        )
        warnings.warn(
            f"memory caps the worker count at {by_memory} (of {cpus} CPUs): "
            f"each worker holds {item_bytes / BYTES_PER_GB:.3g} GB, the budget is "
            f"{budget_gb:.3g} GB{beyond}",
            MemoryCapWarning,
            stacklevel=external_stacklevel(),
        )
    return max(floor, min(cpus, by_memory))
