"""Memory caps, NVML and XPU on real hardware; skipped where there is none.

Run on a GPU machine with ``python -m pytest -m gpu``. Each test also skips
when its library or device kind is missing (a CUDA machine has no XPU).
The fault-injected counterparts are in memory/test_memory_caps.py,
adapters/test_nvml.py and adapters/test_torch.py.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from helpers import run_python

import xpkit
from xpkit._adapters import get_adapter

pytestmark = pytest.mark.gpu

GB = 1024**3


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


def test_set_per_process_memory_fraction_caps_a_real_budget():
    torch = _torch_cuda()
    b = xpkit.Backend("torch", device="cuda:0")
    adapter = get_adapter("torch")
    torch.zeros(1, device="cuda:0")  # this device is in use
    before = torch.cuda.get_per_process_memory_fraction(0)
    torch.cuda.set_per_process_memory_fraction(0.25, 0)
    try:
        total = int(torch.cuda.mem_get_info(0)[1])
        cap = adapter.memory_cap("cuda:0")
        assert cap is not None
        assert cap.source == "torch.cuda.set_per_process_memory_fraction(0.25)"
        assert abs(cap.limit - total // 4) <= 1
        budget = xpkit.device_memory_budget(b)
        assert 0 < budget * GB <= cap.room
        # the budget fits under the cap; a quarter of the device more does not
        x = torch.empty(int(budget * GB) // 4, dtype=torch.float32, device="cuda:0")
        del x
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(int(cap.limit * 1.1) // 4, dtype=torch.float32, device="cuda:0")
    finally:
        torch.cuda.set_per_process_memory_fraction(before, 0)
        torch.cuda.empty_cache()


def test_alloc_conf_fraction_caps_a_fresh_process():
    _torch_cuda()
    code = textwrap.dedent(
        """
        import json, torch, xpkit
        from xpkit._adapters import get_adapter
        b = xpkit.Backend("torch", device="cuda:0")
        cap = get_adapter("torch").memory_cap("cuda:0")
        torch.zeros(1, device="cuda:0")
        total = int(torch.cuda.mem_get_info(0)[1])
        try:
            torch.empty(int(total * 0.3) // 4, dtype=torch.float32, device="cuda:0")
            refused = False
        except torch.OutOfMemoryError:
            refused = True
        print(json.dumps({"limit": cap.limit, "source": cap.source, "total": total,
                          "budget": xpkit.device_memory_budget(b),
                          "refused": refused}))
        """
    )
    proc = run_python(
        code,
        check=True,
        extra_env={"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.25"},
    )
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["source"] == "PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.25"
    assert abs(got["limit"] - got["total"] // 4) <= got["total"] // 100
    assert got["budget"] * GB <= got["limit"]
    assert got["refused"] is True  # torch itself enforces the variable


def test_nvml_reading_creates_no_context():
    """In a fresh process: budget and info of every CUDA device, then no context."""
    _torch_cuda()
    pytest.importorskip("pynvml")
    code = textwrap.dedent(
        """
        import json, os, torch, pynvml
        from xpkit._adapters import get_adapter
        from xpkit._adapters._nvml import nvml_memory
        adapter = get_adapter("torch")
        n = torch.cuda.device_count()
        readings = [nvml_memory(i) for i in range(n)]
        infos = [adapter.memory_info(f"cuda:{i}") for i in range(n)]
        probes = [adapter.memory_probe(f"cuda:{i}").source for i in range(n)]
        pynvml.nvmlInit()
        mine = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            mine += [i for p in procs if p.pid == os.getpid()]
        print(json.dumps({"nvml": [r is not None for r in readings],
                          "probes": probes, "mine": mine,
                          "initialised": torch.cuda.is_initialized()}))
        """
    )
    got = json.loads(run_python(code, check=True).stdout.strip().splitlines()[-1])
    if not all(got["nvml"]):
        pytest.skip("NVML cannot map CUDA devices here (set CUDA_DEVICE_ORDER)")
    assert set(got["probes"]) == {"NVML"}
    assert got["mine"] == []  # no device holds a context of that process


def test_cupy_pool_limit_caps_a_real_budget():
    cupy = pytest.importorskip("cupy")
    if not get_adapter("cupy").devices():
        pytest.skip("CuPy sees no device")
    b = xpkit.Backend("cupy", device="cuda:0")
    pool = cupy.get_default_memory_pool()
    before = pool.get_limit()
    keep = cupy.zeros(1)  # the pool holds memory: the device is in use
    pool.set_limit(size=GB)
    try:
        cap = get_adapter("cupy").memory_cap("cuda:0")
        assert cap is not None
        assert cap.limit == GB
        assert xpkit.device_memory_budget(b) * GB <= GB
    finally:
        pool.set_limit(size=before)
        del keep


def test_jax_cap_is_its_bytes_limit():
    jax = pytest.importorskip("jax")
    gpus = [d for d in jax.devices() if d.platform != "cpu"]
    if not gpus:
        pytest.skip("JAX sees no GPU")
    adapter = get_adapter("jax")
    device = adapter.device_str(gpus[0])
    stats = gpus[0].memory_stats()
    if not stats or "bytes_limit" not in stats:
        pytest.skip("this JAX GPU reports no bytes_limit")
    cap = adapter.memory_cap(device)
    assert cap is not None
    assert cap.limit == stats["bytes_limit"]


def test_real_xpu_memory_and_float64():
    torch = pytest.importorskip("torch")
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        pytest.skip("torch sees no XPU")
    adapter = get_adapter("torch")
    info = adapter.memory_info("xpu:0")
    assert info is not None
    assert 0 < info.free <= info.total
    has = getattr(torch.xpu.get_device_properties(0), "has_fp64", None)
    if has is not None:
        assert adapter.supports_float64("xpu:0") is bool(has)
    b = xpkit.Backend("torch", device="xpu:0")
    x = b.asarray(np.arange(4.0), dtype="float32")
    assert b.to_numpy(b.xp.sum(x)) == 6.0
