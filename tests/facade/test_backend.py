"""Every facade method, on every available backend, against NumPy's answer."""

from __future__ import annotations

import re

import array_api_compat
import numpy as np
import pytest

import xpkit
from xpkit.testing import assert_close, assert_equal


def close(b: xpkit.Backend, actual, desired) -> None:
    """On b's library and device; NumPy's shape, dtype and values (dtype tolerance).

    (The library's own namespace: numpy-readonly's ``b.xp`` makes read-only
    arrays, whose namespace is NumPy's.)
    """
    assert array_api_compat.array_namespace(actual) is _library_xp(b)
    assert xpkit.Backend.from_arrays(actual) == b
    assert isinstance(b.to_numpy(actual), np.ndarray)
    assert_close(actual, np.asarray(desired), check_namespace=False, check_device=False)


def _library_xp(b: xpkit.Backend):
    return xpkit.Backend(b.library, device=b.device).xp


def test_attributes(xpkit_backend):
    b = xpkit_backend
    assert isinstance(b.name, str)
    assert isinstance(b.device, str)
    emulated = {"cpu", "device1", "no_float64"}  # array-api-strict's are CPUs
    assert b.is_gpu is (b.device not in emulated)
    assert hasattr(b.xp, "linalg") is ("linalg" in b.capabilities)
    assert hasattr(b.xp, "permute_dims")


@pytest.mark.xpkit_requires("float64")  # NumPy's dtypes, float64 included
@pytest.mark.parametrize(
    "data", [[[1.5, 2.0], [3.0, -4.0]], [1, 2, 3], [True, False], 2.5]
)
def test_asarray_from_python(xpkit_backend, data):
    b = xpkit_backend
    x = b.asarray(data)
    expected = np.asarray(data)
    close(b, x, expected)
    assert b.dtype_to_str(x.dtype) == expected.dtype.name


@pytest.mark.parametrize(
    "dtype", ["float32", np.float32, np.dtype("float32"), "native"]
)
def test_asarray_dtype_spellings(xpkit_backend, dtype):
    b = xpkit_backend
    dtype = b.xp.float32 if dtype == "native" else dtype
    x = b.asarray(np.arange(6).reshape(2, 3), dtype=dtype)
    assert b.dtype_to_str(x.dtype) == "float32"
    close(b, x, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_every_dtype_object_of_the_namespace_is_named(xpkit_backend):
    """Each dtype the device holds, as the library's own object, has its name."""
    b = xpkit_backend
    for name in sorted(b.dtypes):
        assert b.dtype_to_str(getattr(b.xp, name)) == name
        assert b.dtype_to_str(b.asarray([1], dtype=name).dtype) == name


def test_asarray_from_numpy_and_own_arrays(xpkit_backend, rng):
    b = xpkit_backend
    a = rng.standard_normal((4, 3))
    x = b.asarray(a)
    close(b, x, a)
    y = b.asarray(x, dtype="float32")
    assert b.dtype_to_str(y.dtype) == "float32"
    close(b, y, a.astype(np.float32))


def test_asarray_from_every_other_library(xpkit_backend, rng):
    b = xpkit_backend
    a = rng.standard_normal((3, 2))
    for other in ("numpy", "torch", "array_api_strict", "jax", "dask"):
        if not _installed(other):
            continue
        src = xpkit.Backend(other, device="cpu")
        x = b.asarray(src.asarray(a))
        close(b, x, a)


def _installed(key: str) -> bool:
    from xpkit._adapters import ADAPTERS

    return ADAPTERS[key].is_installed()


def test_asarray_like(xpkit_backend):
    b = xpkit_backend
    ref = b.asarray([1.0, 2.0], dtype="float32")
    x = b.asarray_like([1, 2, 3], ref)
    assert b.dtype_to_str(x.dtype) == "float32"
    close(b, x, np.array([1, 2, 3], dtype=np.float32))


def test_check_arrays(xpkit_backend, rng):
    b = xpkit_backend
    first = b.asarray(rng.standard_normal(3), dtype="float32")
    ints = np.arange(3)
    out = b.check_arrays(first, ints, None, [np.ones(2), np.arange(1, 3)], 2.0)
    assert out[2] is None
    assert isinstance(out[3], list)
    for arr in (out[0], out[1], *out[3], out[4]):
        assert b.dtype_to_str(arr.dtype) == "float32"
        assert xpkit.Backend.from_arrays(arr) == b
    close(b, out[1], ints.astype(np.float32))
    close(b, out[3][1], np.array([1, 2], dtype=np.float32))


@pytest.mark.parametrize(
    "numbers",
    [
        [np.float64(1.0), np.float64(2.0)],
        (np.float32(1.0), np.float64(2.0)),
        [np.int64(1), 2.0],
    ],
    ids=["float64", "mixed", "int and float"],
)
def test_check_arrays_takes_a_list_of_numpy_numbers_as_data(xpkit_backend, numbers):
    """A list of NumPy scalars became a list of 0-d arrays (of Python floats: one array)."""
    b = xpkit_backend
    first = b.asarray(np.ones(2), dtype="float32")
    _, got = b.check_arrays(first, numbers)
    assert not isinstance(got, list)
    close(b, got, np.array([1.0, 2.0], dtype=np.float32))


def test_check_arrays_host_first(xpkit_backend):
    b = xpkit_backend
    out = b.check_arrays(np.array([1, 2], dtype=np.int32), np.array([0.0, 3.0]))
    close(b, out[0], np.array([1, 2], dtype=np.int32))
    close(b, out[1], np.array([0, 3], dtype=np.int32))
    # A float that is not whole would be truncated: refused by name.
    with pytest.raises(ValueError, match=r"inputs\[1\] holds 0\.5"):
        b.check_arrays(np.array([1, 2], dtype=np.int32), np.array([0.5, 1.5]))


def test_concatenate(xpkit_backend, rng):
    b = xpkit_backend
    a1, a2 = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    close(b, b.concatenate([b.asarray(a1), b.asarray(a2)]), np.concatenate([a1, a2]))
    c1 = rng.standard_normal((2, 1))
    close(
        b,
        b.concatenate((b.asarray(a1), b.asarray(c1)), axis=1),
        np.concatenate([a1, c1], axis=1),
    )


def test_copy_is_independent(xpkit_backend, rng):
    b = xpkit_backend
    a = rng.standard_normal((3, 2))
    x = b.asarray(a.copy())
    c = b.copy(x)
    close(b, c, a)
    if array_api_compat.is_writeable_array(x):
        x[0, 0] = 99.0
        close(b, c, a)
        assert b.to_numpy(x)[0, 0] == 99.0


def test_expand_dims(xpkit_backend):
    b = xpkit_backend
    a = np.arange(6.0).reshape(2, 3)
    for axis in (0, 1, -1):
        close(b, b.expand_dims(b.asarray(a), axis), np.expand_dims(a, axis))


@pytest.mark.xpkit_xfail(
    ["array_api_strict-strictest"], reason="nonzero has a data-dependent output shape"
)
def test_flatnonzero(xpkit_backend):
    b = xpkit_backend
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    got = b.flatnonzero(b.asarray(a))
    assert_equal(got, np.flatnonzero(a), check_namespace=False, check_device=False)


@pytest.mark.xpkit_requires("float64")  # float64 among the dtypes
@pytest.mark.parametrize(
    ("fill", "dtype", "expected"),
    [
        (1.5, None, "float64"),
        (3, None, "int64"),
        (True, None, "bool"),
        (2, "float32", "float32"),
    ],
)
def test_full(xpkit_backend, fill, dtype, expected):
    b = xpkit_backend
    x = b.full((2, 3), fill, dtype=dtype)
    assert b.dtype_to_str(x.dtype) == expected
    close(b, x, np.full((2, 3), fill, dtype=expected))
    close(b, b.full(4, fill, dtype=dtype), np.full(4, fill, dtype=expected))


@pytest.mark.parametrize("method", ["full_like", "ones_like", "zeros_like"])
def test_like_methods(xpkit_backend, method):
    b = xpkit_backend
    ref = b.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    args = (7.0,) if method == "full_like" else ()
    np_fn = {
        "full_like": np.full_like,
        "ones_like": np.ones_like,
        "zeros_like": np.zeros_like,
    }
    host_ref = np.arange(6, dtype=np.float32).reshape(2, 3)
    same = getattr(b, method)(ref, *args)
    assert b.dtype_to_str(same.dtype) == "float32"
    close(b, same, np_fn[method](host_ref, *args))
    reshaped = getattr(b, method)(ref, *args, shape=(4,), dtype="int32")
    assert b.dtype_to_str(reshaped.dtype) == "int32"
    close(b, reshaped, np_fn[method](host_ref, *args, shape=(4,), dtype=np.int32))
    on_device = getattr(b, method)(ref, *args, device=b.device)
    close(b, on_device, np_fn[method](host_ref, *args))


@pytest.mark.parametrize("shape", [(0, 100000), (100000, 0), (0, 600, 7), (3, 0, 5000)])
def test_no_elements_beside_a_long_axis(xpkit_backend, shape):
    """Dask's automatic chunking divided by zero (ZeroDivisionError)."""
    b = xpkit_backend
    host = np.zeros(shape, dtype=np.float32)
    made = {
        "asarray": b.asarray(host),
        "move": b.move(host),
        "full": b.full(shape, 2.0, dtype="float32"),
        "full_like": b.full_like(host[..., :0], 2.0, shape=shape),
        "ones_like": b.ones_like(host[..., :0], shape=shape),
        "zeros_like": b.zeros_like(host[..., :0], shape=shape),
    }
    for name, made_here in made.items():
        assert tuple(made_here.shape) == shape, name
        close(b, made_here, host)
        close(b, b.zeros_like(made_here), host)


def test_matmul(xpkit_backend, rng):
    b = xpkit_backend
    a, c = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    close(b, b.matmul(b.asarray(a), b.asarray(c)), a @ c)
    v = rng.standard_normal(3)
    close(b, b.matmul(b.asarray(a), b.asarray(v)), a @ v)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_sort(xpkit_backend, rng, axis):
    b = xpkit_backend
    a = rng.standard_normal((4, 5))
    close(b, b.sort(b.asarray(a), axis=axis), np.sort(a, axis=axis))


def test_numpy_numbers_fill_as_python_numbers(xpkit_backend):
    """array-api-strict refused NumPy scalars, torch an np.uint64."""
    b = xpkit_backend
    got = b.full((2,), np.int64(3))
    assert b.to_numpy(got).tolist() == [3, 3]
    if "float32" in b.dtypes:
        assert b.to_numpy(b.full((1,), np.float32(1.5), dtype="float32")).tolist() == [
            1.5
        ]
    assert b.to_numpy(b.full_like(got, np.int32(-4))).tolist() == [-4, -4]
    if "uint64" in b.dtypes:
        big = b.asarray(np.array([1], dtype=np.uint64))
        top = b.full_like(big, np.uint64(2**64 - 1))
        assert b.to_numpy(top).tolist() == [2**64 - 1]


@pytest.mark.parametrize(
    ("fill", "dtype", "expected"),
    [
        (np.clongdouble(1 + 2j), "complex64", 1 + 2j),
        (np.clongdouble(3 + 0j), "float32", 3.0),
        (2**64, "float32", 2.0**64),
        (-(2**63) - 1, "float32", -(2.0**63)),
    ],
    ids=["clongdouble", "clongdouble real", "2**64", "-2**63 - 1"],
)
def test_fills_that_numpy_takes_are_taken_alike(xpkit_backend, fill, dtype, expected):
    """torch dropped a clongdouble's imaginary part (1+2j filled 1+0j) and
    raised OverflowError for an int beyond int64 into a float dtype."""
    b = xpkit_backend
    try:
        made = b.full((2,), fill, dtype=dtype)
    except TypeError:
        assert dtype not in b.dtypes  # (ndonnx holds no complex)
        return
    close(b, made, np.full((2,), expected, dtype=dtype))
    like = b.full_like(b.asarray(np.zeros(2, dtype=dtype)), fill)  # (the fast path)
    close(b, like, np.full((2,), expected, dtype=dtype))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "uint16", "uint32", "uint64"])
def test_an_operation_the_library_has_no_kernel_for_is_a_type_error(
    xpkit_backend, dtype
):
    """torch raised NotImplementedError for matmul of bool or uint16 and
    nonzero of uint32 ("addmm_impl_cpu_" not implemented for 'UInt16'):
    it is NumPy's answer or a TypeError (naming the operands' dtypes where
    the library had no kernel). ndonnx's bool matmul raised its own
    AttributeError."""
    b = xpkit_backend
    host = np.array([[1, 0], [1, 1]], dtype=dtype)
    try:
        x = b.asarray(host)
    except TypeError:
        assert dtype not in b.dtypes  # (a dtype the device does not hold)
        return
    if b.dtype_to_str(x.dtype) != dtype:
        return  # (narrowed: JAX without x64)
    for call, expected, names in (
        (lambda: b.matmul(x, x), lambda: host @ host, "A of dtype"),
        (lambda: b.flatnonzero(x), lambda: np.flatnonzero(host), "array of dtype"),
    ):
        try:
            got = call()
        except TypeError as exc:
            if " has no " in str(exc):  # (xpkit's, from NotImplementedError)
                assert f"{names} {dtype}" in str(exc), exc
            continue
        except RuntimeError as exc:  # (array-api-strict at its strictest flags)
            assert "data-dependent shapes" in str(exc), exc
            continue
        np.testing.assert_array_equal(b.to_numpy(got), expected())


MIXED = [
    ("float32", "float16"),
    ("bfloat16", "float32"),
    ("float16", "bfloat16"),
    ("uint32", "int64"),
    ("uint16", "int32"),
    ("uint8", "uint32"),
    ("int32", "float64"),
]


@pytest.mark.parametrize(("left", "right"), MIXED, ids=["-".join(p) for p in MIXED])
def test_operands_of_two_dtypes_are_promoted_or_a_type_error(
    xpkit_backend, left, right
):
    """torch's matmul of float32 and float16 and its cat or matmul of uint32
    and int64 raised RuntimeError: the standard's promotion (NumPy's answer),
    or a TypeError naming the dtypes where the library has none."""
    b = xpkit_backend
    host = np.array([[1, 2], [3, 4]])  # (exact in each dtype; NumPy may lack bfloat16)
    hosts = [host, host]
    try:
        x, y = (b.asarray(host, dtype=d) for d in (left, right))
    except (TypeError, ValueError):
        return  # (a dtype the device does not hold)
    if (b.dtype_to_str(x.dtype), b.dtype_to_str(y.dtype)) != (left, right):
        return  # (narrowed: JAX without x64)
    for call, expected in (
        (lambda: b.matmul(x, y), lambda: hosts[0].astype("f8") @ hosts[1].astype("f8")),
        (
            lambda: b.concatenate([x, y]),
            lambda: np.concatenate([hosts[0].astype("f8"), hosts[1].astype("f8")]),
        ),
    ):
        try:
            got = call()
        except TypeError as exc:  # (xpkit's, or the library's own: both dtypes)
            assert re.search(rf"\b{left}\b", str(exc)), exc
            assert re.search(rf"\b{right}\b", str(exc)), exc
            continue
        np.testing.assert_array_equal(b.to_numpy(got).astype("f8"), expected())


def test_sort_of_a_0d_array_is_out_of_range_everywhere(xpkit_backend):
    """torch returned the 0-d tensor as it was."""
    b = xpkit_backend
    with pytest.raises(ValueError, match=r"^axis=-1 is out of range: a 0-dimensional"):
        b.sort(b.asarray(1.0))


@pytest.mark.xpkit_requires("linalg")
@pytest.mark.parametrize("shape", [(6, 4), (4, 6)])
@pytest.mark.parametrize("full", [False, True])
def test_svd(xpkit_backend, rng, shape, full):
    b = xpkit_backend
    a = rng.standard_normal(shape)
    if full and b.library == "dask":
        pytest.skip("dask.array.linalg.svd has no full_matrices=True")
    u, s, vt = b.svd(b.asarray(a), full_matrices=full)
    nu, ns, nvt = np.linalg.svd(a, full_matrices=full)
    close(b, s, ns)
    assert b.to_numpy(u).shape == nu.shape
    assert b.to_numpy(vt).shape == nvt.shape
    k = len(ns)
    rebuilt = (b.to_numpy(u)[:, :k] * b.to_numpy(s)) @ b.to_numpy(vt)[:k, :]
    assert_close(rebuilt, a, atol=1e-10, check_namespace=False)


@pytest.mark.xpkit_requires("linalg")
def test_svd_reduced_by_default(xpkit_backend, rng):
    b = xpkit_backend
    u, s, vt = b.svd(b.asarray(rng.standard_normal((7, 3))))
    assert (b.to_numpy(u).shape, b.to_numpy(s).shape, b.to_numpy(vt).shape) == (
        (7, 3),
        (3,),
        (3, 3),
    )


@pytest.mark.xpkit_requires("float64")  # the host copy equals float64 data
def test_transfers(xpkit_backend, rng):
    b = xpkit_backend
    a = rng.standard_normal((2, 2))
    x = b.to_device(a)
    close(b, x, a)
    cpu = b.to_cpu(x)
    assert_close(xpkit.Backend.from_arrays(cpu).to_numpy(cpu), a, check_namespace=False)
    assert xpkit.Backend.from_arrays(cpu).device == "cpu"
    g = b.to_gpu(x)
    close(b, g, a)
    host = b.to_numpy(x)
    assert isinstance(host, np.ndarray)
    assert_equal(host, a, check_namespace=False)


def test_from_arrays_round_trip(xpkit_backend):
    b = xpkit_backend
    x = b.asarray([1.0, 2.0])
    assert xpkit.Backend.from_arrays(x, None, 3.0, x) == b
    assert xpkit.Backend.from_arrays(x).name == b.name


def test_namespace_agnostic_code(xpkit_backend, rng):
    """Code written against b.xp alone gives NumPy's answer everywhere."""
    b = xpkit_backend
    xp = b.xp
    a = rng.standard_normal((5, 3))
    x = b.asarray(a)
    centred = x - xp.mean(x, axis=0)
    scaled = centred / xp.std(centred, axis=0)
    out = xp.permute_dims(scaled, (1, 0))
    expected = ((a - a.mean(0)) / (a - a.mean(0)).std(0)).T
    close(b, out, expected)


def test_public_device_and_dtype_facts(xpkit_backend):
    b = xpkit_backend
    x = b.xp.zeros(3, device=b.native_device)
    assert xpkit.Backend.from_arrays(x) == b  # created on the backend's device
    assert "float32" in b.dtypes
    assert b.has_float64 == ("float64" in b.dtypes)
    b.require_usable()  # a Backend made here is usable


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("float32", 3.4028235e38),  # (float32's maximum as it prints: above it)
        ("float32", -3.4028235e38),
        ("float16", 65519.0),  # (rounds to 65504.0)
        ("complex64", complex(3.4028235e38, -3.4028235e38)),
    ],
)
def test_a_fill_that_rounds_to_the_largest_finite_value_is_made(
    xpkit_backend, dtype, value
):
    """torch's fill refused it ("cannot be converted to type float without
    overflow"), in full, full_like and at: the cast makes the largest finite
    value, as NumPy's does."""
    b = xpkit_backend
    if dtype not in b.dtypes:
        return
    want = np.asarray(value, dtype=dtype)
    assert np.isfinite(want)
    close(b, b.full((2,), value, dtype=dtype), np.full((2,), want))
    ref = b.asarray(np.zeros(2, dtype=dtype))
    close(b, b.full_like(ref, value), np.full((2,), want))
    close(b, b.at(ref, 0).set(value, copy=True), np.array([want, 0], dtype=dtype))


def test_sort_refuses_numpy_s_clongdouble_as_every_complex_dtype():
    """It was sorted lexicographically (complex128 is refused by name)."""
    b = xpkit.Backend("numpy")
    for dtype in (np.complex128, np.clongdouble):
        with pytest.raises(TypeError, match=r"^array has dtype complex"):
            b.sort(np.array([2, 1j], dtype=dtype))


def test_torch_s_matmul_promotes_a_parameter_beside_float16():
    """A Parameter (a subclass) went to the wrapper, which refused the pair."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    w = torch.nn.Parameter(torch.ones(2, 2))
    got = b.matmul(w, torch.ones(2, 2, dtype=torch.float16))
    assert got.dtype == torch.float32
    assert got.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_check_arrays_converts_a_list_of_arrays_and_numpy_numbers_each():
    """Beside an array, a NumPy number is converted as the arrays are (a list)."""
    b = xpkit.Backend("numpy")
    _, got = b.check_arrays(np.ones(2), [np.array([2.0, 3.0]), np.float64(1.0)])
    assert isinstance(got, list)
    assert [g.tolist() for g in got] == [[2.0, 3.0], 1.0]
