"""What the ndonnx adapter knows that the shared tests cannot reach.

ndonnx computes values by propagating them through onnxruntime, and that
propagation swallows onnxruntime's errors: an allocation that fails leaves an
array without a value. The adapter runs such a graph again so the real error
(an OOM that `compute_oom_safe` splits on) reaches the caller.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

import xpkit
from xpkit._adapters import ADAPTERS

from .helpers import run_python

ndx = pytest.importorskip("ndonnx", reason="needs ndonnx: pip install 'xpkit[ndonnx]'")
ort = pytest.importorskip(
    "onnxruntime", reason="needs onnxruntime: pip install 'xpkit[ndonnx]'"
)

ADAPTER = ADAPTERS["ndonnx"]


def test_a_placeholder_has_no_value_at_hand():
    placeholder = ndx.argument(shape=(2,), dtype=ndx.float64) * 2.0
    assert not ADAPTER.values_at_hand(placeholder)
    with pytest.raises(ValueError, match="no propagated value"):
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


REAL_OOM_SCRIPT = textwrap.dedent(
    """
    import resource
    import numpy as np
    import ndonnx as ndx
    import xpkit

    def vm_size() -> int:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
        raise SystemExit("no VmSize")

    limit = vm_size() + 256 * 1024**2          # 256 MiB more address space
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cols = 1024**2 // 8                         # 1 MiB of scratch per row

    def fn(w):
        wide = ndx.broadcast_to(w[:, None], (w.shape[0], cols))
        return ndx.sum(wide + 1.0, axis=1)

    b = xpkit.Backend("ndonnx")
    w = b.asarray(np.arange(512.0))             # 512 MiB of scratch at once
    try:
        b.to_numpy(fn(w))
    except Exception as exc:
        assert xpkit.is_oom_error(exc), repr(exc)
        print("unsplit call: OOM", type(exc).__name__)
    else:
        raise SystemExit("the unsplit call fitted: the limit did not bite")
    got = b.to_numpy(xpkit.compute_oom_safe(fn, w))
    assert np.array_equal(got, (np.arange(512.0) + 1.0) * cols), "wrong result"
    print("recovered", got.shape[0], "rows exactly")
    """
)


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and /proc are Linux's")
def test_real_onnxruntime_oom_is_split_and_recovered():
    out = run_python(REAL_OOM_SCRIPT, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "unsplit call: OOM" in out.stdout
    assert "recovered 512 rows exactly" in out.stdout
