"""The values of `assert_close` / `assert_equal`: what float64 would round away.

Integers beyond 2**53, long doubles, complex NaNs, values that are not
numbers, a dtype a lazy array declares but does not compute to, and masks
that a conversion would drop.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from xpkit.testing import (
    assert_array_almost_equal,
    assert_close,
    assert_equal,
    default_tolerance,
)

BIG = [
    ("int64", 2**53 + 1, 2**53, {"atol": 0.5}),
    ("int64", 2**62 + 1, 2**62, {"rtol": 1e-20}),  # allows 0.046
    ("int64", -(2**63) + 1, -(2**63), {"atol": 0.9}),
    ("uint64", 2**64 - 1, 2**64 - 2, {"atol": 0.5}),
    ("uint64", 2**64 - 1, 2**64 - 1000, {"atol": 1}),
]


@pytest.mark.parametrize(("dtype", "got", "want", "tolerance"), BIG)
def test_integers_beyond_float64_are_compared_as_integers(dtype, got, want, tolerance):
    """They were compared as the float64 they round to: 2**53 + 1 == 2**53."""
    actual, desired = np.array([7, got], dtype=dtype), np.array([7, want], dtype=dtype)
    with pytest.raises(AssertionError, match=rf"\|difference\| {abs(got - want)}$"):
        assert_close(actual, desired, **tolerance)
    assert_close(actual, desired, atol=abs(got - want))  # the gap itself is allowed


def test_torch_integers_beyond_float64():
    torch = pytest.importorskip("torch")
    actual = torch.tensor([2**53 + 1], dtype=torch.int64)
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_close(actual, torch.tensor([2**53], dtype=torch.int64), atol=0.5)


@pytest.mark.parametrize(
    "compare", [assert_equal, lambda *a, **k: assert_close(*a, rtol=0, atol=0.5, **k)]
)
def test_a_large_integer_against_a_float(compare):
    """2**53 + 1 against the float 2**53: they differ, whatever float64 says."""
    with pytest.raises(AssertionError, match=r"\|difference\| 1$"):
        compare(np.array([2**53 + 1]), np.array([2.0**53]), check_dtype=False)
    with pytest.raises(AssertionError, match=r"\|difference\| 1$"):
        compare(np.array([2.0**53]), np.array([2**53 + 1]), check_dtype=False)
    compare(np.array([2**53]), np.array([2.0**53]), check_dtype=False)


def test_the_worst_integer_is_named_not_the_first():
    with pytest.raises(AssertionError, match=r"worst at index \(1,\): actual 100"):
        assert_equal(np.array([1, 100]), np.array([2, 0]))
    with pytest.raises(AssertionError, match=r"worst at index \(0, 1\): actual 9"):
        assert_close(np.array([[1, 9]]), np.array([[0, 0]]), atol=0.5)


def test_integers_within_the_tolerance_pass():
    assert_close(np.array([10, -10]), np.array([12, -12]), atol=2)
    assert_close(
        np.array([100], dtype=np.uint8), np.array([110], dtype=np.uint8), rtol=0.1
    )
    with pytest.raises(AssertionError, match=r"\|difference\| 11$"):
        assert_close(
            np.array([99], dtype=np.uint8), np.array([110], dtype=np.uint8), rtol=0.09
        )


def test_a_long_double_keeps_its_precision():
    eps = np.finfo(np.longdouble).eps
    if eps >= np.finfo(np.float64).eps:
        pytest.skip("long double is float64 on this platform")
    one = np.array([1.0], dtype=np.longdouble)  # (not a dtype the checks know)
    for check_dtype in (False, True):
        with pytest.raises(AssertionError, match="1 of 1 elements differ"):
            assert_equal(one + eps, one, check_dtype=check_dtype)
        assert_close(one + eps, one, check_dtype=check_dtype, rtol=1e-12, atol=0)
    # Two long doubles are of one dtype ("float128 is not a numeric dtype"
    # was raised), and the default tolerance is the long double's own.
    assert_equal(one.copy(), one)
    assert_close(one + 2 * eps, one)
    rtol, _ = default_tolerance(np.dtype(np.longdouble))
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_close(one + 2 * rtol, one)
    with pytest.raises(AssertionError, match="dtypes differ: actual float"):
        assert_equal(one, np.array([1.0]))


def test_torch_dtypes_outside_the_standard_compare_as_themselves():
    """float8 tensors met "is not a numeric or boolean dtype" against their own kind."""
    torch = pytest.importorskip("torch")
    f8 = torch.tensor([1.0, 2.0]).to(torch.float8_e4m3fn)
    assert_equal(f8, f8.clone())
    assert_close(f8, f8.clone())
    other = torch.tensor([1.0, 3.0]).to(torch.float8_e4m3fn)
    with pytest.raises(AssertionError, match="1 of 2 elements differ"):
        assert_equal(f8, other)
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_equal(f8, torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize(
    ("name", "values", "other"),
    [
        ("float8_e4m3fn", [1.0, 2.0], [1.0, 2.5]),
        ("float8_e5m2", [1.0, 2.0], [2.5, 5.0]),  # (passed: an rtol of 2.0)
        ("float4_e2m1fn", [1.0, 2.0], [1.0, 3.0]),
        ("int4", [1, -2], [1, -3]),
        ("uint2", [1, 2], [1, 3]),
    ],
)
def test_ml_dtypes_numbers_compare_as_themselves(name, values, other):
    """NumPy arrays of ml_dtypes' float8 and int4 (JAX's too) met "is not a
    numeric or boolean dtype", even against a copy of themselves."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = np.array(values, dtype=dtype)
    assert_equal(x, x.copy())
    assert_close(x, x.copy())
    assert_close(x, x.copy(), check_dtype=False)
    with pytest.raises(AssertionError, match="of 2 elements differ"):
        assert_close(x, np.array(other, dtype=dtype))
    with pytest.raises(AssertionError, match="dtypes differ"):
        assert_equal(x, np.array(values, dtype=np.float32))


def test_the_tolerance_of_narrow_dtypes_outside_the_standard():
    """float8, float4 and complex32 raised 'not a numeric or boolean dtype'.

    They take float32's tolerance, as their host copies are compared
    (tighter than their own spacing, 0.125 at 1.0 for float8_e4m3fn); the
    narrow integers are exact.
    """
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch")
    float32 = (4 * float(np.finfo(np.float32).eps) ** 0.5, 0.0)
    for dtype in (
        np.dtype(ml_dtypes.float8_e4m3fn),
        np.dtype(ml_dtypes.float8_e5m2),  # (NumPy's kind "f": an rtol of 2.0)
        np.dtype(ml_dtypes.float4_e2m1fn),
        torch.float8_e5m2,
        torch.complex32,
    ):
        assert default_tolerance(dtype) == pytest.approx(float32), dtype
    assert default_tolerance(np.dtype(ml_dtypes.int4)) == (0.0, 0.0)
    with pytest.raises(TypeError, match="is not a numeric or boolean dtype"):
        default_tolerance(np.dtype("O"))


@pytest.mark.parametrize(
    ("actual", "desired"),
    [
        (complex(1, np.nan), complex(1000, np.nan)),
        (complex(np.nan, 0), complex(0, np.nan)),
        (complex(np.nan, np.nan), complex(np.nan, 1)),
    ],
)
def test_complex_nans_match_part_by_part(actual, desired):
    """Any complex NaN matched any other: 1+nanj against 1000+nanj passed."""
    for compare in (assert_close, assert_equal):
        with pytest.raises(AssertionError, match="1 of 1 elements differ"):
            compare(np.array([actual]), np.array([desired]))


@pytest.mark.parametrize(
    ("actual", "desired"),
    [
        (complex(np.nan, 1.0), complex(np.nan, np.inf)),
        (complex(5.0, np.nan), complex(np.inf, np.nan)),
        (complex(-np.inf, np.nan), complex(np.inf, np.nan)),
    ],
)
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_a_complex_nans_finite_part_is_never_close_to_an_infinite_one(
    actual, desired, dtype
):
    """rtol * inf allowed any part against an infinite one: nan+1j passed
    against nan+infj (and not the other way round)."""
    for a, d in ((actual, desired), (desired, actual)):
        with pytest.raises(AssertionError, match="1 of 1 elements differ"):
            assert_close(np.array([a], dtype=dtype), np.array([d], dtype=dtype))


@pytest.mark.parametrize(
    "compare", [assert_equal, lambda *a, **k: assert_close(*a, rtol=0, atol=0.5, **k)]
)
def test_a_large_integer_against_a_complex(compare):
    """2**62 + 1 against 2**62 + 0j passed: complex128 rounds the integer."""
    with pytest.raises(AssertionError, match=r"\|difference\| 1$"):
        compare(np.array([2**62 + 1]), np.array([2.0**62 + 0j]), check_dtype=False)
    with pytest.raises(AssertionError, match=r"\|difference\| 1$"):
        compare(np.array([2.0**62 + 0j]), np.array([2**62 + 1]), check_dtype=False)
    compare(np.array([2**62]), np.array([2.0**62 + 0j]), check_dtype=False)


def test_complex_nans_with_the_same_parts_match():
    values = np.array([complex(1, np.nan), complex(np.nan, 2), complex(np.nan, np.nan)])
    assert_equal(values, values.copy())
    assert_close(values, values + complex(1e-12, 1e-12))


@pytest.mark.parametrize(
    "values",
    [
        np.array(["1"]),
        np.array([b"1"]),
        np.array([1], dtype="timedelta64[s]"),
        np.array([1], dtype="datetime64[D]"),
        np.array([2**70], dtype=object),
    ],
    ids=["str", "bytes", "timedelta", "datetime", "object"],
)
@pytest.mark.parametrize("check_dtype", [True, False])
def test_values_that_are_not_numbers_are_refused(values, check_dtype):
    """With check_dtype=False they were cast to float64: '1' == '1.0' passed."""
    with pytest.raises(TypeError, match=r"^actual holds values of dtype"):
        assert_equal(values, values.copy(), check_dtype=check_dtype)
    with pytest.raises(TypeError, match=r"^desired holds values of dtype"):
        assert_close(np.ones(1), values, check_dtype=check_dtype)


def test_a_list_of_integers_beyond_int64_is_refused_not_a_crash():
    """It crashed with AttributeError ('int' object has no attribute 'item')."""
    with pytest.raises(
        TypeError, match=r"desired holds values of dtype object \(Python"
    ):
        assert_equal(np.array([1, 2]), [2**70, 2], check_namespace=False)


def test_dask_a_dtype_declared_is_the_dtype_computed():
    """A map_blocks result declared float64 and computed float32 passed as float64."""
    da = pytest.importorskip("dask.array")
    x = da.ones(4, chunks=2, dtype=np.float32).map_blocks(
        lambda block: block, dtype=np.float64
    )
    message = "actual declares dtype float64, but its values are float32"
    with pytest.raises(AssertionError, match=message):
        assert_close(x, da.ones(4, chunks=2))
    with pytest.raises(AssertionError, match=message):
        assert_close(x, np.ones(4), check_namespace=False)
    assert_close(
        x, np.ones(4, dtype=np.float32), check_namespace=False, check_dtype=False
    )
    right = da.ones(4, chunks=2, dtype=np.float32)
    assert_close(right, np.ones(4, dtype=np.float32), check_namespace=False)


def test_dask_a_shape_declared_is_the_shape_computed():
    """A map_blocks result declared (4,) and computed (2,) passed against (2,)."""
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.array([1.0, 2.0, 3.0, 4.0]), chunks=2)
    lie = x.map_blocks(lambda block: block[:1], dtype=np.float64)
    message = re.escape("declares shape (4,), but its values have shape (2,)")
    with pytest.raises(AssertionError, match="actual " + message):
        assert_close(lie, da.from_array(np.array([1.0, 3.0])))
    with pytest.raises(AssertionError, match="actual " + message):
        assert_equal(lie, np.array([1.0, 3.0]), check_namespace=False)
    with pytest.raises(AssertionError, match="desired " + message):
        assert_close(da.from_array(np.array([1.0, 3.0])), lie)
    with pytest.raises(AssertionError, match="x " + message):  # (NumPy's assert)
        assert_array_almost_equal(lie, np.array([1.0, 3.0]))
    with pytest.raises(AssertionError, match=re.escape("actual[0] ") + message):
        assert_close([lie], [np.array([1.0, 3.0])], check_namespace=False)
    unknown = x[x > 2.0]  # (a NaN size: nothing declared to hold it to)
    assert_close(unknown, da.from_array(np.array([3.0, 4.0])))
    declared = x.map_blocks(lambda block: block[:1], chunks=((1, 1),))
    assert_close(declared, da.from_array(np.array([1.0, 3.0])))


def test_dask_masked_chunks_behind_a_plain_meta_are_refused():
    """Their masks were dropped: [1, --] passed against [1, 2]."""
    da = pytest.importorskip("dask.array")
    import xpkit

    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    x = da.from_array(masked, chunks=1, meta=np.empty(0))
    with pytest.raises(TypeError, match="chunks compute to NumPy masked arrays"):
        assert_close(x, np.array([1.0, 2.0]), check_namespace=False)
    with pytest.raises(TypeError, match="chunks compute to NumPy masked arrays"):
        xpkit.Backend("dask").to_numpy(x)


def test_ndonnx_nullable_arrays_are_refused():
    """Their masks were dropped, even by assert_array_almost_equal."""
    ndx = pytest.importorskip("ndonnx")
    x = ndx.asarray(np.ma.masked_array([1.0, 2.0], mask=[False, True]))
    with pytest.raises(TypeError, match="x is an ndonnx array of the nullable dtype"):
        assert_array_almost_equal(x, np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="actual is an ndonnx array of the nullable"):
        assert_close(x, ndx.asarray(np.array([1.0, 2.0])), check_dtype=False)


def test_torch_tensors_without_a_numpy_form_are_refused():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():  # nested: prototype; quantized: deprecated
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        quantized = torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)
    with pytest.raises(TypeError, match="actual is a nested tensor"):
        assert_close(nested, nested)
    with pytest.raises(TypeError, match=r"actual is a quantized tensor \(torch.qint8"):
        assert_close(quantized, quantized)
    with warnings.catch_warnings():  # masked: prototype
        warnings.simplefilter("ignore")
        values = torch.tensor([1.0, 2.0])
        masked = torch.masked.masked_tensor(values, torch.tensor([True, False]))
    with pytest.raises(TypeError, match=r"desired is a masked tensor \(torch.masked"):
        assert_close(values, masked)


def test_torch_complex32_comes_to_the_host_as_complex64():
    """It failed with torch's "Got unsupported ScalarType ComplexHalf"."""
    torch = pytest.importorskip("torch")
    import xpkit

    with warnings.catch_warnings():  # complex32 is experimental
        warnings.simplefilter("ignore")
        x = torch.tensor([0.5 + 1j, -2.0 - 0.25j]).to(torch.complex32)
    host = xpkit.Backend("torch").to_numpy(x)
    assert host.dtype == np.complex64
    np.testing.assert_array_equal(host, [0.5 + 1j, -2.0 - 0.25j])
    doubled = xpkit.map_batches(lambda r: r * 2, x)
    np.testing.assert_array_equal(doubled, [1.0 + 2j, -4.0 - 0.5j])


def test_torch_eight_bit_floats_come_to_the_host_as_float32():
    torch = pytest.importorskip("torch")
    import xpkit

    x = torch.tensor([0.5, -2.0, 448.0]).to(torch.float8_e4m3fn)
    host = xpkit.Backend("torch").to_numpy(x)
    assert host.dtype == np.float32
    np.testing.assert_array_equal(host, [0.5, -2.0, 448.0])


def test_a_list_of_tensors_that_require_grad():
    """It failed with torch's "Can't call numpy() on Tensor that requires grad"."""
    torch = pytest.importorskip("torch")
    tensors = [torch.ones(2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    desired = np.array([[1.0, 1.0], [0.0, 0.0]], dtype=np.float32)
    assert_close(tensors, desired, check_namespace=False)
    assert_array_almost_equal(tensors, desired)
    desired[1, 0] = 3.0
    with pytest.raises(AssertionError, match=r"worst at index \(1, 0\)"):
        assert_close(tensors, desired, check_namespace=False)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (np.timedelta64(1), TypeError, "rtol must be a number"),
        (10**400, ValueError, "rtol must be a finite non-negative number"),
    ],
)
def test_tolerances_that_are_not_finite_numbers(value, error, match):
    with pytest.raises(error, match=match):
        assert_close(np.ones(1), np.ones(1), rtol=value)


def test_default_tolerance_of_none_is_a_type_error():
    """It gave float64's tolerance."""
    with pytest.raises(TypeError, match="dtype must be a dtype or its name, got None"):
        default_tolerance(None)


def test_a_difference_beyond_float64_is_printed_as_inf():
    """It raised OverflowError while writing the message."""
    with pytest.raises(AssertionError, match=r"\|difference\| inf$"):
        assert_close(np.array([1.7e308]), np.array([-1.7e308]))


@pytest.mark.parametrize(
    ("actual", "desired", "tolerance"),
    [
        (np.array([2**59 + 2]), np.array([2**60 + 3]), {"rtol": 0.5, "atol": 0}),
        (np.array([2**53 + 1]), np.array([2.0**53 + 2]), {"rtol": 0, "atol": 1}),
        (
            np.array([2**64 - 1], dtype=np.uint64),
            np.array([2**63], dtype=np.uint64),
            {"rtol": 1.0, "atol": 0},
        ),
    ],
)
def test_large_integers_within_the_rule_exactly_pass(actual, desired, tolerance):
    """Rounded to float64 (rtol * |d| too), these pairs failed though the rule holds."""
    assert_close(actual, desired, check_dtype=False, **tolerance)


@pytest.mark.parametrize(
    ("actual", "desired", "tolerance"),
    [
        # |difference| 3.4e308 > 1.5 * 1.7e308; both overflowed to inf, and
        # inf <= inf passed
        (np.array([1.7e308]), np.array([-1.7e308]), {"rtol": 1.5}),
        (np.array([1.7e308]), np.array([-1.7e308]), {"rtol": 1.0, "atol": 1e308}),
        (
            np.array([1.7e308 + 1.7e308j]),
            np.array([-1.7e308 + 0j]),
            {"rtol": 1.5, "atol": 0},
        ),
    ],
)
def test_a_difference_and_allowance_beyond_the_dtype_are_compared_exactly(
    actual, desired, tolerance
):
    with pytest.raises(AssertionError, match="1 of 1 elements differ"):
        assert_close(actual, desired, **tolerance)
    # within the rule (3.4e308 <= 2.5 * 1.7e308): still passes
    assert_close(actual, desired, rtol=2.5, atol=0)


def test_a_large_integer_against_a_complex_with_an_imaginary_part():
    """Only real pairs were re-compared exactly: 2**62 + 1 against 2**62 +
    1e-300j passed at atol 0.5 (rounded, the difference was 1e-300)."""
    complex_ = np.array([complex(2**62, 1e-300)])
    with pytest.raises(AssertionError, match=r"\|difference\| 1$"):
        assert_close(
            np.array([2**62 + 1]), complex_, rtol=0, atol=0.5, check_dtype=False
        )
    assert_close(np.array([2**62 + 1]), complex_, rtol=0, atol=1.5, check_dtype=False)


@pytest.mark.parametrize(
    ("actual", "desired", "tolerance"),
    [
        (np.array([0.99], dtype=np.float16), np.array([True]), {}),  # float16's 0.125
        (np.array([True]), np.array([1.0 + 1e-9]), {"rtol": 0.1, "atol": 0.1}),
        (np.array([True]), np.array([2]), {"atol": 5.0}),
    ],
)
def test_a_bool_against_numbers_takes_the_tolerance(actual, desired, tolerance):
    """A bool side was compared exactly, whatever the tolerance said."""
    assert_close(actual, desired, check_dtype=False, **tolerance)


def test_a_bool_against_a_number_beyond_the_tolerance_names_both():
    with pytest.raises(AssertionError) as info:
        assert_close(
            np.array([0.5], dtype=np.float16), np.array([True]), check_dtype=False
        )
    assert str(info.value).endswith(
        "worst at index (0,): actual 0.5, desired True, |difference| 0.5"
    )
    with pytest.raises(AssertionError, match="actual True, desired False$"):
        assert_close(np.array([True]), np.array([False]))


def test_a_long_double_type_has_its_tolerance():
    """``np.longdouble`` (the type, as ``np.float64`` is taken) was 'not numeric'."""
    assert default_tolerance(np.longdouble) == default_tolerance(
        np.dtype(np.longdouble)
    )


@pytest.mark.parametrize(
    ("x", "y", "difference"),
    [
        # NumPy subtracts in the dtype: 255 wrapped to 1
        (np.array([127], dtype=np.int8), np.array([-128], dtype=np.int8), 255),
        (np.array([0], dtype=np.uint8), np.array([255], dtype=np.uint8), 255),
        # both rounded to one float64: NumPy's test passed them
        (
            np.array([2**64 - 1], dtype=np.uint64),
            np.array([2**64 - 2], dtype=np.uint64),
            1,
        ),
        (np.array([2**62 + 1]), np.array([2**62]), 1),
    ],
)
def test_assert_array_almost_equal_subtracts_integers_exactly(x, y, difference):
    with pytest.raises(
        AssertionError, match=f"Max absolute difference.*: {difference}\n"
    ):
        assert_array_almost_equal(x, y)
    assert_array_almost_equal(x, x.copy())


def test_a_0_d_integer_past_2_53_still_broadcasts():
    """A review: made 1-d, it no longer broadcast ("shapes (1,), (2,) mismatch")."""
    big = np.array(2**63, dtype=np.uint64)
    both = np.array([2**63, 2**63], dtype=np.uint64)
    assert_array_almost_equal(big, both)
    assert_array_almost_equal(both, big)
    with pytest.raises(AssertionError, match="Max absolute difference.*: 1\n"):
        assert_array_almost_equal(big, both + np.uint64(1))


def test_assert_array_almost_equal_holds_complex_nans_part_by_part():
    """NumPy's test takes any two NaNs as equal: ``nan+1j`` passed as ``1+nanj``
    and as ``nan+5j``."""
    for other in (complex(1, np.nan), complex(np.nan, 5)):
        with pytest.raises(AssertionError, match="NaN in different parts .*first at"):
            assert_array_almost_equal(
                np.array([1 + 1j, complex(np.nan, 1)]), np.array([1 + 1j, other])
            )
    assert_array_almost_equal(
        np.array([complex(np.nan, 1)]), np.array([complex(np.nan, 1 + 1e-9)])
    )
    with pytest.raises(AssertionError, match=r"shapes \(3,\), \(2, 3\) mismatch"):
        assert_array_almost_equal(np.ones(3, complex), np.ones((2, 3), complex))
    assert_array_almost_equal(
        np.array([complex(np.nan, 1)]), np.array([complex(np.nan, 1)])
    )
    assert_array_almost_equal(np.array([complex(np.nan, 0)]), np.array([np.nan]))
