"""xpkit.testing: assert_close / assert_equal / assert_array_almost_equal, strategies."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpkit
from xpkit._dtypes import _warned
from xpkit.testing import (
    assert_array_almost_equal,
    assert_close,
    assert_equal,
    default_tolerance,
    strategies,
)

from .helpers import run_python


def test_assert_close_passes_within_dtype_tolerance(xpkit_backend):
    b = xpkit_backend
    x = b.asarray([1.0, 2.0, 3.0])
    assert_close(x, b.asarray([1.0, 2.0, 3.0 * (1 + 1e-9)]))
    assert_equal(x, b.asarray([1.0, 2.0, 3.0]))


def test_assert_close_dtype_mismatch():
    with pytest.raises(
        AssertionError, match="dtypes differ: actual float32, desired float64"
    ):
        assert_close(np.ones(2, dtype=np.float32), np.ones(2))


def test_assert_close_shape_mismatch():
    with pytest.raises(
        AssertionError, match=r"shapes differ: actual \(2,\), desired \(2, 1\)"
    ):
        assert_close(np.ones(2), np.ones((2, 1)))


def test_assert_close_namespace_mismatch():
    torch = pytest.importorskip("torch")
    with pytest.raises(
        AssertionError, match="namespaces differ: actual is PyTorch, desired is NumPy"
    ):
        assert_close(torch.ones(2, dtype=torch.float64), np.ones(2))
    assert_close(torch.ones(2, dtype=torch.float64), np.ones(2), check_namespace=False)


def test_assert_close_device_mismatch():
    strict = pytest.importorskip("array_api_strict")
    a = strict.asarray([1.0, 2.0])
    c = strict.asarray([1.0, 2.0], device=strict.Device("device1"))
    with pytest.raises(
        AssertionError, match="devices differ: actual on 'cpu', desired on 'device1'"
    ):
        assert_close(a, c)
    assert_close(a, c, check_device=False)


def test_assert_close_value_mismatch_names_worst_element():
    actual = np.array([[1.0, 2.0], [3.0, 4.0]])
    desired = np.array([[1.0, 2.0001], [3.0, 4.5]])
    with pytest.raises(AssertionError) as info:
        assert_close(actual, desired)
    text = str(info.value)
    assert "2 of 4 elements differ" in text
    assert "worst at index (1, 1): actual 4.0, desired 4.5" in text
    assert "|difference| 0.5" in text


def test_assert_close_tolerances_and_nans():
    assert_close(np.array([1.0, np.nan]), np.array([1.0 + 1e-3, np.nan]), rtol=1e-2)
    with pytest.raises(
        AssertionError, match="worst at index \\(1,\\): actual nan, desired 1.0"
    ):
        assert_close(np.array([1.0, np.nan]), np.array([1.0, 1.0]))
    assert_close(np.array([np.inf]), np.array([np.inf]))
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_close(np.array([0.0]), np.array([1e-30]))  # atol defaults to 0
    assert_close(np.array([0.0]), np.array([1e-30]), atol=1e-20)


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


# -- the 16-bit floats: one rule, float16's 4 * sqrt(2**-10) = 0.125 (issue #19) --------
HALF_RTOL = 0.125  # 4 * sqrt(2**-10), written out: not computed by the code under test


def _half_arrays(library: str, dtype: str):
    """A maker of 1-D arrays of ``library`` in the 16-bit float ``dtype``."""
    if library == "numpy":
        if dtype == "bfloat16":
            pytest.skip("NumPy has no bfloat16")
        return lambda v: np.asarray(v, dtype=dtype)
    if library == "torch":
        torch = pytest.importorskip("torch")
        return lambda v: torch.tensor(v, dtype=getattr(torch, dtype))
    jnp = pytest.importorskip("jax.numpy")
    return lambda v: jnp.asarray(v, dtype=getattr(jnp, dtype))


HALF_CASES = [
    (library, dtype)
    for library in ("numpy", "torch", "jax")
    for dtype in ("float16", "bfloat16")
    if (library, dtype) != ("numpy", "bfloat16")
]


@pytest.mark.parametrize(("library", "dtype"), HALF_CASES)
def test_16_bit_floats_pass_a_difference_just_inside_the_tolerance(library, dtype):
    make = _half_arrays(library, dtype)
    # 1 + 7/64 is exact in both formats; |difference| 0.109 <= 0.125 * 1.0
    assert_close(make([1.109375, 2.0]), make([1.0, 2.0]))
    assert_close(make([1.0, 2.0]), make([1.109375, 2.0]))


@pytest.mark.parametrize(("library", "dtype"), HALF_CASES)
def test_16_bit_floats_fail_one_against_one_and_a_quarter(library, dtype):
    make = _half_arrays(library, dtype)
    with pytest.raises(AssertionError, match="actual 1.0, desired 1.25"):
        assert_close(make([1.0]), make([1.25]))
    with pytest.raises(AssertionError, match="actual 1.25, desired 1.0"):
        assert_close(make([1.25]), make([1.0]))


@pytest.mark.parametrize(("library", "dtype"), HALF_CASES)
def test_16_bit_float_tolerance_from_the_library_dtype(library, dtype):
    make = _half_arrays(library, dtype)
    assert default_tolerance(make([1.0]).dtype) == (HALF_RTOL, 0.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_float_tolerance_from_the_dtype_name(dtype):
    assert default_tolerance(dtype) == (HALF_RTOL, 0.0)
    rtol, atol = default_tolerance(dtype)
    # The rule the name gives decides 1.0 against 1.25 (here on float64 arrays).
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_close(np.array([1.0]), np.array([1.25]), rtol=rtol, atol=atol)
    assert_close(np.array([1.109375]), np.array([1.0]), rtol=rtol, atol=atol)


def test_assert_equal_is_exact():
    with pytest.raises(AssertionError, match="actual 2, desired 3"):
        assert_equal(np.array([1, 2]), np.array([1, 3]))
    with pytest.raises(AssertionError, match="1 of 2 elements differ"):
        assert_equal(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-15]))
    with pytest.raises(AssertionError, match="actual False, desired True"):
        assert_equal(np.array([True, False]), np.array([True, True]))


def test_asserts_hide_their_frames(pytester):
    pytester.makepyfile(
        """
        import numpy as np
        from xpkit.testing import assert_close

        def test_fails():
            assert_close(np.ones(2), np.zeros(2))
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "assert_close(np.ones(2), np.zeros(2))" in text
    assert "_compare_values" not in text
    assert "_close.py" not in text


@pytest.mark.parametrize(
    ("dtype", "rtol"),
    [
        ("float64", 4 * np.finfo(np.float64).eps ** 0.5),
        ("float32", 4 * np.finfo(np.float32).eps ** 0.5),
        ("complex64", 4 * np.finfo(np.float32).eps ** 0.5),
        ("int32", 0.0),
        ("bool", 0.0),
    ],
)
def test_default_tolerance(dtype, rtol):
    assert default_tolerance(dtype) == (pytest.approx(rtol), 0.0)


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


@settings(max_examples=30)
@given(data=st.data())
def test_strategies_honour_device_dtype_limits(data):
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="no_float64")
    x = data.draw(strategies.arrays(b, dtype=strategies.dtypes(b, "real floating")))
    assert b.dtype_to_str(x.dtype) == "float32"
    assert xpkit.Backend.from_arrays(x) == b


def test_strategies_dtype_names(xpkit_backend):
    names = strategies.dtype_names(xpkit_backend)
    assert {"bool", "int32", "float32"} <= set(names)
    assert set(strategies.dtype_names(xpkit_backend, "real floating")) <= {
        "float32",
        "float64",
    }
    assert "bool" not in strategies.dtype_names(xpkit_backend, "numeric")


def test_strategies_reject_bad_input():
    b = xpkit.Backend("numpy")
    with pytest.raises(ValueError, match="kind='text' is not one of"):
        strategies.dtype_names(b, "text")
    with pytest.raises(TypeError, match="backend must be a Backend"):
        strategies.arrays("numpy")
    pytest.importorskip("array_api_strict")
    nof64 = xpkit.Backend("array_api_strict", device="no_float64")
    with pytest.raises(
        ValueError, match="dtype='bfloat16' is not supported on array_api_strict"
    ):
        strategies.arrays(nof64, dtype="bfloat16")


@settings(max_examples=5)
@given(data=st.data())
def test_strategies_narrow_a_64_bit_dtype_as_asarray_does(data):
    """float64 on a device without it draws float32 arrays (issue #21), warned once."""
    pytest.importorskip("array_api_strict")
    nof64 = xpkit.Backend("array_api_strict", device="no_float64")
    _warned.clear()
    with pytest.warns(xpkit.PrecisionWarning, match="has no float64; using float32"):
        drawn = strategies.arrays(nof64, dtype="float64", shape=3)
    x = data.draw(drawn)
    assert str(x.dtype) == "array_api_strict.float32"
    assert x.device == nof64.native_device


STRATEGY_ON_32_BIT_JAX = """
import warnings

import jax
from hypothesis import given, settings

import xpkit
from xpkit.testing import strategies

assert not jax.config.jax_enable_x64
b = xpkit.Backend("jax")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    drawn = strategies.arrays(b, dtype="float64", shape=2)
print("warned:", [str(w.message) for w in caught])


@settings(max_examples=3, database=None)
@given(drawn)
def check(x):
    assert str(x.dtype) == "float32", x.dtype


check()
print("float32 drawn")
"""


def test_strategies_narrow_float64_on_jax_without_x64():
    """``arrays(b, dtype="float64")`` raised on 32-bit JAX, where asarray narrows (#21)."""
    pytest.importorskip("jax")
    proc = run_python(STRATEGY_ON_32_BIT_JAX, extra_env={"JAX_ENABLE_X64": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "float32 drawn" in proc.stdout
    assert "jax-cpu has no float64; using float32 instead" in proc.stdout
