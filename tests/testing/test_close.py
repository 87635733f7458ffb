"""xpkit.testing: `assert_close`, `assert_equal` and `default_tolerance`.

Namespace, shape, dtype and device are compared before values, with a
tolerance derived from the dtype (the 16-bit floats share one rule).
"""

from __future__ import annotations

import numpy as np
import pytest

import xpkit.testing
from xpkit.testing import assert_close, assert_equal, default_tolerance


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


def test_two_libraries_on_the_host_are_on_one_device(monkeypatch):
    """JAX's CPU and NumPy's host compared as one device (they were not)."""
    jnp = pytest.importorskip("jax.numpy")
    from xpkit._adapters import get_adapter

    a = jnp.asarray([1.0, 2.0], dtype=jnp.float32)
    desired = np.asarray([1.0, 2.0], dtype=np.float32)
    assert_close(a, desired, check_namespace=False)
    xpkit.testing.assert_equal(a, desired, check_namespace=False)
    jax_adapter = type(get_adapter("jax"))
    monkeypatch.setattr(jax_adapter, "device_str", lambda self, d: "cuda:0")
    with pytest.raises(AssertionError, match="devices differ: actual on 'cuda:0'"):
        assert_close(a, desired, check_namespace=False)


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


def test_a_floating_result_against_integers_is_held_to_its_own_precision():
    """An integer ``desired`` gives no tolerance (exact): a floating
    ``actual`` is held to its own dtype's, as the docstring says (float32's
    1.4e-3, float16's 0.125); two integer arrays compare exactly."""
    ints = np.array([1000, 2000])
    assert_close(np.array([1000.5, 2000.0], np.float32), ints, check_dtype=False)
    with pytest.raises(AssertionError, match="elements differ"):
        assert_close(np.array([1002.0, 2000.0], np.float32), ints, check_dtype=False)
    assert_close(np.array([1100.0, 2000.0], np.float16), ints, check_dtype=False)
    with pytest.raises(AssertionError, match="elements differ"):
        assert_close(np.array([1200.0, 2000.0], np.float16), ints, check_dtype=False)
    with pytest.raises(AssertionError, match="elements differ"):
        assert_close(np.array([1001, 2000]), ints)


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


def test_masks_inside_lists_and_dask_chunks_are_refused_not_dropped():
    """np.asarray of a list dropped a masked element's mask, and a Dask array
    of masked chunks computed to plain values: both asserts passed on data
    that differ where the mask is."""
    masked = np.ma.masked_array([1.0, 999.0], mask=[False, True])
    plain = np.array([[1.0, 999.0]])
    for check in (xpkit.testing.assert_close, xpkit.testing.assert_equal):
        with pytest.raises(TypeError, match=r"^desired\[0\] is a NumPy masked array"):
            check(plain, [masked], check_namespace=False)
        with pytest.raises(TypeError, match=r"^actual\[0\]\[0\] is a NumPy masked"):
            check([[masked]], plain[None], check_namespace=False)
    with pytest.raises(TypeError, match=r"^x\[0\] is a NumPy masked array"):
        xpkit.testing.assert_array_almost_equal([masked], plain)
    xpkit.testing.assert_close(plain, [[1.0, 999.0]], check_namespace=False)
    da = pytest.importorskip("dask.array")
    lazy = da.ma.masked_greater(da.from_array(np.array([1.0, 2.0, 3.0])), 2.5)
    with pytest.raises(TypeError, match=r"^actual is a Dask array of NumPy masked"):
        xpkit.testing.assert_equal(lazy, da.from_array(np.array([1.0, 2.0, 3.0])))


@pytest.mark.parametrize("value", [[1.0], 1.0])
def test_a_value_that_is_not_an_array_is_told_as_such(value):
    """It said 'namespaces differ: actual is list, desired is list'."""
    with pytest.raises(AssertionError) as info:
        assert_close(value, value)
    assert str(info.value) == (
        f"actual is a {type(value).__qualname__}, not an array of a library xpkit "
        "knows (compare it as NumPy would with check_namespace=False)"
    )
    assert_close(value, value, check_namespace=False)
