"""NumPy's read-only namespace (the plugin's ``numpy-readonly``) and its Backend."""

from __future__ import annotations

import array_api_compat
import array_api_compat.numpy as np_compat
import numpy as np
import pytest

import xpkit


def read_only_backend(b: xpkit.Backend) -> xpkit.Backend:
    return xpkit.Backend._of(read_only_facts(b._facts))


from xpkit._adapters._read_only import ReadOnlyNamespace, read_only
from xpkit._facts import read_only as read_only_facts  # the variant's Backend


@pytest.fixture
def ro():
    return ReadOnlyNamespace(np_compat)


def test_every_array_it_returns_is_read_only(ro):
    for x in (ro.asarray([1.0, 2.0]), ro.zeros(3), ro.arange(4), ro.ones((2, 2))):
        assert isinstance(x, np.ndarray)
        assert not x.flags.writeable
    x = ro.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        x += 1.0
    assert not ro.linspace(0, 1, 3).flags.writeable
    assert not ro.linalg.matmul(ro.eye(2), ro.eye(2)).flags.writeable


def test_an_array_passed_in_keeps_its_own_flag(ro):
    mine = np.ones(3)
    got = ro.asarray(mine)  # asarray returns its input: a read-only view of it
    assert not got.flags.writeable
    assert mine.flags.writeable
    assert np.shares_memory(got, mine)


def test_tuples_and_named_tuples_are_rebuilt_read_only(ro):
    u = ro.unique_all(ro.asarray([3, 1, 3]))
    assert type(u) is type(np_compat.unique_all(np.asarray([3, 1, 3])))
    assert u._fields == ("values", "indices", "inverse_indices", "counts")
    assert all(not a.flags.writeable for a in u)
    np.testing.assert_array_equal(u.values, [1, 3])
    parts = ro.meshgrid(ro.arange(2), ro.arange(3))
    assert isinstance(parts, list | tuple)
    assert all(not a.flags.writeable for a in parts)


def test_what_is_no_array_passes_through(ro):
    assert ro.float64 is np_compat.float64
    assert ro.pi == np_compat.pi
    assert ro.isdtype(ro.float64, "real floating") is True
    assert read_only(3.5) == 3.5
    scalar = read_only(np.float64(2.0))
    assert scalar == 2.0
    assert repr(ro) == "<read-only arrays of array_api_compat.numpy>"


def test_the_arrays_namespace_is_numpys_own(ro):
    """Code under test that takes its namespace from the arrays makes writeable ones."""
    x = ro.asarray([1.0, 2.0])
    xp = array_api_compat.array_namespace(x)
    assert xp is np_compat
    own = xp.zeros(2)
    own[0] = 1.0
    assert own[0] == 1.0


def test_the_read_only_backend_makes_read_only_arrays():
    b = read_only_backend(xpkit.Backend("numpy"))
    assert (b.name, b.device) == ("numpy", "cpu")
    assert b == xpkit.Backend("numpy")
    made = [b.asarray([1.0, 2.0]), b.full((2,), 3.0), b.copy(np.ones(2))]
    made.append(b.zeros_like(made[0]))
    assert [a.flags.writeable for a in made] == [False] * 4
    assert not b.xp.ones(2).flags.writeable
    # its computations are the library's own
    assert b.matmul(np.eye(2), np.eye(2)).flags.writeable


def test_a_library_without_read_only_arrays_is_refused():
    pytest.importorskip("array_api_strict")
    with pytest.raises(ValueError, match="'array_api_strict' has no read-only arrays"):
        read_only_backend(xpkit.Backend("array_api_strict"))


def test_map_batches_keeps_its_outputs_on_a_read_only_backend():
    """Outputs held on the device are allocated by the library's own namespace:
    through the Backend's read-only one, the first batch could not be written."""
    b = read_only_backend(xpkit.Backend("numpy"))
    x = b.asarray(np.arange(40.0).reshape(20, 2))
    got = xpkit.map_batches(
        lambda r: r * 2.0,
        x,
        backend=b,
        result_on="device",
        bytes_per_item=16,
        budget_gb=64 / 2**30,
    )
    np.testing.assert_array_equal(got, np.arange(40.0).reshape(20, 2) * 2.0)


def test_an_array_of_its_own_that_can_be_written_becomes_a_read_only_view():
    """asarray and to_device return the library's array itself where they can:
    on the read-only Backend only where it is read-only already."""
    b = read_only_backend(xpkit.Backend("numpy"))
    mine = np.ones(2)
    for got in (b.asarray(mine), b.to_device(mine), b.to_gpu(mine)):
        assert got is not mine
        assert not got.flags.writeable
        assert np.shares_memory(got, mine)
    assert mine.flags.writeable
    made = b.asarray([1.0])
    assert b.asarray(made) is made  # read-only already: itself
    plain = xpkit.Backend("numpy")
    assert plain.asarray(mine) is mine  # (the plain Backend, unchanged)


def test_ufuncs_keep_their_methods(ro):
    assert float(ro.add.reduce(np.ones(3))) == 3.0
    outer = ro.multiply.outer(np.arange(2.0), np.arange(3.0))
    assert outer.shape == (2, 3)
    assert not outer.flags.writeable
    assert ro.add.nin == 2
    assert not ro.sin(np.zeros(2)).flags.writeable


def test_it_copies_and_stays_what_it_was(ro):
    import copy

    clone = copy.copy(ro)
    assert not clone.zeros(1).flags.writeable
