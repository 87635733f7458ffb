"""Checks that only a real GPU can answer; skipped where there is none.

Run on a GPU machine with ``python -m pytest -m gpu``.
"""

from __future__ import annotations

import numpy as np
import pytest

import xpkit
from xpkit._adapters import get_adapter
from xpkit._select import find_gpus
from xpkit.testing import assert_close, assert_equal

pytestmark = pytest.mark.gpu


def _gpu_backends() -> list[xpkit.Backend]:
    return [xpkit.Backend(a.key, device=d) for a, d in find_gpus()]


def test_round_trip_and_compute_on_every_gpu(rng):
    a = rng.standard_normal((64, 32))
    for b in _gpu_backends():
        assert b.is_gpu
        x = b.asarray(a, dtype="float32")
        assert xpkit.Backend.from_arrays(x) == b
        _u, s, _vt = b.svd(x)
        assert_close(
            b.to_numpy(s),
            np.linalg.svd(a.astype(np.float32), compute_uv=False),
            rtol=1e-4,
        )
        assert_close(
            b.to_numpy(b.matmul(x, b.xp.permute_dims(x, (1, 0)))),
            a @ a.T,
            rtol=1e-3,
            atol=1e-3,
        )


def test_measured_budget_is_within_the_device(rng):
    for b in _gpu_backends():
        info = get_adapter(b.library).memory_info(b.device)
        if info is None:
            continue
        budget = xpkit.device_memory_budget(b)
        assert 0 < budget <= info.total / 1024**3


def test_real_device_oom_is_detected_and_recovered():
    """Allocate more than the device has, on purpose, then recover by splitting."""
    for b in _gpu_backends():
        info = get_adapter(b.library).memory_info(b.device)
        if info is None:
            continue
        rows = 64
        per_row = int(info.free / 16)  # 64 rows need ~4x the free memory

        def fn(idx, b=b, per_row=per_row):
            n = int(idx.shape[0])
            scratch = b.xp.ones(
                (n, per_row // 4), dtype=b.xp.float32, device=b.native_device
            )
            return b.to_numpy(b.xp.sum(scratch, axis=1))

        try:
            fn(np.arange(rows))
        except Exception as exc:  # noqa: BLE001 - any library's OOM
            assert xpkit.is_oom_error(exc), repr(exc)
        else:
            pytest.fail("the oversized allocation did not fail")
        xpkit.empty_device_cache()
        got = xpkit.compute_oom_safe(fn, np.arange(rows))
        assert_equal(got, np.full(rows, per_row // 4, dtype=np.float32))


def test_create_lands_on_every_gpu():
    for b in _gpu_backends():
        adapter = get_adapter(b.library)
        for x in (b.create.zeros(3), b.create.arange(4), b.create.eye(2)):
            assert adapter.device_str(adapter.device_of(x)) == b.device


def test_moves_between_gpu_libraries_keep_values_and_device(rng):
    """torch CUDA <-> CuPy <-> JAX GPU by DLPack; zero-copy where both share a GPU."""
    a = rng.standard_normal((8, 4)).astype(np.float32)
    gpus = _gpu_backends()
    for src in gpus:
        for dst in gpus:
            if src.library == dst.library:
                continue
            moved = dst.move(src.asarray(a))
            adapter = get_adapter(dst.library)
            assert adapter.device_str(adapter.device_of(moved)) == dst.device
            assert_equal(dst.to_numpy(moved), a)
            if {src.library, dst.library} == {"torch", "cupy"} and (
                src.device == dst.device
            ):
                dst.move(src.asarray(a), copy=False)  # no copy needed, none made
