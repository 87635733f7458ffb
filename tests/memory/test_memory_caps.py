"""Budgets honour the caps a process runs under (torch, CuPy, JAX), fault-injected.

Every cap is set the way a user sets it (an environment variable, or what
the library's getter reports after its setter ran); the device's free and
total memory are faked. Expected budgets are worked out by hand:
``min(free, limit - held) * HEADROOM``.
"""

from __future__ import annotations

import pytest
from fakes import fake_cuda, fake_cupy_gpus, fake_jax_gpus, no_nvml

import xpkit
from xpkit import _memory
from xpkit._adapters import ADAPTERS, Adapter, MemoryInfo
from xpkit._adapters._base import MemoryCap
from xpkit._adapters._caps import alloc_conf_fraction, cupy_env_limit, jax_arena

GB = 1024**3
HEADROOM = 0.8  # _memory.HEADROOM, written out: the expected values are by hand

CONF_NAMES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (
        *CONF_NAMES,
        "PYTORCH_HIP_ALLOC_CONF",
        "CUPY_GPU_MEMORY_LIMIT",
        "XLA_CLIENT_MEM_FRACTION",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "XLA_PYTHON_CLIENT_PREALLOCATE",
        "XLA_PYTHON_CLIENT_ALLOCATOR",
        "XPKIT_MEMORY_BUDGET_GB",
    ):
        monkeypatch.delenv(name, raising=False)
    no_nvml(monkeypatch)  # the CUDA runtime's view, unless a test installs NVML


def test_headroom_written_out_matches_the_module():
    assert _memory.HEADROOM == HEADROOM


# -- the environment variables, as each library parses them ---------------------
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:0.5"},
            (0.5, "PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.5"),
        ),
        (
            {
                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,"
                "roundup_power2_divisions:[256:1,512:2],"
                " per_process_memory_fraction:0.25"
            },
            (0.25, "PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.25"),
        ),
        (
            {"PYTORCH_ALLOC_CONF": "per_process_memory_fraction:0.3"},
            (0.3, "PYTORCH_ALLOC_CONF per_process_memory_fraction=0.3"),
        ),
        # torch reads the first variable set, and only it
        (
            {
                "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                "PYTORCH_ALLOC_CONF": "per_process_memory_fraction:0.3",
            },
            None,
        ),
        ({"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:1.5"}, None),
        ({"PYTORCH_CUDA_ALLOC_CONF": "per_process_memory_fraction:half"}, None),
        ({}, None),
    ],
)
def test_alloc_conf_fraction(env, expected):
    assert alloc_conf_fraction(CONF_NAMES, env) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1073741824", (GB, "CUPY_GPU_MEMORY_LIMIT=1073741824")),
        ("50%", (40 * GB, "CUPY_GPU_MEMORY_LIMIT=50%")),
        ("12.5%", (10 * GB, "CUPY_GPU_MEMORY_LIMIT=12.5%")),
        ("0", None),  # CuPy: no limit
        ("150%", None),
        ("1e9", None),  # CuPy's int() refuses it
        ("", None),
    ],
)
def test_cupy_env_limit(raw, expected):
    assert cupy_env_limit(80 * GB, {"CUPY_GPU_MEMORY_LIMIT": raw}) == expected


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "JAX's default fraction 0.75, preallocated"),
        (
            {"XLA_CLIENT_MEM_FRACTION": "0.5"},
            "XLA_CLIENT_MEM_FRACTION=0.5, preallocated",
        ),
        (
            {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".3"},
            "XLA_PYTHON_CLIENT_MEM_FRACTION=.3 (deprecated spelling), preallocated",
        ),
        (
            {
                "XLA_CLIENT_MEM_FRACTION": "0.9",
                "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
            },
            (
                "XLA_CLIENT_MEM_FRACTION=0.9, XLA_PYTHON_CLIENT_PREALLOCATE=false "
                "(grown on demand)"
            ),
        ),
        (
            {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},
            "XLA_PYTHON_CLIENT_ALLOCATOR=platform (no arena)",
        ),
    ],
)
def test_jax_arena_source(env, expected):
    assert jax_arena(env) == expected


# -- the rule: min(free, cap room) ----------------------------------------------
class _Capped(Adapter):
    key = "capped-test"
    free = 10 * GB
    cap: MemoryCap | None = None

    def memory_info(self, device):  # noqa: ARG002
        return MemoryInfo(self.free, 80 * GB)

    def memory_cap(self, device):  # noqa: ARG002
        return self.cap


@pytest.mark.parametrize(
    ("free", "cap", "expected"),
    [
        (10 * GB, None, 10 * GB),
        (10 * GB, MemoryCap(8 * GB, 2 * GB, "test"), 6 * GB),
        (3 * GB, MemoryCap(8 * GB, 2 * GB, "test"), 3 * GB),
        (10 * GB, MemoryCap(8 * GB, 9 * GB, "test"), 0),  # over the cap: no room
    ],
)
def test_device_free_bytes_is_the_smaller(free, cap, expected):
    adapter = _Capped()
    adapter.free, adapter.cap = free, cap
    assert _memory.device_free_bytes(adapter, "dev") == expected


def test_cap_room_never_negative():
    assert MemoryCap(4, 9, "x").room == 0
    assert MemoryCap(9, 4, "x").room == 5


def test_host_devices_have_no_cap():
    for key in ("numpy", "torch", "jax"):
        adapter = ADAPTERS[key]
        if adapter.is_installed():
            assert adapter.memory_cap("cpu") is None


# -- torch CUDA --------------------------------------------------------------
def _cuda_memory(monkeypatch, free, total, reserved=0, allocated=0):
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: (free, total))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: reserved)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: allocated)
    return torch


def _initialised(monkeypatch, torch, fraction):
    """torch's CUDA state after ``set_per_process_memory_fraction(fraction)``."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch._C, "_cuda_hasPrimaryContext", lambda i: True, raising=False
    )
    monkeypatch.setattr(
        torch.cuda, "get_per_process_memory_fraction", lambda i=None: fraction
    )


def test_torch_budget_honours_alloc_conf_fraction(monkeypatch):
    _cuda_memory(monkeypatch, free=70 * GB, total=80 * GB)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.5")
    b = xpkit.Backend("torch", device="cuda:0")
    cap = ADAPTERS["torch"].memory_cap("cuda:0")
    assert cap == MemoryCap(
        40 * GB, 0, "PYTORCH_CUDA_ALLOC_CONF per_process_memory_fraction=0.5"
    )
    assert xpkit.device_memory_budget(b) == pytest.approx(40 * HEADROOM)


def test_torch_budget_honours_set_per_process_memory_fraction(monkeypatch):
    # 60 GB free + 3 GB idle in torch's cache = 63; cap 20 GB, 5 allocated: 15
    torch = _cuda_memory(
        monkeypatch, free=60 * GB, total=80 * GB, reserved=8 * GB, allocated=5 * GB
    )
    _initialised(monkeypatch, torch, 0.25)
    b = xpkit.Backend("torch", device="cuda:0")
    cap = ADAPTERS["torch"].memory_cap("cuda:0")
    assert cap == MemoryCap(
        20 * GB, 5 * GB, "torch.cuda.set_per_process_memory_fraction(0.25)"
    )
    assert xpkit.device_memory_budget(b) == pytest.approx(15 * HEADROOM)


def test_torch_smaller_fraction_applies_and_the_variable_wins_a_tie(monkeypatch):
    torch = _cuda_memory(monkeypatch, free=70 * GB, total=80 * GB)
    adapter = ADAPTERS["torch"]
    _initialised(monkeypatch, torch, 0.5)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.25")
    assert adapter.memory_cap("cuda:0").source.startswith("PYTORCH_CUDA_ALLOC_CONF")
    assert adapter.memory_cap("cuda:0").limit == 20 * GB
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.75")
    assert adapter.memory_cap("cuda:0").source.startswith("torch.cuda.set_per")
    assert adapter.memory_cap("cuda:0").limit == 40 * GB
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.5")
    assert adapter.memory_cap("cuda:0").source.startswith("PYTORCH_CUDA_ALLOC_CONF")


def test_torch_fraction_of_one_is_no_cap(monkeypatch):
    torch = _cuda_memory(monkeypatch, free=6 * GB, total=80 * GB)
    _initialised(monkeypatch, torch, 1.0)
    b = xpkit.Backend("torch", device="cuda:0")
    assert ADAPTERS["torch"].memory_cap("cuda:0") is None
    assert xpkit.device_memory_budget(b) == pytest.approx(6 * HEADROOM)


def test_torch_free_memory_below_the_cap_still_decides(monkeypatch):
    _cuda_memory(monkeypatch, free=10 * GB, total=80 * GB)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.5")
    b = xpkit.Backend("torch", device="cuda:0")
    assert xpkit.device_memory_budget(b) == pytest.approx(10 * HEADROOM)


def test_torch_fraction_is_not_asked_before_cuda_is_initialised(monkeypatch):
    """Asking ``get_per_process_memory_fraction`` would initialise CUDA."""
    torch = _cuda_memory(monkeypatch, free=70 * GB, total=80 * GB)

    def initialises(i=None):
        raise AssertionError("get_per_process_memory_fraction initialises CUDA")

    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", initialises)
    assert ADAPTERS["torch"].memory_cap("cuda:1") is None


def test_explicit_budget_still_wins_over_a_cap(monkeypatch):
    _cuda_memory(monkeypatch, free=70 * GB, total=80 * GB)
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "per_process_memory_fraction:0.1")
    b = xpkit.Backend("torch", device="cuda:0")
    assert xpkit.device_memory_budget(b, max_gpu_memory_gb=50.0) == 50.0


# -- CuPy ---------------------------------------------------------------------
def test_cupy_budget_honours_the_pool_limit_from_the_variable(monkeypatch):
    # pool: 40 GB limit (50% of 80), 30 used + 2 free; device 20 free + 2 pooled
    fake_cupy_gpus(
        monkeypatch,
        free=20 * GB,
        total=80 * GB,
        pooled=2 * GB,
        used=30 * GB,
        limit=40 * GB,
    )
    monkeypatch.setenv("CUPY_GPU_MEMORY_LIMIT", "50%")
    cap = ADAPTERS["cupy"].memory_cap("cuda:0")
    assert cap == MemoryCap(40 * GB, 30 * GB, "CUPY_GPU_MEMORY_LIMIT=50%")
    b = xpkit.Backend("cupy", device="cuda:0")
    assert xpkit.device_memory_budget(b) == pytest.approx(10 * HEADROOM)


def test_cupy_limit_set_in_code_is_named_so(monkeypatch):
    fake_cupy_gpus(monkeypatch, free=20 * GB, total=80 * GB, used=GB, limit=4 * GB)
    cap = ADAPTERS["cupy"].memory_cap("cuda:0")
    assert cap == MemoryCap(4 * GB, GB, f"cupy MemoryPool.set_limit({4 * GB})")
    b = xpkit.Backend("cupy", device="cuda:0")
    assert xpkit.device_memory_budget(b) == pytest.approx(3 * HEADROOM)


def test_cupy_without_a_limit_has_no_cap(monkeypatch):
    fake_cupy_gpus(monkeypatch, free=20 * GB, total=80 * GB)
    assert ADAPTERS["cupy"].memory_cap("cuda:0") is None


# -- JAX ------------------------------------------------------------------------
def test_jax_budget_and_cap_from_bytes_limit(monkeypatch):
    fake_jax_gpus(
        monkeypatch, count=1, stats={"bytes_limit": 12 * GB, "bytes_in_use": 4 * GB}
    )
    monkeypatch.setenv("XLA_CLIENT_MEM_FRACTION", "0.5")
    cap = ADAPTERS["jax"].memory_cap("gpu")
    assert cap == MemoryCap(
        12 * GB,
        4 * GB,
        "XLA_CLIENT_MEM_FRACTION=0.5, preallocated (memory_stats bytes_limit)",
    )
    b = xpkit.Backend("jax", device="gpu")
    assert xpkit.device_memory_budget(b) == pytest.approx(8 * HEADROOM)


def test_jax_deprecated_fraction_and_no_preallocation_are_named(monkeypatch):
    fake_jax_gpus(
        monkeypatch, count=1, stats={"bytes_limit": 12 * GB, "bytes_in_use": 0}
    )
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.2")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    source = ADAPTERS["jax"].memory_cap("gpu").source
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 (deprecated spelling)" in source
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false (grown on demand)" in source


def test_jax_device_without_a_limit_has_no_cap(monkeypatch):
    fake_jax_gpus(monkeypatch, count=1, stats={"bytes_in_use": 0})
    assert ADAPTERS["jax"].memory_cap("gpu") is None
