"""xpkit.testing.strategies: Hypothesis strategies that draw arrays for a `Backend`."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from helpers import run_python
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

import xpkit
from xpkit._adapters import get_adapter
from xpkit._dtypes import _warned
from xpkit.testing import strategies


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
import re
import warnings

import jax
from hypothesis import find, given, settings
from hypothesis.errors import NoSuchExample

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


def _on_32_bit_jax(script: str) -> str:
    """What ``script`` prints, run in a child with JAX's x64 off (it must succeed)."""
    pytest.importorskip("jax")
    proc = run_python(script, extra_env={"JAX_ENABLE_X64": "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_strategies_narrow_float64_on_jax_without_x64():
    """``arrays(b, dtype="float64")`` raised on 32-bit JAX, where asarray narrows (#21)."""
    out = _on_32_bit_jax(STRATEGY_ON_32_BIT_JAX)
    assert "float32 drawn" in out
    assert "jax-cpu has no float64; using float32 instead" in out


@settings(max_examples=20)
@given(data=st.data())
def test_float64_bounds_are_kept_where_float64_is_narrowed(data):
    """float64 bounds went to Hypothesis as float32 ones: InvalidArgument for 0.1."""
    pytest.importorskip("array_api_strict")
    nof64 = xpkit.Backend("array_api_strict", device="no_float64")
    bounds = {"min_value": 0.1, "max_value": 0.9}
    with warnings.catch_warnings():  # (the narrowing is warned once per process)
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        drawn = strategies.arrays(nof64, dtype="float64", shape=4, elements=bounds)
    x = data.draw(drawn)
    assert nof64.dtype_to_str(x.dtype) == "float32"
    values = nof64.to_numpy(x)  # float64 values cast to float32, as asarray casts
    assert np.all(values >= np.float32(0.1))
    assert np.all(values <= np.float32(0.9))


@settings(max_examples=10)
@given(data=st.data())
def test_a_dtype_the_backend_holds_beyond_the_standard_is_drawn(data):
    """arrays() refused float16 on NumPy and uint64 on torch, which asarray makes."""
    numpy = xpkit.Backend("numpy")
    x = data.draw(strategies.arrays(numpy, dtype="float16", shape=3))
    assert x.dtype == np.float16
    pytest.importorskip("torch")
    torch = xpkit.Backend("torch")
    held = get_adapter("torch").held_dtypes(torch.device)
    for name in sorted({"uint64", "uint16", "bfloat16"} & held):
        x = data.draw(strategies.arrays(torch, dtype=name, shape=2))
        assert torch.dtype_to_str(x.dtype) == name


@settings(max_examples=50)
@given(data=st.data())
def test_bfloat16_draws_keep_their_bounds(data):
    """Drawn as float32 within the bounds, then rounded: 0.2001953125 > 0.2."""
    pytest.importorskip("torch")
    torch = xpkit.Backend("torch")
    bounds = {"min_value": 0.1, "max_value": 0.2}
    x = data.draw(strategies.arrays(torch, dtype="bfloat16", shape=4, elements=bounds))
    values = torch.to_numpy(x)
    assert np.all(values >= 0.1)
    assert np.all(values <= 0.2)
    unbounded = data.draw(strategies.arrays(torch, dtype="bfloat16", shape=4))
    assert torch.dtype_to_str(unbounded.dtype) == "bfloat16"


@pytest.mark.parametrize(
    ("bounds", "outside"),
    [
        ({"min_value": 1.0, "max_value": 2.0, "exclude_min": True}, "<= 1"),
        ({"min_value": 1.0, "max_value": 2.0, "exclude_max": True}, ">= 2"),
        ({"min_value": -2.0, "max_value": -1.0, "exclude_max": True}, ">= -1"),
    ],
)
def test_bfloat16_draws_keep_exclusive_bounds(bounds, outside):
    """A float32 drawn just past 1.0 rounded back to bfloat16's 1.0: found at once."""
    pytest.importorskip("torch")
    torch = xpkit.Backend("torch")
    drawn = strategies.arrays(torch, dtype="bfloat16", shape=2, elements=bounds)
    limit = float(outside.split()[1])

    def breaks(x):
        values = torch.to_numpy(x)
        return bool(
            (values <= limit).any() if "<" in outside else (values >= limit).any()
        )

    with pytest.raises(NoSuchExample):
        find(drawn, breaks, settings=settings(max_examples=300, database=None))


INT_BOUNDS_ON_32_BIT_JAX = """
import re
import warnings

import jax
from hypothesis import given, settings

import xpkit
from xpkit.testing import strategies

assert not jax.config.jax_enable_x64
b = xpkit.Backend("jax")
warnings.simplefilter("ignore", xpkit.PrecisionWarning)
for bounds in ({"max_value": -2**31}, {"min_value": 2**31 - 1}):
    drawn = strategies.arrays(b, dtype="int64", shape=2, elements=bounds)

    @settings(max_examples=3, database=None)
    @given(drawn)
    def check(x):
        assert str(x.dtype) == "int32", x.dtype
        assert ((x == bounds.get("max_value", 0)) | (x == bounds.get("min_value", 0))).all()

    check()
for bounds in ({"max_value": 2**31}, {"min_value": -2**31 - 1}):
    drawn = strategies.arrays(b, dtype="int64", shape=2, elements=bounds)

    @settings(max_examples=1, database=None)
    @given(drawn)
    def draw(x):
        pass

    try:
        draw()
    except ValueError as exc:
        print("refused:", exc)
print("drawn at int32's ends")
"""


def test_int64_bounds_narrowed_to_int32_take_int32_s_ends():
    """-2**31 as max_value was refused as 'beyond what int32 holds (2147483647)'."""
    out = _on_32_bit_jax(INT_BOUNDS_ON_32_BIT_JAX)
    assert "drawn at int32's ends" in out
    assert (
        "refused: elements={'max_value': 2147483648} is beyond what int32 holds "
        "(-2147483648 to 2147483647)"
    ) in out
    assert "refused: elements={'min_value': -2147483649} is beyond" in out


@pytest.mark.parametrize(
    ("call", "error", "said"),
    [
        # (an unhashable list: "unhashable type: 'list'")
        (lambda b: strategies.dtype_names(b, ["bool"]), TypeError, "kind must be"),
        (lambda b: strategies.dtype_names(b, 5), TypeError, "got 5"),
        # (NumPy's "negative dimensions are not allowed", only when drawn)
        (lambda b: strategies.arrays(b, shape=-1), ValueError, "no negative side"),
        (lambda b: strategies.arrays(b, shape=2.5), TypeError, "got 2.5"),
        (lambda b: strategies.arrays(b, shape=(2, True)), TypeError, "got (2, True)"),
    ],
)
def test_strategies_name_a_bad_kind_or_shape(call, error, said):
    with pytest.raises(error, match=re.escape(said)):
        call(xpkit.Backend("numpy"))


@settings(max_examples=20)
@given(data=st.data())
def test_an_infinite_bound_is_kept_where_float64_is_narrowed(data):
    """float32 holds -inf: it was refused as 'beyond what float32 holds'."""
    pytest.importorskip("array_api_strict")
    nof64 = xpkit.Backend("array_api_strict", device="no_float64")
    bounds = {"min_value": -np.inf, "max_value": 0.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        x = data.draw(
            strategies.arrays(nof64, dtype="float64", shape=4, elements=bounds)
        )
    assert np.all(nof64.to_numpy(x) <= 0)


def test_a_narrowed_bound_that_is_not_a_number_is_named():
    """It was NumPy's "'<=' not supported between 'float' and 'str'"."""
    pytest.importorskip("array_api_strict")
    nof64 = xpkit.Backend("array_api_strict", device="no_float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        drawn = strategies.arrays(nof64, dtype="float64", elements={"min_value": "a"})
        with pytest.raises(TypeError, match=r"elements=\{'min_value': 'a'\}: a bound"):
            find(drawn, lambda _: True)


def test_a_bfloat16_bound_beyond_its_range_says_bfloat16s_range():
    """It said 'beyond what float32 holds (... 3.39e38)', bfloat16's range."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    top = float(torch.finfo(torch.bfloat16).max)
    drawn = strategies.arrays(b, dtype="bfloat16", elements={"max_value": 3.4e38})
    with pytest.raises(ValueError, match="beyond what bfloat16 holds") as info:
        find(drawn, lambda _: True)
    assert str(info.value) == (
        f"elements={{'max_value': 3.4e+38}} is beyond what bfloat16 holds "
        f"({-top!r} to {top!r}) on this device"
    )


def test_a_shape_as_a_list_or_of_numpy_integers_is_taken():
    """A review caught the first check refusing ``shape=[2, 3]``, which
    Hypothesis takes, and passing NumPy integers on to fail in its words."""
    b = xpkit.Backend("numpy")
    for shape, want in (([2, 3], (2, 3)), ((np.int64(2),), (2,)), (np.int64(4), (4,))):
        assert find(strategies.arrays(b, shape=shape), lambda _: True).shape == want


def test_a_fraction_is_a_bound_where_float64_is_narrowed():
    """The first check refused a Fraction as 'not a real number'."""
    pytest.importorskip("array_api_strict")
    from fractions import Fraction

    nof64 = xpkit.Backend("array_api_strict", device="no_float64")
    bounds = {"min_value": Fraction(1, 3), "max_value": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        drawn = strategies.arrays(nof64, dtype="float64", shape=3, elements=bounds)
        x = find(drawn, lambda a: bool(nof64.to_numpy(a).min() < 0.9))
    values = nof64.to_numpy(x)
    assert values.min() >= np.float32(1 / 3)
