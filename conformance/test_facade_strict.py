"""Every public facade method on array-api-strict at its strictest flags.

Any call outside the standard (a NumPy-only keyword, flat indexing, a
non-standard function) fails here. Results are compared with NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest

import xpkit

A = np.arange(12.0).reshape(4, 3) - 5.0
B = np.linspace(-1.0, 1.0, 6).reshape(3, 2)


def host(b: xpkit.Backend, x) -> np.ndarray:
    return b.to_numpy(x)


CASES = {
    "asarray": (lambda b: b.asarray(A), lambda: A),
    "asarray_dtype": (
        lambda b: b.asarray(A, dtype="float32"),
        lambda: A.astype(np.float32),
    ),
    "asarray_like": (
        lambda b: b.asarray_like([1, 2], b.asarray(A)),
        lambda: np.array([1.0, 2.0]),
    ),
    "check_arrays": (
        lambda b: b.check_arrays(b.asarray(A), A.astype(int))[1],
        lambda: A,
    ),
    "concatenate": (
        lambda b: b.concatenate([b.asarray(A), b.asarray(A)], axis=1),
        lambda: np.concatenate([A, A], 1),
    ),
    "copy": (lambda b: b.copy(b.asarray(A)), lambda: A),
    "expand_dims": (lambda b: b.expand_dims(b.asarray(A), 1), lambda: A[:, None, :]),
    "full": (lambda b: b.full((2, 2), 3.5), lambda: np.full((2, 2), 3.5)),
    "full_like": (
        lambda b: b.full_like(b.asarray(A), 1.5, shape=(2,)),
        lambda: np.full(2, 1.5),
    ),
    "matmul": (lambda b: b.matmul(b.asarray(A), b.asarray(B)), lambda: A @ B),
    "ones_like": (lambda b: b.ones_like(b.asarray(A)), lambda: np.ones_like(A)),
    "sort": (lambda b: b.sort(b.asarray(-A), axis=0), lambda: np.sort(-A, axis=0)),
    "svd_values": (
        lambda b: b.svd(b.asarray(A))[1],
        lambda: np.linalg.svd(A, compute_uv=False),
    ),
    "to_cpu": (lambda b: b.to_cpu(b.asarray(A)), lambda: A),
    "to_device": (lambda b: b.to_device(A), lambda: A),
    "to_gpu": (lambda b: b.to_gpu(b.asarray(A)), lambda: A),
    "zeros_like": (
        lambda b: b.zeros_like(b.asarray(A), dtype="int32"),
        lambda: np.zeros_like(A, dtype=np.int32),
    ),
    "map_batches": (
        lambda b: xpkit.map_batches(
            _capacity_two, b.asarray(A), budget_gb=3 * 24 / 1024**3
        ),
        lambda: A * 2.0,
    ),
    "compute_oom_safe": (
        lambda b: xpkit.compute_oom_safe(_capacity_two, b.asarray(A)),
        lambda: A * 2.0,
    ),
}


def _capacity_two(x):
    if x.shape[0] > 2:
        raise MemoryError
    return x * 2.0


@pytest.mark.parametrize("name", sorted(CASES))
def test_method_on_strictest(strict_backend, name):
    run, expected = CASES[name]
    got = run(strict_backend)
    np.testing.assert_allclose(host(strict_backend, got), expected(), rtol=1e-12)


def test_svd_reconstructs_on_strictest(strict_backend):
    b = strict_backend
    u, s, vt = b.svd(b.asarray(A))
    np.testing.assert_allclose(host(b, b.matmul(u * s, vt)), A, atol=1e-12)


def test_dtype_to_str_on_strict_dtypes(strict_backend):
    assert strict_backend.dtype_to_str(strict_backend.xp.float32) == "float32"
    assert strict_backend.dtype_to_str(strict_backend.xp.int16) == "int16"


def test_flatnonzero_needs_data_dependent_shapes(strict_backend):
    """``nonzero`` is data-dependent by definition: strictest mode refuses it."""
    with pytest.raises(RuntimeError, match="data-dependent shapes"):
        strict_backend.flatnonzero(strict_backend.asarray(A))


def test_flatnonzero_with_data_dependent_shapes_on():
    strict = pytest.importorskip("array_api_strict")
    with strict.ArrayAPIStrictFlags(boolean_indexing=False, data_dependent_shapes=True):
        b = xpkit.Backend("array_api_strict")
        got = b.flatnonzero(b.asarray(A))
    np.testing.assert_array_equal(host(b, got), np.flatnonzero(A))


def test_every_facade_method_is_covered():
    public = {
        n
        for n in dir(xpkit.Backend)
        if not n.startswith("_") and callable(getattr(xpkit.Backend, n))
    }
    covered = {n.split("_values")[0].replace("asarray_dtype", "asarray") for n in CASES}
    covered |= {"svd", "dtype_to_str", "flatnonzero", "to_numpy", "from_arrays"}
    assert public - covered == set()
