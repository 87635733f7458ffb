"""xpkit.testing: `assert_array_almost_equal`, the seed's precision-aware assert."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from plugin_runs import needs, outcomes

import xpkit
from xpkit._dtypes import _warned
from xpkit.testing import assert_array_almost_equal


def test_assert_array_almost_equal_any_library(xpkit_backend):
    b = xpkit_backend
    assert_array_almost_equal(b.asarray([1.0, 2.0]), np.array([1.0, 2.0000001]))
    # A device without float64 compares at 2 decimals (its summary line says
    # so; no warning inside the plugin's tests).
    decimals, off = (6, 0.001) if "float64" in b.dtypes else (2, 0.1)
    with pytest.raises(
        AssertionError, match=f"Arrays are not almost equal to {decimals} decimals"
    ):
        assert_array_almost_equal(b.asarray([1.0, 2.0]), np.array([1.0, 2.0 + off]))


def test_assert_array_almost_equal_reduces_precision_without_float64():
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="no_float64")
    _warned.clear()
    with pytest.warns(xpkit.PrecisionWarning, match="no float64"):
        x = b.asarray([1.0, 2.001])
    with pytest.warns(
        xpkit.PrecisionWarning, match="comparing at decimal=2 instead of 6"
    ):
        assert_array_almost_equal(x, np.array([1.0, 2.0]))
    with (
        pytest.warns(xpkit.PrecisionWarning),
        pytest.raises(AssertionError, match="2 decimals"),
    ):
        assert_array_almost_equal(x, np.array([1.0, 2.1]), backend=b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decimal already <= 2: nothing to say
        assert_array_almost_equal(x, np.array([1.0, 2.0]), decimal=1)


def test_assert_array_almost_equal_loosens_only_a_narrowed_float64():
    """Two float32 arrays on a device without float64 passed at decimal=2."""
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="no_float64")
    x = b.asarray([1.0, 2.0], dtype="float32")
    y = b.asarray([1.004, 2.0], dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing narrowed: nothing to say
        with pytest.raises(AssertionError, match="6 decimals"):
            assert_array_almost_equal(x, y)
        with pytest.raises(AssertionError, match="6 decimals"):
            assert_array_almost_equal(x, y, backend=b)
        # Two float64 host arrays: nothing narrowed, whatever the backend.
        with pytest.raises(AssertionError, match="6 decimals"):
            assert_array_almost_equal(
                np.array([1.0, 2.0]), np.array([1.004, 2.0]), backend=b
            )
    with pytest.warns(xpkit.PrecisionWarning, match="decimal=2 instead of 6"):
        assert_array_almost_equal(x, np.array([1.004, 2.0]))  # a float64 reference


LOOSE_IN_A_VARIANT = """
import numpy as np
from xpkit.testing import assert_array_almost_equal

def test_float32(xpkit_backend, xp):
    x = xpkit_backend.asarray([1.0, 2.0], dtype=xp.float32)
    y = xpkit_backend.asarray([1.004, 2.0], dtype=xp.float32)
    assert_array_almost_equal(x, y)

def test_reference(xpkit_backend, xp):
    x = xpkit_backend.asarray([1.0, 2.0], dtype=xp.float32)
    assert_array_almost_equal(x, np.array([1.004, 2.0]))
"""


def test_assert_array_almost_equal_in_a_variant_says_where_it_loosened(pytester):
    """In the plugin's tests float32 passed at decimal=2 and no line said so."""
    needs("array_api_strict")
    pytester.makepyfile(test_user=LOOSE_IN_A_VARIANT)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-W",
        "error",
        "-v",
        "--xpkit-backends=array_api_strict-no_float64,array_api_strict",
    )
    assert outcomes(result) == {
        "test_float32[array_api_strict-no_float64]": "FAILED",
        "test_float32[array_api_strict]": "FAILED",
        "test_reference[array_api_strict-no_float64]": "PASSED",
        "test_reference[array_api_strict]": "FAILED",
    }
    said = (
        "xpkit: array_api_strict-no_float64 has no float64: "
        "assert_array_almost_equal compared float32 arrays with float64 ones "
        "at decimal=2 instead of 6"
    )
    result.stdout.fnmatch_lines([said])
    assert "xpkit: array_api_strict has no" not in result.stdout.str()


def test_assert_array_almost_equal_rejects():
    with pytest.raises(TypeError, match="decimal must be an int"):
        assert_array_almost_equal(np.ones(1), np.ones(1), decimal=2.5)
    with pytest.raises(TypeError, match="backend must be a Backend or None"):
        assert_array_almost_equal(np.ones(1), np.ones(1), backend="numpy")


@pytest.mark.parametrize("decimal", [323, 324, 400, 10**400])
def test_a_decimal_finer_than_float64_compares_as_323(decimal):
    """NumPy failed equal arrays from decimal=324 on (its bound, 1.5 * 10**-decimal,
    is 0) and raised OverflowError past float's range."""
    x = np.array([1.0, 2.0**-1070])
    assert_array_almost_equal(x, x.copy(), decimal=decimal)
    with pytest.raises(AssertionError, match="not almost equal to 323 decimals"):
        assert_array_almost_equal(x, x + np.array([0.0, 2.0**-1060]), decimal=decimal)
