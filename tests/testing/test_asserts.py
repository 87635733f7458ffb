"""xpkit.testing: `assert_array_almost_equal`, the seed's precision-aware assert."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

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


def test_assert_array_almost_equal_rejects():
    with pytest.raises(TypeError, match="decimal must be an int"):
        assert_array_almost_equal(np.ones(1), np.ones(1), decimal=2.5)
    with pytest.raises(TypeError, match="backend must be a Backend or None"):
        assert_array_almost_equal(np.ones(1), np.ones(1), backend="numpy")
