"""Backend.at: one behaviour on every library (issue #19).

An integer index out of range raises IndexError everywhere (JAX and ndonnx
would drop the update silently), NumPy numbers are update values as Python
numbers are, and another library's array is refused by name. The bad inputs
themselves are rows of tests/test_bad_inputs.py; here, what must work.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xpkit
from xpkit._adapters import get_adapter
from xpkit._at_index import is_basic_index, plain_index

pytest.importorskip(
    "array_api_extra", reason="needs array-api-extra: pip install 'xpkit[test]'"
)

START = np.array([1.0, 2.0, 4.0])

#: method -> the update of START[1] by 2.0, written out in NumPy.
EXPECTED = {
    "set": [1.0, 2.0, 4.0],
    "add": [1.0, 4.0, 4.0],
    "subtract": [1.0, 0.0, 4.0],
    "multiply": [1.0, 4.0, 4.0],
    "divide": [1.0, 1.0, 4.0],
    "power": [1.0, 4.0, 4.0],
    "min": [1.0, 2.0, 4.0],
    "max": [1.0, 2.0, 4.0],
}


def _host(b, x):
    return np.asarray(b.to_numpy(x), dtype=np.float64)


@pytest.mark.parametrize("method", list(EXPECTED))
def test_every_method_updates_a_copy(xpkit_backend, method):
    b = xpkit_backend
    x = b.asarray(START)
    update = b.at(x, 1)
    assert isinstance(update, xpkit.At)
    out = getattr(update, method)(2.0, copy=True)
    np.testing.assert_array_equal(_host(b, out), EXPECTED[method])
    np.testing.assert_array_equal(_host(b, x), START)  # copy=True: x untouched


@pytest.mark.parametrize(
    "value",
    [np.float64(3.0), np.float32(3.0), np.int64(3), np.asarray(3.0)],
    ids=["float64", "float32", "int64", "0-d ndarray"],
)
def test_numpy_numbers_are_values_like_python_numbers(xpkit_backend, value):
    b = xpkit_backend
    x = b.asarray(START)
    out = b.at(x, 0).set(value, copy=True)
    np.testing.assert_array_equal(_host(b, out), [3.0, 2.0, 4.0])
    if value.dtype.kind == "f":  # (max of float and int arrays: strict refuses)
        out = b.at(x, 2).max(value, copy=True)
        np.testing.assert_array_equal(_host(b, out), [1.0, 2.0, 4.0])
        out = b.at(x, 1).min(value, copy=True)
        np.testing.assert_array_equal(_host(b, out), [1.0, 2.0, 4.0])
        out = b.at(x, 1).add(value, copy=True)
        np.testing.assert_array_equal(_host(b, out), [1.0, 5.0, 4.0])


def test_numpy_integers_and_negative_indices_in_range(xpkit_backend):
    b = xpkit_backend
    x = b.asarray(START)
    np.testing.assert_array_equal(
        _host(b, b.at(x, np.int64(-1)).set(0.0, copy=True)), [1.0, 2.0, 0.0]
    )
    np.testing.assert_array_equal(
        _host(b, b.at(x, -3).add(1.0, copy=True)), [2.0, 2.0, 4.0]
    )
    m = b.asarray(np.zeros((2, 3)))
    out = b.at(m, (np.int32(-1), ..., np.int64(-3))).set(5.0, copy=True)
    np.testing.assert_array_equal(_host(b, out), [[0, 0, 0], [5, 0, 0]])


def test_the_value_may_be_an_array_of_this_library(xpkit_backend):
    b = xpkit_backend
    x = b.asarray(np.zeros((2, 2)))
    out = b.at(x, (0, slice(None))).set(b.asarray([7.0, 8.0]), copy=True)
    np.testing.assert_array_equal(_host(b, out), [[7.0, 8.0], [0.0, 0.0]])


@pytest.mark.parametrize(
    ("idx", "shape", "selected"),
    [(0, (3,), (4,)), (0, (2, 4), (4,)), (slice(0, 2), (3, 1), (2, 4))],
)
def test_a_value_that_does_not_broadcast_is_refused_by_name(
    xpkit_backend, idx, shape, selected
):
    """torch raised RuntimeError in its own words, and ndonnx gave back a
    lazy array that failed only when read."""
    b = xpkit_backend
    x = b.asarray(np.zeros((3, 4)))
    before = _host(b, x).copy()
    msg = (
        f"y has shape {shape}, which does not broadcast to the shape {selected} "
        "of the elements x[idx] selects"
    )
    for copy in (None, True):
        with pytest.raises(ValueError, match=re.escape(msg)):
            b.at(x, idx).set(b.asarray(np.ones(shape)), copy=copy)
    np.testing.assert_array_equal(_host(b, x), before)
    fits = b.at(x, idx).set(b.asarray(np.ones((1, 1, 4))), copy=True)
    expected = before.copy()
    expected[idx] = 1.0
    np.testing.assert_array_equal(_host(b, fits), expected)


@pytest.mark.xpkit_skip(
    ["array_api_strict*", "ndonnx"], reason="no integer index arrays in an update"
)
def test_a_value_is_checked_against_numpy_s_placement_of_the_axes(xpkit_backend):
    """torch and Dask place ``x[0, :, arange(4)]``'s axes otherwise than NumPy
    ((3, 4), not (4, 3)): a value of NumPy's shape was refused against
    theirs, and a value that fits neither raised torch's RuntimeError."""
    b = xpkit_backend
    start = np.arange(24.0).reshape(2, 3, 4)
    idx = (0, slice(None), np.arange(4))
    for shape in ((1, 4, 3), (4, 3), (1, 4, 1), (1, 3)):
        y = np.arange(float(np.prod(shape))).reshape(shape) + 100.0
        want = start.copy()
        want[idx] = y
        got = b.at(b.asarray(start), idx).set(b.asarray(y), copy=True)
        assert _host(b, got).tolist() == want.tolist(), shape
    for shape in ((3, 4), (2, 4, 3), (4, 2)):
        msg = f"y has shape {shape}, which does not broadcast to the shape (4, 3)"
        with pytest.raises(ValueError, match=re.escape(msg)):
            b.at(b.asarray(start), idx).set(b.asarray(np.ones(shape)), copy=True)


@pytest.mark.xpkit_skip(
    ["array_api_strict-strictest"], reason="its boolean indexing is switched off"
)
def test_an_update_by_a_mask_keeps_every_uint64_or_is_refused(xpkit_backend):
    """ndonnx's where (its update by a mask) rounded uint64 through float64:
    the elements not selected changed too, silently (2**64 - 1 became 0)."""
    b = xpkit_backend
    if "uint64" not in b.dtypes:
        pytest.skip(f"{b.name} holds no uint64")
    start = np.array([2**64 - 1, 2**53 + 1, 2], dtype=np.uint64)
    x = b.asarray(start)
    mask = b.asarray(np.array([False, False, True]))
    try:
        got = b.at(x, mask).set(5, copy=True)
    except TypeError as exc:
        assert "uint64, whose values" in str(exc)
        assert "where rounds (every element, selected or not)" in str(exc)
        return
    assert b.to_numpy(got).tolist() == [2**64 - 1, 2**53 + 1, 5]
    assert b.to_numpy(x).tolist() == start.tolist()


@pytest.mark.xpkit_skip(
    ["numpy-readonly"],
    reason="array-api-extra copies through the xp it is given: a read-only copy",
)
def test_xp_is_handed_on(xpkit_backend):
    b = xpkit_backend
    out = b.at(b.asarray(START), 0).set(9.0, copy=True, xp=b.xp)
    np.testing.assert_array_equal(_host(b, out), [9.0, 2.0, 4.0])


def test_copy_none_updates_a_writeable_array_in_place():
    b = xpkit.Backend("numpy")
    x = b.asarray(START)
    assert b.at(x, 0).set(0.0) is x
    np.testing.assert_array_equal(x, [0.0, 2.0, 4.0])


def test_torch_takes_a_numpy_float64_value():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    t = torch.zeros(2, dtype=torch.float32)
    out = b.at(t, 0).set(np.float64(2.0))
    assert out.dtype == torch.float32
    assert out.tolist() == [2.0, 0.0]


def test_the_value_of_another_library_names_both():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    with pytest.raises(
        TypeError, match="y is an array of NumPy, but x is an array of PyTorch"
    ):
        b.at(torch.zeros(2), 0).set(np.ones(1))


# -- JAX: out of range was dropped silently, and jit knows the shapes -------------
def test_jax_out_of_range_raises_instead_of_dropping_the_update():
    jnp = pytest.importorskip("jax.numpy")
    b = xpkit.Backend("jax")
    with pytest.raises(IndexError, match="idx=5 .* axis 0 of x, which has size 2"):
        b.at(jnp.zeros(2), 5).set(1.0)
    with pytest.raises(IndexError, match="idx holds 2, out of range for axis 0"):
        b.at(jnp.zeros(2), jnp.asarray([0, 2])).set(1.0)


def test_jax_jit_checks_a_static_index_against_the_static_shape():
    jax = pytest.importorskip("jax")
    b = xpkit.Backend("jax")

    @jax.jit
    def put(x):
        return b.at(x, (1, 3)).set(1.0)

    with pytest.raises(IndexError, match=r"idx\[1\]=3 .* axis 1 of x, .* size 3"):
        put(jax.numpy.zeros((2, 3)))

    @jax.jit
    def put_last(x):
        return b.at(x, (1, -1)).set(1.0)

    np.testing.assert_array_equal(
        np.asarray(put_last(jax.numpy.zeros((2, 3)))), [[0, 0, 0], [0, 0, 1]]
    )


def test_jax_jit_cannot_check_a_traced_index():
    """Documented in Backend.at: traced index values are not at hand."""
    jax = pytest.importorskip("jax")
    b = xpkit.Backend("jax")

    @jax.jit
    def put(x, i):
        return b.at(x, i).set(1.0)

    out = put(jax.numpy.zeros(2), 5)  # JAX drops the update: no error to give
    np.testing.assert_array_equal(np.asarray(out), [0.0, 0.0])


@pytest.mark.xpkit_skip(
    ["array_api_strict-strictest"], reason="its boolean indexing is switched off"
)
def test_a_boolean_mask_selects_positions_it_does_not_hold(xpkit_backend):
    """A 1-D mask was read as an integer array: its True (1) out of range
    for a 1-element axis, and min/max of booleans on array-api-strict."""
    b = xpkit_backend
    x = b.asarray([5.0, 6.0, 7.0])
    mask = b.asarray([True, False, True])
    assert _host(b, b.at(x, mask).set(0.0, copy=True)).tolist() == [0.0, 6.0, 0.0]
    one = b.asarray([5.0])
    assert _host(b, b.at(one, b.asarray([True])).add(1.0, copy=True)).tolist() == [6.0]
    assert _host(b, x).tolist() == [5.0, 6.0, 7.0]


@pytest.mark.parametrize("part", [True, np.bool_(False), 1.0, np.float32(0.0)])
def test_a_bool_or_a_float_is_no_index(xpkit_backend, part):
    """ndonnx read True as 1 and False as 0, Dask took 1.0 as 1."""
    b = xpkit_backend
    x = b.asarray([5.0, 6.0])
    with pytest.raises(
        TypeError, match="^" + re.escape(f"idx={part!r} is not an index")
    ):
        b.at(x, part)
    with pytest.raises(TypeError, match="^" + re.escape(f"idx[1]={part!r} is not")):
        b.at(b.asarray([[5.0, 6.0]]), (0, part))


#: NumPy's update of the selected values by the number 5, per method.
_BY_FIVE = {
    "set": lambda v: np.full_like(v, 5.0),
    "add": lambda v: v + 5.0,
    "multiply": lambda v: v * 5.0,
    "max": lambda v: np.maximum(v, 5.0),
}


@pytest.mark.parametrize("op", sorted(_BY_FIVE))
@pytest.mark.parametrize("wrapped", [False, True], ids=["bare", "in a tuple"])
@pytest.mark.parametrize("mask_of", ["its library", "numpy"])
def test_a_mask_of_leading_axes_updates_by_a_number_on_every_backend(
    xpkit_backend, op, wrapped, mask_of
):
    """Dask: ``add`` through a row mask of a matrix, or through ``(mask,)``,
    raised "chunk sizes are unknown" (``set`` through the bare mask worked);
    JAX under ``jit`` failed the same way. A NumPy mask of x's shape, Dask
    read as integer positions ("Incorrect shape ((3, 2)) of integer indices")."""
    b = xpkit_backend
    if b.library == "array_api_strict":
        pytest.skip("array-api-strict takes no boolean index in __setitem__")
    rows = np.array([True, False, True])
    full = np.array([[True, False], [False, False], [True, True]])
    for shape, mask in (((3, 2), rows), ((3,), rows), ((3, 2), full)):
        values = np.arange(float(np.prod(shape))).reshape(shape) + 1.0
        want = values.copy()
        want[mask] = _BY_FIVE[op](want[mask])
        x, m = b.asarray(values), b.asarray(mask) if mask_of != "numpy" else mask
        idx = (m,) if wrapped else m
        got = getattr(b.at(x, idx), op)(5.0, copy=True)
        assert _host(b, got).tolist() == want.tolist()
        assert _host(b, x).tolist() == values.tolist()


@pytest.mark.parametrize("mask_of", ["its library", "numpy"])
def test_a_mask_updates_by_an_array_of_the_selected_values(xpkit_backend, mask_of):
    """ndonnx refused a NumPy mask ("unexpected key type") where the value
    was an array, a 0-d one too, though its own mask took them. Dask does
    not know how many elements a mask selects: an array of them is its
    ValueError (a number or a 0-d array updates)."""
    b = xpkit_backend
    if b.library == "array_api_strict":
        pytest.skip("array-api-strict takes no boolean index in __setitem__")
    values = np.arange(6.0).reshape(2, 3)
    mask = np.array([[True, False, True], [False, True, False]])
    m = b.asarray(mask) if mask_of != "numpy" else mask
    for y in (np.array([7.0, 8.0, 9.0]), np.array(7.0)):
        want = values.copy()
        want[mask] = y
        x = b.asarray(values)
        if b.library == "dask" and y.ndim:
            with pytest.raises(ValueError, match="broadcast"):
                b.at(x, m).set(b.asarray(y), copy=True)
            continue
        got = b.at(x, m).set(b.asarray(y), copy=True)
        assert _host(b, got).tolist() == want.tolist()
        assert _host(b, x).tolist() == values.tolist()


def test_a_list_index_is_read_as_numpy_reads_it(xpkit_backend):
    """A list was each library's: torch updated a 1-d array through
    ``[[True, False, True, False]]`` (NumPy: IndexError), JAX refused every
    list. It is the NumPy array NumPy reads, on every backend."""
    b = xpkit_backend
    values = np.arange(4.0)
    x = b.asarray(values)
    with pytest.raises(IndexError, match="idx indexes 2 axes"):
        b.at(x, [[True, False, True, False]]).set(-1.0, copy=True)
    with pytest.raises(TypeError, match="not an index"):
        b.at(x, [[0], [1, 2]]).set(-1.0, copy=True)
    if b.library == "array_api_strict":
        return  # (it takes no NumPy index array: it says so)
    lists = [[True, False, True, False]]
    if b.library != "ndonnx":  # (no integer index array of any library)
        lists += [[0, 2], [], [-1, 0]]
    for idx in lists:
        want = values.copy()
        want[np.asarray(idx, dtype=None if idx else np.intp)] = -1.0
        got = b.at(x, idx).set(-1.0, copy=True)
        assert _host(b, got).tolist() == want.tolist(), idx


@pytest.mark.parametrize("mask_of", ["its library", "numpy"])
def test_a_0d_mask_updates_as_numpy_s_does(xpkit_backend, mask_of):
    """torch: a NumPy 0-d mask of a 0-d tensor was its IndexError ("too many
    indices"), its own mask worked."""
    b = xpkit_backend
    if b.library == "array_api_strict":
        pytest.skip("array-api-strict takes no boolean index in __setitem__")
    for values in (np.array(3.0), np.arange(3.0)):
        for selected in (True, False):
            mask = np.array(selected)
            want = values.copy()
            want[mask] = 5.0
            m = b.asarray(mask) if mask_of != "numpy" else mask
            got = b.at(b.asarray(values), m).set(5.0, copy=True)
            assert _host(b, got).tolist() == want.tolist(), (values, selected)


def test_a_mask_of_leading_axes_updates_under_jax_jit():
    jax = pytest.importorskip("jax")
    b = xpkit.Backend("jax")
    x = b.asarray(np.arange(6.0).reshape(3, 2))
    rows = b.asarray(np.array([True, False, True]))
    added = jax.jit(lambda x, m: b.at(x, (m,)).add(5.0))(x, rows)
    assert np.asarray(added).tolist() == [[5.0, 6.0], [2.0, 3.0], [9.0, 10.0]]


def test_an_index_array_of_another_library_is_refused_naming_it(xpkit_backend):
    """Each library misread another's: torch's "too many indices" for a JAX
    array, Dask's "Boolean value of Tensor ... is ambiguous"."""
    b = xpkit_backend
    x = b.asarray([5.0, 6.0, 7.0])
    others = [  # (NumPy's arrays are every library's index)
        name
        for name in ("torch", "jax", "dask")
        if name != b.library and get_adapter(name).is_installed()
    ]
    for name in others:
        label = get_adapter(name).label
        positions = xpkit.Backend(name, device="cpu").asarray(np.array([0, 2]))
        for idx, said in ((positions, "idx"), ((positions,), "idx[0]")):
            with pytest.raises(
                TypeError, match=re.escape(f"{said} is an array of {label} but x is")
            ):
                b.at(x, idx).set(0.0, copy=True)
    assert _host(b, x).tolist() == [5.0, 6.0, 7.0]


def test_a_float_index_array_is_no_index(xpkit_backend):
    """Dask read a float array as a mask (non-zero: True), a NumPy one as
    positions; the other libraries refused it in words of their own."""
    b = xpkit_backend
    x = b.asarray([5.0, 6.0, 7.0, 8.0])
    floats = b.asarray([0.0, 2.0, 0.0, 3.0], dtype=b.xp.float32)
    for index_array in (floats, np.array([0.0, 2.0])):
        said = b.dtype_to_str(index_array.dtype) if index_array is floats else "float64"
        for idx, name in ((index_array, "idx"), ((index_array,), "idx[0]")):
            with pytest.raises(
                TypeError, match=re.escape(f"{name} is an array of {said}, which is")
            ):
                b.at(x, idx).set(-1.0, copy=True)
    assert _host(b, x).tolist() == [5.0, 6.0, 7.0, 8.0]


def test_a_masked_value_or_index_is_refused_on_every_backend(xpkit_backend):
    """Their masks were dropped: a masked value written, a masked index used."""
    b = xpkit_backend
    x = b.asarray([5.0, 6.0])
    for value in (np.ma.array([1.0, 2.0], mask=[False, True]), np.ma.masked):
        with pytest.raises(TypeError, match=r"^y is a NumPy masked array"):
            b.at(x, slice(None)).set(value, copy=True)
    with pytest.raises(TypeError, match=r"^idx is a NumPy masked array"):
        b.at(x, np.ma.array([0, 1], mask=[False, True]))
    assert _host(b, x).tolist() == [5.0, 6.0]


def test_copy_none_copies_a_read_only_array_of_array_api_strict():
    """A move of a read-only NumPy array: the update raised NumPy's own
    "assignment destination is read-only" (a read-only NumPy array copies)."""
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict")
    source = np.arange(3.0)
    source.flags.writeable = False
    x = b.move(source)
    assert _host(b, b.at(x, 0).set(9.0)).tolist() == [9.0, 1.0, 2.0]
    assert source.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="read-only"):
        b.at(x, 0).set(9.0, copy=False)  # (in place or raise, as asked)


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        ("uint8", 300),  # JAX wrote 44, NumPy raised OverflowError
        ("uint8", np.int64(300)),  # NumPy wrote 44
        ("uint8", -1),  # torch and JAX wrote 255
        ("int32", float("nan")),  # JAX wrote 0
        ("int32", 0.5),  # 0 nearly everywhere; array-api-strict refused it
        ("int32", float("inf")),
        ("float32", 1 + 2j),  # JAX wrote 1.0
        ("float32", 1e300),  # inf
        ("complex64", 1e300),  # inf: a complex dtype was not checked
        ("complex64", 1e-50j),  # 0
        ("float32", 1e-50),  # 0 (the fills refused it)
        ("float64", 2**1100),  # OverflowError, not ValueError
    ],
)
def test_a_number_that_would_change_in_x_s_dtype_is_refused(
    xpkit_backend, dtype, value
):
    b = xpkit_backend
    if dtype not in b.dtypes:
        pytest.skip(f"{b.name} holds no {dtype}")
    x = b.asarray(np.array([1, 2], dtype=dtype))
    for method in ("set", "add"):
        with pytest.raises(
            ValueError, match=r"^y=.* (does not fit|overflows|has an imag)"
        ):
            getattr(b.at(x, 0), method)(value, copy=True)
    assert np.asarray(b.to_numpy(x)).tolist() == [1, 2]


def test_a_number_that_fits_arrives_as_x_s_kind(xpkit_backend):
    """2.0 and True into integers, 0.1 into float32 (rounded), inf into a
    float: the same on every library (array-api-strict refused 2.0 and True,
    JAX warned of 2.0)."""
    b = xpkit_backend
    ints = b.asarray(np.array([1, 2], dtype="int32"))
    assert _host(b, b.at(ints, 0).set(2.0, copy=True)).tolist() == [2.0, 2.0]
    assert _host(b, b.at(ints, 1).set(True, copy=True)).tolist() == [1.0, 1.0]
    assert _host(b, b.at(ints, 0).add(np.float64(3.0), copy=True)).tolist() == [
        4.0,
        2.0,
    ]
    if "float32" in b.dtypes:
        floats = b.asarray(np.array([1.0, 2.0], dtype="float32"))
        got = b.to_numpy(b.at(floats, 0).set(0.1, copy=True))
        assert got.tolist() == [np.float32(0.1), 2.0]
        assert np.isinf(b.to_numpy(b.at(floats, 1).set(float("inf"), copy=True))[1])


@pytest.mark.parametrize(
    ("idx", "row"),
    [(0, 0), (-1, 1), ((slice(None), 1), None), (slice(0, 1), 0)],
    ids=["int", "negative", "a column", "a slice"],
)
def test_an_index_of_fewer_axes_than_x_has_means_the_rest_whole(
    xpkit_backend, idx, row
):
    """NumPy's rule (array-api-strict refused ``at(x, 0)`` on a 2-D x)."""
    b = xpkit_backend
    start = np.arange(6.0).reshape(2, 3)
    expected = start.copy()
    expected[idx] = -1.0
    out = b.at(b.asarray(start), idx).set(-1.0, copy=True)
    np.testing.assert_array_equal(_host(b, out), expected)
    out = b.at(b.asarray(start), idx).add(
        b.asarray(np.ones(3) if row is not None else np.ones(2)), copy=True
    )
    expected = start.copy()
    expected[idx] += np.ones(3) if row is not None else np.ones(2)
    np.testing.assert_array_equal(_host(b, out), expected)


@pytest.mark.xpkit_requires("data_dependent_shapes")  # (strictest: no masks)
def test_a_mask_of_the_first_axis_updates_whole_rows(xpkit_backend):
    """A boolean index is the whole index (no ``...`` added after it: the
    standard, and array-api-strict and ndonnx, take a mask only alone)."""
    b = xpkit_backend
    start = np.arange(6.0).reshape(2, 3)
    mask = np.array([True, False])
    expected = start.copy()
    expected[mask] = -1.0
    out = b.at(b.asarray(start), b.asarray(mask)).set(-1.0, copy=True)
    np.testing.assert_array_equal(_host(b, out), expected)


@pytest.mark.parametrize("idx", [None, (None, 0), (0, None), (..., None)])
def test_a_new_axis_in_an_update_index_is_refused_by_name(xpkit_backend, idx):
    """The standard's __setitem__ takes no None (Dask raised AttributeError)."""
    b = xpkit_backend
    x = b.asarray(np.zeros((2, 3)))
    with pytest.raises(TypeError, match=r"idx(\[\d\])?=None"):
        b.at(x, idx)


#: Slices that step back (torch's own slices take none), alone and with others.
BACKWARD = {
    "reversed": slice(None, None, -1),
    "every other, back": slice(3, 0, -2),
    "from the end": slice(-1, -4, -2),
    "empty": pytest.param(
        slice(0, 3, -1),
        marks=pytest.mark.xpkit_skip(
            ["dask"], reason="Dask's own update of an empty slice by an array fails"
        ),
    ),
    "rows back, one column": (slice(None, None, -1), 1),
    "one row, columns back": (2, slice(None, None, -2)),
    "both back": (slice(None, None, -1), slice(4, 0, -1)),
    "ellipsis, last back": (..., slice(None, None, -1)),
}


def _numbered(shape):
    """Values that tell every position apart (a reversal shows)."""
    return np.arange(100.0, 100.0 + np.prod(shape)).reshape(shape)


@pytest.mark.parametrize("idx", list(BACKWARD.values()), ids=list(BACKWARD))
def test_a_slice_that_steps_back_updates_what_numpy_updates(xpkit_backend, idx):
    """torch refused a negative step ("step must be greater than zero"): its
    update is the forward slice of the same elements, the value reversed."""
    b = xpkit_backend
    start = np.arange(20.0).reshape(4, 5)
    selected = start[idx].shape
    for value in (-1.0, _numbered(selected), _numbered(selected[-1:])):
        expected = start.copy()
        expected[idx] = value
        y = value if isinstance(value, float) else b.asarray(value)
        out = b.at(b.asarray(start), idx).set(y, copy=True)
        np.testing.assert_array_equal(_host(b, out), expected)
        expected = start.copy()
        expected[idx] += value
        out = b.at(b.asarray(start), idx).add(y, copy=True)
        np.testing.assert_array_equal(_host(b, out), expected)


_TWO_ARRAYS = pytest.mark.xpkit_skip(
    ["dask"], reason="Dask's update takes one integer array at most"
)


@pytest.mark.xpkit_skip(
    ["array_api_strict", "array_api_strict-*", "ndonnx"],
    reason="their __setitem__ takes no integer array",
)
@pytest.mark.parametrize(
    "idx",
    [
        pytest.param((slice(None, None, -1), np.array([0, 3])), id="back, then array"),
        pytest.param((np.array([2, 0]), slice(None, None, -2)), id="array, then back"),
        pytest.param(
            (np.array([[1], [3]]), slice(None, None, -1), np.array([0, 1])),
            id="arrays apart",
            marks=_TWO_ARRAYS,
        ),
        pytest.param(
            (np.array([1, 3]), slice(4, 0, -1), np.array([0, 1])),
            id="back between",
            marks=_TWO_ARRAYS,
        ),
    ],
)
def test_a_slice_that_steps_back_beside_an_integer_array(xpkit_backend, idx):
    """NumPy's rule for where the arrays' axes stand (first, when they are
    not adjacent), which torch keeps: the value is reversed along the right
    axis."""
    b = xpkit_backend
    start = np.arange(40.0).reshape(4, 5, 2)[:, :, : 2 if len(idx) == 3 else 1]
    start = np.ascontiguousarray(start if len(idx) == 3 else start[:, :, 0])
    selected = start[idx].shape
    expected = start.copy()
    expected[idx] = _numbered(selected)
    device_idx = tuple(b.asarray(p) if isinstance(p, np.ndarray) else p for p in idx)
    out = b.at(b.asarray(start), device_idx).set(
        b.asarray(_numbered(selected)), copy=True
    )
    np.testing.assert_array_equal(_host(b, out), expected)


@pytest.mark.xpkit_skip(
    ["array_api_strict", "array_api_strict-*", "ndonnx"],
    reason="their __setitem__ takes no integer array",
)
@pytest.mark.parametrize(
    "dtype", ["uint8", "int8", "int16", "uint16", "int32", "uint32", "uint64"]
)
def test_a_narrow_integer_index_array_holds_positions(xpkit_backend, dtype):
    """torch read a uint8 index as a mask (position 2 changed, which the
    index does not hold) and refused int8 and int16 ones."""
    b = xpkit_backend
    if dtype not in b.dtypes:
        pytest.skip(f"{b.name} holds no {dtype}")
    positions = np.array([0, 1, 1, 0], dtype=dtype)
    expected = np.arange(4.0)
    expected[positions] = 7.0
    out = b.at(b.asarray(np.arange(4.0)), b.asarray(positions)).set(7.0, copy=True)
    np.testing.assert_array_equal(_host(b, out), expected)


def test_an_index_of_two_ellipses_is_refused_on_every_backend(xpkit_backend):
    """NumPy refused it; torch and ndonnx updated every element, Dask failed."""
    b = xpkit_backend
    with pytest.raises(IndexError, match=r"more than one \.\.\."):
        b.at(b.asarray(np.zeros((2, 3))), (..., ...))


def test_an_integer_array_takes_no_quotient_and_no_negative_power(xpkit_backend):
    """JAX, Dask and ndonnx wrote truncated quotients (divide(0): INT32_MAX
    or INT64_MIN) and garbage powers; NumPy and torch raised their own."""
    b = xpkit_backend
    x = b.asarray(np.array([4, 5, 6], dtype=np.int32))
    update = b.at(x, slice(None))
    for y in (2, 0):
        with pytest.raises(TypeError, match=r"divide on x of dtype int32"):
            update.divide(y, copy=True)
    with pytest.raises(ValueError, match=r"y=-1: x of dtype int32 takes no negative"):
        update.power(-1, copy=True)
    expected = np.array([4, 5, 6]) ** 2
    np.testing.assert_array_equal(b.to_numpy(update.power(2, copy=True)), expected)
    assert np.asarray(b.to_numpy(x)).tolist() == [4, 5, 6]


@pytest.mark.parametrize(
    ("idx", "value_shape"),
    [(0, (1, 3)), (slice(None), (1, 1, 3)), (slice(None), (3,)), (slice(1, 3), (1,))],
    ids=["row, one leading", "all, two leading", "all, a row", "two rows, one"],
)
def test_a_value_broadcasts_as_numpy_s_setitem_takes_it(
    xpkit_backend, idx, value_shape
):
    """ndonnx's update failed on a value of fewer axes, and then on one of
    leading axes of one element, which NumPy takes."""
    b = xpkit_backend
    start = np.zeros((4, 3))
    value = np.arange(1.0, 1.0 + np.prod(value_shape)).reshape(value_shape)
    expected = start.copy()
    expected[idx] = value
    out = b.at(b.asarray(start), idx).set(b.asarray(value), copy=True)
    np.testing.assert_array_equal(_host(b, out), expected)


@pytest.mark.xpkit_skip(
    ["array_api_strict", "array_api_strict-*", "ndonnx"],
    reason="their __setitem__ takes no integer array",
)
@pytest.mark.parametrize(
    ("shape", "idx"),
    [
        pytest.param((3, 5, 4), (1, slice(None), [0, 1, 3]), id="apart"),
        pytest.param(
            (3, 5, 4), (1, slice(None, None, -1), [0, 1, 3]), id="apart, back"
        ),
        pytest.param((4, 4, 4), (0, slice(None), [0, 1, 2, 3]), id="apart, square"),
        pytest.param((4, 4, 4), ([0, 2], slice(None), 0), id="array first"),
        pytest.param(
            (4, 4, 4), (slice(None), 0, ..., [0, 1, 2, 3]), id="apart by an empty ..."
        ),
        pytest.param((4, 4, 4), ("0-d", slice(None), [0, 1, 2, 3]), id="a 0-d index"),
        pytest.param((3, 5, 4), (slice(None), 1, [0, 1, 3]), id="adjacent"),
    ],
)
def test_an_integer_beside_an_integer_array_places_axes_as_numpy(
    xpkit_backend, shape, idx
):
    """NumPy puts the block of integers and arrays that are not adjacent (a
    ``...`` parts them, even of no axes) first; torch and Dask read an
    integer, or a 0-d array, as a basic index: a square value was written
    transposed, silently, and another refused as a shape mismatch."""
    b = xpkit_backend
    start = np.zeros(shape)
    host = tuple(
        np.array(0) if p == "0-d" else np.array(p) if isinstance(p, list) else p
        for p in idx
    )
    selected = start[host].shape
    device_idx = tuple(b.asarray(p) if isinstance(p, np.ndarray) else p for p in host)
    values = (_numbered(selected), _numbered(selected[-1:]), 7.0)
    if b.library == "dask" and any(isinstance(p, (int, str)) for p in idx):
        # (Dask's own update through an integer and an array fails: an array
        # value (a TypeError), and a 0-d index (NotImplementedError))
        values = () if "0-d" in idx else (7.0,)
    for value in values:
        expected = start.copy()
        expected[host] = value
        y = value if isinstance(value, float) else b.asarray(value)
        out = b.at(b.asarray(start), device_idx).set(y, copy=True)
        np.testing.assert_array_equal(_host(b, out), expected)


def test_torch_takes_an_unsigned_index_it_cannot_reduce():
    """torch has no min of uint16, uint32 or uint64: the range check failed
    with NotImplementedError ("min_values_cpu" not implemented)."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch")
    x = b.asarray(np.zeros(300))
    for dtype in (torch.uint16, torch.uint32, torch.uint64):
        out = b.at(x, torch.tensor([0, 250], dtype=dtype)).set(7.0, copy=True)
        assert out.nonzero().flatten().tolist() == [0, 250]
        with pytest.raises(IndexError, match="holds 300"):
            b.at(x, torch.tensor([0, 300], dtype=dtype))


def test_a_bfloat16_update_keeps_its_fraction(xpkit_backend):
    """With ml_dtypes imported (JAX imports it), NumPy's bfloat16 is of kind
    "V": a number into a bfloat16 array was cut to an integer (2.5 -> 2),
    and NaN or inf into it raised Python's int() errors."""
    pytest.importorskip("ml_dtypes")  # (as JAX's import gives it)
    b = xpkit_backend
    if "bfloat16" not in get_adapter(b.library).held_dtypes(b.device):
        pytest.skip(f"{b.name} holds no bfloat16")
    x = b.asarray(np.zeros(3), dtype="bfloat16")
    got = b.to_numpy(b.at(x, 0).set(2.5, copy=True))
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), [2.5, 0.0, 0.0])
    got = b.to_numpy(b.at(x, slice(None)).add(0.75, copy=True))
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), [0.75] * 3)
    for special in (float("nan"), float("inf")):
        got = np.asarray(b.to_numpy(b.at(x, 1).set(special, copy=True)), dtype=float)
        np.testing.assert_array_equal(got, [0.0, special, 0.0])
    with pytest.raises(ValueError, match="does not fit x's dtype bfloat16"):
        b.at(x, 0).set(1e300, copy=True)


def test_elements_that_share_memory_are_copied_not_updated_through_each_other():
    """torch's ``zeros(1).expand(3)`` updated in place set every element
    (they are one); NumPy's writable ``as_strided`` the same. ``copy=None``
    may update in place only where that gives the right answer."""
    b = xpkit.Backend("numpy")
    base = np.zeros(1)
    shared = np.lib.stride_tricks.as_strided(base, shape=(3,), strides=(0,))
    out = b.at(shared, 0).set(1.0)
    np.testing.assert_array_equal(out, [1.0, 0.0, 0.0])
    assert base.tolist() == [0.0]
    torch = pytest.importorskip("torch")
    t = torch.zeros(1)
    out = xpkit.Backend("torch").at(t.expand(3), 0).set(1.0)
    assert out.tolist() == [1.0, 0.0, 0.0]
    assert t.tolist() == [0.0]
    plain = torch.zeros(3)  # (a tensor that can be updated in place still is)
    assert xpkit.Backend("torch").at(plain, 0).set(1.0) is plain
    assert plain.tolist() == [1.0, 0.0, 0.0]


WIDE_FLOAT = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant


@pytest.mark.skipif(not WIDE_FLOAT, reason="np.longdouble is float64 here")
@pytest.mark.parametrize(
    ("dtype", "value", "reason"),
    [
        ("float64", "1e600", "overflow to inf"),  # float() made it inf: let through
        ("float64", "1e-4800", "underflow to 0"),  # float() made it 0.0
        ("int64", "2**62 + 0.5", "not a whole number"),  # 0.5 dropped
        ("uint64", "2**64", "0 to"),
    ],
)
def test_a_longdouble_that_would_change_is_refused(xpkit_backend, dtype, value, reason):
    """``np.longdouble`` (80 bits here) went through ``float()`` before it
    was checked, which itself overflowed, underflowed or rounded it: the
    update and the fill wrote inf, 0 or a whole number, silently."""
    b = xpkit_backend
    if dtype not in b.dtypes:
        pytest.skip(f"{b.name} holds no {dtype}")
    x = b.asarray(np.array([1, 2], dtype=dtype))
    y = {  # (made by arithmetic: NumPy warns parsing such strings)
        "1e600": np.longdouble(1e300) * np.longdouble(1e300),
        "1e-4800": np.longdouble(1e-300) ** 16,
        "2**62 + 0.5": np.longdouble(2**62) + np.longdouble(0.5),
        "2**64": np.longdouble(2**64),
    }[value]
    with pytest.raises(ValueError, match=reason):
        b.at(x, 0).set(y, copy=True)
    with pytest.raises(ValueError, match=reason):
        b.full((1,), y, dtype=dtype)
    whole = np.longdouble(2**62) + 1  # (int() of it rounds through a float64)
    if "int64" in b.dtypes:
        assert b.to_numpy(b.full((1,), whole, dtype="int64")).tolist() == [2**62 + 1]
        ints = b.asarray(np.zeros(2, dtype="int64"))
        got = b.to_numpy(b.at(ints, 0).set(whole, copy=True))
        assert got.tolist() == [2**62 + 1, 0]
    exact = np.longdouble(2**63) + 1  # (a whole number int() would round)
    if "uint64" in b.dtypes:
        big = b.asarray(np.zeros(2, dtype="uint64"))
        got = b.to_numpy(b.at(big, 0).set(exact, copy=True))
        assert got.tolist() == [2**63 + 1, 0]


def test_copy_false_in_a_traced_fn_is_still_traced():
    """A shape-only stand-in has no ``writeable`` flag: the check of
    ``copy=False`` read it as read-only and raised, so a NumPy ``fn`` with
    ``at(...).set(..., copy=False)`` was measured, not traced."""
    b = xpkit.Backend("numpy")

    def fn(r):
        return b.at(r * 2.0, (slice(None), 0)).set(1.0, copy=False)

    plan = xpkit.plan_batches(fn, np.ones((1000, 4)), remember=False)
    assert plan.source == "traced by shape-only arrays"


def test_copy_false_refuses_elements_that_share_memory():
    """``copy=False`` updates in place or raises: on an expanded tensor (or
    NumPy's writable ``as_strided``) in place writes every element that
    shares the one updated, so it raises (it wrote ``[[5, 0, 0], [5, 0, 0]]``)."""
    b = xpkit.Backend("numpy")
    base = np.zeros(1)
    shared = np.lib.stride_tricks.as_strided(base, shape=(3,), strides=(0,))
    with pytest.raises(ValueError, match=r"^copy=False: x \(shape \(3,\)\)"):
        b.at(shared, 0).set(1.0, copy=False)
    assert base.tolist() == [0.0]
    torch = pytest.importorskip("torch")
    t = torch.zeros(3)
    for method in ("set", "add", "max"):
        with pytest.raises(ValueError, match="share memory"):
            getattr(xpkit.Backend("torch").at(t.expand(2, 3), (0, 0)), method)(
                5.0, copy=False
            )
    assert t.tolist() == [0.0, 0.0, 0.0]
    plain = torch.zeros(3)  # (one that can be updated in place is)
    assert xpkit.Backend("torch").at(plain, 0).set(1.0, copy=False) is plain


@pytest.mark.parametrize("method", ["min", "max"])
def test_min_and_max_take_a_number_in_x_s_own_dtype(xpkit_backend, method):
    """A number reaches ``min``/``max`` as an array of x's dtype, not the
    library's default: torch's float64 x took 0.1 as float32
    (0.10000000149011612) and 1e300 as inf, NumPy's and Dask's uint64 x
    took 0 as int64 (the result float64: 2**63 + 1 became 2**63), and
    array-api-strict refused 0.5 beside float32."""
    b = xpkit_backend
    value = {"min": 0.1, "max": 1e300}[method]
    for dtype in ("float64", "float32"):
        if dtype not in b.dtypes:
            continue
        x = b.asarray(np.array([1.0, 2.0], dtype=dtype))
        got = b.to_numpy(
            getattr(b.at(x, 0), method)(value if dtype == "float64" else 0.5, copy=True)
        )
        want = np.array([value if dtype == "float64" else 0.5, 2.0], dtype=dtype)
        if method == "max" and dtype == "float32":
            want = np.array([1.0, 2.0], dtype=dtype)
        assert got.dtype == np.dtype(dtype)
        assert got.tolist() == want.tolist()
    if "uint64" in b.dtypes:
        big = b.asarray(np.array([2**63 + 1, 5], dtype="uint64"))
        got = b.to_numpy(getattr(b.at(big, 0), method)(0, copy=True))
        assert got.dtype == np.uint64
        assert got.tolist() == ([0, 5] if method == "min" else [2**63 + 1, 5])


@pytest.mark.xpkit_requires("data_dependent_shapes")  # (strictest: no masks)
@pytest.mark.parametrize(
    "mask", [[[True, False, True]], [True, False, True], [[True], [False]]]
)
def test_a_mask_of_another_shape_than_the_axes_it_indexes_is_refused(
    xpkit_backend, mask
):
    """ndonnx broadcast a (1, 3) mask over a (2, 3) array (every row set) and
    met onnx's InferenceError for others; NumPy raises an IndexError."""
    b = xpkit_backend
    start = np.arange(6.0).reshape(2, 3)
    with pytest.raises(IndexError):  # (NumPy's own rule, the reference)
        start.copy()[np.array(mask)] = -1.0
    x = b.asarray(start)
    with pytest.raises(IndexError, match=r"idx is a boolean mask of shape"):
        b.at(x, b.asarray(np.array(mask))).set(-1.0, copy=True)
    fits = np.array([[True, False, True], [False, False, True]])
    expected = start.copy()
    expected[fits] = -1.0
    out = b.at(x, b.asarray(fits)).set(-1.0, copy=True)
    np.testing.assert_array_equal(_host(b, out), expected)


def test_an_integer_array_takes_no_negative_power_array(xpkit_backend):
    """A number was refused, an array not: torch and ndonnx wrote 0, JAX
    garbage (2111105451), NumPy raised its own error."""
    b = xpkit_backend
    x = b.asarray(np.array([2, 3, 4], dtype=np.int32))
    update = b.at(x, slice(None))
    negative = b.asarray(np.array([2, -1, 1], dtype=np.int32))
    with pytest.raises(ValueError, match=r"(takes no negative power|negative integer)"):
        b.to_numpy(update.power(negative, copy=True))  # (Dask's tasks raise)
    fine = b.asarray(np.array([2, 0, 1], dtype=np.int32))
    got = np.asarray(b.to_numpy(update.power(fine, copy=True)))
    np.testing.assert_array_equal(got, np.array([2, 3, 4]) ** np.array([2, 0, 1]))
    assert np.asarray(b.to_numpy(x)).tolist() == [2, 3, 4]


@pytest.mark.xpkit_skip(
    ["array_api_strict", "array_api_strict-*", "ndonnx"],
    reason="their __setitem__ takes no integer array",
)
@pytest.mark.parametrize(
    "idx",
    [
        (2, np.array([1])),
        (0, np.array([1, 3])),
        (-1, slice(None), np.array([3, 0, 1])),
        (Ellipsis, 0, np.array([3, 0, 1])),
        (slice(1, 3), -2, np.array([4, 0])),
        (np.array(1),),
        (np.array(-1), 2),
        (slice(None), np.array(3)),
        (Ellipsis, np.array(0)),
        (np.array(2), slice(1, 3)),
    ],
    ids=[
        "int, array",
        "int, two",
        "int, slice, array",
        "..., int, array",
        "slice",
        "0-d alone",
        "0-d, int",
        "slice, 0-d",
        "..., 0-d",
        "0-d, slice",
    ],
)
@pytest.mark.parametrize("value", ["array", "number"])
def test_an_integer_beside_an_integer_array_sets_what_numpy_sets(
    xpkit_backend, idx, value
):
    """Dask's assignment wrote -1 five times where NumPy writes -1..-5 at
    ``x[2, [1]]``, and failed deep inside for the others (an array value);
    a 0-d integer array met "does not yet implement assignment to a scalar
    numpy or dask array index" where NumPy takes it as an integer."""
    b = xpkit_backend
    start = np.arange(60.0).reshape(3, 4, 5)
    selected = start[idx].shape
    y = -1.0 - np.arange(float(np.prod(selected))).reshape(selected)
    expected = start.copy()
    expected[idx] = y if value == "array" else -7.0
    positions = tuple(b.asarray(p) if isinstance(p, np.ndarray) else p for p in idx)
    given = b.asarray(y) if value == "array" else -7.0
    source = b.asarray(start)
    out = b.at(source, positions).set(given, copy=True)
    np.testing.assert_array_equal(_host(b, out), expected)
    np.testing.assert_array_equal(_host(b, source), start)


def test_torch_tensors_the_update_cannot_take_are_refused_by_name():
    """A nested tensor met torch's "Internal error: NestedTensorImpl doesn't
    support sizes"; a float8 one took 1000 as 448 and 1e-9 as 0 silently,
    where asarray and full refuse that dtype."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch")
    import warnings

    with warnings.catch_warnings():  # (nested tensors are a prototype)
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(TypeError, match=r"^x is a nested tensor"):
        b.at(nested, 0).set(1.0)
    with pytest.raises(TypeError, match=r"^x is a nested tensor"):
        b.top_k(nested, 1)
    eight = torch.zeros(2, dtype=torch.float8_e4m3fn)
    with pytest.raises(TypeError, match=r"^x has dtype torch.float8_e4m3fn, which"):
        b.at(eight, 0).set(1000.0)
    assert eight.float().tolist() == [0.0, 0.0]


def test_a_tensor_in_an_autograd_graph_is_still_updated_in_place():
    """A review caught a first fix that copied every tensor torch would not
    write rows into: one that requires grad was copied (torch warned, an
    error under -W error) where autograd tracks the in-place update."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch")
    leaf = torch.ones(3, requires_grad=True)
    inner = leaf * 2
    out = b.at(inner, 0).set(5.0)
    assert out is inner
    assert out.tolist() == [5.0, 2.0, 2.0]
    out.sum().backward()
    assert leaf.grad.tolist() == [0.0, 2.0, 2.0]


def test_a_masked_tensor_is_refused_by_at():
    """Its update was dropped: ``set(7.0)`` at a masked position gave ``--``."""
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():  # (torch.masked is a prototype)
        warnings.simplefilter("ignore")
        values = torch.tensor([1.0, 100.0, 3.0, 50.0])
        masked = torch.masked.masked_tensor(values, values < 60)
    with pytest.raises(TypeError, match=r"^x is a masked tensor \(torch.masked\)"):
        xpkit.Backend("torch").at(masked, 1).set(7.0, copy=True)


def test_torch_updates_in_place_from_a_view_of_x_itself():
    """``x[1:] = x[:-1]``: NumPy reads the value whole first; torch refused it."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    x = torch.arange(5.0)
    got = b.at(x, slice(1, None)).set(x[:-1])
    want = np.arange(5.0)
    want[1:] = want[:-1].copy()
    assert got.tolist() == want.tolist()
    assert x.tolist() == want.tolist()  # (copy=None: in place, where it can)


@pytest.mark.parametrize("copy", [None, True])
def test_torch_updates_a_tensor_that_requires_grad_in_its_graph(copy):
    """copy=None raised autograd's RuntimeError; copy=True warned (torch.asarray)."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    g = torch.arange(3.0, requires_grad=True)
    got = b.at(g, 0).set(5.0, copy=copy)
    assert got.tolist() == [5.0, 1.0, 2.0]
    assert got.requires_grad
    got.sum().backward()
    assert g.grad.tolist() == [0.0, 1.0, 1.0]  # (the set element's gradient is gone)
    assert g.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("view", ["slice", "reshaped", "a weight's row"])
def test_torch_updates_a_view_of_a_leaf_that_requires_grad_on_a_copy(view):
    """Only the leaf itself was copied: a view of it met autograd's
    RuntimeError ("a view of a leaf Variable that requires grad"), with
    copy=False too, in place of xpkit's ValueError naming x."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    leaf = torch.arange(4.0, requires_grad=True)
    x, idx = {
        "slice": (leaf[1:], 0),
        "reshaped": (leaf.view(2, 2), (0, 0)),
        "a weight's row": (torch.nn.Parameter(torch.zeros(2, 2))[0], 0),
    }[view]
    got = b.at(x, idx).set(9.0)
    assert got.flatten()[0].item() == 9.0
    assert got.requires_grad
    with pytest.raises(ValueError, match=r"is a view of a leaf tensor that requires"):
        b.at(x, idx).set(9.0, copy=False)
    assert leaf.tolist() == [0.0, 1.0, 2.0, 3.0]
    with torch.no_grad():  # (as an optimizer updates a weight's rows: in place)
        assert b.at(leaf[1:], 0).set(7.0, copy=False).tolist() == [7.0, 2.0, 3.0]
    assert leaf.tolist() == [0.0, 7.0, 2.0, 3.0]


def test_torch_updates_a_parameter_in_place_under_no_grad():
    """As an optimizer updates weights: a review caught the update refused
    (copy=False) or made on a copy (copy=None) under torch.no_grad."""
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    w = torch.nn.Parameter(torch.zeros(3))
    with torch.no_grad():
        assert b.at(w, 0).set(1.0, copy=False) is w
        assert b.at(w, 1).set(2.0) is w
    assert w.tolist() == [1.0, 2.0, 0.0]
    assert w.requires_grad


@pytest.mark.parametrize(
    ("idx", "match"),
    [
        (slice(0, 1.5), r"^idx is a slice of 1\.5: its bounds"),
        (slice(0.0, 2), r"^idx is a slice of 0\.0: its bounds"),
        (slice(0, 2, 1.0), r"^idx is a slice of 1\.0: its bounds"),
        ("a", r"^idx='a' is not an index"),
        ((0, "a"), r"^idx\[1\]='a' is not an index"),
    ],
)
def test_a_slice_of_floats_or_a_string_index_is_a_type_error_everywhere(
    xpkit_backend, idx, match
):
    """ndonnx raised AttributeError, Dask IndexError, NumPy IndexError for a string."""
    b = xpkit_backend
    x = b.asarray(np.arange(4.0))
    with pytest.raises(TypeError, match=match):
        b.at(x, idx).set(9.0)
    assert _host(b, b.at(x, slice(np.int64(1), 3)).set(9.0, copy=True)).tolist() == [
        0.0,
        9.0,
        9.0,
        3.0,
    ]


@given(data=st.data())
def test_a_basic_index_updates_what_numpy_s_setitem_updates(xpkit_backend, data):
    # Integers (negative too), slices of any step and ... take a path of
    # their own (no array in the index: nothing converted or moved).
    b = xpkit_backend
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5))
    idx = data.draw(hnp.basic_indices(shape, min_dims=0, allow_newaxis=False))
    assert is_basic_index(plain_index(idx))
    start = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    expected = start.copy()
    selected = expected[idx].shape
    value = -1.0 - np.arange(np.prod(selected), dtype=np.float64).reshape(selected)
    expected[idx] = value
    x = b.asarray(start)
    got = b.at(x, idx).set(b.asarray(value), copy=True)
    np.testing.assert_array_equal(_host(b, got), expected)
    np.testing.assert_array_equal(_host(b, x), start)  # (copy=True: x kept)


@pytest.mark.parametrize(
    ("idx", "basic"),
    [
        ((0, slice(None), Ellipsis), True),
        (-1, True),
        (slice(4, 0, -2), True),
        (Ellipsis, True),
        (np.int64(2), True),  # (an int once plain)
        ((slice(None), np.arange(2)), False),
        (np.array([True, False]), False),
        ([0, 1], False),
        ((0, [1]), False),
    ],
)
def test_only_integers_slices_and_ellipsis_are_a_basic_index(idx, basic):
    assert is_basic_index(plain_index(idx)) is basic


@pytest.mark.parametrize("copy", [None, True])
@pytest.mark.parametrize(
    ("idx", "fits"),
    [
        ((0, slice(None), slice(0, 0)), (2, 0)),
        (slice(0, 0), (0, 2, 1)),
        ((Ellipsis, slice(1, 1)), (1, 2, 0)),
    ],
)
def test_an_update_that_selects_nothing_leaves_x_as_it_was(
    xpkit_backend, idx, fits, copy
):
    # Dask refused an empty array into an empty selection of its very shape
    # ("(2, 0) could not be broadcast to ... (2, 0)").
    b = xpkit_backend
    start = np.arange(2.0).reshape(1, 2, 1)
    x = b.asarray(start)
    got = b.at(x, idx).set(b.asarray(np.zeros(fits)), copy=copy)
    np.testing.assert_array_equal(_host(b, got), start)
    with pytest.raises(ValueError, match=r"y has shape \(3,\)"):
        b.at(x, idx).set(b.asarray(np.zeros(3)), copy=copy)


@pytest.mark.parametrize(
    "idx",
    [
        (0, slice(None), "mask"),  # (apart: NumPy puts the block first)
        (slice(None), 0, "mask"),  # (adjacent: where the integer stands)
        ("mask", slice(None), -1),
        # (a ... of no axes parts two arrays for NumPy, not for torch)
        (slice(None), "positions", Ellipsis, "mask"),
    ],
)
@pytest.mark.parametrize("held", [[True, True, True], [True, False, True]])
@pytest.mark.parametrize("numpy_mask", [False, True])
def test_a_mask_beside_an_integer_or_an_array_places_axes_as_numpy(
    xpkit_backend, idx, held, numpy_mask
):
    # torch reads an integer as a basic index: x[0, :, mask] put the mask's
    # axis last, and a (3, 1) value was added along the wrong axis
    # (silently, where the mask selects 3 of 3). Dask failed inside itself
    # for a NumPy mask beside an integer.
    b = xpkit_backend
    start = np.arange(27.0).reshape(3, 3, 3)
    mask = np.array(held)
    positions = np.array([-1])
    parts = {"mask": mask, "positions": positions}
    numpy_idx = tuple(parts.get(p, p) if isinstance(p, str) else p for p in idx)
    expected = start.copy()
    selected = expected[numpy_idx].shape
    value = 10.0 * (1 + np.arange(selected[0], dtype=np.float64))[:, None]
    expected[numpy_idx] += value
    given = {
        k: v if numpy_mask and k == "mask" else b.asarray(v) for k, v in parts.items()
    }
    own_idx = tuple(given[p] if isinstance(p, str) else p for p in idx)
    x = b.asarray(start)
    try:
        got = b.at(x, own_idx).add(b.asarray(value), copy=True)
    except (ValueError, IndexError, NotImplementedError) as exc:  # (a refusal,
        # never a wrong answer: Dask does not know its own mask's size, nor
        # takes an array beside a mask, "nd fancy indexing"; ndonnx and
        # array-api-strict take a mask only as the whole index, as the
        # standard does)
        dask_can = numpy_mask and "positions" not in idx
        assert b.library in ("ndonnx", "array_api_strict") or (
            b.library == "dask" and not dask_can
        ), exc
        return
    np.testing.assert_array_equal(_host(b, got), expected)


def test_an_update_that_selects_nothing_still_refuses_what_it_refuses_elsewhere(
    xpkit_backend,
):
    # Only the library's refusal of an empty value into an empty selection
    # (Dask's "could not be broadcast") is answered with x: another error
    # stands, as it does where an element is selected (an update of an
    # integer x by a float array).
    b = xpkit_backend
    x = b.asarray(np.zeros(3, dtype=np.int32))
    floats = b.asarray(np.full(1, 0.5))
    try:
        b.at(x, slice(0, 1)).add(floats, copy=True)
    except Exception as exc:  # noqa: BLE001 - the library's own, whichever
        refused: type[BaseException] | None = type(exc)
    else:
        refused = None
    empty = b.asarray(np.full(0, 0.5))
    if refused is None:
        got = b.at(x, slice(0, 0)).add(empty, copy=True)
        assert _host(b, got).tolist() == [0.0, 0.0, 0.0]
    else:
        with pytest.raises(refused):
            b.at(x, slice(0, 0)).add(empty, copy=True)


@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_a_mask_fn_computes_from_its_rows_is_traced(name):
    # The trace's mask stands in for one of x's library: it was refused as
    # "an array of shape-only arrays but x is of NumPy", and fn measured.
    pytest.importorskip(name)
    b = xpkit.Backend(name)

    def fn(r):
        return b.at(r, (slice(None), 0, r[0, 0] > 0.5)).set(0.0, copy=True)

    rows = b.asarray(np.random.default_rng(0).random((1000, 4, 3)))
    plan = xpkit.plan_batches(fn, rows, remember=False)
    assert plan.source == "traced by shape-only arrays"


def test_an_empty_index_array_selects_nothing_on_every_backend(xpkit_backend):
    # JAX took a value of any shape there (x came back as it was; NumPy
    # refuses a value that does not fit the selection of no elements).
    b = xpkit_backend
    start = np.arange(3.0)
    x = b.asarray(start)
    none = b.asarray(np.zeros(0, dtype=np.int64))
    if b.library in ("ndonnx", "array_api_strict"):  # (no integer array in
        # an update: their own IndexError, whatever the value)
        with pytest.raises((ValueError, IndexError)):
            b.at(x, none).set(b.asarray(np.ones(5)), copy=True)
        with pytest.raises(IndexError):
            b.at(x, none).set(b.asarray(np.ones(0)), copy=True)
        return
    with pytest.raises(ValueError, match=r"y has shape \(5,\)"):
        b.at(x, none).set(b.asarray(np.ones(5)), copy=True)
    got = b.at(x, none).set(b.asarray(np.ones(0)), copy=True)
    np.testing.assert_array_equal(_host(b, got), start)
