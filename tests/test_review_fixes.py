"""Regression tests for bugs found in review: one test per finding."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pickle
import re
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest
from fakes import fake_cuda, no_gpu
from fakes import write_file as _write

import xpkit
from xpkit import _memory, _oom
from xpkit.testing import assert_close

GB = 1024**3


def test_cgroup_v2_page_cache_is_reclaimable(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "0::/job\n")
    _write(tmp_path, "sys/fs/cgroup/job/memory.max", str(2 * GB))
    _write(tmp_path, "sys/fs/cgroup/job/memory.current", str(2 * GB))
    _write(
        tmp_path,
        "sys/fs/cgroup/job/memory.stat",
        f"anon 100\ninactive_file {GB}\nactive_file 5\n",
    )
    assert _memory._cgroup_available(tmp_path) == GB


def test_cgroup_v1_page_cache_is_reclaimable(tmp_path):
    _write(tmp_path, "proc/self/cgroup", "4:memory:/c\n")
    _write(tmp_path, "sys/fs/cgroup/memory/c/memory.limit_in_bytes", str(4 * GB))
    _write(tmp_path, "sys/fs/cgroup/memory/c/memory.usage_in_bytes", str(4 * GB))
    _write(
        tmp_path,
        "sys/fs/cgroup/memory/c/memory.stat",
        f"cache 9\ntotal_inactive_file {3 * GB}\n",
    )
    assert _memory._cgroup_available(tmp_path) == 3 * GB


def test_nothing_free_gives_the_minimum_budget_not_the_fallback(monkeypatch):
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 0)
    assert xpkit.device_memory_budget() == _memory.MIN_BUDGET_GB
    assert _memory.MIN_BUDGET_GB < _memory.FALLBACK_BUDGET_GB


def test_unpickled_backend_without_device_refuses_memory_work(monkeypatch):
    fake_cuda(monkeypatch)
    data = pickle.dumps(xpkit.Backend("torch", device="cuda"))
    monkeypatch.undo()
    no_gpu(monkeypatch)
    b = pickle.loads(data)
    with pytest.raises(
        RuntimeError, match="pickled on a host with PyTorch device 'cuda'"
    ):
        xpkit.device_memory_budget(b)
    with pytest.raises(RuntimeError, match="pickled on a host"):
        xpkit.map_batches(lambda x: x, np.ones((4, 1)), backend=b)


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


class _Scratch:
    """A buffer stand-in that weak references can watch."""

    def __init__(self, rows: int) -> None:
        self.data = np.empty((rows, 256))


def _run_with_cycle(alive_at_call: list[int]) -> np.ndarray:
    tracked: list[weakref.ref] = []

    def fn(x):
        alive_at_call.append(sum(r() is not None for r in tracked))
        scratch = _Scratch(x.shape[0])
        tracked.append(weakref.ref(scratch))
        if x.shape[0] > 4:
            err = MemoryError("simulated")
            raise err  # the frame holds `err`, whose traceback holds the frame: a cycle
        return x + 0.0

    return xpkit.compute_oom_safe(fn, np.arange(16.0)[:, None])


def test_failed_attempt_is_freed_despite_a_reference_cycle():
    alive: list[int] = []
    gc.disable()
    try:
        got = _run_with_cycle(alive)
    finally:
        gc.enable()
    assert_close(got, np.arange(16.0)[:, None])
    assert alive == [0] * len(alive), alive  # no failed attempt's scratch survives


def test_clearing_frames_alone_frees_the_failed_attempt(monkeypatch):
    """Without the gc/cache step, traceback.clear_frames still breaks the cycle."""
    monkeypatch.setattr(_oom, "release_after_oom", lambda: None)
    alive: list[int] = []
    gc.disable()
    try:
        _run_with_cycle(alive)
    finally:
        gc.enable()
    assert alive == [0] * len(alive), alive


def test_the_cycle_test_can_fail(monkeypatch):
    """With neither clear_frames nor gc, the failed attempt's scratch stays alive."""
    monkeypatch.setattr(_oom, "release_after_oom", lambda: None)
    monkeypatch.setattr("traceback.clear_frames", lambda tb: None)
    alive: list[int] = []
    gc.disable()
    try:
        _run_with_cycle(alive)
    finally:
        gc.enable()
    assert max(alive) > 0


def test_is_oom_error_respects_from_none():
    try:
        try:
            raise MemoryError
        except MemoryError:
            raise ValueError("refused on purpose") from None
    except ValueError as exc:
        caught = exc
    assert not xpkit.is_oom_error(caught)


def test_memory_budget_decorates_coroutines():
    @xpkit.memory_budget(2.0)
    async def job() -> float:
        await asyncio.sleep(0)
        return xpkit.device_memory_budget()

    assert asyncio.run(job()) == 2.0
    assert _memory.configured_budget_gb() is None


def test_assert_close_rejects_bad_tolerances():
    with pytest.raises(
        ValueError, match="rtol must be a finite non-negative number, got nan"
    ):
        assert_close(np.ones(2), np.zeros(2), rtol=float("nan"))
    with pytest.raises(ValueError, match="atol must be a finite non-negative"):
        assert_close(np.ones(2), np.zeros(2), atol=-1.0)


def test_assert_close_applies_tolerances_to_integers():
    assert_close(np.array([1, 2]), np.array([1, 3]), atol=5)
    with pytest.raises(AssertionError):
        assert_close(np.array([1, 2]), np.array([1, 3]))


def test_assert_close_bfloat16_tolerance_from_its_dtype():
    torch = pytest.importorskip("torch")
    one = torch.tensor([1.0], dtype=torch.bfloat16)
    next_up = torch.tensor(
        [1.0078125], dtype=torch.bfloat16
    )  # one bfloat16 ulp above 1
    assert_close(next_up, one)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: xpkit.Backend.dtype_to_str("foo.float32"), "dtype='foo.float32'"),
    ],
)
def test_dtype_errors_are_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_dtype_the_device_lacks_is_a_type_error():
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict")
    with pytest.raises(
        TypeError, match=r"dtype 'float16' is not supported by array_api_strict"
    ):
        b.asarray(np.ones(2, dtype=np.float16))


def test_bfloat16_request_on_numpy_is_a_type_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="dtype 'bfloat16' is not supported by numpy"):
        xpkit.Backend("numpy").asarray([1.0], dtype=torch.bfloat16)


def test_auto_says_where_it_went(caplog):
    with caplog.at_level(logging.INFO, logger="xpkit"):
        b = xpkit.Backend("auto")
    assert any(
        f"backend='auto' chose {b.library}" in r.getMessage() for r in caplog.records
    )


JAX_NO_X64 = textwrap.dedent(
    """
    import warnings
    import numpy as np
    import jax
    import xpkit

    b = xpkit.Backend("jax")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x = b.asarray(np.array([1.5, 2.5]))
        i = b.asarray(np.array([1, 2], dtype=np.int64))
    assert b.dtype_to_str(x.dtype) == "float32", x.dtype
    assert b.dtype_to_str(i.dtype) == "int32", i.dtype
    messages = sorted(str(w.message) for w in seen)
    assert any("has no float64" in m for m in messages), messages
    assert any("has no int64" in m for m in messages), messages
    assert not any("truncated" in m for m in messages), messages  # JAX's own warning
    assert xpkit.Backend.from_arrays(x) == b

    jax.config.update("jax_enable_x64", True)
    y = xpkit.Backend.from_arrays(x).asarray(np.array([1.5]))
    assert xpkit.Backend.dtype_to_str(y.dtype) == "float64", y.dtype   # no stale cache
    print("ok")
    """
)


def test_jax_without_x64_end_to_end():
    pytest.importorskip("jax")
    proc = subprocess.run(
        [sys.executable, "-c", JAX_NO_X64],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"


# -- second review: fast paths, lazy loading, CLI --------------------------------


def test_map_batches_ceiling_never_refuses_one_big_item(monkeypatch):
    monkeypatch.setattr(_memory, "host_available_bytes", lambda: 64 * GB)
    seen: list[int] = []

    def fn(x):
        seen.append(x.shape[0])
        return x

    got = xpkit.map_batches(
        fn, np.zeros((4, 1)), bytes_per_item=100 * 2**20, overhead=2.0
    )
    assert got.shape == (4, 1)
    assert seen == [
        1,
        1,
        1,
        1,
    ]  # one 200 MiB item per batch: over the CPU ceiling, allowed


def test_asarray_fast_path_keeps_the_slow_paths_meaning():
    b = xpkit.Backend("numpy")
    scalar = b.asarray(np.float64(1.5))
    assert type(scalar) is np.ndarray
    assert scalar.shape == ()
    with pytest.raises(TypeError, match="is not a numeric or boolean dtype"):
        b.asarray(np.array(["a", "b"]))
    masked = np.ma.masked_array([1.0, 2.0], mask=[0, 1])
    assert type(b.zeros_like(masked)) is np.ndarray
    with pytest.warns(PendingDeprecationWarning, match="matrix subclass"):
        matrix = np.asmatrix(np.eye(2))
    assert type(b.asarray(matrix)) is np.ndarray
    with pytest.raises(TypeError):
        b.zeros_like(np.array(["x"]))


def test_torch_fast_paths_refuse_sparse_and_unsupported_dtypes():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    sparse = torch.eye(3).to_sparse()
    assert b.zeros_like(sparse).layout is torch.strided
    # torch's own uint16 passes through as the library holds it (issue 11).
    u16 = torch.zeros(2, dtype=torch.uint16)
    assert b.asarray(u16) is u16


def test_xpkit_testing_is_reachable_and_dir_is_clean():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import xpkit; print(xpkit.testing.assert_close.__name__); print(sorted(dir(xpkit)))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == "assert_close"
    names = eval(out[1])
    assert "Any" not in names
    assert "importlib" not in names
    assert {"Backend", "map_batches", "testing"} <= set(names)


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "abc"])
def test_cli_rejects_bad_budget(bad):
    from xpkit._cli import main

    with pytest.raises(SystemExit) as info:
        main(["demo", "--budget-gb", bad])
    assert info.value.code == 2


def test_from_arrays_of_a_jax_tracer_is_the_default_device():
    jax = pytest.importorskip("jax")
    seen = []

    @jax.jit
    def f(x):
        b = xpkit.Backend.from_arrays(x)
        seen.append(b.name)
        return b.matmul(x, x)

    assert float(f(jax.numpy.arange(3.0))) == 5.0
    assert seen == [xpkit.Backend("jax").name]


def test_from_arrays_of_a_sharded_jax_array_asks_for_a_device():
    pytest.importorskip("jax")
    code = textwrap.dedent(
        """
        import jax, numpy as np, xpkit
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        mesh = Mesh(np.array(jax.devices("cpu")[:2]), ("x",))
        x = jax.device_put(np.arange(4.0), NamedSharding(mesh, PartitionSpec("x")))
        try:
            xpkit.Backend.from_arrays(x)
        except ValueError as exc:
            print("ValueError:", exc)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
    )
    assert "ValueError: arrays sharded over 2 devices have no single device" in (
        run.stdout
    )
