"""What the ndonnx adapter knows that the shared tests cannot reach.

ndonnx computes values by propagating them through onnxruntime, and that
propagation swallows onnxruntime's errors: an allocation that fails leaves an
array without a value. The adapter runs such a graph again so the real error
(an OOM that `compute_oom_safe` splits on) reaches the caller. A real
onnxruntime OOM under an address-space limit is in `benchmarks/ndonnx_oom.py`:
onnxruntime sometimes crashes (SIGSEGV) when an allocation fails during a
session's initialisation, so it cannot be a test that passes every time.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import xpkit
from xpkit._adapters import ADAPTERS

ndx = pytest.importorskip("ndonnx", reason="needs ndonnx: pip install 'xpkit[ndonnx]'")
ort = pytest.importorskip(
    "onnxruntime", reason="needs onnxruntime: pip install 'xpkit[ndonnx]'"
)

ADAPTER = ADAPTERS["ndonnx"]


def test_a_placeholder_has_no_value_at_hand():
    placeholder = ndx.argument(shape=(2,), dtype=ndx.float64) * 2.0
    assert not ADAPTER.values_at_hand(placeholder)
    with pytest.raises(ValueError, match="an ndonnx array without values"):
        ADAPTER.to_numpy(placeholder)
    eager = ndx.asarray(np.arange(3.0)) * 2.0
    assert ADAPTER.values_at_hand(eager)
    np.testing.assert_array_equal(ADAPTER.to_numpy(eager), [0.0, 2.0, 4.0])


def test_a_value_lost_in_propagation_is_computed_again(monkeypatch):
    """An array whose propagated value is missing gets it from onnxruntime."""
    x = ndx.asarray(np.arange(4.0)) + 1.0
    monkeypatch.setattr(
        type(x),
        "unwrap_numpy",
        lambda self: (_ for _ in ()).throw(ValueError("no propagated value available")),
    )
    np.testing.assert_array_equal(ADAPTER.to_numpy(x), [1.0, 2.0, 3.0, 4.0])


def test_onnxruntime_errors_are_oom_only_when_an_allocation_failed():
    state = pytest.importorskip("onnxruntime.capi.onnxruntime_pybind11_state")
    from google.protobuf.message import EncodeError

    failed = state.Fail(
        "[ONNXRuntimeError] : 1 : FAIL : bfc_arena.cc:360 Failed to allocate "
        "memory for requested buffer of size 2199023255552"
    )
    bad_alloc = state.RuntimeException(
        "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : std::bad_alloc"
    )
    type_error = state.Fail("[ONNXRuntimeError] : 1 : FAIL : Type Error: float")
    assert xpkit.is_oom_error(failed)
    assert xpkit.is_oom_error(bad_alloc)
    assert xpkit.is_oom_error(EncodeError("Failed to serialize proto"))
    assert not xpkit.is_oom_error(type_error)
    assert not ADAPTER.is_oom(RuntimeError("Failed to allocate memory"))


def test_device_objects_of_other_libraries_are_refused():
    b = xpkit.Backend("ndonnx")
    assert ADAPTER.device_str(b.native_device) == "cpu"
    with pytest.raises(TypeError, match="device=5 is not a device of backend"):
        b.asarray([1.0], device=5)
    with pytest.raises(TypeError, match="is not a device of backend"):
        b.asarray([1.0], device=np.float64(0))


def test_a_placeholder_without_values_is_refused_saying_so():
    """ndonnx said "no propagated value available", and a symbolic axis got
    Dask's advice ("compute chunk sizes first")."""
    said = "an ndonnx array without values (a placeholder of a graph, ndx.argument)"
    with pytest.raises(ValueError, match=re.escape(said)):
        xpkit.map_batches(
            lambda r: r.sum(axis=1), ndx.argument(shape=(10, 3), dtype=ndx.float32)
        )
    symbolic = ndx.argument(shape=("N", 3), dtype=ndx.float32)
    with pytest.raises(ValueError, match="a symbolic axis") as info:
        xpkit.map_batches(lambda r: r.sum(axis=1), symbolic)
    assert "chunk" not in str(info.value)
