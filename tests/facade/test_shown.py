"""_shown: values as error messages show them, however large."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import xpkit
from xpkit._shown import shown


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (10**29, repr(10**29)),  # (30 digits: as it is)
        (10**30, "100000000000... (an int of 31 digits)"),
        (10**30 - 1, repr(10**30 - 1)),
        (-(2**1100), "-135829852904... (an int of 332 digits)"),
        (10**5000, "100000000000... (an int of 5001 digits)"),
        (10**40000 - 1, "999999999999... (an int of 40000 digits)"),
        (Fraction(10**5000, 3), "a Fraction too long to print"),
        (True, "True"),
        (np.int64(7), "np.int64(7)"),
        (1.5, "1.5"),
    ],
    ids=lambda v: str(len(v)) if isinstance(v, str) else type(v).__name__,
)
def test_a_long_int_is_shown_by_its_first_digits_and_its_length(value, text):
    assert shown(value) == text


BIG, HUGE = 2**1100, 10**5000


@pytest.mark.parametrize(
    ("call", "error", "said"),
    [  # (each said "must be a finite positive number" or failed to print the value)
        (
            lambda: xpkit.auto_batch_size(10, 8, budget_gb=BIG),
            ValueError,
            (
                r"^budget_gb must be at most 8589934592 GB \(2\*\*63 bytes\), "
                r"got 135829852904\.\.\. \(an int of 332 digits\)$"
            ),
        ),
        (
            lambda: xpkit.memory_budget(HUGE),
            ValueError,
            r"^gb must be at most 8589934592 GB .* \(an int of 5001 digits\)$",
        ),
        (
            lambda: xpkit.memory_budget(Fraction(HUGE, 3)),
            ValueError,
            r"^gb must be at most .*, got a Fraction too long to print$",
        ),
        (
            lambda: xpkit.map_batches(abs, np.ones(3), min_batch=-HUGE),
            ValueError,
            (
                r"^min_batch must be a positive int, got -100000000000\.\.\. "
                r"\(an int of 5001 digits\)$"
            ),
        ),
        (
            lambda: xpkit.auto_batch_size(10, HUGE, budget_gb=1),
            ValueError,
            r"^bytes_per_item must be at most 1\.798e\+308 \(the largest float\), ",
        ),
        (
            lambda: xpkit.auto_batch_size(10, -HUGE, budget_gb=1),
            ValueError,
            r"^bytes_per_item must be a finite positive number, got -1000",
        ),
        (
            lambda: xpkit.auto_select_backend(-HUGE, 10),
            ValueError,
            r"^n_samples must be positive, got -1000.* \(an int of 5001 digits\)$",
        ),
        (
            lambda: xpkit.Backend("numpy").full((2,), HUGE),
            ValueError,
            r"^fill_value=1000.* \(an int of 5001 digits\) does not fit",
        ),
        (
            lambda: xpkit.Backend("numpy").top_k(np.ones(3), HUGE),
            ValueError,
            r"^k=1000.* \(an int of 5001 digits\) is out of range",
        ),
    ],
    ids=[
        "auto_batch_size budget_gb",
        "memory_budget int",
        "memory_budget Fraction",
        "map_batches min_batch",
        "auto_batch_size bytes_per_item",
        "auto_batch_size negative bytes_per_item",
        "auto_select_backend n_samples",
        "Backend.full fill_value",
        "Backend.top_k k",
    ],
)
def test_a_huge_int_argument_is_refused_for_what_it_is(call, error, said):
    with pytest.raises(error, match=said):
        call()


def test_a_min_batch_of_thousands_of_digits_runs_the_rows(caplog):
    """A min_batch beyond the rows runs them all: past float's range it
    raised OverflowError, and its warning failed to print."""
    a = np.arange(12.0).reshape(6, 2)
    got = xpkit.map_batches(lambda r: r * 2, a, min_batch=HUGE, budget_gb=1e-12)
    np.testing.assert_array_equal(got, a * 2)
    assert "(an int of 5001 digits" in caplog.text
    plan = xpkit.plan_batches(lambda r: r * 2, a, min_batch=10**400)
    assert plan.batch_size == 6


def test_an_axis_or_a_value_past_every_dtype_is_told_not_printed(xpkit_backend):
    """``expand_dims(x, -10**5000)`` met NumPy's OverflowError, and
    ``asarray(10**5000)`` Python's refusal to print the int in its message."""
    b = xpkit_backend
    x = b.asarray(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"^axis=-100000000000\.\.\. \(an int of 5001"):
        b.expand_dims(x, -(10**5000))
    with pytest.raises(ValueError, match=r"^axis=1180591620717411303424 is out of"):
        b.sort(x, axis=2**70)
    with pytest.raises(TypeError, match=r"^axis must be an int, got 'a'"):
        b.expand_dims(x, "a")
    with pytest.raises(
        TypeError, match=r"^x has non-numeric dtype object \(value 1000"
    ):
        b.asarray(10**5000)
