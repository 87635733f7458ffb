"""torch's meter: the live bytes of the tensors a call's operations make (issue #28).

It follows the calling thread's aten operations (a dispatch mode), counts
each new storage on the measured device, rounded to the allocator's block,
and resets no allocator statistic. The CUDA path is checked on torch's
``meta`` device (storages with sizes and no data) and with the allocator's
statistics made to fail if they are touched.
"""

from __future__ import annotations

import threading

import pytest

torch = pytest.importorskip("torch")

from xpkit._adapters import get_adapter
from xpkit._adapters._torch_dispatch import DispatchPeak

MIB = 2**20


def _cpu_meter() -> DispatchPeak:
    (meter, *_) = get_adapter("torch").peak_meters("cpu")
    assert isinstance(meter, DispatchPeak)
    return meter


def test_it_counts_what_the_operations_make_and_frees():
    x = torch.ones(MIB // 4)  # 1 MiB of float32, made before: not counted

    def fn():
        a = x * 2  # 1 MiB
        b = torch.zeros(2 * MIB // 4)  # a factory: 2 MiB
        del a  # freed before the next allocation
        c = b + 1  # 2 MiB, with b alive: 4 MiB at once
        return c.sum()

    result, peak = _cpu_meter().measure(fn)
    assert float(result) == 2 * MIB // 4
    assert 4 * MIB <= peak < 4 * MIB + 4096


@pytest.mark.parametrize(
    ("dtype", "op", "out_bytes", "cast_bytes"),
    [
        (torch.int8, lambda x: torch.cumsum(x, dim=1), 8, 8),  # into int64
        (torch.int32, lambda x: torch.cumsum(x, dim=1), 8, 8),
        (torch.float32, lambda x: torch.cumsum(x, dim=1), 4, 0),  # its own dtype
        (torch.float32, lambda x: x > 0, 1, 0),  # a bool result: no cast
        (torch.float32, lambda x: torch.argmax(x, dim=1), 0, 0),  # not an arithmetic op
    ],
    ids=["cumsum-int8", "cumsum-int32", "cumsum-float32", "compare", "argmax"],
)
def test_an_operand_cast_whole_inside_the_operation_is_counted(
    dtype, op, out_bytes, cast_bytes
):
    """torch's cumsum of int8 casts the input to int64 before it sums: a
    batch planned from its outputs alone took twice its budget (measured
    against a counting malloc)."""
    shape = (1000, 256)
    x = torch.ones(shape, dtype=dtype)
    _, peak = _cpu_meter().measure(lambda: op(x))
    elements = shape[0] * shape[1]
    expected = elements * (out_bytes + cast_bytes)
    assert expected <= peak <= expected + 16 * 1024, (peak, expected)


def test_views_and_in_place_operations_make_nothing():
    x = torch.ones(1024, 256)

    def fn():
        v = x[10:20].T  # views of an input
        x.mul_(1.0)  # in place
        out = torch.empty(1024, 256)
        torch.add(x, 1, out=out)  # into a buffer it made
        return v[:3], out

    _, peak = _cpu_meter().measure(fn)
    assert peak == 1024 * 256 * 4  # the one empty() buffer


def test_a_result_moved_to_another_device_is_not_counted():
    meter = DispatchPeak("meta", None, 512)

    def fn():
        on_meta = torch.empty(1000, device="meta")  # 4000 bytes -> 4096 in blocks
        host = torch.ones(10_000)  # the CPU's: not the measured device
        return on_meta, host

    _, peak = meter.measure(fn)
    assert peak == 4096


def test_the_allocator_block_rounds_every_storage():
    meter = DispatchPeak("meta", None, 512)
    _, peak = meter.measure(lambda: [torch.empty(1, device="meta") for _ in range(3)])
    assert peak == 3 * 512


def test_another_threads_tensors_are_not_counted():
    started, release = threading.Event(), threading.Event()
    held: list[object] = []

    def other():
        started.set()
        held.append(torch.ones(8 * MIB // 4))  # 8 MiB in another thread
        release.wait(10)

    worker = threading.Thread(target=other)
    worker.start()
    started.wait(10)
    try:
        _, peak = _cpu_meter().measure(lambda: torch.ones(MIB // 4) * 3)
    finally:
        release.set()
        worker.join(10)
    assert MIB <= peak < 3 * MIB  # its own 2 MiB, never the other thread's 8


def test_it_never_touches_the_allocators_statistics(monkeypatch):
    def touched(*args, **kwargs):
        msg = "an allocator statistic was read or reset"
        raise AssertionError(msg)

    for name in (
        "reset_peak_memory_stats",
        "max_memory_allocated",
        "memory_allocated",
        "memory_stats",
        "reset_accumulated_memory_stats",
    ):
        monkeypatch.setattr(torch.cuda, name, touched)
    meters = get_adapter("torch").peak_meters("cuda:0")
    _, peak = meters[0].measure(lambda: torch.ones(1000) * 2)  # CPU work: 0 on cuda
    assert peak == 0
    _, peak = DispatchPeak("meta", None, 512).measure(
        lambda: torch.empty(10_000, device="meta") + 1
    )
    assert peak == 2 * 40_448  # two storages of 40,000 bytes in 512-byte blocks


def test_threads_measure_at_once_without_waiting():
    barrier = threading.Barrier(4)
    peaks: list[int] = []

    def work(k):
        barrier.wait(10)
        _, peak = _cpu_meter().measure(lambda: torch.ones(k * MIB // 4) + 0)
        peaks.append((k, peak))

    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(peaks) == [(k, 2 * k * MIB) for k in (1, 2, 3, 4)]


_NO_DYNAMO = """
import json, os, sys, warnings
import torch
import xpkit

env, filters = dict(os.environ), list(warnings.filters)
x = torch.arange(2000.0).reshape(1000, 2)
got = xpkit.map_batches(lambda r: r * 2.0 if float(r[0, 0]) > -1 else r, x)
plan = xpkit.plan_batches(lambda r: r * 3.0 if float(r[0, 0]) > -1 else r, x)
print(json.dumps({
    "dynamo": "torch._dynamo" in sys.modules,
    "env": sorted(set(os.environ.items()) ^ set(env.items())),
    "filters": len(warnings.filters) - len(filters),
    "source": plan.source,
    "same": bool((got == (x * 2.0).numpy()).all()),
}))
"""


def test_the_meter_imports_no_compiler_and_changes_no_process_state():
    """Its mode's first operation imported torch._dynamo (1 s), which set
    TORCHINDUCTOR_CACHE_DIR in os.environ and added a warnings filter."""
    import json

    from helpers import run_python

    done = run_python(_NO_DYNAMO, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["source"].startswith("measured by torch dispatch"), got
    assert got["same"], got
    assert got == {**got, "dynamo": False, "env": [], "filters": 0}


def test_with_the_compiler_imported_the_meter_still_counts():
    import torch._dynamo  # the process has it, as a torch.compile user does

    from xpkit._adapters._torch_dispatch import DispatchPeak

    def make() -> torch.Tensor:
        return torch.ones(1000) * 2.0

    result, peak = DispatchPeak("cpu", None, 1).measure(make)
    assert result.shape == (1000,)
    assert peak >= 4000


@pytest.mark.parametrize("where", ["entering", "leaving"])
def test_a_ctrl_c_as_the_mode_enters_or_leaves_takes_it_off_the_stack(
    monkeypatch, where
):
    """An interrupt landing in the mode's ``__exit__`` before it popped (or
    after ``__enter__`` pushed it) left xpkit's counting mode on the caller's
    thread: every later torch operation went through it."""
    from torch.utils import _python_dispatch as dispatch

    real_enter = dispatch.TorchDispatchMode.__enter__
    real_exit = dispatch.TorchDispatchMode.__exit__
    hit = []

    def enter(self):
        real_enter(self)  # (pushed)
        hit.append(where)
        raise KeyboardInterrupt

    def leave(self, *exc):
        if hit:  # (once: a second call is xpkit's own)
            return real_exit(self, *exc)
        hit.append(where)
        raise KeyboardInterrupt  # (before anything is undone)

    if where == "entering":
        monkeypatch.setattr(dispatch.TorchDispatchMode, "__enter__", enter)
    else:
        monkeypatch.setattr(dispatch.TorchDispatchMode, "__exit__", leave)
    flag = dispatch._is_in_torch_dispatch_mode
    with pytest.raises(KeyboardInterrupt):
        _cpu_meter().measure(lambda: torch.ones(4) * 2)
    monkeypatch.undo()
    assert hit == [where]
    assert dispatch._get_current_dispatch_mode_stack() == []
    assert dispatch._is_in_torch_dispatch_mode == flag
