"""GPU decisions with faked devices, pickling, and unavailable devices."""

from __future__ import annotations

import copy
import logging
import pickle
import textwrap
import warnings

import numpy as np
import pytest
from fakes import fake_cuda, fake_mps, no_gpu
from helpers import run_python

import xpkit
from xpkit._dtypes import _warned
from xpkit.testing import assert_equal


def test_torch_default_device_prefers_cuda(monkeypatch):
    fake_cuda(monkeypatch)
    b = xpkit.Backend("torch")
    assert (b.name, b.device, b.is_gpu) == ("torch-cuda", "cuda", True)
    assert xpkit.Backend("torch", device="cuda:1").device == "cuda:1"
    assert xpkit.Backend("torch", device="cpu").name == "torch-cpu"
    assert xpkit.Backend("auto").name == "torch-cuda"


def test_torch_cuda_index_out_of_range(monkeypatch):
    fake_cuda(monkeypatch, count=2)
    with pytest.raises(
        ValueError, match=r"device='cuda:2'.*available devices: cuda, cuda:0, cuda:1"
    ):
        xpkit.Backend("torch", device="cuda:2")


def test_torch_mps_device_and_float64_narrowing(monkeypatch):
    fake_mps(monkeypatch)
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch")
    assert (b.name, b.device, b.is_gpu) == ("torch-mps", "mps", True)
    _warned.clear()
    with pytest.warns(xpkit.PrecisionWarning, match="torch-mps has no float64"):
        assert b._xp_dtype("float64") is torch.float32
    with pytest.warns(xpkit.PrecisionWarning, match="torch-mps has no complex128"):
        assert b._xp_dtype("complex128") is torch.complex64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per process and dtype: silent now
        assert b._xp_dtype("float64") is torch.float32
        assert b._xp_dtype("float32") is torch.float32


def test_float64_narrowing_end_to_end_on_strict_device():
    """array-api-strict's simulated ``no_float64`` device behaves like MPS."""
    pytest.importorskip("array_api_strict")
    b = xpkit.Backend("array_api_strict", device="no_float64")
    _warned.clear()
    with pytest.warns(xpkit.PrecisionWarning, match="no float64"):
        x = b.asarray(np.array([1.0, 2.5]))
    assert b.dtype_to_str(x.dtype) == "float32"
    assert_equal(b.to_numpy(x), np.array([1.0, 2.5], dtype=np.float32))
    y = b.full(3, 0.5)
    assert b.dtype_to_str(y.dtype) == "float32"
    z = b.asarray([1, 2], dtype="float64")
    assert b.dtype_to_str(z.dtype) == "float32"


JAX_NO_X64 = textwrap.dedent(
    """
    import warnings
    import numpy as np
    import jax
    import xpkit

    b = xpkit.Backend("jax")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x = b.asarray(np.array([1.5, 2.5]))
        i = b.asarray(np.array([1, 2], dtype=np.int64))
    assert b.dtype_to_str(x.dtype) == "float32", x.dtype
    assert b.dtype_to_str(i.dtype) == "int32", i.dtype
    messages = sorted(str(w.message) for w in seen)
    assert any("has no float64" in m for m in messages), messages
    assert any("has no int64" in m for m in messages), messages
    assert not any("truncated" in m for m in messages), messages  # JAX's own warning
    assert xpkit.Backend.from_arrays(x) == b

    jax.config.update("jax_enable_x64", True)
    y = xpkit.Backend.from_arrays(x).asarray(np.array([1.5]))
    assert xpkit.Backend.dtype_to_str(y.dtype) == "float64", y.dtype   # no stale cache
    print("ok")
    """
)


def test_jax_without_x64_end_to_end():
    pytest.importorskip("jax")
    proc = run_python(JAX_NO_X64)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"


JAX_X64_SWITCHED_OFF = textwrap.dedent(
    """
    import warnings

    import jax
    import pytest

    import xpkit

    jax.config.update("jax_enable_x64", True)
    b = xpkit.Backend("jax")  # (bound while JAX holds float64)
    jax.config.update("jax_enable_x64", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xpkit.PrecisionWarning)
        with pytest.raises(ValueError, match="does not fit dtype float32"):
            b.asarray([1e300])
        with pytest.raises(ValueError, match="does not fit dtype int32"):
            b.asarray([2**40])
        with pytest.raises(ValueError, match="does not fit dtype float32"):
            b.full((1,), 1e300)
        assert b.dtype_to_str(b.asarray([0.5]).dtype) == "float32"
    print("ok")
    """
)


def test_a_jax_backend_follows_x64_switched_off_after_it_was_made():
    """It kept the dtypes it bound: 1e300 became inf and 2**40 0 in JAX's
    hands, with JAX's own warning only."""
    pytest.importorskip("jax")
    proc = run_python(JAX_X64_SWITCHED_OFF)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "ok"


def test_gpu_spec_runs_on_gpu_or_raises(monkeypatch):
    no_gpu(monkeypatch)
    with pytest.raises(RuntimeError, match="no GPU is available"):
        xpkit.resolve_backend("gpu")
    available, info = xpkit.check_gpu_available()
    assert available is False
    assert (info["backend"], info["device"], info["gpus"]) == ("numpy", "cpu", [])


def test_gpu_spec_with_fake_cuda(monkeypatch):
    fake_cuda(monkeypatch)
    b = xpkit.resolve_backend("gpu")
    assert b.name == "torch-cuda"
    available, info = xpkit.check_gpu_available()
    assert available is True
    assert info["backend"] == "torch"
    assert info["device"] == "cuda"
    assert info["device_name"] == "Fake GPU 0"
    torch_gpus = [g for g in info["gpus"] if g["backend"] == "torch"]
    assert [g["device"] for g in torch_gpus] == ["cuda", "cuda:1"]


def test_resolve_backend_specifiers():
    assert xpkit.resolve_backend(None).name == "numpy"
    assert xpkit.resolve_backend("cpu").name == "numpy"
    assert xpkit.resolve_backend("numpy").name == "numpy"
    b = xpkit.Backend("numpy")
    assert xpkit.resolve_backend(b) is b


@pytest.mark.parametrize(
    ("n_samples", "n_features", "cv", "fake", "expected"),
    [
        (1_000, 1_000, 1, "cuda", "numpy"),  # 1M elements
        (1_000, 1_000, 10, "cuda", "torch-cuda"),  # cv multiplies: 10M
        (10_000, 1_000, 1, "cuda", "torch-cuda"),  # 10M on CUDA
        (10_000, 1_000, 2, "mps", "numpy"),  # 20M: below the MPS threshold
        (10_000, 3_000, 1, "mps", "torch-mps"),  # 30M on MPS
        (100_000, 1_000, 1, None, "numpy"),  # no GPU at all
    ],
)
def test_auto_select_backend_thresholds(
    monkeypatch, n_samples, n_features, cv, fake, expected
):
    if fake == "cuda":
        fake_cuda(monkeypatch)
    elif fake == "mps":
        fake_mps(monkeypatch)
    else:
        no_gpu(monkeypatch)
    assert xpkit.auto_select_backend(n_samples, n_features, cv=cv).name == expected


def test_auto_says_where_it_went(caplog):
    with caplog.at_level(logging.INFO, logger="xpkit"):
        b = xpkit.Backend("auto")
    assert any(
        f"backend='auto' chose {b.library}" in r.getMessage() for r in caplog.records
    )


@pytest.mark.xpkit_skip(
    ["numpy-readonly"], reason="the plugin's variant pickles as NumPy's Backend"
)
def test_pickle_and_deepcopy_round_trip(xpkit_backend):
    b = xpkit_backend
    for clone in (pickle.loads(pickle.dumps(b)), copy.deepcopy(b), copy.copy(b)):
        assert clone == b
        assert (clone.name, clone.device, clone.xp) == (b.name, b.device, b.xp)
        assert_equal(
            clone.to_numpy(clone.asarray([1.0, 2.0])),
            np.array([1.0, 2.0]),
            check_namespace=False,
        )


def test_unpickled_on_host_without_the_device(monkeypatch):
    fake_cuda(monkeypatch)
    data = pickle.dumps(xpkit.Backend("torch", device="cuda:1"))
    monkeypatch.undo()
    no_gpu(monkeypatch)
    b = pickle.loads(data)
    assert (b.name, b.device) == ("torch-cuda", "cuda:1")  # never silently moved
    with pytest.raises(
        RuntimeError, match=r"pickled on a host with PyTorch device 'cuda:1'"
    ):
        b.asarray([1.0])
    with pytest.raises(RuntimeError, match="cuda:1"):
        b.xp.ones(3)


def test_unpickled_backend_without_device_refuses_memory_work(monkeypatch):
    fake_cuda(monkeypatch)
    data = pickle.dumps(xpkit.Backend("torch", device="cuda"))
    monkeypatch.undo()
    no_gpu(monkeypatch)
    b = pickle.loads(data)
    with pytest.raises(
        RuntimeError, match="pickled on a host with PyTorch device 'cuda'"
    ):
        xpkit.device_memory_budget(b)
    with pytest.raises(RuntimeError, match="pickled on a host"):
        xpkit.map_batches(lambda x: x, np.ones((4, 1)), backend=b)


def test_from_arrays_finds_strict_devices():
    strict = pytest.importorskip("array_api_strict")
    x = strict.asarray([1.0], device=strict.Device("device1"))
    b = xpkit.Backend.from_arrays(x, 2)
    assert (b.name, b.device) == ("array_api_strict", "device1")
    assert b == xpkit.Backend("array_api_strict", device="device1")
    moved = b.to_gpu(xpkit.Backend("array_api_strict").asarray([1.0]))
    assert xpkit.Backend.from_arrays(moved).device == "device1"
    back = b.to_cpu(moved)
    assert xpkit.Backend.from_arrays(back).device == "cpu"


def test_from_arrays_with_no_arrays_is_numpy():
    assert xpkit.Backend.from_arrays().name == "numpy"
    assert xpkit.Backend.from_arrays(None, 1.0, True).name == "numpy"


def test_from_arrays_of_a_jax_tracer_is_the_default_device():
    jax = pytest.importorskip("jax")
    seen = []

    @jax.jit
    def f(x):
        b = xpkit.Backend.from_arrays(x)
        seen.append(b.name)
        return b.matmul(x, x)

    assert float(f(jax.numpy.arange(3.0))) == 5.0
    assert seen == [xpkit.Backend("jax").name]


def test_from_arrays_of_a_sharded_jax_array_asks_for_a_device():
    pytest.importorskip("jax")
    code = textwrap.dedent(
        """
        import jax, numpy as np, xpkit
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        mesh = Mesh(np.array(jax.devices("cpu")[:2]), ("x",))
        x = jax.device_put(np.arange(4.0), NamedSharding(mesh, PartitionSpec("x")))
        try:
            xpkit.Backend.from_arrays(x)
        except ValueError as exc:
            print("ValueError:", exc)
        """
    )
    run = run_python(
        code,
        check=True,
        extra_env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
    )
    assert "ValueError: arrays sharded over 2 devices have no single device" in (
        run.stdout
    )


def test_to_numpy_is_zero_copy_on_cpu(xpkit_backend):
    b = xpkit_backend
    x = b.asarray(np.arange(4.0))
    host = b.to_numpy(x)
    again = b.to_numpy(x)
    if b.library in {"numpy", "torch", "array_api_strict", "jax"} and not b.is_gpu:
        assert np.shares_memory(host, again)


def test_torch_lists_cuda_dtypes_without_touching_cuda():
    """Listing a CUDA device's dtypes made a tensor there: a driver context each."""
    pytest.importorskip("torch")
    from xpkit._adapters import get_adapter

    torch_adapter = get_adapter("torch")
    assert torch_adapter.supported_dtypes("cuda:1") == torch_adapter.supported_dtypes(
        "cpu"
    )
