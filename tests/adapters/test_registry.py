"""The registry: the adapters the layers above find, by key or by array.

The layers above the adapters import the registry and the `Adapter`
interface, never an adapter; the package ``xpkit._adapters`` registers the
seven. A fresh interpreter that imports only the registry finds it filled.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import run_python

from xpkit._adapters import _registry
from xpkit._adapters._base import Adapter
from xpkit._adapters._registry import ADAPTERS, adapter_for_array, get_adapter, to_host

#: The order a GPU is looked for by "gpu" / "auto" (the order they register in).
GPU_SEARCH_ORDER = [
    "numpy",
    "torch",
    "array_api_strict",
    "cupy",
    "jax",
    "dask",
    "ndonnx",
]


def test_the_registry_holds_every_adapter_in_search_order():
    assert list(ADAPTERS) == GPU_SEARCH_ORDER
    assert all(isinstance(a, Adapter) for a in ADAPTERS.values())
    assert {key: a.key for key, a in ADAPTERS.items()} == {k: k for k in ADAPTERS}


def test_importing_only_the_registry_fills_it():
    code = (
        "import sys\n"
        "from xpkit._adapters._registry import ADAPTERS\n"
        "print(','.join(ADAPTERS))\n"
        "print('torch' in sys.modules, 'jax' in sys.modules)\n"
    )
    done = run_python(code, check=True)
    names, imported = done.stdout.splitlines()
    assert names.split(",") == GPU_SEARCH_ORDER
    assert imported == "False False"  # (registering imports no library)


def test_an_unknown_key_is_a_key_error():
    assert get_adapter("numpy") is ADAPTERS["numpy"]
    with pytest.raises(KeyError):
        get_adapter("tensorflow")


def test_an_array_finds_its_adapter_once_per_type():
    x = np.ones(3)
    assert adapter_for_array(x) is ADAPTERS["numpy"]
    assert _registry.BY_TYPE[np.ndarray] is ADAPTERS["numpy"]
    assert adapter_for_array([1.0, 2.0]) is None
    assert adapter_for_array(None) is None


def test_to_host_keeps_a_numpy_array_and_converts_the_rest():
    x = np.arange(4.0)
    assert to_host(x) is x
    listed = to_host([1.0, 2.0])
    assert isinstance(listed, np.ndarray)
    np.testing.assert_array_equal(listed, [1.0, 2.0])


def test_to_host_of_every_backend(xpkit_backend):
    host = np.arange(6.0).reshape(3, 2)
    got = to_host(xpkit_backend.asarray(host))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, host.astype(got.dtype))


def test_a_library_half_imported_by_another_thread_owns_nothing_yet():
    """While one thread imported Dask, another's ``top_k`` on NumPy asked
    whether ``k`` was a Dask array and met the partly made ``dask.array``
    (AttributeError: no attribute 'Array')."""
    code = """
import sys, types
import numpy as np
import xpkit
from xpkit._adapters._registry import adapter_for_array
assert "dask.array" not in sys.modules
half = types.ModuleType("dask.array")  # (as a module being made: no Array yet)
sys.modules["dask"] = types.ModuleType("dask")
sys.modules["dask.array"] = half
assert adapter_for_array(3) is None
got = xpkit.Backend("numpy").top_k(np.array([3.0, 1.0, 2.0]), 2)
values, indices = got
print(values.tolist(), indices.tolist())
"""
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[3.0,", "2.0]", "[0,", "2]"]


def test_a_device_is_found_while_another_thread_imports_dask(monkeypatch):
    """array-api-compat asks every array whether it is Dask's by reading
    ``dask.array.Array`` of the module in ``sys.modules``: while another
    thread imports Dask, that module is half made (AttributeError), and
    ``Backend.from_arrays`` of a tensor failed with it."""
    torch = pytest.importorskip("torch")
    import sys
    import types

    class Tensor(torch.Tensor):  # (a class array-api-compat has not seen)
        pass

    half_made = types.ModuleType("dask.array")  # (no Array yet)
    monkeypatch.setitem(sys.modules, "dask.array", half_made)
    t = torch.ones(2).as_subclass(Tensor)
    adapter = get_adapter("torch")
    assert adapter.device_of(t) == torch.device("cpu")
    assert adapter.device_key(t) is not None


@pytest.mark.parametrize(
    "obj", [slice(1, 2), 3, 2.5, True, None, Ellipsis, (0, 1), [1, 2], "a"]
)
def test_python_s_own_objects_are_answered_without_asking_an_adapter(monkeypatch, obj):
    # (an update's index asks for each part's library several times a call)
    asked = []
    for adapter in ADAPTERS.values():
        monkeypatch.setattr(adapter, "owns", lambda x, a=adapter: asked.append(a))
    assert adapter_for_array(obj) is None
    assert asked == []
