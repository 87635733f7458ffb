"""Arrays created on, and moved to, a backend's device.

``b.create`` binds the namespace's creation functions to the backend's
device; ``b.move`` brings an array of any library there (DLPack first, the
host where no DLPack path exists); ``check_arrays(convert=True)`` follows
the first array. array-api-strict's second device (``device1``) shows that
nothing lands on the default device by accident.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import xpkit
from xpkit._adapters import ADAPTERS, adapter_for_array

#: (function, args) of every creation function ``b.create`` binds.
CREATIONS: list[tuple[str, tuple[Any, ...]]] = [
    ("asarray", ([1.0, 2.0],)),
    ("zeros", ((2, 3),)),
    ("ones", (4,)),
    ("empty", ((2,),)),
    ("full", ((2, 2), 1.5)),
    ("arange", (5,)),
    ("linspace", (0.0, 1.0, 5)),
    ("eye", (3,)),
]

#: Libraries with a CPU device, for the moves this machine can make.
CPU_LIBRARIES = ["numpy", "torch", "array_api_strict", "jax", "dask", "ndonnx"]


def _cpu_backend(key: str) -> xpkit.Backend:
    adapter = ADAPTERS[key]
    if not adapter.is_installed():
        pytest.skip(f"needs {adapter.label}: pip install 'xpkit[{adapter.extra}]'")
    return xpkit.Backend(key, device="cpu")


def _device(b: xpkit.Backend, x: Any) -> str:
    adapter = ADAPTERS[b.library]
    return adapter.device_str(adapter.device_of(x))


@pytest.mark.parametrize(("fn", "args"), CREATIONS)
def test_create_lands_on_the_backend_s_device(xpkit_backend, fn, args):
    b = xpkit_backend
    x = getattr(b.create, fn)(*args)
    assert adapter_for_array(x) is ADAPTERS[b.library]
    assert _device(b, x) == b.device
    expected = getattr(b.xp, fn)(*args, device=b.native_device)
    np.testing.assert_array_equal(
        b.to_numpy(x).shape, b.to_numpy(expected).shape
    )  # same call, same result shape
    if fn != "empty":
        np.testing.assert_array_equal(b.to_numpy(x), b.to_numpy(expected))


@pytest.mark.parametrize(("fn", "args"), CREATIONS)
def test_create_on_a_second_device_never_lands_on_the_default(fn, args):
    b = _cpu_backend("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="device1")
    x = getattr(b.create, fn)(*args)
    default = getattr(b.xp, fn)(*args)  # what forgetting device= gives
    assert x.device == b.native_device == b.xp.Device("device1")
    assert default.device != x.device
    cpu = b.xp.Device("CPU_DEVICE")
    assert getattr(b.create, fn)(*args, device=cpu).device == cpu  # explicit wins


def test_create_is_the_namespace_untouched(xpkit_backend):
    """``b.xp`` stays the compliant namespace: its functions take no bound device."""
    b = xpkit_backend
    assert b.create.zeros.func is b.xp.zeros
    assert b.create.zeros.keywords == {"device": b.native_device}


@pytest.mark.parametrize(
    ("src", "dst"),
    [p for p in itertools.product(CPU_LIBRARIES, repeat=2) if p[0] != p[1]],
)
def test_move_between_every_cpu_pair(src, dst):
    source, target = _cpu_backend(src), _cpu_backend(dst)
    values = np.array([[1.5, -0.0], [np.inf, 3.25]], dtype=np.float32)
    x = source.asarray(values)
    moved = target.move(x)
    assert adapter_for_array(moved) is ADAPTERS[dst]
    assert target.dtype_to_str(moved.dtype) == "float32"
    assert _device(target, moved) == target.device
    got = target.to_numpy(moved)
    np.testing.assert_array_equal(got, values)
    assert np.signbit(got[0, 1])  # -0.0 kept


ZERO_COPY = [("numpy", "torch"), ("torch", "numpy"), ("numpy", "array_api_strict")]


@pytest.mark.parametrize(("src", "dst"), ZERO_COPY)
def test_move_shares_memory_where_dlpack_allows(src, dst):
    source, target = _cpu_backend(src), _cpu_backend(dst)
    x = source.asarray(np.arange(4.0))
    shared = target.move(x)
    assert np.shares_memory(target.to_numpy(shared), source.to_numpy(x))
    assert np.shares_memory(
        target.to_numpy(target.move(x, copy=False)), source.to_numpy(x)
    )
    copied = target.move(x, copy=True)
    assert not np.shares_memory(target.to_numpy(copied), source.to_numpy(x))
    np.testing.assert_array_equal(target.to_numpy(copied), np.arange(4.0))


@pytest.mark.parametrize("dst", ["dask", "ndonnx"])
def test_copy_false_without_a_dlpack_path_is_a_value_error(dst):
    target = _cpu_backend(dst)
    x = np.arange(3.0)
    with pytest.raises(ValueError, match=r"without a copy .*does not import DLPack"):
        target.move(x, copy=False)
    np.testing.assert_array_equal(target.to_numpy(target.move(x)), x)


def test_copy_false_of_a_library_without_dlpack_export():
    source, target = _cpu_backend("ndonnx"), _cpu_backend("numpy")
    x = source.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match="ndonnx arrays do not export DLPack"):
        target.move(x, copy=False)
    np.testing.assert_array_equal(target.move(x), [1.0, 2.0])


def test_move_within_one_library():
    b = _cpu_backend("array_api_strict")
    on1 = xpkit.Backend("array_api_strict", device="device1")
    x = b.asarray([1.0, 2.0])
    assert b.move(x) is x
    assert b.move(x, copy=True) is not x
    moved = on1.move(x)
    assert moved.device == on1.native_device
    with pytest.raises(ValueError, match="cannot move there with copy=False"):
        on1.move(x, copy=False)


def test_move_refuses_what_is_not_an_array():
    b = xpkit.Backend("numpy")
    with pytest.raises(
        TypeError, match="x must be an array of a supported library, got list"
    ):
        b.move([1.0, 2.0])
    with pytest.raises(TypeError, match="copy must be True, False or None, got 'yes'"):
        b.move(np.ones(2), copy="yes")


def test_check_arrays_refuses_mixed_libraries_unless_asked():
    torch_b, jax_b = _cpu_backend("torch"), _cpu_backend("jax")
    X = torch_b.asarray(np.ones((2, 2), dtype=np.float32))
    y = jax_b.asarray(np.array([1.0, 2.0], dtype=np.float32))
    with pytest.raises(TypeError, match=r"inputs\[1\] is a JAX array .*convert=True"):
        torch_b.check_arrays(X, y)
    X2, y2 = torch_b.check_arrays(X, y, convert=True)
    assert X2 is X
    assert adapter_for_array(y2) is ADAPTERS["torch"]
    np.testing.assert_array_equal(torch_b.to_numpy(y2), [1.0, 2.0])
    with pytest.raises(TypeError, match="convert must be a bool, got 1"):
        torch_b.check_arrays(X, y, convert=1)


def test_check_arrays_convert_follows_the_first_array_s_device_and_dtype():
    _cpu_backend("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="device1")
    cpu = xpkit.Backend("array_api_strict")
    X = b.asarray(np.ones(2, dtype=np.float32))
    y = cpu.asarray([1.0, 2.0])  # float64, on the CPU device
    with pytest.raises(ValueError, match="on device 'cpu' but the first input"):
        b.check_arrays(X, y)
    _, y2 = b.check_arrays(X, y, convert=True)
    assert y2.device == X.device
    assert b.dtype_to_str(y2.dtype) == "float32"
