"""Bad input gets a clear error naming the parameter and the value: one test a case."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import xpkit
from xpkit._adapters import ADAPTERS


def test_unknown_backend_name_lists_accepted_names():
    with pytest.raises(
        ValueError, match=r"backend='tensorflow'.*accepted names: auto, numpy, torch"
    ):
        xpkit.Backend("tensorflow")


def test_backend_name_must_be_a_string():
    with pytest.raises(TypeError, match="backend must be a string, got 3"):
        xpkit.Backend(3)


def test_device_must_be_a_string():
    with pytest.raises(TypeError, match="device must be a string or None, got 0"):
        xpkit.Backend("numpy", device=0)


@pytest.mark.parametrize("key", ["torch", "array_api_strict", "cupy", "jax", "dask"])
def test_missing_library_names_the_extra(monkeypatch, key):
    adapter = ADAPTERS[key]
    monkeypatch.setattr(adapter, "is_installed", lambda: False)
    with pytest.raises(ImportError, match=rf"pip install 'xpkit\[{adapter.extra}\]'"):
        xpkit.Backend(key)


def test_device_that_does_not_exist():
    with pytest.raises(
        ValueError, match=r"device='cuda' does not exist .* available devices: cpu"
    ):
        xpkit.Backend("numpy", device="cuda")


def test_explicit_transfer_to_missing_device_raises():
    b = xpkit.Backend("numpy")
    with pytest.raises(ValueError, match="device='cuda:0' does not exist"):
        b.to_gpu(np.ones(2), device="cuda:0")


def test_from_arrays_mixed_libraries():
    torch = pytest.importorskip("torch")
    with pytest.raises(
        TypeError, match=r"arrays\[0\] is NumPy, arrays\[2\] is PyTorch"
    ):
        xpkit.Backend.from_arrays(np.ones(2), None, torch.ones(2))


def test_from_arrays_mixed_devices():
    strict = pytest.importorskip("array_api_strict")
    a = strict.asarray([1.0])
    b = strict.asarray([1.0], device=strict.Device("device1"))
    with pytest.raises(
        ValueError, match=r"arrays\[0\] is on 'cpu', arrays\[1\] is on 'device1'"
    ):
        xpkit.Backend.from_arrays(a, b)


def test_from_arrays_rejects_non_arrays():
    with pytest.raises(TypeError, match=r"arrays\[1\] is a str"):
        xpkit.Backend.from_arrays(np.ones(1), "abc")


def test_check_arrays_mixed_libraries():
    pytest.importorskip("torch")
    strict = pytest.importorskip("array_api_strict")
    b = xpkit.Backend("torch", device="cpu")
    with pytest.raises(TypeError, match=r"inputs\[1\] is a array-api-strict array"):
        b.check_arrays(b.asarray([1.0]), strict.asarray([1.0]))


def test_check_arrays_mixed_devices():
    strict = pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict")
    other = strict.asarray([1.0], device=strict.Device("device1"))
    with pytest.raises(ValueError, match=r"inputs\[1\] is on device 'device1'.*'cpu'"):
        b.check_arrays(b.asarray([1.0]), other)


def test_ragged_list():
    with pytest.raises(ValueError, match="x is not array-like"):
        xpkit.Backend("numpy").asarray([[1.0, 2.0], [3.0]])


def test_non_numeric_data():
    with pytest.raises(TypeError, match=r"x has non-numeric dtype <U1"):
        xpkit.Backend("numpy").asarray(["a", "b"])


@pytest.mark.parametrize("dtype", ["object", "str", np.dtype("U3"), object])
def test_non_numeric_dtype(dtype):
    with pytest.raises(TypeError, match="dtype=.* is not a numeric or boolean dtype"):
        xpkit.Backend("numpy").asarray([1, 2], dtype=dtype)
    with pytest.raises(TypeError, match="is not a numeric or boolean dtype"):
        xpkit.Backend.dtype_to_str(dtype)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: xpkit.Backend.dtype_to_str("foo.float32"), "dtype='foo.float32'"),
    ],
)
def test_dtype_errors_are_type_errors(call, match):
    with pytest.raises(TypeError, match=match):
        call()


def test_dtype_the_device_lacks_is_a_type_error():
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict")
    with pytest.raises(
        TypeError, match=r"dtype 'float16' is not supported by array_api_strict"
    ):
        b.asarray(np.ones(2, dtype=np.float16))


def test_bfloat16_request_on_numpy_is_a_type_error():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="dtype 'bfloat16' is not supported by numpy"):
        xpkit.Backend("numpy").asarray([1.0], dtype=torch.bfloat16)


@pytest.mark.parametrize(
    ("shape", "exc"), [("3", TypeError), ((2, 1.5), TypeError), ((2, -1), ValueError)]
)
def test_full_bad_shape(shape, exc):
    with pytest.raises(exc, match="shape must"):
        xpkit.Backend("numpy").full(shape, 1.0)


def test_full_bad_fill_value():
    with pytest.raises(
        TypeError, match=r"fill_value must be a Python or NumPy number, got \[1\]"
    ):
        xpkit.Backend("numpy").full(2, [1])


def test_axis_must_be_an_int():
    b = xpkit.Backend("numpy")
    with pytest.raises(TypeError, match="axis must be an int, got '0'"):
        b.sort(np.ones(3), axis="0")
    with pytest.raises(TypeError, match="axis must be an int, got 1.0"):
        b.expand_dims(np.ones(3), 1.0)


def test_svd_full_matrices_must_be_bool():
    with pytest.raises(TypeError, match="full_matrices must be a bool, got 'yes'"):
        xpkit.Backend("numpy").svd(np.eye(2), full_matrices="yes")


def test_concatenate_empty_and_non_sequence():
    b = xpkit.Backend("numpy")
    with pytest.raises(ValueError, match="arrays must not be empty"):
        b.concatenate([])
    with pytest.raises(
        TypeError, match="arrays must be a sequence of arrays, got ndarray"
    ):
        b.concatenate(np.ones((2, 2)))


@pytest.mark.parametrize(
    ("spec", "exc"), [(42, TypeError), ("tpu", ValueError), (1.5, TypeError)]
)
def test_resolve_backend_bad_spec(spec, exc):
    with pytest.raises(exc, match=rf"parallel.*{spec!r}"):
        xpkit.resolve_backend(spec)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((0, 5), ValueError, "n_samples must be positive, got 0"),
        ((5, -1), ValueError, "n_features must be positive, got -1"),
        ((5, 5, 0), ValueError, "cv must be positive, got 0"),
        (("5", 5), TypeError, "n_samples must be an int, got '5'"),
        ((5, 5.0), TypeError, "n_features must be an int, got 5.0"),
    ],
)
def test_auto_select_backend_bad_sizes(args, exc, match):
    with pytest.raises(exc, match=match):
        xpkit.auto_select_backend(*args)


def test_like_methods_bad_device():
    b = xpkit.Backend("numpy")
    with pytest.raises(ValueError, match="device='mps' does not exist"):
        b.zeros_like(np.ones(2), device="mps")
    with pytest.raises(TypeError, match="device=3 is not a device of backend 'numpy'"):
        b.ones_like(np.ones(2), device=3)


def test_a_device_object_of_the_library_that_is_not_here_is_a_value_error():
    """``torch.device("cuda", 3)`` was a TypeError ("not a device of
    backend"), its string "cuda:3" a ValueError: the same ValueError now;
    another library's device object stays a TypeError."""
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() > 3:
        pytest.skip("this machine has a cuda:3")
    b = xpkit.Backend("torch")
    for device in (torch.device("cuda", 3), "cuda:3"):
        with pytest.raises(ValueError, match=r"device='cuda:3' does not exist"):
            b.asarray(np.ones(2), device=device)
    with pytest.raises(TypeError, match=r"is not a device of backend 'numpy'"):
        xpkit.Backend("numpy").asarray(np.ones(2), device=torch.device("cuda", 3))
    assert b.asarray(np.ones(2), device=torch.device("cpu")).device.type == "cpu"


@pytest.mark.parametrize(
    ("method", "args", "valid"),
    [
        ("sort", lambda x: (x, 3), "-1 to 0"),
        ("sort", lambda x: (x, -2), "-1 to 0"),
        ("expand_dims", lambda x: (x, 5), "-2 to 1"),
        ("concatenate", lambda x: ([x, x], 2), "-1 to 0"),
    ],
    ids=["sort", "sort-negative", "expand_dims", "concatenate"],
)
def test_axis_out_of_range_is_a_value_error(xpkit_backend, method, args, valid):
    """NumPy says AxisError, torch and Dask IndexError: the facade says one thing."""
    x = xpkit_backend.asarray([1.0, 2.0])
    with pytest.raises(
        ValueError, match=rf"axis=-?\d+ is out of range .*\(valid: {valid}\)"
    ):
        getattr(xpkit_backend, method)(*args(x))


@pytest.mark.parametrize("fill", [1000, -129, np.int64(128)])
def test_fill_value_that_does_not_fit_the_dtype(xpkit_backend, fill):
    """NumPy raises OverflowError, torch RuntimeError, JAX and Dask wrap around."""
    ref = xpkit_backend.asarray([1, 2], dtype="int8")
    with pytest.raises(ValueError, match=r"fill_value=.* does not fit dtype int8"):
        xpkit_backend.full((2,), fill, dtype="int8")
    with pytest.raises(ValueError, match=r"fill_value=.* does not fit dtype int8"):
        xpkit_backend.full_like(ref, fill)
    with pytest.raises(ValueError, match=r"fill_value=.* does not fit dtype int8"):
        xpkit_backend.full_like(ref, fill, shape=(3,))
    edge = xpkit_backend.full_like(ref, 127)  # the extremes fit
    assert xpkit_backend.to_numpy(edge).tolist() == [127, 127]


@pytest.mark.parametrize("fill", [1e10, -1e10, float("inf"), float("nan")])
def test_float_fill_value_without_an_int32_is_a_value_error(xpkit_backend, fill):
    with pytest.raises(ValueError, match=r"fill_value=.* does not fit dtype int32"):
        xpkit_backend.full((2,), fill, dtype="int32")


def test_map_batches_names_its_own_parameters():
    with pytest.raises(ValueError, match=r"backend='nope' is not a backend specifier"):
        xpkit.map_batches(lambda x: x, np.ones((2, 1)), backend="nope")
    with pytest.raises(TypeError, match="min_batch must be an int, got True"):
        xpkit.map_batches(lambda x: x, np.ones((2, 1)), min_batch=True)


def test_a_library_that_cannot_list_its_dtypes_is_an_error(monkeypatch):
    adapter = ADAPTERS["numpy"]

    class Broken:
        def __array_namespace_info__(self):
            msg = "no inspection here"
            raise AttributeError(msg)

    monkeypatch.setattr(type(adapter), "namespace", lambda self: Broken())
    with pytest.raises(
        RuntimeError,
        match=r"NumPy could not list the dtypes of device 'cpu' .*no inspection",
    ):
        adapter.supported_dtypes("cpu")


def test_svd_without_the_linalg_extension_names_the_capability(monkeypatch):
    adapter = ADAPTERS["numpy"]
    monkeypatch.setattr(
        type(adapter), "capabilities", frozenset({"data_dependent_shapes"})
    )
    b = xpkit.Backend("numpy")
    with pytest.raises(
        NotImplementedError,
        match=r"Backend.svd needs the linalg extension, which backend 'numpy' "
        r"lacks \(capabilities: data_dependent_shapes\)",
    ):
        b.svd(np.ones((3, 2)))


def test_at_checks_its_array_and_names_the_missing_package(monkeypatch):
    b = xpkit.Backend("numpy")
    with pytest.raises(TypeError, match="x"):
        b.at([1.0, 2.0], 0)
    monkeypatch.setitem(sys.modules, "array_api_extra", None)
    with pytest.raises(ImportError, match="Backend.at needs array-api-extra"):
        b.at(np.ones(2), 0)


class _NoRepr:
    """A user's object whose repr raises (weights not loaded, say)."""

    def __repr__(self) -> str:
        msg = "repr of a half-made object"
        raise RuntimeError(msg)


class _CallableNoRepr(_NoRepr):
    def __call__(self, rows):  # noqa: ARG002 - (a bug: fn returns nothing)
        return None


class _BadIndex:
    def __index__(self) -> int:
        msg = "an __index__ of its own that fails"
        raise RuntimeError(msg)


_RAISING_REPRS = {
    "fn not callable": lambda: xpkit.map_batches(_NoRepr(), np.ones((4, 2))),
    "fn returns None": lambda: xpkit.map_batches(_CallableNoRepr(), np.ones((4, 2))),
    "arrays[0]": lambda: xpkit.map_batches(lambda r: r, _NoRepr()),
    "budget_gb": lambda: xpkit.map_batches(
        lambda r: r, np.ones((4, 2)), budget_gb=_NoRepr()
    ),
    "min_batch": lambda: xpkit.map_batches(
        lambda r: r, np.ones((4, 2)), min_batch=_NoRepr()
    ),
    "compute_oom_safe fn": lambda: xpkit.compute_oom_safe(_NoRepr(), np.ones((4, 2))),
    "fill_value": lambda: xpkit.Backend("numpy").full((2,), _NoRepr()),
    "shape": lambda: xpkit.Backend("numpy").full(_NoRepr(), 1.0),
    "backend": lambda: xpkit.Backend(_NoRepr()),
    "resolve_backend": lambda: xpkit.resolve_backend(_NoRepr()),
    "gb_to_bytes": lambda: xpkit.gb_to_bytes(_NoRepr()),
    "n_items __index__": lambda: xpkit.auto_batch_size(_BadIndex(), 8, budget_gb=1),
    "n_samples __index__": lambda: xpkit.auto_select_backend(_BadIndex(), 10),
    "gb timedelta64": lambda: xpkit.gb_to_bytes(np.timedelta64(4)),
    "fill_value datetime64": lambda: xpkit.Backend("numpy").full(
        (2,), np.datetime64(1, "s")
    ),
}


@pytest.mark.parametrize("call", _RAISING_REPRS.values(), ids=_RAISING_REPRS.keys())
def test_a_value_whose_repr_or_index_raises_is_still_told_as_a_type_error(call):
    """The repr's (or __index__'s) RuntimeError replaced the error that named
    the parameter; NumPy's timedelta64 passed as a number of GB (it is a
    numbers.Integral), a datetime64 fill was told as a bad dtype."""
    with pytest.raises(TypeError, match=r"must be|is not|must return"):
        call()


@pytest.mark.parametrize(
    ("make", "full_matrices", "said"),
    [
        (lambda b, a: b.asarray(a), True, "full_matrices=True"),
        (lambda b, a: b.asarray(np.stack([a, a])), False, "X of 3 dimensions"),
        (lambda b, a: b.asarray(a).rechunk((2, 2)), False, "X chunked along both"),
    ],
    ids=["full", "a stack", "chunked both ways"],
)
def test_dask_svd_says_what_its_svd_lacks(make, full_matrices, said):
    """Dask's own errors ("full_matrices=True is not supported by dask.",
    "Array must be 2D.", "Array must be chunked in one dimension only"),
    for what the docstring offers."""
    pytest.importorskip("dask")
    b = xpkit.Backend("dask")
    a = np.random.default_rng(0).standard_normal((4, 3))
    with pytest.raises(
        NotImplementedError, match=f"^Backend.svd on Dask cannot take {said}"
    ):
        b.svd(make(b, a), full_matrices=full_matrices)
    u, s, vt = b.svd(b.asarray(a))  # (reduced, chunked along one axis: its own)
    np.testing.assert_allclose(b.to_numpy((u * s) @ vt), a, atol=1e-12)
