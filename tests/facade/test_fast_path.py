"""The facade's fast-path predicate (`Adapter.own_check`).

NumPy and torch replace the generic predicate by specialised closures, because
it runs on every facade call. Each specialisation must give exactly the
generic answer, for plain arrays and for every kind of object the fast path
has to refuse.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import xpkit
from xpkit._adapters import ADAPTERS, Adapter
from xpkit._dtypes import DTYPE_NAMES


def _numpy_candidates() -> list[object]:
    with warnings.catch_warnings():  # np.matrix is pending deprecation
        warnings.simplefilter("ignore")
        matrix = np.asmatrix(np.ones((2, 2)))
    return [
        np.ones(3),
        np.ones(3, dtype=np.float32),
        np.ones(3, dtype=bool),
        np.arange(3, dtype=np.uint64),
        np.array(["a"]),
        np.array([object()]),
        np.float64(1.0),  # a NumPy scalar, not an array
        matrix,
        np.ma.masked_array(np.ones(3)),
        np.ones(3).view(np.recarray),
        [1.0, 2.0],
        1.0,
        None,
    ]


def _torch_candidates() -> list[object]:
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():  # complex32 is experimental, quint8 deprecated
        warnings.simplefilter("ignore")
        complex32 = torch.ones(3, dtype=torch.complex32)
        quantized = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)
    return [
        torch.ones(3),
        torch.ones(3, dtype=torch.float64),
        torch.ones(3, dtype=torch.bfloat16),
        complex32,
        torch.ones(3, dtype=torch.bool),
        torch.nn.Parameter(torch.ones(3)),
        torch.ones(3).to_sparse(),
        quantized,
        torch.ones(3, device="meta"),
        np.ones(3),
        [1.0],
        None,
    ]


CASES = {"numpy": _numpy_candidates, "torch": _torch_candidates}


@pytest.mark.parametrize("key", sorted(CASES))
@pytest.mark.parametrize("any_device", [False, True])
@pytest.mark.parametrize(
    "dtypes",
    [
        frozenset(DTYPE_NAMES - {"bfloat16"}),
        frozenset({"float32", "int64", "bool"}),
        frozenset({"float64"}),
    ],
    ids=["all", "some", "float64-only"],
)
def test_specialised_predicate_agrees_with_the_generic_one(key, any_device, dtypes):
    adapter = ADAPTERS[key]
    if not adapter.is_installed():
        pytest.skip(f"{key} is not installed")
    candidates = CASES[key]()
    native = adapter.native_device(adapter.default_device())
    fast = adapter.own_check(native, dtypes, any_device=any_device)
    generic = Adapter.own_check(adapter, native, dtypes, any_device=any_device)
    assert type(adapter).own_check is not Adapter.own_check  # really specialised
    verdicts = [(repr(type(x)), fast(x), generic(x)) for x in candidates]
    assert [v[1] for v in verdicts] == [v[2] for v in verdicts], verdicts
    assert any(v[1] for v in verdicts)  # the plain arrays pass
    assert not all(v[1] for v in verdicts)  # and the rest do not


def test_torch_predicate_checks_the_device():
    torch = pytest.importorskip("torch")
    adapter = ADAPTERS["torch"]
    names = frozenset({"float32"})
    on_cpu = adapter.own_check(torch.device("cpu"), names)
    anywhere = adapter.own_check(torch.device("cpu"), names, any_device=True)
    cpu_t, meta_t = torch.ones(2), torch.ones(2, device="meta")
    assert (on_cpu(cpu_t), on_cpu(meta_t)) == (True, False)
    assert (anywhere(cpu_t), anywhere(meta_t)) == (True, True)


def test_numpy_non_native_byte_order_takes_the_slow_path():
    """The one intended difference: NumPy's predicate refuses swapped bytes,
    so ``asarray`` returns native byte order as the conversion path does."""
    import xpkit

    swapped = np.arange(3, dtype=np.float64).astype(np.dtype(np.float64).newbyteorder())
    got = xpkit.Backend("numpy").asarray(swapped)
    assert got is not swapped
    assert got.dtype.isnative
    assert not swapped.dtype.isnative
    np.testing.assert_array_equal(got, [0.0, 1.0, 2.0])


def test_torch_subclasses_take_the_slow_path():
    """The other intended difference: torch's predicate takes exact ``Tensor``
    and ``Parameter`` only (as NumPy's takes exact ``ndarray``); a subclass,
    which may override any function through ``__torch_function__``, goes
    through the namespace's functions."""
    torch = pytest.importorskip("torch")
    adapter = ADAPTERS["torch"]

    class Sub(torch.Tensor):
        pass

    sub = torch.ones(3).as_subclass(Sub)
    native = torch.device("cpu")
    names = frozenset({"float32"})
    assert Adapter.own_check(adapter, native, names)(sub)
    assert not adapter.own_check(native, names)(sub)
    assert adapter.own_check(native, names)(torch.ones(3))


def test_fast_sort_is_stable_as_the_standard_says(xpkit_backend):
    """Sorting values only, stability shows in the order of -0.0 and 0.0."""
    data = np.array([0.0, -0.0, 1.0, -0.0, 0.0] * 8)
    x = xpkit_backend.asarray(data)
    ours = np.signbit(xpkit_backend.to_numpy(xpkit_backend.sort(x)))
    standard = np.signbit(xpkit_backend.to_numpy(xpkit_backend.xp.sort(x)))
    np.testing.assert_array_equal(ours, standard)
    # Stable: the zeros keep their input order (+, -, -, +, ...).
    zeros = data[data == 0]
    np.testing.assert_array_equal(ours[: zeros.size], np.signbit(zeros))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("int64", "float32"),
        ("float32", "float64"),
        ("int8", "int32"),
        ("float64", "float64"),
    ],
)
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((2, 3), (3, 2)), ((4, 2, 3), (3,))])
def test_torch_matmul_promotes_mixed_dtypes_as_the_wrapper(left, right, shapes):
    """torch.matmul refuses mixed dtypes; the fast path then uses the wrapper."""
    torch = pytest.importorskip("torch")
    import xpkit

    b = xpkit.Backend("torch")
    a = (
        torch.arange(int(np.prod(shapes[0])))
        .reshape(shapes[0])
        .to(getattr(torch, left))
    )
    c = (
        torch.arange(int(np.prod(shapes[1])))
        .reshape(shapes[1])
        .to(getattr(torch, right))
    )
    ours, standard = b.matmul(a, c), b.xp.matmul(a, c)
    assert ours.dtype == standard.dtype
    assert torch.equal(ours, standard)


def test_asarray_fast_path_keeps_the_slow_paths_meaning():
    b = xpkit.Backend("numpy")
    scalar = b.asarray(np.float64(1.5))
    assert type(scalar) is np.ndarray
    assert scalar.shape == ()
    with pytest.raises(TypeError, match="is not a numeric or boolean dtype"):
        b.asarray(np.array(["a", "b"]))
    masked = np.ma.masked_array([1.0, 2.0], mask=[0, 1])
    with pytest.raises(TypeError, match="^array is a NumPy masked array"):
        b.zeros_like(masked)  # (NumPy's own keeps the mask: a plain array lost it)
    with pytest.warns(PendingDeprecationWarning, match="matrix subclass"):
        matrix = np.asmatrix(np.eye(2))
    assert type(b.asarray(matrix)) is np.ndarray
    with pytest.raises(TypeError):
        b.zeros_like(np.array(["x"]))


def test_asarray_in_its_own_dtype_is_the_array_itself(xpkit_backend):
    """As the standard's asarray(copy=None): no copy where none is needed."""
    b = xpkit_backend
    x = b.asarray([1.0, 2.0], dtype="float32")
    assert b.asarray(x) is x
    assert b.asarray(x, dtype=x.dtype) is x
    assert b.asarray(x, dtype="float32") is x
    other = b.asarray(x, dtype="int32")
    assert other is not x
    assert b.dtype_to_str(other.dtype) == "int32"
    copied = b.copy(x)
    assert copied is not x


def test_torch_fast_paths_refuse_sparse_and_unsupported_dtypes():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    sparse = torch.eye(3).to_sparse()
    with pytest.raises(TypeError, match="^array is a sparse tensor"):
        b.zeros_like(sparse)  # (torch's own is sparse; a reference, as an operand)
    # torch's own uint16 passes through as the library holds it (issue 11).
    u16 = torch.zeros(2, dtype=torch.uint16)
    assert b.asarray(u16) is u16
