"""`assert_close` / `assert_equal` over special values, against NumPy's asserts.

NumPy's ``assert_allclose`` (``equal_nan=True``) and ``assert_array_equal``
are the reference for which pairs must fail: infinities, NaNs, signed zeros,
subnormals, huge finite values and complex numbers with infinite parts;
but complex NaNs match part by part (`_nan_parts_differ`).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xpkit.testing import assert_close, assert_equal

SPECIAL = [
    np.inf,
    -np.inf,
    np.nan,
    0.0,
    -0.0,
    5e-324,  # the smallest subnormal
    -2.5e-310,
    1.0,
    1.0 + 1e-9,
    -1.0,
    1.7e308,
    -1.7e308,
    3.0,
]
values = st.sampled_from(SPECIAL)
rtols = st.sampled_from([0.0, 1e-12, 1e-7, 0.5])


def _fails(check, *args, **kwargs) -> bool:
    try:
        check(*args, **kwargs)
    except AssertionError:
        return True
    return False


def _numpy_fails(check, *args, **kwargs) -> bool:
    with np.errstate(all="ignore"):  # NumPy's own asserts warn on overflow
        return _fails(check, *args, **kwargs)


@st.composite
def pairs(draw, complex_: bool):
    n = draw(st.integers(1, 4))
    a = draw(st.lists(values, min_size=n, max_size=n))
    d = draw(st.lists(values, min_size=n, max_size=n))
    if complex_:
        ai = draw(st.lists(values, min_size=n, max_size=n))
        di = draw(st.lists(values, min_size=n, max_size=n))
        return (
            np.array([complex(r, i) for r, i in zip(a, ai, strict=True)]),
            np.array([complex(r, i) for r, i in zip(d, di, strict=True)]),
        )
    return np.array(a), np.array(d)


def _nan_parts_differ(a, d, rtol: float) -> bool:
    """Whether a pair NumPy calls two NaNs differs part by part (xpkit's rule).

    NumPy matches any complex NaN with any other (``1+nanj`` with
    ``1000+nanj``); xpkit asks the same parts to be NaN and the others to
    be close, as torch.testing does.
    """
    if a.dtype.kind != "c":
        return False
    for x, y in zip(a, d, strict=True):
        if not (np.isnan(x) and np.isnan(y)):
            continue
        for part in ("real", "imag"):
            p, q = getattr(x, part), getattr(y, part)
            if np.isnan(p) != np.isnan(q):
                return True
            if not np.isnan(p) and _numpy_fails(
                np.testing.assert_allclose, p, q, rtol=rtol, atol=0
            ):
                return True
    return False


def _past_the_range_differs(a, d, rtol: float) -> bool:
    """Whether a finite pair whose difference and allowance both overflow to
    inf differs (NumPy passes it: ``inf <= inf``; xpkit compares exactly).

    Judged here on the halves of the values, which do not overflow.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        over = (
            np.isfinite(a)
            & np.isfinite(d)
            & np.isinf(np.abs(a - d))
            & np.isinf(rtol * np.abs(d))
        )
        return bool(np.any(over & (np.abs(a / 2 - d / 2) > rtol * np.abs(d / 2))))


@pytest.mark.parametrize("complex_", [False, True], ids=["float64", "complex128"])
@given(data=st.data(), rtol=rtols)
def test_assert_close_fails_exactly_where_numpy_does(complex_, data, rtol):
    """... or where NumPy passes what differs: a complex NaN's parts, and a
    pair past float64's range (xpkit's rules)."""
    a, d = data.draw(pairs(complex_))
    want = (
        _numpy_fails(
            np.testing.assert_allclose, a, d, rtol=rtol, atol=0, equal_nan=True
        )
        or _nan_parts_differ(a, d, rtol)
        or _past_the_range_differs(a, d, rtol)
    )
    assert _fails(assert_close, a, d, rtol=rtol, atol=0.0) == want, (a, d, rtol)


@pytest.mark.parametrize("complex_", [False, True], ids=["float64", "complex128"])
@given(data=st.data())
def test_assert_equal_fails_exactly_where_numpy_does(complex_, data):
    a, d = data.draw(pairs(complex_))
    want = _numpy_fails(np.testing.assert_array_equal, a, d) or _nan_parts_differ(
        a, d, 0.0
    )
    assert _fails(assert_equal, a, d) == want, (a, d)


@pytest.mark.parametrize(
    ("actual", "desired"),
    [
        ([1.0], [np.inf]),
        ([-np.inf], [np.inf]),
        ([5.0], [np.inf]),
        ([np.inf], [1.0]),
        ([np.nan], [1.0]),
        ([complex(1, np.inf)], [complex(1, -np.inf)]),
        ([1e308], [-1e308]),
    ],
)
@pytest.mark.parametrize("check", [assert_close, assert_equal])
def test_infinities_never_pass_against_other_values(check, actual, desired):
    with pytest.raises(AssertionError, match="elements differ"):
        check(np.array(actual), np.array(desired))
