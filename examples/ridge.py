"""Ridge regression through the SVD, written once, run on every backend.

Run it: ``python examples/ridge.py``. It fits the same problem on every
backend installed here and prints the largest difference from NumPy.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import xpkit


def ridge_svd(X, y, alpha: float, backend: xpkit.Backend):
    """Coefficients minimising ||y - X w||² + alpha ||w||² (no intercept).

    Only `Backend` methods and the standard namespace ``backend.xp`` are
    used, so the same code runs on NumPy, PyTorch, array-api-strict, CuPy,
    JAX and Dask.
    """
    xp = backend.xp
    X, y = backend.check_arrays(X, y)
    U, s, Vt = backend.svd(X)  # reduced SVD
    d = s / (s**2 + alpha)  # shrunken inverse singular values
    Uty = backend.matmul(xp.permute_dims(U, (1, 0)), y)
    return backend.matmul(xp.permute_dims(Vt, (1, 0)), d[:, None] * Uty)


def _message(exc: BaseException) -> str:
    """The whole message of ``exc`` on one line."""
    return " ".join(str(exc).split())


def main() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2_000, 50))
    y = X @ rng.standard_normal((50, 3)) + 0.1 * rng.standard_normal((2_000, 3))
    reference = ridge_svd(X, y, 1.0, xpkit.Backend("numpy"))
    print(f"{'backend':<18} {'seconds':>8} {'max |w - w_numpy|':>18}")
    # Warnings (a float64 request narrowed to float32, ...) are collected and
    # printed under the table, not in the middle of it.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in xpkit.BACKEND_NAMES[1:]:
            try:
                backend = xpkit.Backend(name)
            except (ImportError, RuntimeError, ValueError) as exc:
                print(f"{name:<18} skipped: {_message(exc)}")
                continue
            start = time.perf_counter()
            try:
                w = backend.to_numpy(ridge_svd(X, y, 1.0, backend))
            except NotImplementedError as exc:  # a library without linalg (ndonnx)
                print(f"{backend.name:<18} skipped: {_message(exc)}")
                continue
            elapsed = time.perf_counter() - start
            deviation = np.max(np.abs(w - reference))
            print(f"{backend.name:<18} {elapsed:8.4f} {deviation:18.2e}")
    seen: dict[str, None] = {}  # each warning once, in the order it came
    for warning in caught:
        seen.setdefault(f"{warning.category.__name__}: {_message(warning.message)}")
    if seen:
        print("\nwarnings:")
        for text in seen:
            print(f"- {text}")


if __name__ == "__main__":
    main()
