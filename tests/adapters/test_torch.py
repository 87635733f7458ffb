"""torch XPU (Intel GPUs) in the torch adapter, with faked ``torch.xpu`` queries.

Nothing allocates on a fake XPU: the tests exercise xpkit's decisions
(device order, float64 per device, memory, cache release, OOM detection),
with errors constructed as torch raises them.
"""

from __future__ import annotations

import warnings

import pytest
from fakes import fake_cuda, fake_mps, fake_xpu

import xpkit
from xpkit._adapters import ADAPTERS, MemoryInfo
from xpkit._adapters._base import MemoryCap
from xpkit._dtypes import _warned

GB = 1024**3

torch = pytest.importorskip("torch")
TORCH = ADAPTERS["torch"]


def test_xpu_devices_come_after_cuda(monkeypatch):
    fake_cuda(monkeypatch, count=1)
    fake_xpu(monkeypatch, count=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert TORCH.devices() == ("cuda", "cuda:0", "xpu", "xpu:0", "xpu:1", "cpu")


def test_xpu_is_the_default_without_cuda(monkeypatch):
    fake_xpu(monkeypatch, count=2)
    b = xpkit.Backend("torch")
    assert (b.name, b.device, b.is_gpu) == ("torch-xpu", "xpu", True)
    assert xpkit.Backend("torch", device="xpu:1").device == "xpu:1"
    assert xpkit.resolve_backend("gpu").name == "torch-xpu"
    available, info = xpkit.check_gpu_available()
    assert (available, info["device"], info["device_name"]) == (
        True,
        "xpu",
        "Fake Arc 0",
    )
    assert TORCH.canonical_device("XPU") == "xpu:0"
    assert TORCH.device_name("xpu:1") == "Fake Arc 1"
    assert TORCH.unified_memory("xpu:0") is False
    with pytest.raises(ValueError, match=r"device='xpu:2'.*xpu, xpu:0, xpu:1"):
        xpkit.Backend("torch", device="xpu:2")


def test_float64_is_read_per_xpu_device(monkeypatch):
    fake_xpu(monkeypatch, count=2, fp64=(True, False))
    assert TORCH.supports_float64("xpu:0") is True
    assert TORCH.supports_float64("xpu:1") is False
    assert xpkit.Backend("torch", device="xpu:0").has_float64 is True
    b = xpkit.Backend("torch", device="xpu:1")
    assert b.has_float64 is False
    _warned.clear()
    with pytest.warns(xpkit.PrecisionWarning, match="torch-xpu has no float64"):
        assert b._xp_dtype("float64") is torch.float32


def test_xpu_without_has_fp64_tries_a_float64_tensor(monkeypatch):
    fake_xpu(monkeypatch, count=1, fp64=(None,))
    made = []

    def empty(*shape, dtype=None, device=None):
        made.append((dtype, str(device)))

    assert TORCH.supports_float64("xpu:0") is False  # this CPU build refuses xpu
    monkeypatch.setattr(torch, "empty", empty)
    assert TORCH.supports_float64("xpu:0") is True
    assert made == [(torch.float64, "xpu:0")]


def test_mps_float64_is_read_at_run_time(monkeypatch):
    fake_mps(monkeypatch)
    assert TORCH.supports_float64("mps") is False  # no MPS here: nothing made

    def empty(*shape, dtype=None, device=None):
        return None

    monkeypatch.setattr(torch, "empty", empty)  # a Metal that made one
    assert TORCH.supports_float64("mps") is True


def test_xpu_memory_counts_the_allocator_cache(monkeypatch):
    fake_xpu(monkeypatch, count=2, memory=(6 * GB, 16 * GB))
    monkeypatch.setattr(torch.xpu, "memory_reserved", lambda i: 3 * GB)
    monkeypatch.setattr(torch.xpu, "memory_allocated", lambda i: GB)
    assert TORCH.memory_info("xpu:1") == MemoryInfo(8 * GB, 16 * GB)
    assert TORCH.memory_probe("xpu:1").context_cost is None
    b = xpkit.Backend("torch", device="xpu:1")
    assert xpkit.device_memory_budget(b) == pytest.approx(8 * 0.8)


def test_xpu_memory_without_mem_get_info(monkeypatch):
    fake_xpu(monkeypatch, count=1)
    monkeypatch.delattr(torch.xpu, "mem_get_info", raising=False)
    monkeypatch.setattr(torch.xpu, "memory_reserved", lambda i: 3 * GB)
    monkeypatch.setattr(torch.xpu, "memory_allocated", lambda i: GB)
    # 16 GB (the fake's total_memory) less what torch has allocated
    assert TORCH.memory_info("xpu:0") == MemoryInfo(15 * GB, 16 * GB)


def test_xpu_per_process_fraction_is_a_cap(monkeypatch):
    fake_xpu(monkeypatch, count=1, memory=(14 * GB, 16 * GB))
    monkeypatch.setattr(torch.xpu, "memory_reserved", lambda i: 2 * GB)
    monkeypatch.setattr(torch.xpu, "memory_allocated", lambda i: 2 * GB)
    assert TORCH.memory_cap("xpu:0") is None  # not initialised: not asked
    monkeypatch.setattr(torch.xpu, "is_initialized", lambda: True)
    monkeypatch.setattr(
        torch.xpu, "get_per_process_memory_fraction", lambda i=None: 0.5
    )
    assert TORCH.memory_cap("xpu:0") == MemoryCap(
        8 * GB, 2 * GB, "torch.xpu.set_per_process_memory_fraction(0.5)"
    )
    b = xpkit.Backend("torch", device="xpu:0")
    assert xpkit.device_memory_budget(b) == pytest.approx(6 * 0.8)


def test_xpu_cache_is_emptied_only_when_in_use(monkeypatch):
    fake_xpu(monkeypatch, count=1)
    emptied = []
    monkeypatch.setattr(torch.xpu, "empty_cache", lambda: emptied.append("xpu"))
    TORCH.empty_cache()
    assert emptied == []
    monkeypatch.setattr(torch.xpu, "is_initialized", lambda: True)
    TORCH.empty_cache()
    assert emptied == ["xpu"]


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError(
            "XPU out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.11 GiB total)"
        ),
        torch.OutOfMemoryError("XPU out of memory. Tried to allocate 20.00 GiB"),
        RuntimeError(
            "level_zero backend failed with error: 39 "
            "(UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"
        ),
    ],
    ids=["message", "OutOfMemoryError", "level-zero"],
)
def test_xpu_oom_errors_are_detected(exc):
    assert TORCH.is_oom(exc) is True
    assert xpkit.is_oom_error(exc) is True


def test_other_xpu_errors_are_not_oom():
    err = RuntimeError("UR_RESULT_ERROR_INVALID_ARGUMENT on xpu:0")
    assert TORCH.is_oom(err) is False
    assert xpkit.is_oom_error(err) is False


def test_xpu_meter_follows_the_operations_and_reads_no_allocator_statistic(
    monkeypatch,
):
    fake_xpu(monkeypatch, count=2)

    def touched(*args):
        msg = "an XPU allocator statistic was read or reset"
        raise AssertionError(msg)

    for name in ("reset_peak_memory_stats", "memory_allocated", "max_memory_allocated"):
        monkeypatch.setattr(torch.xpu, name, touched)
    (meter,) = TORCH.peak_meters("xpu:1")
    assert meter.name == "torch dispatch (live tensors)"
    assert meter.measure(lambda: "done") == ("done", 0)


def test_a_torch_build_without_xpu(monkeypatch):
    monkeypatch.delattr(torch, "xpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert TORCH.devices() == ("cpu",)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TORCH.empty_cache()  # nothing to empty, nothing raised
    assert TORCH.memory_cap("cpu") is None


def test_the_adapter_knows_when_dynamo_traces_the_caller():
    """compiling(): False in eager code, True while torch.compile traces it."""
    torch = pytest.importorskip("torch")
    from xpkit._adapters import get_adapter

    adapter = get_adapter("torch")
    assert adapter.compiling() is False
    assert get_adapter("numpy").compiling() is False  # (no compiler of its own)
    seen = []

    def f(x):
        seen.append(adapter.compiling())
        return x + 1

    torch.compile(f, backend="eager")(torch.ones(3))
    assert seen == [True]


def test_matmul_of_a_tensor_with_values_and_a_meta_tensor_is_refused():
    """torch's matmul of a CPU tensor and a meta one gave a CPU tensor of
    uninitialised memory, different from run to run."""
    b = xpkit.Backend("torch", device="cpu")
    values = torch.full((2, 2), 5.0)
    meta = torch.ones(2, 2, device="meta")
    for A, B in ((values, meta), (meta, values)):
        with pytest.raises(ValueError, match=r"^A and B are on two devices \("):
            b.matmul(A, B)
    assert b.matmul(values, values).tolist() == [[50.0, 50.0], [50.0, 50.0]]
    assert b.matmul(meta, meta).device.type == "meta"
    weight = torch.nn.Parameter(values.clone())  # (a subclass: a review)
    with pytest.raises(ValueError, match=r"^A and B are on two devices \("):
        b.matmul(weight, meta)
