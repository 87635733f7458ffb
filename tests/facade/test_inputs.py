"""The facade's inputs (issue 11): dtypes, layouts, lossy casts, mixing, shapes.

One policy on every backend:

- a dtype the library holds on the device passes through (float16, bfloat16,
  torch's uint16/32/64); only one it cannot hold is a TypeError naming it;
- any NumPy layout converts (reversed views, big-endian, strided fields);
- a cast that would change a value is a ValueError naming the input and the
  value; a masked array (whose mask would be lost) a TypeError;
- operations take arrays of the backend's library: another library's array,
  or a list, is a TypeError naming the argument; shapes that do not fit a
  ValueError naming the arguments and giving the shapes;
- ``"cpu:0"`` (and ``torch.device("cpu", 0)``) is the CPU.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

import xpkit
from xpkit._adapters import ADAPTERS

NAN, INF = math.nan, math.inf

#: Dtypes beyond the standard's that each library holds (on its CPU, or on
#: every device). `Backend` must accept arrays of these as they are.
HELD_EXTRAS = {
    "numpy": {"float16"},
    "torch": {"float16", "bfloat16", "uint16", "uint32", "uint64"},
    "jax": {"float16", "bfloat16"},
    "dask": {"float16"},
    "cupy": {"float16"},
    "array_api_strict": set(),
    "ndonnx": {"float16"},
}
EXTRAS = ("float16", "bfloat16", "uint16", "uint32", "uint64")


def _name(b: xpkit.Backend, x: Any) -> str | None:
    return b.dtype_to_str(x.dtype)


def _values(b: xpkit.Backend, x: Any) -> list[Any]:
    host = b.to_numpy(x)
    return np.asarray(host, dtype=np.float64).tolist()


def _expected_extras(b: xpkit.Backend) -> set[str]:
    expected = set(HELD_EXTRAS[b.library])
    if b.library == "torch":
        import torch

        expected = {n for n in expected if hasattr(torch, n)}  # uints: torch >= 2.3
        if b.device.startswith("mps"):
            expected &= {"float16"}
    return expected


def _foreign(b: xpkit.Backend, shape: tuple[int, ...]) -> Any:
    """An array of a library other than ``b``'s."""
    if b.library != "numpy":
        return np.ones(shape)
    if ADAPTERS["torch"].is_installed():
        import torch

        return torch.ones(shape, dtype=torch.float64)
    strict = pytest.importorskip("array_api_strict")
    return strict.ones(shape)


# -- 1. dtypes the library holds pass through --------------------------------------
def test_the_library_s_own_dtypes_pass_through_every_function(xpkit_backend):
    b = xpkit_backend
    expected = _expected_extras(b)
    assert expected <= set(b._held), sorted(b._held)
    for name in sorted(expected):
        a = b.asarray(np.arange(3), dtype=name)
        assert _name(b, a) == name
        assert b.asarray(a) is a  # the fast path keeps it as it is
        assert _name(b, b.to_device(a)) == name
        checked = b.check_arrays(a, np.arange(3), [np.ones(3)])
        assert [_name(b, c) for c in (checked[0], checked[1], checked[2][0])] == [
            name
        ] * 3
        assert _name(b, b.copy(a)) == name
        assert _values(b, b.copy(a)) == [0.0, 1.0, 2.0]
        assert _name(b, b.asarray_like([1, 2], a)) == name
        for like in (
            b.zeros_like(a),
            b.ones_like(a),
            b.full_like(a, 1),
            b.zeros_like(a, shape=(2,)),
            b.ones_like(a, shape=2),
            b.full_like(a, 2, shape=(2,)),
            b.zeros_like(np.arange(3), dtype=name),
        ):
            assert _name(b, like) == name
        full = b.full((2,), 1, dtype=name)
        assert _name(b, full) == name
        assert _values(b, full) == [1.0, 1.0]


def test_a_dtype_the_device_cannot_hold_is_a_type_error_naming_it(xpkit_backend):
    b = xpkit_backend
    missing = [n for n in EXTRAS if n not in b._held]
    own = b.asarray([1.0, 2.0])
    for name in missing:
        pattern = rf"dtype '{name}' is not supported by {b.name} .*dtype='{name}'"
        with pytest.raises(TypeError, match=pattern):
            b.asarray([1.0], dtype=name)
        with pytest.raises(TypeError, match=pattern):
            b.full((2,), 1, dtype=name)
        with pytest.raises(TypeError, match=pattern):
            b.zeros_like(own, dtype=name)
    assert "bfloat16" in missing or b.library in {"torch", "jax"}


def test_numpy_float16_and_torch_bfloat16_and_uint_are_accepted():
    f16 = np.ones(3, np.float16)
    assert xpkit.Backend("numpy").asarray(f16) is f16
    assert xpkit.Backend("numpy").check_arrays(f16)[0].dtype == np.float16
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    bf16 = torch.ones(3, dtype=torch.bfloat16)
    assert b.check_arrays(bf16)[0].dtype == torch.bfloat16
    assert b.zeros_like(bf16).dtype == torch.bfloat16
    assert b.asarray(f16).dtype == torch.float16
    for name in ("uint16", "uint32", "uint64"):
        if not hasattr(torch, name):  # pragma: no cover - torch < 2.3
            continue
        t = torch.ones(3, dtype=getattr(torch, name))
        assert b.asarray(t) is t
        assert b.copy(t).dtype == t.dtype
        assert b.check_arrays(t)[0].dtype == t.dtype
        assert b.asarray(np.ones(3, dtype=name)).dtype == t.dtype
        with pytest.raises(ValueError, match="x holds 300, .* dtype uint8"):
            b.asarray(torch.tensor([1, 300], dtype=t.dtype), dtype="uint8")


def test_strict_refuses_float16_input_by_name():
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict")
    f16 = np.ones(2, dtype=np.float16)
    with pytest.raises(TypeError, match=r"'float16' .* \(x has dtype float16\)"):
        b.asarray(f16)
    with pytest.raises(TypeError, match=r"inputs\[0\] has dtype float16"):
        b.check_arrays(f16)
    with pytest.raises(TypeError, match=r"array has dtype float16"):
        b.copy(f16)
    assert _name(b, b.asarray(f16, dtype="float32")) == "float32"  # converting is fine


# -- 2. NumPy layouts ---------------------------------------------------------------
def _layouts() -> dict[str, np.ndarray]:
    x = np.arange(12.0).reshape(3, 4)
    fields = np.zeros(4, dtype=[("a", "<f8"), ("b", "i1")])
    fields["a"] = [1.0, 2.0, 3.0, 4.0]
    return {
        "reversed": x[::-1],
        "reversed columns": x[:, ::-1],
        "big-endian": x.astype(">f8"),
        "big-endian reversed": x.astype(">f8")[::-1, ::-2],
        "big-endian int": np.arange(5, dtype=">i4"),
        "transposed": x.T,
        "structured field": fields["a"],
    }


@pytest.mark.parametrize("layout", sorted(_layouts()))
def test_every_numpy_layout_converts(xpkit_backend, layout):
    b = xpkit_backend
    host = _layouts()[layout]
    expected = np.array(host, dtype=host.dtype.newbyteorder("=")).tolist()
    ref = b.asarray(np.ones(1))
    for got in (
        b.asarray(host),
        b.asarray(host, dtype="float64"),
        b.check_arrays(ref, host)[1],
        b.check_arrays(host)[0],
        b.asarray_like(host, ref),
        b.copy(host),
        b.to_device(host),
    ):
        assert b.to_numpy(got).tolist() == expected


# -- 3. casts that would change values, masks, copies --------------------------------
LOSSY = {
    "300 to uint8": ([300], "uint8", "300"),
    "-1 to uint8": ([-1], "uint8", "-1"),
    "128 to int8": ([1, 128], "int8", "128"),
    "nan to int64": ([NAN], "int64", "nan"),
    "inf to int64": ([INF], "int64", "inf"),
    "-inf to int32": ([1.0, -INF], "int32", "-inf"),
    "0.5 to int64": ([0.5], "int64", r"0\.5"),
    "2.5 to int32": ([1.0, 2.5], "int32", r"2\.5"),
    "2 to bool": ([0, 2], "bool", "2"),
    "0.5 to bool": ([0.5], "bool", r"0\.5"),
    "1e300 to float32": ([1e300], "float32", r"1e\+300"),
    "1+1j to float64": ([1 + 1j], "float64", r"\(1\+1j\)"),
}


@pytest.mark.parametrize(("data", "dtype", "value"), LOSSY.values(), ids=LOSSY.keys())
def test_a_cast_that_changes_a_value_is_a_value_error(
    xpkit_backend, data, dtype, value
):
    b = xpkit_backend
    with pytest.raises(ValueError, match=rf"^x holds {value}, which does not fit"):
        b.asarray(data, dtype=dtype)
    with pytest.raises(ValueError, match=rf"^x holds {value}, which does not fit"):
        b.asarray(np.array(data), dtype=dtype)


EXACT = {
    "whole floats to int8": ([1.0, -3.0, 127.0], "int8"),
    "0 and 1 to bool": ([0, 1], "bool"),
    "255 to uint8": ([0, 255], "uint8"),
    "non-finite floats to float32": ([NAN, INF, -INF], "float32"),
    "real complex to float64": ([1 + 0j, -2 + 0j], "float64"),
    "float64 to float32 rounds": ([0.1], "float32"),
}


@pytest.mark.xpkit_requires("float64")  # casts to float64
@pytest.mark.parametrize(("data", "dtype"), EXACT.values(), ids=EXACT.keys())
def test_a_cast_that_keeps_every_value_passes(xpkit_backend, data, dtype):
    b = xpkit_backend
    got = b.asarray(data, dtype=dtype)  # no warning either (filterwarnings=error)
    assert _name(b, got) == dtype
    expected = np.array(data).real.astype(dtype).astype(np.float64)
    np.testing.assert_array_equal(_values(b, got), expected)


#: float64 values at and beside where a cast through float32 first (torch's,
#: and JAX's of its own arrays) overflows or underflows in float16 and
#: bfloat16, and where float32's subnormals begin (XLA's CPU flushes them).
NEAR_THE_EDGES = {
    "float16": [
        65520.0 - 2.0**-9,
        math.nextafter(65520.0 - 2.0**-9, 0.0),
        2.0**-25 + 2.0**-49,
        math.nextafter(2.0**-25 + 2.0**-49, 1.0),
    ],
    "bfloat16": [
        2.0**128 - 2.0**119 - 2.0**103,
        math.nextafter(2.0**128 - 2.0**119 - 2.0**103, 0.0),
        2.0**-134 + 2.0**-150,
        math.nextafter(2.0**-134 + 2.0**-150, 1.0),
        2.0**-130,
    ],
    "float32": [2.0**-130, 2.0**-126, math.nextafter(2.0**-126 - 2.0**-150, 0.0)],
}


def test_jax_narrows_its_float64_as_this_processor_does():
    """XLA's CPU converts float64 to float16 through float32 (rounding twice)
    on most processors, and once on one with AVX512-FP16: there the check,
    held to twice, refused 65520 - 2**-9, which JAX casts to 65504. The
    oracle is JAX's own cast; each rule's limits are NumPy's casts."""
    jax = pytest.importorskip("jax")
    from xpkit._adapters._registry import get_adapter
    from xpkit._cast_checks import limits

    assert jax.config.jax_enable_x64  # (the suite's conftest switches it on)
    near = 65520.0 - 2.0**-9
    own = jax.numpy.asarray(np.array([near])).astype(jax.numpy.float16)
    narrowing = get_adapter("jax").float64_narrowing(on_host=False)
    over, _ = limits("float64", "float16", narrowing)
    assert over is not None
    assert (near >= over) == bool(np.isinf(np.asarray(own))[0]), narrowing
    assert float(np.float16(near)) == 65504.0  # (once: NumPy's)
    assert limits("float64", "float16", "flushed, float16 once") == limits(
        "float64", "float16"
    )
    assert limits("float64", "float32", "flushed, float16 once") == limits(
        "float64", "float32", "via float32, flushed"
    )


@pytest.mark.parametrize("target", list(NEAR_THE_EDGES))
def test_a_cast_is_refused_where_the_library_s_own_makes_inf_or_0(
    xpkit_backend, target
):
    """torch rounds float64 to float32 first: 65520 - 2**-20 became inf in
    float16 (the check, held to one rounding, passed it); JAX's CPU flushes
    float32's subnormals of its own float64 arrays: 2**-130 became 0.

    The oracle is the library's own cast of the same value (its asarray of
    a NumPy array, its full, its astype of its own array): where it gives
    inf or 0, the facade refuses; elsewhere the facade gives what it gives.
    """
    b = xpkit_backend
    try:
        xp_dtype = b.asarray([1.0], dtype=target).dtype
    except TypeError:
        pytest.skip(f"{b.name} holds no {target}")
    xp, device = b.xp, b.native_device
    paths = {
        "asarray": (
            lambda v: b.asarray([v], dtype=target),
            lambda v: xp.asarray(np.array([v]), dtype=xp_dtype, device=device),
        ),
        "full": (
            lambda v: b.full((1,), v, dtype=target),
            lambda v: xp.full((1,), v, dtype=xp_dtype, device=device),
        ),
    }
    if "float64" in b.dtypes and ADAPTERS[b.library].values_at_hand(b.asarray([1.0])):
        paths["own"] = (
            lambda v: b.asarray(b.asarray([v], dtype="float64"), dtype=target),
            lambda v: xp.astype(b.asarray([v], dtype="float64"), xp_dtype),
        )
    checked = 0
    for v in NEAR_THE_EDGES[target]:
        for name, (facade, library) in paths.items():
            with warnings.catch_warnings():  # (the library's own cast may warn)
                warnings.simplefilter("ignore")
                own = float(_values(b, library(v))[0])
            if own == 0.0 or math.isinf(own):
                with pytest.raises(ValueError, match=r"would (overflow|underflow)"):
                    facade(v)
                checked += 1
            else:
                assert float(_values(b, facade(v))[0]) == own, (name, v)
    if b.library == "torch" and target != "float32":  # (rounding twice: refused)
        assert checked == 2 * len(paths)


def test_python_ints_past_int64_reach_uint64_exactly(xpkit_backend):
    """NumPy makes [2**63 + 1, 0] float64: it reached uint64 as 2**63, through
    asarray, asarray_like and check_arrays alike."""
    b = xpkit_backend
    try:
        ref = b.asarray(np.zeros(1, dtype=np.uint64))
    except (TypeError, ValueError):
        pytest.skip(f"{b.name} holds no uint64")
    if b.dtype_to_str(ref.dtype) != "uint64":
        pytest.skip(f"{b.name} narrows uint64")
    data = [[2**63 + 1, 0], [2**64 - 1, 7]]
    expected = np.array(data, dtype=np.uint64)  # (NumPy's, given the dtype)
    for made in (
        b.asarray(data, dtype="uint64"),
        b.asarray_like(data, ref),
        b.check_arrays(ref, data)[1],
    ):
        assert b.to_numpy(made).tolist() == expected.tolist()
    with pytest.raises(ValueError, match=r"^x holds 9223372036854775809, which"):
        b.asarray([2**63 + 1, 0], dtype="int64")  # (named as given, not rounded)


def test_own_arrays_are_checked_where_they_live(xpkit_backend):
    b = xpkit_backend
    x = b.asarray([0.5, 1.0])
    if not ADAPTERS[b.library].values_at_hand(x):
        # Lazy (Dask): reading values would compute the graph; cast unchecked.
        assert _name(b, b.asarray(x, dtype="int64")) == "int64"
        return
    with pytest.raises(ValueError, match=r"^x holds 0\.5"):
        b.asarray(x, dtype="int64")
    ints = b.asarray([1, 2, 3])
    with pytest.raises(ValueError, match=r"^inputs\[1\] holds 0\.5"):
        b.check_arrays(ints, b.asarray([0.5, 1.7, 2.2]))
    with pytest.raises(ValueError, match=r"^x holds 0\.5"):
        b.asarray_like(x, ints)
    assert _values(b, b.asarray(b.asarray([1.0, 2.0]), dtype="int64")) == [1.0, 2.0]


def test_check_arrays_refuses_a_float_y_an_integer_x_would_truncate(xpkit_backend):
    b = xpkit_backend
    X = b.asarray(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"^inputs\[1\] holds 0\.5"):
        b.check_arrays(X, np.array([0.5, 1.7, 2.2]))
    with pytest.raises(ValueError, match=r"^inputs\[2\]\[1\] holds 1\.5"):
        b.check_arrays(X, None, [np.array([1.0]), np.array([1.5])])
    with pytest.raises(ValueError, match=r"^inputs\[1\] holds 1\.5"):
        b.check_arrays(X, 1.5)
    with pytest.raises(ValueError, match=r"^x holds 0\.5"):
        b.asarray_like([0.5], X)
    out = b.check_arrays(X, np.array([0.0, 4.0, -2.0]))
    assert _values(b, out[1]) == [0.0, 4.0, -2.0]


def test_check_arrays_converts_another_library_s_array_unchanged_or_refuses(
    xpkit_backend,
):
    """Dask checked a converted torch tensor as one of its own lazy arrays,
    so not at all: 2**40 became 0 in int32, 0.5 became 0."""
    torch = pytest.importorskip("torch")
    b = xpkit_backend
    if b.library == "torch":
        pytest.skip("torch's tensors are this backend's own")
    first = b.asarray(np.array([1], dtype=np.int32))
    for bad, shown in (
        (torch.tensor([2**40, 7]), "1099511627776"),
        (torch.tensor([0.5]), r"0\.5"),
    ):
        with pytest.raises(ValueError, match=rf"^inputs\[1\] holds {shown}"):
            b.check_arrays(first, bad, convert=True)
    out = b.check_arrays(first, torch.tensor([3, 7]), convert=True)
    assert _values(b, out[1]) == [3, 7]


@pytest.mark.xpkit_requires("float64")  # fills float64
@pytest.mark.parametrize(
    ("fill", "dtype", "shown"),
    [
        (0.5, "int32", r"0\.5"),
        (2, "bool", "2"),
        (1e39, "float32", r"1e\+39"),
        (1 + 2j, "float64", r"\(1\+2j\)"),
    ],
)
def test_full_refuses_a_fill_value_the_dtype_would_change(
    xpkit_backend, fill, dtype, shown
):
    b = xpkit_backend
    with pytest.raises(
        ValueError, match=rf"^fill_value={shown} does not fit dtype {dtype}"
    ):
        b.full((2,), fill, dtype=dtype)
    ref = b.asarray([0, 1], dtype=dtype)
    with pytest.raises(
        ValueError, match=rf"^fill_value={shown} does not fit dtype {dtype}"
    ):
        b.full_like(ref, fill)


@pytest.mark.parametrize(
    ("fill", "dtype", "expected"),
    [(1 + 0j, "float32", 1.0), (np.complex64(3), "int32", 3), (1 + 0j, "bool", True)],
)
def test_a_complex_fill_with_no_imaginary_part_fills_a_real_dtype(
    xpkit_backend, fill, dtype, expected
):
    """NumPy, torch, array-api-strict and Dask took it; JAX and ndonnx raised
    their own errors (the value fits: its imaginary part is 0)."""
    b = xpkit_backend
    filled = b.full((2,), fill, dtype=dtype)
    like = b.full_like(b.asarray(np.zeros(2, dtype=dtype)), fill)
    for out in (filled, like):
        assert np.asarray(b.to_numpy(out)).tolist() == [expected, expected]


def test_full_names_fill_value_past_every_integer_dtype(xpkit_backend):
    b = xpkit_backend
    with pytest.raises(
        ValueError, match=r"^fill_value=18446744073709551616 does not fit any integer"
    ):
        b.full((2,), 2**64)
    with pytest.raises(ValueError, match=r"^fill_value=-9223372036854775809 does not"):
        b.full((2,), -(2**63) - 1)


def test_masked_arrays_are_refused_by_name(xpkit_backend):
    b = xpkit_backend
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    ref = b.asarray([1.0])
    calls = {
        "x": [lambda: b.asarray(masked), lambda: b.asarray_like(masked, ref)],
        r"inputs\[1\]": [lambda: b.check_arrays(ref, masked)],
        r"inputs\[0\]": [lambda: b.check_arrays(masked)],
        "array": [
            lambda: b.copy(masked),
            lambda: b.to_gpu(masked),
            # (the reference of a *_like: NumPy's own dropped its mask)
            lambda: b.zeros_like(masked),
            lambda: b.ones_like(masked, shape=(3,)),
            lambda: b.full_like(masked, 7.0, dtype="float32"),
        ],
        "ref": [lambda: b.asarray_like([1.0], masked)],
        "arr": [lambda: b.to_device(masked), lambda: b.to_numpy(masked)],
    }
    for param, fns in calls.items():
        for fn in fns:
            with pytest.raises(TypeError, match=rf"^{param} is a NumPy masked array"):
                fn()


def test_operations_refuse_a_masked_array_by_name():
    """An operation ignored the mask (top_k chose a masked entry) or dropped
    it (``at(...).set`` unmasked the source in place): each refuses it."""
    b = xpkit.Backend("numpy")
    masked = np.ma.masked_array([[1.0, 5.0, 3.0]], mask=[[False, True, False]])
    plain = np.ones((3, 1))
    calls = {
        "x": [lambda: b.top_k(masked, 1), lambda: b.at(masked, 0).set(2.0)],
        "array": [
            lambda: b.sort(masked),
            lambda: b.expand_dims(masked, 0),
            lambda: b.flatnonzero(masked),
        ],
        r"arrays\[1\]": [lambda: b.concatenate([plain.T, masked])],
        "A": [lambda: b.matmul(masked, plain)],
        "B": [lambda: b.matmul(plain.T, masked.T)],
    }
    for param, fns in calls.items():
        for fn in fns:
            with pytest.raises(TypeError, match=rf"^{param} is a NumPy masked array"):
                fn()
    assert masked.mask.tolist() == [[False, True, False]]  # (the source as it was)
    assert masked.data.tolist() == [[1.0, 5.0, 3.0]]


def test_a_list_of_masked_arrays_is_refused_by_name(xpkit_backend):
    """``asarray([masked])`` made a plain array of the masked values."""
    b = xpkit_backend
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    with pytest.raises(TypeError, match=r"^x\[1\] is a NumPy masked array"):
        b.asarray([np.zeros(2), masked])


@pytest.mark.parametrize(
    ("data", "place"),
    [
        (lambda m: [[1.0, 2.0], m], r"x\[1\]"),
        (lambda m: [1.0, np.ma.masked], r"x\[1\]"),
        (lambda m: [[m]], r"x\[0\]\[0\]"),
        (lambda m: ([0.0, 1.0], ([3.0, 4.0], m)), r"x\[1\]\[1\]"),
    ],
    ids=["after-a-list", "masked-constant", "two-deep", "tuples"],
)
def test_a_masked_array_anywhere_in_a_list_is_refused_by_name(
    xpkit_backend, data, place
):
    """Only a list whose first item was an array was checked: ``[[1, 2], m]``
    and ``[[m]]`` made plain arrays of the masked values."""
    b = xpkit_backend
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    for convert, param in ((b.asarray, "x"), (b.copy, "array")):
        named = param + place[1:]
        with pytest.raises(TypeError, match=rf"^{named} is a NumPy masked array"):
            convert(data(masked))
    with pytest.raises(TypeError, match=r"^inputs\[0\]\[0\]\[0\] is a NumPy masked"):
        b.check_arrays([[masked]])
    assert b.to_numpy(b.asarray([[1.0, 2.0], [3.0, 4.0]])).tolist() == [
        [1.0, 2.0],
        [3.0, 4.0],
    ]  # (numbers alone pass)


def test_a_masked_tensor_anywhere_in_a_list_is_refused_by_name():
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():  # (torch.masked is a prototype)
        warnings.simplefilter("ignore", UserWarning)
        masked = torch.masked.masked_tensor(
            torch.tensor([1.0, 2.0]), torch.tensor([True, False])
        )
    for data in ([[masked]], [1.0, masked]):
        with pytest.raises(TypeError, match=r"^x\[\d\](\[0\])? is a masked tensor"):
            xpkit.Backend("numpy").asarray(data)


def test_operations_refuse_a_numpy_matrix_by_name():
    """Always 2-D: flatnonzero of [[0, 1], [2, 0]] gave [0, 0], matmul kept a
    vector 2-D. Conversions still take it (as a plain array)."""
    b = xpkit.Backend("numpy")
    with warnings.catch_warnings():  # (np.matrix is pending deprecation)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        m = np.asmatrix([[0.0, 1.0], [2.0, 0.0]])
    for param, call in (
        ("array", lambda: b.flatnonzero(m)),
        ("A", lambda: b.matmul(m, np.ones(2))),
        ("array", lambda: b.sort(m)),
        ("x", lambda: b.top_k(m, 1)),
    ):
        with pytest.raises(TypeError, match=rf"^{param} is a NumPy matrix"):
            call()
    assert type(b.asarray(m)) is np.ndarray


@pytest.mark.parametrize("bad", ["abc", None, b"x", object()])
def test_copy_refuses_what_is_not_numeric_data(xpkit_backend, bad):
    with pytest.raises(TypeError, match=r"^array has non-numeric dtype"):
        xpkit_backend.copy(bad)


def test_copy_of_host_data_is_independent(xpkit_backend):
    b = xpkit_backend
    host = np.arange(3.0)
    c = b.copy(host)
    host[0] = 99.0
    assert _values(b, c) == [0.0, 1.0, 2.0]
    assert xpkit.Backend.from_arrays(c) == b


def test_operations_refuse_another_library_s_arrays(xpkit_backend):
    b = xpkit_backend
    own = b.asarray(np.ones((2, 2)))
    other = _foreign(b, (2, 2))
    label = r"is an array of (NumPy|PyTorch|array-api-strict)"
    with pytest.raises(TypeError, match=rf"^B {label}"):
        b.matmul(own, other)
    with pytest.raises(TypeError, match=rf"^A {label}"):
        b.matmul(other, own)
    with pytest.raises(TypeError, match=rf"^arrays\[1\] {label}"):
        b.concatenate([own, other])
    with pytest.raises(TypeError, match=rf"^array {label}"):
        b.sort(other)
    with pytest.raises(TypeError, match=rf"^array {label}"):
        b.expand_dims(other, 0)
    with pytest.raises(TypeError, match=rf"^X {label}"):
        b.svd(other)


def test_operations_refuse_lists_on_every_backend(xpkit_backend):
    b = xpkit_backend
    own = b.asarray(np.ones((2, 2)))
    must = r"must be an array of .*, got list"
    with pytest.raises(TypeError, match=rf"^array {must}"):
        b.sort([3.0, 1.0, 2.0])
    with pytest.raises(TypeError, match=rf"^array {must}"):
        b.sort([3.0, 1.0, 2.0], axis=0)
    with pytest.raises(TypeError, match=rf"^A {must}"):
        b.matmul([[1.0, 0.0], [0.0, 1.0]], own)
    with pytest.raises(TypeError, match=rf"^arrays\[1\] {must}"):
        b.concatenate([own, [[1.0, 2.0]]])
    with pytest.raises(TypeError, match=rf"^array {must}"):
        b.expand_dims([1.0], 0)
    with pytest.raises(TypeError, match=rf"^array {must}"):
        b.flatnonzero([1, 0])
    with pytest.raises(TypeError, match=rf"^X {must}"):
        b.svd([[1.0, 0.0], [0.0, 1.0]])


def test_numpy_backend_no_longer_returns_a_tensor_from_matmul():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("numpy")
    with pytest.raises(TypeError, match=r"^B is an array of PyTorch"):
        b.matmul(np.eye(2), torch.eye(2, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"^arrays\[1\] is an array of PyTorch"):
        b.concatenate([np.ones(2), torch.ones(2, dtype=torch.float64)])


# -- 4. one exception type per bad input, on every backend ----------------------------
def test_concatenate_shape_mismatch_names_arrays_and_shapes(xpkit_backend):
    b = xpkit_backend
    a22, a23, a32 = (b.asarray(np.ones(s)) for s in ((2, 2), (2, 3), (3, 2)))
    with pytest.raises(
        ValueError,
        match=r"^arrays must have the same shape except along axis=0: "
        r"arrays\[0\] has shape \(2, 2\), arrays\[1\] has shape \(2, 3\)",
    ):
        b.concatenate([a22, a23])
    with pytest.raises(ValueError, match=r"except along axis=1: .* \(3, 2\)"):
        b.concatenate([a22, a32], axis=1)
    with pytest.raises(
        ValueError,
        match=r"same number of dimensions: arrays\[0\] has shape \(2, 2\), "
        r"arrays\[2\] has shape \(3,\)",
    ):
        b.concatenate([a22, a22, b.asarray(np.ones(3))])
    assert tuple(b.concatenate([a22, a32]).shape) == (5, 2)
    empty = b.asarray(np.zeros(0))  # (torch.cat skipped it: (2, 2), silently)
    for axis in (0, 1, -1):
        with pytest.raises(ValueError, match=r"arrays\[1\] has shape \(0,\)"):
            b.concatenate([a22, empty], axis=axis)
    none_by_three = b.asarray(np.zeros((0, 3)))  # (Dask skipped it: (2, 2))
    with pytest.raises(ValueError, match=r"arrays\[0\] has shape \(0, 3\)"):
        b.concatenate([none_by_three, a22])
    assert tuple(b.concatenate([b.asarray(np.zeros((0, 2))), a22]).shape) == (2, 2)


def test_matmul_shape_mismatch_names_a_and_b_and_shapes(xpkit_backend):
    b = xpkit_backend
    x23 = b.asarray(np.ones((2, 3)))
    with pytest.raises(
        ValueError,
        match=r"^A's last axis \(3\) does not match B's second-to-last axis \(2\): "
        r"A has shape \(2, 3\), B has shape \(2, 3\)",
    ):
        b.matmul(x23, x23)
    with pytest.raises(ValueError, match=r"B's only axis \(2\).*B has shape \(2,\)"):
        b.matmul(x23, b.asarray(np.ones(2)))
    with pytest.raises(ValueError, match=r"^the stack dimensions of A \(2,\) and B"):
        b.matmul(b.asarray(np.ones((2, 2, 3))), b.asarray(np.ones((3, 3, 2))))


def test_svd_refuses_1d_and_integer_input_by_name(xpkit_backend):
    b = xpkit_backend
    with pytest.raises(
        ValueError, match=r"^X must have at least 2 dimensions .* got shape \(3,\)"
    ):
        b.svd(b.asarray(np.ones(3)))
    for dtype in ("int64", "bool"):
        with pytest.raises(
            TypeError, match=rf"^X must have a floating dtype .* got {dtype}"
        ):
            b.svd(b.asarray(np.eye(3), dtype=dtype))


def test_errors_outside_the_arguments_propagate_unchanged(xpkit_backend):
    """The facade explains a native error only when it finds the fault in the
    arguments: anything else (an OOM, a library bug) reaches the caller as is."""
    b = xpkit_backend
    fresh = xpkit.Backend(b.library, device=b.device)
    kind = ADAPTERS[b.library].argument_errors[-1]
    boom = kind("not about the arguments")

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise boom

    fresh._matmul = fresh._concat = fresh._sort = fail
    x = fresh.asarray(np.ones((2, 2)))
    for call in (
        lambda: fresh.matmul(x, x),
        lambda: fresh.concatenate([x, x]),
        lambda: fresh.sort(x),
    ):
        with pytest.raises(kind) as caught:
            call()
        assert caught.value is boom


# -- 5. devices ---------------------------------------------------------------------
def test_cpu_0_is_the_cpu(xpkit_backend):
    b = xpkit_backend
    adapter = ADAPTERS[b.library]
    if "cpu" not in adapter.devices():
        pytest.skip(f"{b.library} has no CPU device")
    cpu = xpkit.Backend(b.library, device="cpu")
    assert xpkit.Backend(b.library, device="cpu:0") == cpu
    assert xpkit.Backend(b.library, device=" CPU:0 ").device == cpu.device
    assert xpkit.Backend.from_arrays(b.asarray([1.0], device="cpu:0")) == cpu
    with pytest.raises(ValueError, match="device='cpu:1' does not exist"):
        xpkit.Backend(b.library, device="cpu:1")


def test_torch_device_objects_are_accepted():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device=torch.device("cpu", 0))
    assert (b.device, b.name) == ("cpu", "torch-cpu")
    assert xpkit.Backend("torch", device=torch.device("cpu")) == b
    x = xpkit.Backend("torch").asarray([1.0], device=torch.device("cpu", 0))
    assert x.device == torch.device("cpu")
    with pytest.raises(TypeError, match="device must be a string or None, got 0"):
        xpkit.Backend("torch", device=0)
    with pytest.raises(TypeError, match="device must be a string, a PyTorch device"):
        xpkit.Backend("torch", device=object())
    with pytest.raises(TypeError, match=r"a NumPy device or None, got device\(type="):
        xpkit.Backend("numpy", device=torch.device("cpu"))


@pytest.mark.parametrize(
    ("device", "text"), [(("cuda",), "cuda:0"), (("cpu", 1), "cpu:1")]
)
def test_a_torch_device_object_that_is_not_here_is_a_value_error(device, text):
    """It was a TypeError ("must be a string or None") where its string is
    a ValueError ("does not exist"), as the docstring says."""
    torch = pytest.importorskip("torch")
    if text.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("CUDA is here")
    for make in (
        lambda d: xpkit.Backend("torch", device=d),
        lambda d: xpkit.Backend("torch").asarray([1.0], device=d),
    ):
        with pytest.raises(ValueError, match=rf"^device='{text}' does not exist"):
            make(torch.device(*device))


@pytest.mark.parametrize(
    "view",
    [
        lambda a: a,
        lambda a: a[::-1],
        lambda a: a[:, ::-2],
        lambda a: a[2:5],
        lambda a: a.T,
        lambda a: a[:0],
        lambda a: a[3],
    ],
)
def test_an_extent_is_the_bytes_numpy_bounds(view):
    """`Extent` against NumPy's own byte bounds of the same view."""
    from xpkit._adapters._layout import host_extent

    a = np.arange(60.0).reshape(6, 10)
    v = view(a)
    got = host_extent(v)
    if v.size == 0:  # (an empty view touches no byte of its base)
        assert not got.overlaps(host_extent(a))
        assert not got.shares(host_extent(a))
        return
    low, high = np.lib.array_utils.byte_bounds(v)
    assert (got.low, got.high) == (low, high)
    assert got.overlaps(host_extent(a))
    assert not got.overlaps(host_extent(a.copy()))
    assert (got == host_extent(a)) == (v.shape == a.shape and v.strides == a.strides)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (lambda a: a[:, 0], lambda a: a[:, 1]),
        (lambda a: a[:, ::2], lambda a: a[:, 1::2]),
        (lambda a: a[:, :4], lambda a: a[:, 3:]),
        (lambda a: a[::2], lambda a: a[1::2, 5]),
        (lambda a: a[:3], lambda a: a[3:]),
        (lambda a: a[::-1, 2], lambda a: a[:, 2]),
    ],
)
def test_an_extent_shares_what_numpy_says_is_shared(first, second):
    """`Extent.shares` against ``np.shares_memory`` of the arrays themselves."""
    from xpkit._adapters._layout import host_extent

    a = np.arange(60.0).reshape(6, 10)
    x, y = first(a), second(a)
    assert host_extent(x).shares(host_extent(y)) is np.shares_memory(x, y)


def test_torch_takes_numpy_s_long_long_integers():
    """``np.array([2**63])`` is ``ulonglong`` ('Q'), which torch refused by type
    (a raw TypeError) though it holds uint64 of the same bytes."""
    pytest.importorskip("torch")
    b = xpkit.Backend("torch")
    big = np.array([1, 2**64 - 1], dtype="Q")
    for got, expected in (
        (b.asarray([2**63]), [2**63]),
        (b.asarray(big), [1, 2**64 - 1]),
        (b.copy(big), [1, 2**64 - 1]),
        (b.asarray(np.array([-5], dtype="q")), [-5]),
    ):
        assert b.to_numpy(got).tolist() == expected


@pytest.mark.parametrize(
    "values",
    [[2**40, -3], [1e300], [2**63]],
    ids=["int64", "float64", "uint64"],
)
def test_copy_refuses_a_narrowing_that_changes_values_as_asarray_does(
    xpkit_backend, values
):
    """``copy`` of host data narrowed without the check (JAX without 64-bit
    types: ``[2**40, -3]`` became ``[0, -3]``, ``1e300`` inf)."""
    b = xpkit_backend
    source = np.array(values, dtype=np.uint64 if values == [2**63] else None)
    with warnings.catch_warnings():  # (a device without 64-bit types says so)
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        try:
            expected = b.to_numpy(b.asarray(source))
        except ValueError as exc:
            with pytest.raises(ValueError, match=r"^array holds .* does not fit"):
                b.copy(source)
            assert str(exc).startswith("x holds")
            return
        got = b.to_numpy(b.copy(source))
    assert got.tolist() == expected.tolist() == source.tolist()


@pytest.mark.parametrize("device", ["no_x64", "no_float64"])
def test_copy_on_a_device_without_64_bit_types_keeps_values(device):
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict", device=device)
    big = np.array([2**40]) if device == "no_x64" else np.array([1e300])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        with pytest.raises(ValueError, match=r"^array holds .* does not fit"):
            b.copy(big)
        small = np.array([7]) if device == "no_x64" else np.array([1.5])
        assert b.to_numpy(b.copy(small)).tolist() == small.tolist()


@pytest.mark.parametrize("layout", ["coo", "csr", "quantized"])
def test_operations_refuse_a_sparse_or_quantized_tensor_by_name(layout):
    """torch's own errors came out ("aten::sort.stable not implemented for
    SparseCPU", "Sparse CSR tensors do not have strides")."""
    torch = pytest.importorskip("torch")
    dense = torch.tensor([[3.0, 0.0], [0.0, 5.0]])
    with warnings.catch_warnings():  # (CSR is in beta, quantized deprecated)
        warnings.simplefilter("ignore", UserWarning)
        x = {
            "coo": dense.to_sparse,
            "csr": dense.to_sparse_csr,
            "quantized": lambda: torch.quantize_per_tensor(dense, 0.1, 0, torch.qint8),
        }[layout]()
    b = xpkit.Backend("torch")
    what = "a quantized tensor" if layout == "quantized" else "a sparse tensor"
    for param, call in (
        ("x", lambda: b.top_k(x, 1)),
        ("array", lambda: b.sort(x)),
        ("X", lambda: b.svd(x)),
        ("array", lambda: b.flatnonzero(x)),
    ):
        with pytest.raises(TypeError, match=rf"^{param} is {what}"):
            call()
    values, _ = b.top_k(dense, 1)  # (a dense one passes)
    assert values.tolist() == [[3.0], [5.0]]


def test_a_list_of_tensors_numpy_cannot_take_converts_on_every_backend(xpkit_backend):
    """torch's __array__ refuses a tensor that requires grad or has a lazy
    conjugate or negative bit (RuntimeError); alone each converted, in a list
    it raised."""
    torch = pytest.importorskip("torch")
    b = xpkit_backend
    z = torch.tensor([1 + 2j])
    cases = [
        ([torch.tensor(1.5, requires_grad=True)], [1.5]),
        ([z.conj()], [[1 - 2j]]),
        ([[z.conj().imag]], [[[-2.0]]]),
    ]
    for value, want in cases:
        try:
            got = b.asarray(value)
        except TypeError as exc:  # (a dtype the device does not hold)
            assert "complex" in str(exc), exc
            continue
        assert b.to_numpy(got).tolist() == want
    assert b.to_numpy([torch.tensor(1.5, requires_grad=True)]).tolist() == [1.5]
