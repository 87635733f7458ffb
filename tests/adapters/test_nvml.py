"""No CUDA context created by looking: NVML for unused devices, else not queried.

A fake ``pynvml`` (tests/fakes.py) stands in for nvidia-ml-py; the CUDA
runtime's query (``torch.cuda.mem_get_info``, CuPy's ``memGetInfo``) is
replaced by one that records or refuses being asked, which is how a test
proves that no context was created: that query is what creates one.
"""

from __future__ import annotations

import json

import pytest
from fakes import fake_cuda, fake_cupy_gpus, fake_nvml, no_nvml

import xpkit
from xpkit._adapters import ADAPTERS, MemoryInfo
from xpkit._adapters._base import MemoryProbe
from xpkit._adapters._nvml import nvml, nvml_memory, nvml_name
from xpkit._cli import collect_info, print_info

GB = 1024**3
H100 = ("NVIDIA H100", "GPU-aaaa", 70 * GB, 80 * GB)
H100_B = ("NVIDIA H100", "GPU-bbbb", 50 * GB, 80 * GB)
H100_C = ("NVIDIA H100", "GPU-cccc", 30 * GB, 80 * GB)
A10 = ("NVIDIA A10", "GPU-dddd", 20 * GB, 24 * GB)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DEVICE_ORDER",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_ALLOC_CONF",
        "CUPY_GPU_MEMORY_LIMIT",
        "XPKIT_MEMORY_BUDGET_GB",
    ):
        monkeypatch.delenv(name, raising=False)


# -- the NVML helper ------------------------------------------------------------
def test_without_nvidia_ml_py_there_is_no_nvml(monkeypatch):
    no_nvml(monkeypatch)
    assert nvml() is None
    assert nvml_memory(0) is None


def test_nvml_without_a_driver_is_tried_once(monkeypatch):
    fake = fake_nvml(monkeypatch, [H100], init_fails=True)
    assert nvml() is None
    assert nvml_memory(0) is None
    assert fake.init_calls == 1


def test_nvml_reads_free_and_total(monkeypatch):
    fake = fake_nvml(monkeypatch, [H100, H100_B])
    assert nvml_memory(1) == MemoryInfo(50 * GB, 80 * GB)
    assert nvml_memory(2) is None  # no such device
    assert fake.init_calls == 1


@pytest.mark.parametrize(
    ("visible", "index", "expected"),
    [
        ("2,0", 0, MemoryInfo(30 * GB, 80 * GB)),  # CUDA's 0 is NVML's 2
        ("2,0", 1, MemoryInfo(70 * GB, 80 * GB)),
        ("2,0", 2, None),  # only two visible
        ("GPU-bbbb", 0, MemoryInfo(50 * GB, 80 * GB)),
        ("GPU-zzzz", 0, None),  # an unknown UUID: no answer, not a wrong one
        ("1,MIG-0123,0", 1, None),  # CUDA stops reading at the MIG entry
        ("", 0, None),  # no device visible
    ],
)
def test_nvml_follows_cuda_visible_devices(monkeypatch, visible, index, expected):
    fake_nvml(monkeypatch, [H100, H100_B, H100_C])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml_memory(index) == expected


def test_nvml_refuses_to_guess_the_order_of_mixed_models(monkeypatch):
    fake_nvml(monkeypatch, [A10, H100])
    assert nvml_memory(0) is None  # CUDA puts the fastest first: which one is it?
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert nvml_memory(0) == MemoryInfo(20 * GB, 24 * GB)


def test_nvml_error_during_a_query_is_no_answer(monkeypatch):
    fake = fake_nvml(monkeypatch, [H100])

    def broken(handle):
        raise fake.NVMLError("GPU is lost")

    monkeypatch.setattr(fake, "nvmlDeviceGetMemoryInfo", broken)
    assert nvml_memory(0) is None


def test_only_nvml_s_own_errors_are_no_answer(monkeypatch):
    """A fault that is not NVML's (a bug, an interrupt) is not hidden as "no answer"."""
    fake = fake_nvml(monkeypatch, [H100])

    def buggy(handle):
        raise KeyError(handle)

    monkeypatch.setattr(fake, "nvmlDeviceGetName", buggy)
    with pytest.raises(KeyError):
        nvml_name(0)


# -- torch CUDA ------------------------------------------------------------------
def _runtime_refuses(monkeypatch, torch):
    def creates_context(i=None):
        raise AssertionError(f"mem_get_info({i}) would create a CUDA context")

    monkeypatch.setattr(torch.cuda, "mem_get_info", creates_context)


def _runtime_records(monkeypatch, torch, free=6 * GB, total=80 * GB):
    asked: list[int] = []

    def mem_get_info(i=None):
        asked.append(i)
        return free, total

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    return asked


def test_torch_unused_device_is_read_through_nvml(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake = fake_nvml(monkeypatch, [H100, H100_B])
    _runtime_refuses(monkeypatch, torch)
    adapter = ADAPTERS["torch"]
    assert adapter.memory_info("cuda:1") == MemoryInfo(50 * GB, 80 * GB)
    assert adapter.memory_probe("cuda:1") == MemoryProbe("NVML", in_use=False)
    assert adapter.memory_probe("cuda") == MemoryProbe("NVML", in_use=True)
    assert 1 in fake.asked


def test_torch_device_with_a_context_is_read_from_the_runtime(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake = fake_nvml(monkeypatch, [H100, H100_B])
    asked = _runtime_records(monkeypatch, torch, free=6 * GB)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch._C, "_cuda_hasPrimaryContext", lambda i: i == 0, raising=False
    )
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: 3 * GB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: GB)
    adapter = ADAPTERS["torch"]
    # the runtime's free memory plus 2 GB idle in torch's cache
    assert adapter.memory_info("cuda:0") == MemoryInfo(8 * GB, 80 * GB)
    assert asked == [0]
    assert fake.asked == []
    assert adapter.memory_probe("cuda:0").source == (
        "torch.cuda.mem_get_info + caching allocator"
    )


def test_torch_context_known_from_the_allocator_without_the_driver_probe(monkeypatch):
    """Builds without ``_cuda_hasPrimaryContext``: memory torch holds means a context."""
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake_nvml(monkeypatch, [H100, H100_B])
    monkeypatch.delattr(torch._C, "_cuda_hasPrimaryContext", raising=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: GB if i == 1 else 0)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: GB if i == 1 else 0)
    adapter = ADAPTERS["torch"]
    assert adapter.memory_probe("cuda:1").source.startswith("torch.cuda.mem_get_info")
    assert adapter.memory_probe("cuda:0") == MemoryProbe("NVML", in_use=True)


def test_torch_without_nvml_says_asking_creates_a_context(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    no_nvml(monkeypatch)
    _runtime_refuses(monkeypatch, torch)
    adapter = ADAPTERS["torch"]
    probe = adapter.memory_probe("cuda:1")
    assert probe.in_use is False
    assert "would create a CUDA context on cuda:1" in probe.context_cost
    assert "nvidia-ml-py" in probe.context_cost
    assert adapter.memory_probe("cuda").in_use is True  # the current device


def test_torch_on_rocm_never_asks_nvml(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake = fake_nvml(monkeypatch, [H100, H100_B])
    monkeypatch.setattr(torch.version, "hip", "6.2.0")
    asked = _runtime_records(monkeypatch, torch)
    adapter = ADAPTERS["torch"]
    assert adapter.memory_info("cuda:1") == MemoryInfo(6 * GB, 80 * GB)
    assert asked == [1]
    assert fake.asked == []
    assert "NVML does not read ROCm GPUs" in adapter.memory_probe("cuda:1").context_cost


def test_torch_cap_of_an_unused_device_takes_its_total_from_nvml(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake_nvml(monkeypatch, [H100, H100_B])
    _runtime_refuses(monkeypatch, torch)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.25")
    cap = ADAPTERS["torch"].memory_cap("cuda:1")
    assert (cap.limit, cap.held) == (20 * GB, 0)


# -- xpkit info ---------------------------------------------------------------------
def _torch_rows(info):
    return {r["device"]: r for r in info["gpu_memory"] if r["library"] == "torch"}


def test_info_without_nvml_queries_only_the_device_in_use(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    no_nvml(monkeypatch)
    asked = _runtime_records(monkeypatch, torch, free=6 * GB, total=80 * GB)
    info = collect_info()
    rows = _torch_rows(info)
    assert set(asked) == {0}
    assert rows["cuda:0"]["queried"] is True
    assert rows["cuda:0"]["free_gb"] == pytest.approx(6)
    assert rows["cuda:1"]["queried"] is False
    assert rows["cuda:1"]["free_gb"] is None
    assert "would create a CUDA context on cuda:1" in rows["cuda:1"]["note"]
    json.dumps(info)  # what --json prints
    out = _text(info)
    assert "cuda:1   not queried: asking would create a CUDA context on cuda:1" in out
    assert "the device in use, so queried: asking would create" in out


def _device_untouched(monkeypatch, torch):
    """A tensor made on a CUDA device, or torch's CUDA initialised, fails the test."""
    real_empty = torch.empty

    def empty(*args, device=None, **kwargs):
        assert "cuda" not in str(device), "a tensor on a CUDA device creates a context"
        return real_empty(*args, device=device, **kwargs)

    def lazy_init():
        raise AssertionError("torch initialised its CUDA state")

    monkeypatch.setattr(torch, "empty", empty)
    monkeypatch.setattr(torch.cuda, "_lazy_init", lazy_init)
    _runtime_refuses(monkeypatch, torch)


def test_a_torch_cuda_backend_is_built_without_touching_the_device(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake_nvml(monkeypatch, [H100, H100_B])
    _device_untouched(monkeypatch, torch)
    b = xpkit.Backend("torch", device="cuda:1")
    assert {"float16", "bfloat16"} <= ADAPTERS["torch"].extra_dtypes("cuda:1")
    assert b.has_float64 is True
    assert ADAPTERS["torch"].device_name("cuda:1") == "NVIDIA H100"


def test_info_with_nvml_creates_no_context(monkeypatch):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, count=2)
    fake = fake_nvml(monkeypatch, [H100, H100_B])
    _device_untouched(monkeypatch, torch)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.5")
    info = collect_info()
    rows = _torch_rows(info)
    assert {0, 1} <= set(fake.asked)
    assert rows["cuda:1"]["source"] == "NVML"
    assert rows["cuda:1"]["free_gb"] == pytest.approx(50)
    assert rows["cuda:1"]["cap"] == {
        "limit_gb": 40.0,
        "held_gb": 0.0,
        "room_gb": 40.0,
        "source": "PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.5",
    }
    cuda_row = next(b for b in info["backends"] if b["name"] == "torch-cuda")
    assert cuda_row["device_name"] == "NVIDIA H100"  # NVML's name, not torch's
    assert cuda_row["budget_gb"] == pytest.approx(40 * 0.8)
    assert cuda_row["memory_cap"]["source"].startswith("PYTORCH_CUDA_ALLOC_CONF")
    out = _text(info)
    assert (
        "cap 40.00 GB, 0.00 GB held, 40.00 GB room: "
        "PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.5"
    ) in out
    assert "not queried" not in out


def test_info_on_a_machine_without_gpus_says_so(monkeypatch):
    from fakes import no_gpu

    no_gpu(monkeypatch)
    info = collect_info()
    assert info["gpu_memory"] == []
    assert "  no GPU found" in _text(info)


def _text(info):
    import io

    out = io.StringIO()
    print_info(info, out)
    return out.getvalue()


# -- CuPy -------------------------------------------------------------------------
def test_cupy_other_device_is_read_through_nvml(monkeypatch):
    cupy = pytest.importorskip("cupy")
    fake_cupy_gpus(monkeypatch, count=2, free=6 * GB, total=80 * GB, pooled=GB)
    fake_nvml(monkeypatch, [H100, H100_B])

    def creates_context():
        raise AssertionError("memGetInfo would create a CUDA context")

    adapter = ADAPTERS["cupy"]
    # device 0 is current and CuPy's pool holds memory there: the runtime
    assert adapter.memory_info("cuda:0") == MemoryInfo(7 * GB, 80 * GB)
    monkeypatch.setattr(cupy.cuda.runtime, "memGetInfo", creates_context)
    assert adapter.memory_info("cuda:1") == MemoryInfo(50 * GB, 80 * GB)
    assert adapter.memory_probe("cuda:1") == MemoryProbe("NVML", in_use=False)
    monkeypatch.setenv("CUPY_GPU_MEMORY_LIMIT", "25%")
    cap = adapter.memory_cap("cuda:1")
    assert (cap.limit, cap.held, cap.source) == (
        20 * GB,
        0,
        "CUPY_GPU_MEMORY_LIMIT=25%",
    )


def test_cupy_without_nvml_says_asking_creates_a_context(monkeypatch):
    pytest.importorskip("cupy")
    fake_cupy_gpus(monkeypatch, count=2)
    no_nvml(monkeypatch)
    probe = ADAPTERS["cupy"].memory_probe("cuda:1")
    assert probe.in_use is False
    assert "would create a CUDA context on cuda:1" in probe.context_cost
