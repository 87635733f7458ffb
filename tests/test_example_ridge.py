"""The README's namespace-agnostic example agrees with scikit-learn everywhere."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from xpkit.testing import assert_close

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ridge.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("xpkit_example_ridge", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.xpkit_requires("linalg")
@pytest.mark.parametrize("alpha", [0.1, 10.0])
def test_ridge_matches_scikit_learn(xpkit_backend, rng, alpha):
    linear_model = pytest.importorskip("sklearn.linear_model")
    ridge_svd = _load_example().ridge_svd
    X = rng.standard_normal((60, 8))
    y = X @ rng.standard_normal((8, 2)) + 0.05 * rng.standard_normal((60, 2))
    expected = (
        linear_model.Ridge(alpha=alpha, solver="svd", fit_intercept=False)
        .fit(X, y)
        .coef_.T
    )
    got = xpkit_backend.to_numpy(ridge_svd(X, y, alpha, xpkit_backend))
    assert_close(got, expected, rtol=1e-9, atol=1e-12)
