"""OOM detection with the real exception classes, and split-and-retry recovery."""

from __future__ import annotations

import gc
import logging
import re
import sys
import threading
import weakref

import numpy as np
import pytest

import xpkit
from xpkit import _oom
from xpkit.testing import assert_close, assert_equal


def _numpy_oom() -> MemoryError:
    try:
        np.empty(10**15)
    except MemoryError as exc:  # numpy._core._exceptions._ArrayMemoryError
        return exc
    pytest.skip("this host allowed a 7 PiB allocation")


def _real_ooms() -> list[tuple[str, BaseException]]:
    found: list[tuple[str, BaseException]] = [("MemoryError", MemoryError())]
    if "torch" in sys.modules or _has("torch"):
        import torch

        found += [
            (
                "torch.OutOfMemoryError",
                torch.OutOfMemoryError(
                    "CUDA out of memory. Tried to allocate 2.00 GiB"
                ),
            ),
            (
                "torch.AcceleratorError",
                torch.AcceleratorError("CUDA error: out of memory"),
            ),
            (
                "cuda RuntimeError",
                RuntimeError(
                    "CUDA error: out of memory\nCUDA kernel errors might be ..."
                ),
            ),
            (
                "cuBLAS",
                RuntimeError(
                    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"
                ),
            ),
            (
                "cuSOLVER",
                RuntimeError(
                    "cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling ..."
                ),
            ),
            ("cuFFT", RuntimeError("cuFFT error: CUFFT_ALLOC_FAILED")),
            (
                "torch CPU",
                RuntimeError(
                    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes."
                ),
            ),
            (
                "torch CPU on Windows",
                RuntimeError(
                    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 8 bytes."
                ),
            ),
            (
                "MPS",
                RuntimeError(
                    "MPS backend out of memory (MPS allocated: 1.2 GB, other allocations: 0 bytes)"
                ),
            ),
        ]
    if _has("jax"):
        from jax.errors import JaxRuntimeError

        found.append(
            (
                "JaxRuntimeError",
                JaxRuntimeError(
                    "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB."
                ),
            )
        )
    return found


def _has(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@pytest.mark.parametrize(
    ("label", "exc"), _real_ooms(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_is_oom_error_real_classes(label, exc):
    assert xpkit.is_oom_error(exc), label


def test_numpy_array_memory_error_is_oom():
    exc = _numpy_oom()
    assert type(exc) is not MemoryError
    assert type(exc).__module__.startswith("numpy")
    assert xpkit.is_oom_error(exc)


LOOKALIKES = [
    RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    RuntimeError(
        "Storage size calculation overflowed with sizes=[9223372036854775807]"
    ),
    RuntimeError("CUDA error: device-side assert triggered"),
    KeyError("out of memory"),
    ValueError("RESOURCE_EXHAUSTED"),
    RuntimeError("RESOURCE_EXHAUSTED: not from jax"),
    TypeError("CUDA out of memory"),
]


@pytest.mark.parametrize(
    "exc", LOOKALIKES, ids=lambda e: f"{type(e).__name__}:{str(e)[:30]}"
)
def test_is_oom_error_rejects_lookalikes(exc):
    pytest.importorskip("torch")
    assert not xpkit.is_oom_error(exc)


def test_is_oom_error_follows_cause_and_context():
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as exc:
        assert xpkit.is_oom_error(exc)
    try:
        try:
            raise MemoryError
        except MemoryError:
            raise KeyError("during handling")  # noqa: B904 - implicit context on purpose
    except KeyError as exc:
        assert exc.__context__ is not None
        assert xpkit.is_oom_error(exc)  # raised while handling the OOM
    cyclic = ValueError("a")
    other = ValueError("b")
    cyclic.__context__, other.__context__ = other, cyclic
    assert not xpkit.is_oom_error(cyclic)


def test_is_oom_error_respects_from_none():
    try:
        try:
            raise MemoryError
        except MemoryError:
            raise ValueError("refused on purpose") from None
    except ValueError as exc:
        caught = exc
    assert not xpkit.is_oom_error(caught)


def test_is_oom_error_rejects_non_exceptions():
    with pytest.raises(TypeError, match="exc must be an exception, got 'boom'"):
        xpkit.is_oom_error("boom")


def test_empty_device_cache_never_raises(monkeypatch):
    from xpkit._adapters import ADAPTERS

    def explode() -> None:
        raise RuntimeError("driver gone")

    monkeypatch.setattr(ADAPTERS["numpy"], "empty_cache", explode)
    assert xpkit.empty_device_cache() is None


class Capacity:
    """A row-wise function that fails with ``exc_factory()`` above ``capacity`` rows."""

    def __init__(self, capacity: int, exc_factory=MemoryError) -> None:
        self.capacity = capacity
        self.exc_factory = exc_factory
        self.calls: list[int] = []

    def __call__(self, x, w):
        self.calls.append(int(x.shape[0]))
        if x.shape[0] > self.capacity:
            raise self.exc_factory()
        return x * 2.0 + w


def _ref(x, w):
    return np.asarray(x) * 2.0 + np.asarray(w)


@pytest.mark.xpkit_requires("float64")  # equal to a float64 reference
@pytest.mark.parametrize("capacity", [2, 7, 24, 1000])
def test_compute_oom_safe_exact_recovery(xpkit_backend, rng, capacity):
    b = xpkit_backend
    a, w = rng.standard_normal((24, 3)), rng.standard_normal((24, 3))
    fn = Capacity(capacity)
    got = xpkit.compute_oom_safe(fn, b.asarray(a), b.asarray(w))
    assert isinstance(got, np.ndarray)
    assert_equal(got, _ref(a, w), check_namespace=False)
    assert max(c for c in fn.calls if c <= capacity) <= capacity
    assert sum(c for c in fn.calls if c <= capacity) == 24  # every row exactly once


def test_compute_oom_safe_with_torch_oom(rng):
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    a = rng.standard_normal((20, 2))
    fn = Capacity(4, lambda: torch.OutOfMemoryError("CUDA out of memory."))
    got = xpkit.compute_oom_safe(fn, b.asarray(a), b.asarray(a))
    assert_equal(got, _ref(a, a))


def test_compute_oom_safe_reraises_below_min_chunk():
    fn = Capacity(2)
    with pytest.raises(MemoryError):
        xpkit.compute_oom_safe(fn, np.ones((16, 1)), np.ones((16, 1)), min_chunk=4)
    assert fn.calls == [16, 8, 4]


def test_compute_oom_safe_does_not_catch_other_errors():
    fn = Capacity(2, lambda: ValueError("shape mismatch"))
    with pytest.raises(ValueError, match="shape mismatch"):
        xpkit.compute_oom_safe(fn, np.ones((4, 1)), np.ones((4, 1)))
    assert fn.calls == [4]


def test_failed_attempt_buffers_are_freed_before_retry():
    alive: list[weakref.ref] = []
    seen_alive_at_retry: list[int] = []

    def fn(x):
        gc.collect()
        seen_alive_at_retry.append(sum(r() is not None for r in alive))
        scratch = np.empty((x.shape[0], 1000))  # the failed attempt's buffer
        alive.append(weakref.ref(scratch))
        if x.shape[0] > 4:
            raise MemoryError
        return x + 0.0

    got = xpkit.compute_oom_safe(fn, np.arange(16.0)[:, None])
    assert_equal(got, np.arange(16.0)[:, None])
    assert seen_alive_at_retry[0] == 0
    # successful attempts return; failed ones must be gone by the next call
    assert all(n <= 1 for n in seen_alive_at_retry), seen_alive_at_retry


class _Scratch:
    """A buffer stand-in that weak references can watch."""

    def __init__(self, rows: int) -> None:
        self.data = np.empty((rows, 256))


def _run_with_cycle(alive_at_call: list[int]) -> np.ndarray:
    """compute_oom_safe over a fn whose failures leave a cycle, with gc off."""
    tracked: list[weakref.ref] = []

    def fn(x):
        alive_at_call.append(sum(r() is not None for r in tracked))
        scratch = _Scratch(x.shape[0])
        tracked.append(weakref.ref(scratch))
        if x.shape[0] > 4:
            err = MemoryError("simulated")
            raise err  # the frame holds `err`, whose traceback holds the frame: a cycle
        return x + 0.0

    gc.disable()
    try:
        return xpkit.compute_oom_safe(fn, np.arange(16.0)[:, None])
    finally:
        gc.enable()


def test_failed_attempt_is_freed_despite_a_reference_cycle():
    alive: list[int] = []
    got = _run_with_cycle(alive)
    assert_close(got, np.arange(16.0)[:, None])
    assert alive == [0] * len(alive), alive  # no failed attempt's scratch survives


def test_clearing_frames_alone_frees_the_failed_attempt(monkeypatch):
    """Without the gc/cache step, traceback.clear_frames still breaks the cycle."""
    monkeypatch.setattr(_oom, "release_after_oom", lambda: None)
    alive: list[int] = []
    _run_with_cycle(alive)
    assert alive == [0] * len(alive), alive


def test_the_cycle_test_can_fail(monkeypatch):
    """With neither clear_frames nor gc, the failed attempt's scratch stays alive."""
    monkeypatch.setattr(_oom, "release_after_oom", lambda: None)
    monkeypatch.setattr("traceback.clear_frames", lambda tb: None)
    alive: list[int] = []
    _run_with_cycle(alive)
    assert max(alive) > 0


def test_compute_oom_safe_logs_each_split(caplog):
    with caplog.at_level(logging.INFO, logger="xpkit"):
        xpkit.compute_oom_safe(Capacity(4), np.ones((8, 1)), np.ones((8, 1)))
    splits = [r for r in caplog.records if "out of memory on rows" in r.getMessage()]
    assert len(splits) == 1
    assert "rows 0:8 (8 rows), retrying as 4 + 4 rows" in splits[0].getMessage()


def test_compute_oom_safe_threads(rng):
    data = [rng.standard_normal((40, 2)) for _ in range(4)]
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = xpkit.compute_oom_safe(Capacity(3 + i), data[i], data[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert_equal(results[i], _ref(data[i], data[i]))


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        (("notcallable", np.ones(2)), {}, TypeError, "fn must be callable"),
        ((abs,), {}, ValueError, "arrays must hold at least one array"),
        (
            (abs, np.ones(3), np.ones(4)),
            {},
            ValueError,
            r"share their axis-0 length, got lengths \[3, 4\]",
        ),
        (
            (abs, np.float64(1.0)),
            {},
            TypeError,
            r"arrays\[0\] must be an array with at least one axis",
        ),
        (
            (abs, np.ones(2)),
            {"min_chunk": 0},
            ValueError,
            "min_chunk must be a positive int, got 0",
        ),
        (
            (abs, np.ones(2)),
            {"min_chunk": 1.5},
            TypeError,
            "min_chunk must be an int, got 1.5",
        ),
    ],
)
def test_compute_oom_safe_rejects(args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        xpkit.compute_oom_safe(*args, **kwargs)


@pytest.mark.parametrize(
    ("fn", "shape"),
    [(lambda x: x[:1], "(1,)"), (lambda x: x.sum(), "()")],
    ids=["drops rows", "0-d"],
)
def test_compute_oom_safe_requires_row_aligned_results(fn, shape):
    def capped(x):
        if x.shape[0] > 3:
            raise MemoryError
        return fn(x)

    with pytest.raises(
        ValueError,
        match=r"must return one row per input row: .* has shape " + re.escape(shape),
    ):
        xpkit.compute_oom_safe(capped, np.arange(8.0))


def test_an_exception_group_of_ooms_is_an_oom():
    assert xpkit.is_oom_error(ExceptionGroup("tasks", [MemoryError()]))
    nested = ExceptionGroup(
        "outer", [MemoryError(), ExceptionGroup("inner", [MemoryError()])]
    )
    assert xpkit.is_oom_error(nested)
    assert not xpkit.is_oom_error(ExceptionGroup("tasks", [ValueError("no")]))
    caused = ValueError("while handling the group")
    caused.__cause__ = ExceptionGroup("tasks", [MemoryError(), MemoryError()])
    assert xpkit.is_oom_error(caused)


def test_a_group_that_also_holds_another_error_is_no_oom():
    """A retry that ran would drop the ValueError: it was split and retried."""
    nested = ExceptionGroup(
        "outer", [ValueError(), ExceptionGroup("inner", [MemoryError()])]
    )
    assert not xpkit.is_oom_error(nested)
    assert not xpkit.is_oom_error(ExceptionGroup("g", [MemoryError(), KeyError(1)]))
    calls = []

    def fn(x):
        calls.append(x.shape[0])
        errors = [MemoryError(), ValueError("a bug")]
        raise ExceptionGroup("tasks", errors if x.shape[0] > 2 else errors[1:])

    with pytest.raises(ExceptionGroup) as info:
        xpkit.compute_oom_safe(fn, np.arange(8.0))
    assert calls == [8]
    assert len(info.value.exceptions) == 2


def test_a_chain_that_loops_back_on_itself_is_walked_once():
    first, second = ValueError("a"), KeyError("b")
    first.__context__, second.__context__ = second, first
    assert not xpkit.is_oom_error(first)
    group = ExceptionGroup("g", [MemoryError()])
    group.exceptions[0].__context__ = group
    assert xpkit.is_oom_error(group)


def _nested(inner: BaseException, depth: int) -> BaseException:
    for _ in range(depth):
        inner = BaseExceptionGroup("g", [inner])
    return inner


def _forks(last: BaseException, links: int) -> BaseException:
    """Links that each have a cause and another context, not suppressed (as
    a library may set them), ``last`` at the end."""
    for i in range(links):
        link = RuntimeError(i)
        link.__cause__, link.__context__ = ValueError(i), last
        link.__suppress_context__ = False  # (setting a cause set it True)
        last = link
    return last


@pytest.mark.parametrize("depth", [500, 3000])
def test_deep_groups_and_forked_chains_are_walked_without_recursion(depth):
    """Walked by recursion: RecursionError, which compute_oom_safe then
    raised in place of fn's own exception."""
    assert xpkit.is_oom_error(_nested(MemoryError(), depth))
    assert not xpkit.is_oom_error(_nested(ValueError(), depth))
    assert not xpkit.is_oom_error(_nested(KeyboardInterrupt(), depth))
    assert xpkit.is_oom_error(_forks(MemoryError(), depth))
    assert not xpkit.is_oom_error(_forks(ValueError(), depth))
    raised = _nested(ValueError("fn's own"), depth)

    def fn(x):
        raise raised

    with pytest.raises(BaseExceptionGroup) as info:
        xpkit.compute_oom_safe(fn, np.zeros((4, 2)))
    assert info.value is raised


def test_compute_oom_safe_splits_on_a_task_group_oom():
    import asyncio

    def fn(x):
        async def run():
            async with asyncio.TaskGroup() as group:
                task = group.create_task(asyncio.sleep(0, x * 2.0))
                if x.shape[0] > 2:
                    msg = "simulated"
                    raise MemoryError(msg)
            return task.result()

        return asyncio.run(run())

    got = xpkit.compute_oom_safe(fn, np.arange(8.0)[:, None])
    assert_equal(got, np.arange(8.0)[:, None] * 2.0)


class _Buggy:
    """``fn`` that records its real row counts, with a bug switched on or off.

    (An attribute of a module-level object: a plan remembered for ``fn``
    does not key it, as the repeated path needs.)
    """

    bug = False
    armed = False  # (what `_repeated` switches the bug to, after two calls)
    calls: list[int] = []  # noqa: RUF012 - (reset by each test)

    @staticmethod
    def fn(x):
        if isinstance(x, np.ndarray):  # (not the shape-only trace's stand-ins)
            _Buggy.calls.append(x.shape[0])
        if _Buggy.bug:
            msg = "a bug in fn"
            raise ValueError(msg)
        if x.shape[0] > 16 and isinstance(x, np.ndarray):
            msg = "simulated"
            raise MemoryError(msg)
        return x * 2.0


def _repeated(x):
    _Buggy.bug = False
    xpkit.map_batches(_Buggy.fn, x, bytes_per_item=16)
    xpkit.map_batches(_Buggy.fn, x, bytes_per_item=16)  # (now remembered)
    _Buggy.bug, _Buggy.calls[:] = _Buggy.armed, []
    return xpkit.map_batches(_Buggy.fn, x, bytes_per_item=16)


_ENTRIES = {
    "map_batches": lambda x: xpkit.map_batches(_Buggy.fn, x, remember=False),
    "bytes_per_item": lambda x: xpkit.map_batches(
        _Buggy.fn, x, bytes_per_item=16, remember=False
    ),
    "compute_oom_safe": lambda x: xpkit.compute_oom_safe(_Buggy.fn, x),
    "iter_batches": lambda x: np.concatenate(
        [rows for _, rows in xpkit.iter_batches(_Buggy.fn, x, remember=False)]
    ),
    "joblib": lambda x: xpkit.map_batches(
        _Buggy.fn, x, executor="joblib", bytes_per_item=160, budget_gb=1e-6
    ),
    "repeated": _repeated,
}


@pytest.mark.parametrize("entry", [e for e in _ENTRIES if e != "joblib"])
def test_fn_s_bug_inside_the_caller_s_except_memory_error_is_fn_s(entry):
    """Python makes the caller's MemoryError the __context__ of fn's ValueError.

    It was split and retried down to one row ([32, 16, 8, 4, 2, 1]), then
    named an OOM: a MemoryError 'rows 0:1 ... out of memory (ValueError:
    ...)'. (joblib's workers run fn in processes of their own, which the
    caller's exception does not reach; the executors' driver, where a task
    runs in the caller's thread, has its own test in test_executors.py.)
    """
    x = np.arange(64.0).reshape(32, 2)
    _Buggy.calls[:] = []
    try:
        msg = "the whole array at once"
        raise MemoryError(msg)
    except MemoryError:
        _Buggy.bug = _Buggy.armed = True
        try:
            with pytest.raises(ValueError, match="^a bug in fn$"):
                _ENTRIES[entry](x)
        finally:
            _Buggy.bug = _Buggy.armed = False
    assert len(_Buggy.calls) <= 1, _Buggy.calls  # (the probe's, or the batch's)


@pytest.mark.parametrize("entry", list(_ENTRIES))
def test_an_oom_of_fn_inside_the_caller_s_except_is_still_split(entry):
    x = np.arange(64.0).reshape(32, 2)
    try:
        msg = "the whole array at once"
        raise MemoryError(msg)
    except MemoryError:
        got = _ENTRIES[entry](x)
    assert_equal(got, np.arange(64.0).reshape(32, 2) * 2.0)


def test_an_error_whose_message_cannot_be_read_is_judged_by_its_type():
    """is_oom_error raised LookupError (torch's adapter read the message); a
    MemoryError of that kind was not split (the retry's log line read it)."""

    class Unreadable(RuntimeError):
        def __str__(self):
            msg = "__str__ broken"
            raise LookupError(msg)

    class UnreadableMemory(MemoryError):
        def __str__(self):
            msg = "__str__ broken"
            raise LookupError(msg)

    assert not xpkit.is_oom_error(Unreadable())
    assert xpkit.is_oom_error(UnreadableMemory())

    def fn(x):
        if x.shape[0] > 2:
            raise UnreadableMemory
        return x + 1.0

    assert_equal(xpkit.compute_oom_safe(fn, np.arange(8.0)), np.arange(8.0) + 1.0)

    def never(x):
        raise UnreadableMemory

    with pytest.raises(MemoryError, match="whose message could not be read"):
        xpkit.map_batches(never, np.arange(8.0), bytes_per_item=8)
    # (the default path traces fn first, and quoted its error there)
    assert_equal(xpkit.map_batches(fn, np.arange(8.0)), np.arange(8.0) + 1.0)
    with pytest.raises(MemoryError, match="whose message could not be read"):
        list(xpkit.iter_batches(never, np.arange(8.0)))
    with pytest.raises(MemoryError, match="whose message could not be read"):
        xpkit.plan_batches(never, np.arange(8.0))
