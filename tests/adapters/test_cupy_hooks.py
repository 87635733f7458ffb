"""CuPy's meter: the memory pool's blocks a call's thread takes (issue #28).

No GPU here: CuPy's ``cupy.cuda.memory_hook`` is stood in for by a module of
the same shape (a ``MemoryHook`` base class whose hooks a thread enters with
``with``, kept per thread, and a pool that calls ``malloc_postprocess`` /
``free_postprocess`` with the keywords CuPy passes). The real module runs
where CuPy is installed (the `gpu` test at the end).
"""

from __future__ import annotations

import collections
import sys
import threading
import types

import pytest

from xpkit._adapters import _cupy_hooks, get_adapter
from xpkit._adapters._cupy_hooks import HookPeak

_TLS = threading.local()


def _hooks() -> collections.OrderedDict:
    if not hasattr(_TLS, "hooks"):
        _TLS.hooks = collections.OrderedDict()
    return _TLS.hooks


class _MemoryHook:
    """CuPy's ``MemoryHook``: registered per thread by name while ``with``-ed."""

    name = "MemoryHook"

    def __enter__(self):
        hooks = _hooks()
        if self.name in hooks:
            msg = f"hook {self.name} already exists"
            raise RuntimeError(msg)
        hooks[self.name] = self
        return self

    def __exit__(self, *exc):
        del _hooks()[self.name]

    def malloc_postprocess(self, **_kwargs):
        return None

    def free_postprocess(self, **_kwargs):
        return None


class _Pool:
    """A memory pool that calls the current thread's hooks as CuPy's does."""

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        self.next = 1 << 20

    def malloc(self, size: int) -> int:
        mem_size = -(-size // 512) * 512
        ptr, self.next = self.next, self.next + mem_size
        for hook in list(_hooks().values()):
            hook.malloc_postprocess(
                device_id=self.device_id,
                size=size,
                mem_size=mem_size,
                mem_ptr=ptr,
                pmem_id=id(self),
            )
        return ptr

    def free(self, ptr: int, mem_size: int) -> None:
        for hook in list(_hooks().values()):
            hook.free_postprocess(
                device_id=self.device_id, mem_size=mem_size, mem_ptr=ptr, pmem_id=0
            )


@pytest.fixture
def fake_memory_hook(monkeypatch):
    """``cupy.cuda.memory_hook`` as a module of CuPy's shape (no CuPy needed)."""
    module = types.ModuleType("cupy.cuda.memory_hook")
    module.MemoryHook = _MemoryHook
    monkeypatch.setitem(sys.modules, "cupy.cuda.memory_hook", module)
    monkeypatch.setattr(_cupy_hooks, "_HOOK", [])  # made again from the fake
    return module


def test_the_adapter_offers_the_hook_meter_on_each_device():
    for device, index in (("cuda:0", 0), ("cuda:3", 3)):
        (meter,) = get_adapter("cupy").peak_meters(device)
        assert isinstance(meter, HookPeak)
        assert meter._device_id == index
        assert not meter.process_wide


def test_it_counts_the_blocks_taken_and_given_back(fake_memory_hook):
    pool = _Pool()

    def run():
        a = pool.malloc(1000)  # 1024 in blocks
        b = pool.malloc(5000)  # 5120
        pool.free(a, 1024)
        c = pool.malloc(100)  # 512: 5632 live, under the 6144 peak
        return b, c

    _, peak = HookPeak(0).measure(run)
    assert peak == 1024 + 5120


def test_blocks_freed_that_it_never_saw_count_nothing(fake_memory_hook):
    pool = _Pool()
    earlier = pool.malloc(10_000)  # before the measurement

    def run():
        pool.free(earlier, 10_240)
        return pool.malloc(512)

    _, peak = HookPeak(0).measure(run)
    assert peak == 512


def test_another_devices_and_another_threads_blocks_are_not_counted(fake_memory_hook):
    mine, other_device = _Pool(0), _Pool(1)
    started, release = threading.Event(), threading.Event()

    def elsewhere():
        with _MemoryHook():  # (a hook of its own thread, not the meter's)
            started.set()
            _Pool(0).malloc(1 << 24)
            release.wait(10)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    started.wait(10)
    try:
        _, peak = HookPeak(0).measure(
            lambda: (mine.malloc(2048), other_device.malloc(1 << 20))
        )
    finally:
        release.set()
        worker.join(10)
    assert peak == 2048
    assert "xpkit" not in _hooks()  # the hook left the thread with the call


@pytest.mark.gpu
def test_on_a_real_gpu_it_sees_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    _, peak = HookPeak(0).measure(lambda: cupy.ones(1 << 20, dtype=cupy.float32) * 2)
    assert peak >= 2 * 4 * (1 << 20)
