"""The README's namespace-agnostic example agrees with scikit-learn everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import load_script

from xpkit.testing import assert_close

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ridge.py"


def _load_example():
    return load_script(EXAMPLE, "xpkit_example_ridge")


@pytest.mark.xpkit_requires("float64")  # scikit-learn's float64 to 1e-9
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
    got = ridge_svd(X, y, alpha, xpkit_backend)  # the variant's, on its device
    assert_close(got, expected, rtol=1e-9, atol=1e-12)


def _message(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def test_the_script_prints_whole_skip_messages_and_warnings_under_its_table():
    """``python examples/ridge.py`` as a user runs it, in a fresh process.

    A skipped backend's line holds the whole reason (a message cut at 60
    characters once ended mid-word), and a warning (JAX without x64 narrows
    float64) is printed under the table, not in the middle of it.
    """
    import subprocess
    import sys

    import numpy as np

    import xpkit

    proc = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    end = lines.index("") if "" in lines else len(lines)
    table, below = lines[1:end], lines[end:]
    assert table, proc.stdout
    assert not [line for line in table if "Warning" in line], proc.stdout
    expected_skips = []
    X = np.ones((4, 2))
    for name in xpkit.BACKEND_NAMES[1:]:
        try:
            backend = xpkit.Backend(name)
        except (ImportError, RuntimeError, ValueError) as exc:
            expected_skips.append(f"skipped: {_message(exc)}")
            continue
        try:
            backend.svd(backend.asarray(X))
        except NotImplementedError as exc:
            expected_skips.append(f"skipped: {_message(exc)}")
    for skip in expected_skips:
        assert any(line.endswith(skip) for line in table), (skip, proc.stdout)
    if below:
        assert below[1] == "warnings:", proc.stdout
        assert all(line.startswith("- ") for line in below[2:]), proc.stdout
