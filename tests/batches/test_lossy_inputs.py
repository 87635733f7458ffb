"""Masked and sparse arrays are refused wherever they enter, never silently converted.

Issue #29, "Silent" 1 and "Unclear" 6: a NumPy masked array passed to
`map_batches` came back as a plain array with its masked entries as data;
a sparse torch tensor met torch's own message, naming no parameter.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import xpkit
from xpkit.testing import assert_array_almost_equal, assert_close, assert_equal

MASKED = r"is a NumPy masked array, whose mask the conversion would drop"


def _masked():
    return np.ma.masked_array(
        np.arange(6.0).reshape(3, 2), mask=[[0, 1], [0, 0], [1, 0]]
    )


def _plain(a):
    return np.asarray(a) * 2  # (what drops a mask without a word)


@pytest.mark.parametrize(
    ("param", "call"),
    [
        ("arrays[0]", lambda m: xpkit.map_batches(_plain, m)),
        ("arrays[1]", lambda m: xpkit.map_batches(np.add, np.ones((3, 2)), m)),
        ("whole[0]", lambda m: xpkit.map_batches(np.add, np.ones((3, 2)), whole=(m,))),
        (
            "whole['w']",
            lambda m: xpkit.map_batches(
                lambda a, w: a * w, np.ones((3, 2)), whole={"w": m}
            ),
        ),
        ("arrays[0]", lambda m: xpkit.plan_batches(_plain, m)),
        ("arrays[0]", lambda m: xpkit.compute_oom_safe(_plain, m)),
        ("arrays[0]", lambda m: xpkit.map_batches(_plain, m, bytes_per_item=64)),
    ],
)
def test_a_masked_input_is_refused_by_name(param, call):
    with pytest.raises(TypeError, match=rf"^{re.escape(param)} {MASKED}"):
        call(_masked())


def test_a_masked_input_is_refused_on_the_repeat_path_too():
    """A plain call of that shape learned a repeat: the masked one still meets the check."""
    fn = lambda a: np.asarray(a) * 2
    plain = np.ones((3, 2))
    for _ in range(3):
        np.testing.assert_array_equal(xpkit.map_batches(fn, plain), plain * 2)
    with pytest.raises(TypeError, match=rf"^arrays\[0\] {MASKED}"):
        xpkit.map_batches(fn, _masked())


@pytest.mark.parametrize(
    ("label", "fn"),
    [
        ("result", lambda a: np.ma.masked_array(a * 2, mask=a > 2)),
        ("result[1]", lambda a: (a, np.ma.masked_array(a * 2, mask=a > 2))),
        ("result['m']", lambda a: {"m": np.ma.masked_array(a, mask=a > 2)}),
    ],
)
@pytest.mark.parametrize("path", ["map_batches", "compute_oom_safe"])
def test_a_masked_result_is_refused_naming_fn(label, fn, path):
    x = np.arange(6.0).reshape(3, 2)
    run = xpkit.map_batches if path == "map_batches" else xpkit.compute_oom_safe
    with pytest.raises(
        TypeError, match=rf"^fn=.*'s {re.escape(label)} for rows 0:3 {MASKED}"
    ):
        run(fn, x)


def test_a_masked_result_is_refused_on_the_repeat_path():
    """A call learned with plain results repeats; a masked result then is refused."""
    masked = {"now": False}

    def fn(a):
        return np.ma.masked_array(a * 2, mask=a > 2) if masked["now"] else a * 2

    x = np.arange(6.0).reshape(3, 2)
    for _ in range(3):
        np.testing.assert_array_equal(xpkit.map_batches(fn, x), x * 2)
    masked["now"] = True
    with pytest.raises(TypeError, match=rf"^fn=.*'s result for rows 0:3 {MASKED}"):
        xpkit.map_batches(fn, x)


def test_an_unmasked_result_still_passes():
    """The check can pass: a plain array of the same values is taken."""
    x = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(xpkit.map_batches(lambda a: a * 2, x), x * 2)


@pytest.mark.parametrize("param", ["actual", "desired"])
@pytest.mark.parametrize("check", [assert_close, assert_equal])
def test_the_asserts_refuse_a_masked_array(check, param):
    plain = np.arange(6.0).reshape(3, 2)
    args = {"actual": plain, "desired": plain}
    args[param] = _masked()
    with pytest.raises(TypeError, match=rf"^{param} {MASKED}"):
        check(args["actual"], args["desired"])


def test_assert_array_almost_equal_refuses_a_masked_array():
    with pytest.raises(TypeError, match=rf"^y {MASKED}"):
        assert_array_almost_equal(np.arange(6.0).reshape(3, 2), _masked())


# -- sparse tensors ------------------------------------------------------------------
SPARSE = r"is a sparse tensor \(layout torch.sparse_coo\), which xpkit does not densify"


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_a_sparse_tensor_is_refused_by_name(torch):
    s = torch.eye(3).to_sparse()
    dense = torch.ones(3, 3)
    with pytest.raises(TypeError, match=rf"^arrays\[0\] {SPARSE}"):
        xpkit.map_batches(lambda a: a * 2, s)
    with pytest.raises(TypeError, match=rf"^whole\[0\] {SPARSE}"):
        xpkit.map_batches(lambda a, w: a * 2, dense, whole=(s,))
    with pytest.raises(TypeError, match=rf"^arrays\[0\] {SPARSE}"):
        xpkit.compute_oom_safe(lambda a: a * 2, s)
    with pytest.raises(TypeError, match=rf"^x {SPARSE}"):
        xpkit.Backend.from_arrays(dense).asarray(s)
    with pytest.raises(TypeError, match=rf"^actual {SPARSE}"):
        assert_close(s, dense)


def test_a_sparse_result_is_refused_naming_fn(torch):
    with pytest.raises(TypeError, match=rf"^fn=.*'s result for rows 0:3 {SPARSE}"):
        xpkit.map_batches(lambda a: (a * 2).to_sparse(), torch.ones(3, 2))


def test_a_sparse_input_is_refused_on_the_repeat_path_too(torch):
    fn = lambda a: a.to_dense() * 2
    dense = torch.ones(3, 3)
    for _ in range(3):
        xpkit.map_batches(fn, dense)
    with pytest.raises(TypeError, match=rf"^arrays\[0\] {SPARSE}"):
        xpkit.map_batches(fn, torch.eye(3).to_sparse())


# -- masked tensors (torch.masked) -----------------------------------------------------
MASKED_TENSOR = r"is a masked tensor \(torch.masked\), whose mask the conversion"


def _masked_tensor(torch, values):
    import warnings

    with warnings.catch_warnings():  # (torch.masked is a prototype)
        warnings.simplefilter("ignore")
        return torch.masked.masked_tensor(values, values > 2)


def test_a_masked_tensor_input_is_refused_by_name(torch):
    t = torch.arange(6.0).reshape(3, 2)
    with pytest.raises(TypeError, match=rf"^arrays\[0\] {MASKED_TENSOR}"):
        xpkit.map_batches(lambda a: a * 2, _masked_tensor(torch, t))
    with pytest.raises(TypeError, match=rf"^whole\[0\] {MASKED_TENSOR}"):
        xpkit.map_batches(lambda a, w: a * 2, t, whole=(_masked_tensor(torch, t),))


@pytest.mark.parametrize(
    "sizing", [{}, {"bytes_per_item": 16, "budget_gb": 32 / 2**30}], ids=["one", "two"]
)
@pytest.mark.parametrize("result_on", ["host", "device"])
def test_a_masked_tensor_result_is_refused_naming_fn(torch, result_on, sizing):
    """On the device, its values were written into a plain tensor: the mask lost."""
    t = torch.arange(6.0).reshape(3, 2)
    with pytest.raises(
        TypeError, match=rf"^fn=.*'s result for rows 0:\d {MASKED_TENSOR}"
    ):
        xpkit.map_batches(
            lambda a: _masked_tensor(torch, a * 10), t, result_on=result_on, **sizing
        )
    plain = xpkit.map_batches(lambda a: a * 10, t, result_on=result_on, **sizing)
    np.testing.assert_array_equal(np.asarray(plain), np.arange(6.0).reshape(3, 2) * 10)


# -- Dask arrays of masked chunks, in the facade's operations -----------------------
DASK_MASKED = r"is a Dask array of NumPy masked chunks"


@pytest.mark.parametrize(
    ("param", "call"),
    [
        ("x", lambda b, m: b.top_k(m, 2)),
        ("x", lambda b, m: b.top_k(m, 2, mode="smallest")),
        ("array", lambda b, m: b.sort(m)),
        ("arrays[0]", lambda b, m: b.concatenate([m, m])),
        ("A", lambda b, m: b.matmul(m, m)),
        ("array", lambda b, m: b.expand_dims(m, 0)),
        ("x", lambda b, m: b.at(m, 0).set(1.0)),
    ],
)
def test_a_dask_array_of_masked_chunks_is_refused_by_the_operations(param, call):
    """top_k's argpartition ignored the masks: a masked 50 came back as a
    value, and an unmasked 3.0 masked; the others took them unchecked."""
    da = pytest.importorskip("dask.array")
    b = xpkit.Backend("dask")
    m = np.ma.masked_array([1.0, 100.0, 3.0, 50.0], mask=[0, 1, 0, 1])
    masked = da.from_array(m, chunks=2, asarray=False)
    with pytest.raises(TypeError, match=rf"^{re.escape(param)} {DASK_MASKED}"):
        call(b, masked)
    plain = da.from_array(np.array([1.0, 100.0, 3.0, 50.0]), chunks=2)
    values, _ = b.top_k(plain, 2)  # (a plain one still runs)
    np.testing.assert_array_equal(values.compute(), [100.0, 50.0])
