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
        a32 = a.astype(np.float32)
        assert_close(  # (CUDA matmuls of float32 may run in TF32: 10-bit mantissas)
            b.to_numpy(b.matmul(x, b.xp.permute_dims(x, (1, 0)))),
            a32 @ a32.T,
            rtol=1e-2,
            atol=2e-2,
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
            where = adapter.device_str(adapter.device_of(x))
            assert adapter.canonical_device(where) == adapter.canonical_device(b.device)


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
            where = adapter.device_str(adapter.device_of(moved))
            assert adapter.canonical_device(where) == adapter.canonical_device(
                dst.device
            )
            assert_equal(dst.to_numpy(moved), a)
            if {src.library, dst.library} == {"torch", "cupy"} and (
                src.device == dst.device
            ):
                dst.move(src.asarray(a), copy=False)  # no copy needed, none made


def _on(libraries: set[str]) -> dict[str, xpkit.Backend]:
    """One GPU backend per library in ``libraries`` found here."""
    found: dict[str, xpkit.Backend] = {}
    for b in _gpu_backends():
        if b.library in libraries and b.library not in found:
            found[b.library] = b
    return found


def test_gpu_moves_copy_what_cannot_be_shared(rng):
    """Issue #19 on a GPU: reversed and broadcast CuPy views, torch's lazy bits, JAX."""
    gpus = _on({"torch", "cupy", "jax"})
    if len(gpus) < 2:
        pytest.skip(f"needs two GPU libraries, found {sorted(gpus)}")
    a = rng.standard_normal((6, 4)).astype(np.float32)
    torch_b, cupy_b, jax_b = (gpus.get(k) for k in ("torch", "cupy", "jax"))
    if cupy_b is not None and torch_b is not None:
        c = cupy_b.asarray(a)
        for view, expected in (
            (c[::-1], a[::-1]),
            (c[:, ::-2], a[:, ::-2]),
            (cupy_b.xp.broadcast_to(c[:1], (3, 4)), np.broadcast_to(a[:1], (3, 4))),
        ):
            moved = torch_b.move(view)
            assert_equal(torch_b.to_numpy(moved), expected)
        with pytest.raises(ValueError, match="negative strides.*copy=False"):
            torch_b.move(c[::-1], copy=False)
        z = torch_b.xp.asarray(a[:, 0] + 1j * a[:, 1], device=torch_b.native_device)
        assert_equal(
            cupy_b.to_numpy(cupy_b.move(z.conj())), np.conj(a[:, 0] + 1j * a[:, 1])
        )
        assert_equal(cupy_b.to_numpy(cupy_b.move(z.conj().imag)), -a[:, 1])
        assert xpkit.Backend.from_arrays(c) == cupy_b  # the device key is hashable
    if jax_b is not None and torch_b is not None:
        j = jax_b.asarray(a)
        t = torch_b.move(j)
        t += 1
        assert_equal(jax_b.to_numpy(j), a)  # the JAX buffer never changed
        with pytest.raises(ValueError, match="must never change.*copy=False"):
            torch_b.move(j, copy=False)


def test_map_batches_on_a_gpu_measures_remembers_and_keeps_the_budget(rng):
    """Issue #20 on a GPU: the allocator's meter, the plan memory, exact results."""
    a = rng.standard_normal((4000, 64)).astype(np.float32)
    for b in _gpu_backends():
        X = b.asarray(a)

        def fn(rows, X=X, xp=b.xp):
            return xp.sum(rows[:, None, :] * X[None, :64, :], axis=-1)

        xpkit.plan_memory.clear()
        guess = {"fallback_bytes_per_item": 64 * 64 * 4.0}  # where nothing measures
        with xpkit.memory_budget(0.01):
            plan = xpkit.plan_batches(fn, X, **guess)
            got = xpkit.map_batches(fn, X, **guess)
            again = xpkit.plan_batches(fn, X, **guess)
        assert_close(got, a @ a[:64].T, rtol=1e-3, atol=1e-3)
        if plan.source.startswith("measured"):
            assert again.remembered, again
            assert again.probe_rows == 0
        else:  # no meter on this device: the fallback estimate, not the input rows
            assert plan.source.startswith("fallback"), plan
        assert plan.batch_size < 4000, plan  # 0.01 GB cannot hold all rows at once
