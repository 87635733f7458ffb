"""map_batches' outputs: allocated once, every structure, whole operands, probe, OOM."""

from __future__ import annotations

import dataclasses
import itertools
import json

import array_api_compat
import numpy as np
import pytest
from helpers import run_python

import xpkit
from xpkit._adapters import ADAPTERS, get_adapter
from xpkit._dtypes import dtype_name
from xpkit.testing import assert_equal

GB = 1024**3
#: bytes_per_item=1 with this budget gives batches of 7 rows.
SEVEN = {"bytes_per_item": 1.0, "budget_gb": 7 / GB}


def _on(x) -> xpkit.Backend:
    return xpkit.Backend.from_arrays(x)


def _data(n: int, cols: int = 4) -> np.ndarray:
    a = np.arange(n * cols, dtype=np.float64).reshape(n, cols) - 3.0
    a[:, 0] = np.arange(n)  # column 0 holds the row index
    return a


def _three(x):
    xp = array_api_compat.array_namespace(x)
    k = int(x.shape[0])
    return x * 2.0, xp.sum(x, axis=1), xp.reshape(x[:, :4], (k, 2, 2)), x[:, 1] > 9.0


class Recorder:
    """Row-wise fn recording its batches' row indices (column 0 of its input)."""

    def __init__(self, fails=lambda rows: False) -> None:
        self.fails = fails
        self.sizes: list[int] = []
        self.done: list[np.ndarray] = []

    def __call__(self, x):
        rows = np.asarray(_on(x).to_numpy(x[:, 0]), dtype=int)
        self.sizes.append(rows.size)
        if self.fails(rows):
            raise MemoryError
        self.done.append(rows)
        return x * 2.0 + 1.0

    def rows_once(self, n: int) -> bool:
        done = np.sort(np.concatenate(self.done))
        return done.size == n and np.array_equal(done, np.arange(n))


@pytest.mark.parametrize("sizing", [{"bytes_per_item": 1.0, "budget_gb": 1.0}, {}])
def test_identity_result_is_a_fresh_array(sizing):
    x = _data(6)
    got = xpkit.map_batches(lambda a: a, x, **sizing)
    assert got is not x
    assert not np.shares_memory(got, x)
    assert_equal(got, _data(6))


@pytest.mark.xpkit_skip(["jax", "dask"], reason="their arrays are not writable")
@pytest.mark.xpkit_skip(["numpy-readonly"], reason="fn writes into an array of xp's")
@pytest.mark.parametrize("result_on", ["host", "device"])
def test_fn_reusing_one_out_buffer(xpkit_backend, result_on):
    b = xpkit_backend
    returned = []

    def fn(x):
        if not returned:  # one buffer, allocated by the first call, then reused
            returned.append(
                b.xp.empty(x.shape, dtype=x.dtype, device=array_api_compat.device(x))
            )
        returned[0][...] = x * 3.0 - 1.0
        return returned[0]

    a = _data(70)  # ten batches of 7 rows, all into the same buffer
    got = xpkit.map_batches(fn, b.asarray(a), result_on=result_on, **SEVEN)
    assert len(returned) == 1
    assert got is not returned[0]
    want = a * 3.0 - 1.0
    if result_on == "host":
        assert isinstance(got, np.ndarray)
        assert_equal(got, want, check_namespace=False)
    else:
        assert_equal(got, b.asarray(want))
    assert not np.shares_memory(b.to_numpy(got), b.to_numpy(returned[0]))


class Outs(list):
    """A list subclass: came back as a tuple (the spec held its name only)."""


class array(tuple):  # (named as the spec names one array)
    """A tuple subclass named ``array``: only its first output came back."""


@pytest.mark.parametrize("kind", [tuple, list, dict, Outs, array])
def test_structured_results_every_backend(xpkit_backend, kind):
    b = xpkit_backend
    keys = ("double", "total", "square", "big")

    def fn(x):
        outs = _three(x)
        return dict(zip(keys, outs, strict=True)) if kind is dict else kind(outs)

    a = _data(50)
    got = xpkit.map_batches(fn, b.asarray(a), **SEVEN)
    want = (a * 2.0, a.sum(axis=1), a[:, :4].reshape(-1, 2, 2), a[:, 1] > 9.0)
    assert type(got) is kind
    if kind is dict:
        assert list(got) == list(keys)
        got = [got[k] for k in keys]
    assert len(got) == 4
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, np.ndarray)
        assert_equal(g, w, check_namespace=False)


@pytest.mark.parametrize("by", ["position", "keyword"])
def test_whole_operands_moved_once_not_split(xpkit_backend, by):
    b = xpkit_backend
    a, w = _data(40, 3), np.arange(6.0).reshape(3, 2)  # exact products
    seen_x, seen_w = [], []

    def fn(x, W):
        seen_x.append(x)
        seen_w.append(W)
        return x @ W

    whole = (w,) if by == "position" else {"W": w}
    got = xpkit.map_batches(fn, a, backend=b, whole=whole, **SEVEN)
    assert_equal(got, a @ w, check_namespace=False)
    assert len(seen_x) == 6
    last = 7 if ADAPTERS[b.library].pads_batches(fn) else 5  # JAX: one shape
    assert [int(x.shape[0]) for x in seen_x] == [7] * 5 + [last]
    assert all(_on(x) == b for x in seen_x), "slices must be moved to the backend"
    assert all(tuple(W.shape) == (3, 2) for W in seen_w)
    assert _on(seen_w[0]) == b
    assert len({id(W) for W in seen_w}) == 1, "whole operands moved once"


def test_result_on_device_every_backend(xpkit_backend):
    b = xpkit_backend
    a = _data(30)
    dev = {"backend": b, "result_on": "device"}
    got = xpkit.map_batches(
        lambda x: {"y": x * 2.0, "s": x[:, 1] > 9.0}, a, **dev, **SEVEN
    )
    assert set(got) == {"y", "s"}
    for value, want in ((got["y"], a * 2.0), (got["s"], a[:, 1] > 9.0)):
        assert _on(value) == b
        assert_equal(value, b.asarray(want))
    # one batch, fn returns its input: still a new array on the device
    single = xpkit.map_batches(lambda x: x, a, **dev, bytes_per_item=1.0, budget_gb=1.0)
    assert _on(single) == b
    assert not np.shares_memory(b.to_numpy(single), a)
    assert_equal(single, a)
    host = xpkit.map_batches(lambda x: x * 2.0, b.asarray(a), **SEVEN)
    assert isinstance(host, np.ndarray)
    assert_equal(host, a * 2.0, check_namespace=False)


@pytest.mark.parametrize(
    ("bad", "error"),
    [("gpu", ValueError), ("Host", ValueError), (None, TypeError), (1, TypeError)],
)
def test_bad_result_on(bad, error):
    """A value that is no string is a TypeError (None and 1 were ValueErrors)."""
    with pytest.raises(
        error, match=f"result_on must be 'host' or 'device', got {bad!r}"
    ):
        xpkit.map_batches(lambda x: x, np.ones((3, 1)), result_on=bad)


def test_zero_rows_every_backend(xpkit_backend):
    b = xpkit_backend
    empty = b.asarray(np.empty((0, 3)))
    sizes = []

    def fn(x):
        sizes.append(int(x.shape[0]))
        return x[:, :2] * 2.0

    got = xpkit.map_batches(fn, empty)
    assert sizes == [0]
    assert_equal(got, np.empty((0, 2)), check_namespace=False)
    on_device = xpkit.map_batches(fn, empty, result_on="device")
    assert _on(on_device) == b
    assert tuple(on_device.shape) == (0, 2)
    assert sizes == [0, 0]
    with pytest.raises(ValueError, match="must return one row per input row"):
        xpkit.map_batches(lambda x: b.xp.ones((5, 3), dtype=x.dtype), empty)
    with pytest.raises(TypeError, match=r"fn=.*rows 0:0"):
        xpkit.map_batches(lambda x: None, empty)


def _later(first, later):  # ``later`` from the second batch (row 7) on
    return lambda x: first(x) if x[0, 0] == 0 else later(x)


ONE_ROW = "must return one row per input row"


@pytest.mark.parametrize(
    ("fn", "exc", "match"),
    [
        (lambda x: None, TypeError, r"fn=.*rows 0:7"),
        (lambda x: [1.0] * x.shape[0], TypeError, r"fn=.*non-array.*rows 0:7"),
        (lambda x: (x, "nope"), TypeError, r"fn=.*non-array at \[1\].*rows 0:7"),
        (lambda x: {}, TypeError, r"fn=.*rows 0:7"),
        (lambda x: x[1:], ValueError, ONE_ROW),
        (lambda x: x.sum(), ValueError, ONE_ROW),
        (lambda x: (x, x[:-1]), ValueError, ONE_ROW + r": for rows 0:7 output \[1\]"),
        (
            _later(lambda x: x, lambda x: x.astype(np.float32)),
            TypeError,
            "changed the dtype.*rows 7:14",
        ),
        (_later(lambda x: (x,), lambda x: [x]), ValueError, "rows 7:14 but"),
        (_later(lambda x: (x,), lambda x: (x, x)), ValueError, "rows 7:14 but"),
        (_later(lambda x: {"a": x}, lambda x: {"b": x}), ValueError, "rows 7:14 but"),
        (
            _later(lambda x: x, lambda x: x[:, :1]),
            ValueError,
            "changed the row shape.*rows 7:14",
        ),
    ],
)
def test_bad_fn_results(fn, exc, match):
    with pytest.raises(exc, match=match):
        xpkit.map_batches(fn, _data(30), **SEVEN)


def test_bad_result_during_the_probe_names_its_rows():
    with pytest.raises(TypeError, match=r"fn=.*rows 0:4"):
        xpkit.map_batches(lambda x: None, _data(30))


M = 512  # columns of every temporary: 4 KiB per row

#: The meter reads the process's peak RSS, which depends on what the heap
#: already holds (freed blocks, glibc's raised mmap threshold): each
#: accuracy check runs in a fresh process, as a user's first call would.
_PROBE_IN_A_FRESH_PROCESS = """
import itertools, json, sys
import numpy as np
import xpkit

M, K, CASE = 512, int(sys.argv[1]), sys.argv[2]
sizes = []


def temporaries(x):
    sizes.append(int(x.shape[0]))
    temps = [np.full((x.shape[0], M), float(i)) for i in range(K)]  # K live at once
    return sum(t[:, 0] for t in temps) + x[:, 0]


def scratch(x):
    s = np.ones(250_000)  # a 2 MB scratch per call, whatever the rows
    t = np.full((x.shape[0], M), 2.0)
    return t[:, 0] * s[0] + x[:, 0]


data = np.random.default_rng(0).standard_normal((20_000, 4))
fn = temporaries if CASE == "temporaries" else scratch
plan = xpkit.plan_batches(fn, data, budget_gb=1.0)
print(json.dumps({"plan": plan.__dict__, "sizes": sizes}))
"""


def _probe_in_a_fresh_process(
    case: str, k: int = 1
) -> tuple[xpkit.BatchPlan, list[int]]:
    proc = run_python(_PROBE_IN_A_FRESH_PROCESS, str(k), case)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return xpkit.BatchPlan(**out["plan"]), out["sizes"]


@pytest.mark.parametrize("k", [1, 3])
def test_probe_measures_the_per_item_cost(k):
    plan, sizes = _probe_in_a_fresh_process("temporaries", k)
    expected = k * M * 8
    if not plan.source.startswith("measured"):
        pytest.skip(f"nothing measures here: {plan.source}")
    assert plan.source.startswith("measured by sampled RSS"), plan.source
    assert expected / 2 <= plan.bytes_per_item <= expected * 2, plan
    assert plan.fixed_bytes < expected * 16, plan
    assert sizes[0] == 4
    assert 2 <= len(sizes) <= 6
    assert all(s1 < s2 <= 4 * s1 for s1, s2 in itertools.pairwise(sizes))
    assert plan.probe_rows == sum(sizes)
    assert plan.n_items == 20_000
    assert plan.n_batches == -(-(20_000 - plan.probe_rows) // plan.batch_size)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.batch_size = 1  # type: ignore[misc]


def test_probe_puts_a_fixed_allocation_in_fixed_bytes():
    plan, _ = _probe_in_a_fresh_process("scratch")
    if not plan.source.startswith("measured"):
        pytest.skip(f"nothing measures here: {plan.source}")
    assert plan.fixed_bytes >= 250_000 * 8 / 2, plan
    assert plan.bytes_per_item <= 2 * M * 8, plan


def test_probe_rows_are_kept_in_the_result():
    fn = Recorder()
    a = _data(3000)
    got = xpkit.map_batches(fn, a, budget_gb=1.0)
    assert_equal(got, a * 2.0 + 1.0)
    assert fn.sizes[:3] == [4, 16, 64]
    assert fn.rows_once(3000)


@pytest.mark.parametrize(
    ("n", "per_item", "budget", "overhead", "min_batch"),
    [(1000, 64.0, 640 / GB, 1.0, 1), (1000, 100.0, 1e-6, 2.5, 3), (10, 8.0, 1.0, 1, 1)],
)
def test_plan_with_bytes_per_item_matches_auto_batch_size(
    n, per_item, budget, overhead, min_batch
):
    fn = Recorder()
    sizing = {"budget_gb": budget, "overhead": overhead, "min_batch": min_batch}
    plan = xpkit.plan_batches(fn, _data(n), bytes_per_item=per_item, **sizing)
    batch, n_batches = xpkit.auto_batch_size(n, per_item, **sizing)
    expected = (n, budget, per_item, 0.0, overhead, "given", batch, n_batches, 0)
    assert dataclasses.astuple(plan)[:9] == expected
    assert plan.batch_peak_bytes == overhead * batch * per_item
    assert not plan.remembered
    assert plan.output_bytes is None  # fn never ran: its outputs are unknown
    assert plan.outputs_fit is None
    assert fn.sizes == []


def test_cost_source_per_backend(xpkit_backend):
    b = xpkit_backend
    x = b.asarray(_data(200))
    row = 4 * np.dtype(dtype_name(x.dtype)).itemsize
    plan = xpkit.plan_batches(lambda r: r * 2.0, x, budget_gb=1.0)
    assert plan.source == "traced by shape-only arrays"
    assert plan.probe_rows == 0
    assert plan.bytes_per_item >= row  # the result's row, at least

    def reads(r):  # a value read: the trace cannot follow it
        return r * 2.0 if float(_on(r).to_numpy(r[:1, 0])[0]) > -1 else r

    plan = xpkit.plan_batches(reads, x, budget_gb=1.0)
    meters = get_adapter(b.library).peak_meters(b.device)
    if not meters:  # nothing measures a real run there
        assert plan.source.startswith("input rows (")
        assert (plan.probe_rows, plan.bytes_per_item) == (0, row)
    else:
        assert plan.source.startswith(f"measured by {meters[0].name} (")
        assert "shape-only arrays could not follow fn" in plan.source
        assert plan.probe_rows > 0


def test_oom_during_the_probe_every_backend(xpkit_backend):
    b = xpkit_backend
    if not get_adapter(b.library).peak_meters(b.device):
        pytest.skip(f"no meter of a real run on {b.name}")
    fn = Recorder(fails=lambda rows: rows.size > 2)  # reads values: measured
    a = _data(40)
    got = xpkit.map_batches(fn, b.asarray(a), budget_gb=1.0)
    assert_equal(got, a * 2.0 + 1.0, check_namespace=False)
    # The probe's first 4 rows fail, then 2 fit, and only 2 (a warmed meter
    # runs each size twice)...
    assert fn.sizes[:2] == [4, 2]
    # ...and after 16 batches of 2 one try of 4 rows fails, then no more.
    assert len(fn.sizes) - len(fn.done) in {1, 2}
    assert max(r.size for r in fn.done) <= 2
    assert fn.rows_once(40)


@pytest.mark.parametrize(("n", "min_batch", "fits"), [(17, 4, 5), (9, 3, 3)])
def test_oom_in_the_probe_goes_on_at_min_batch(xpkit_backend, n, min_batch, fits):
    """A probe's OOM where half its rows are under ``min_batch``: min_batch rows next.

    Batches of ``fits`` rows fit, more run out of memory; without the
    probe (``bytes_per_item``) the same call recovers, and so does the probe.
    """
    b = xpkit_backend
    if not get_adapter(b.library).peak_meters(b.device):
        pytest.skip(f"no meter of a real run on {b.name}")
    fn = Recorder(fails=lambda rows: rows.size > fits)  # reads values: measured
    a = _data(n)
    got = xpkit.map_batches(fn, b.asarray(a), min_batch=min_batch, remember=False)
    assert_equal(got, a * 2.0 + 1.0, check_namespace=False)
    assert fn.rows_once(n)
    assert max(r.size for r in fn.done) <= fits
    # after a failure of k rows, the next try has at most max(k // 2, min_batch)
    for failed, after in itertools.pairwise(fn.sizes):
        if failed > fits:
            assert after <= max(failed // 2, min_batch)


def test_oom_in_the_probe_at_min_batch_names_the_rows():
    """Where min_batch rows run out of memory in the probe: the named error."""
    fn = Recorder(fails=lambda rows: True)
    with pytest.raises(MemoryError, match=r"rows 0:3 \(3 rows.*min_batch=3") as info:
        xpkit.map_batches(fn, _data(9), min_batch=3, remember=False)
    assert isinstance(info.value.__cause__, MemoryError)
    assert fn.sizes[-1] == 3


@pytest.mark.parametrize("per_item", [None, 1.0])
def test_oom_after_the_outputs_exist_every_backend(xpkit_backend, per_item):
    b = xpkit_backend
    fn = Recorder(fails=lambda rows: rows.max() >= 30 and rows.size > 3)
    a = _data(90)
    sizing = {"bytes_per_item": per_item, "budget_gb": 15 / GB if per_item else 1.0}
    plan = xpkit.plan_batches(lambda x: x * 2.0, b.asarray(a), **sizing)
    got = xpkit.map_batches(fn, b.asarray(a), **sizing)
    assert_equal(got, a * 2.0 + 1.0, check_namespace=False)
    if per_item or plan.probe_rows:  # the first batch (or probe) allocated the outputs
        assert fn.done[0][0] == 0
        assert fn.sizes[0] == fn.done[0].size >= 4
    assert len(fn.sizes) > len(fn.done)  # some batch did run out of memory
    assert fn.rows_once(90)
    assert all(r.size <= 3 for r in fn.done if r.max() >= 30)


# -- outputs: what the first version got wrong ---------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda x: np.array([f"row {int(v):04d}" for v in x[:, 0]]),
        lambda x: x[:, 0].astype("datetime64[s]"),
        lambda x: np.array([{"row": int(v)} for v in x[:, 0]], dtype=object),
    ],
    ids=["str", "datetime64", "object"],
)
def test_results_of_any_numpy_dtype_are_assembled(make):
    a = _data(20)
    got = xpkit.map_batches(make, a, **SEVEN)
    want = make(a)
    assert got.dtype == want.dtype
    assert list(got) == list(want)


STRUCTURED = {
    "record": np.dtype((np.record, [("a", "f8"), ("b", "f8")])),
    "aligned": np.dtype([("a", "u1"), ("b", "f8")], align=True),
    "nested big-endian": np.dtype([("a", [("x", "f8"), ("y", "i4")]), ("b", ">f8")]),
}


@pytest.mark.parametrize("dtype", STRUCTURED.values(), ids=STRUCTURED.keys())
def test_structured_results_are_assembled_and_counted_by_their_itemsize(dtype):
    """NumPy cannot read a record's or an aligned struct's label back as a dtype."""
    a = _data(300)

    def fn(x):
        out = np.zeros(x.shape[0], dtype=dtype)
        out["b"] = x[:, 0]
        return out

    got = xpkit.map_batches(fn, a, budget_gb=4e-6)  # (several batches)
    assert got.dtype == dtype
    assert_equal(np.asarray(got["b"]), a[:, 0])
    plan = xpkit.plan_batches(fn, a, budget_gb=4e-6)
    assert plan.output_bytes == a.shape[0] * dtype.itemsize


def test_dict_results_may_list_their_keys_in_another_order():
    a = _data(21)

    def fn(x):
        d, s = x * 2.0, x.sum(axis=1)
        return {"d": d, "s": s} if x[0, 0] == 0 else {"s": s, "d": d}

    got = xpkit.map_batches(fn, a, **SEVEN)
    assert list(got) == ["d", "s"]
    assert_equal(got["d"], a * 2.0)
    assert_equal(got["s"], a.sum(axis=1))


def test_device_results_keep_dtypes_their_library_holds():
    torch = pytest.importorskip("torch")
    b = xpkit.Backend("torch", device="cpu")
    a = torch.arange(12.0).reshape(6, 2)
    got = xpkit.map_batches(
        lambda x: x.to(torch.bfloat16), a, result_on="device", **SEVEN
    )
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, a.to(torch.bfloat16))
    assert xpkit.Backend.from_arrays(got) == b


def test_plan_batches_allocates_no_output():
    import tracemalloc

    x = np.zeros((4_000_000, 1))  # fn's output would be 4,000,000 x 64 float64: 2 GB

    def fn(r):
        return np.zeros((r.shape[0], 64))

    tracemalloc.start()
    try:
        plan = xpkit.plan_batches(fn, x, budget_gb=0.01)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert plan.probe_rows > 0
    assert peak < 64 * 2**20  # the probe's batches, never the 2 GB output


def test_outputs_that_do_not_fit_beside_the_first_result_split_it():
    """The first chunk's result and the outputs together are one chunk too many."""
    from xpkit import _outputs

    real_empty = np.empty
    calls: list[int] = []
    held: list[int] = []

    class Fake:
        """NumPy, whose ``empty`` fails beside a result of more than 8 rows."""

        @staticmethod
        def empty(shape, dtype):
            calls.append(held[-1])
            if held[-1] > 8:  # the result being held is too big to allocate beside
                msg = "simulated"
                raise MemoryError(msg)
            return real_empty(shape, dtype)

        def __getattr__(self, name):
            return getattr(np, name)

    def fn(x):
        held.append(int(x.shape[0]))
        return x[:, ::-1]  # a view of the input: copied into outputs of its own

    import unittest.mock

    with unittest.mock.patch.object(_outputs, "np", Fake()):
        got = xpkit.compute_oom_safe(fn, _data(16))
    assert_equal(got, _data(16)[:, ::-1])
    assert calls == [16, 8]  # refused beside all 16 rows, allocated beside 8


# -- outputs from one result for all rows (a repeated call) --------------------------
def test_a_fresh_writable_result_for_all_rows_is_the_output():
    from xpkit._outputs import outputs_of_all_rows

    x = _data(20)
    result = x * 2.0
    assert outputs_of_all_rows(result, 20, _three, (x,)) is result


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x,
        lambda x: x[:, ::-1],
        lambda x: np.broadcast_to(x[:1], x.shape),
    ],
    ids=["an input", "a view", "read-only"],
)
def test_a_result_that_cannot_be_held_as_it_is_is_copied(make):
    from xpkit._outputs import outputs_of_all_rows

    x = _data(20)
    result = make(x)
    got = outputs_of_all_rows(result, 20, _three, (x,))
    assert_equal(got, np.asarray(result))
    assert not np.shares_memory(got, x)
    assert got.flags.writeable


def test_a_result_owning_the_memory_an_input_views_is_copied():
    from xpkit._outputs import outputs_of_all_rows

    buffer = _data(20)
    assert buffer.flags.owndata
    x = buffer[:, 1:]  # the input is a view of fn's result
    got = outputs_of_all_rows(buffer, 20, _three, (x,))
    assert_equal(got, buffer)
    assert not np.shares_memory(got, buffer)
    assert got is not buffer


def test_a_result_sharing_another_library_s_input_memory_is_copied():
    torch = pytest.importorskip("torch")
    from xpkit._outputs import outputs_of_all_rows

    host = _data(20)
    t = torch.from_numpy(host)  # the same memory
    got = outputs_of_all_rows(host[:, :2], 20, _three, (t,))
    assert_equal(got, host[:, :2])
    assert not np.shares_memory(got, host)


def test_a_structured_or_wrong_result_goes_through_the_checks():
    from xpkit._outputs import outputs_of_all_rows

    x = _data(20)
    got = outputs_of_all_rows((x * 2.0, x[:, 0]), 20, _three, (x,))
    assert isinstance(got, tuple)
    assert_equal(got[1], x[:, 0])
    assert not np.shares_memory(got[1], x)
    with pytest.raises(ValueError, match="one row per input row"):
        outputs_of_all_rows(x[:5] * 2.0, 20, _three, (x,))


@pytest.mark.parametrize(
    "wrap",
    [lambda w: [w], lambda w: {"w": w}, lambda w: ([w], 3)],
    ids=["list", "dict", "nested"],
)
def test_a_result_that_is_an_array_in_a_whole_container_is_copied(wrap):
    """A list of arrays as a whole operand: a result that was one of them came
    back uncopied when one call covered every row (``whole=(w,)`` was
    copied); a write into it changed the caller's array."""
    x = np.zeros((4, 2))
    w = np.arange(4.0)

    def first(rows, held):
        while not isinstance(held, np.ndarray):
            held = held[0] if isinstance(held, (list, tuple)) else held["w"]
        return held

    for _ in range(3):  # (planned, then repeated from the plan memory)
        got = xpkit.map_batches(first, x, whole=(wrap(w),))
        assert not np.shares_memory(got, w)
        np.testing.assert_array_equal(got, np.arange(4.0))
        got[:] = -1.0
        np.testing.assert_array_equal(w, np.arange(4.0))


@pytest.mark.parametrize("executor", [None, "joblib"])
@pytest.mark.parametrize("pair", [("bfloat16", "float32"), ("float32", "bfloat16")])
def test_a_dtype_the_host_widens_changed_between_batches_is_refused(executor, pair):
    """torch's bfloat16 for rows 0:5, float32 after: both are float32 on the
    host, and the rows came back in one array of mixed precision, unrefused
    (``result_on="device"`` and ``out=`` refused it)."""
    torch = pytest.importorskip("torch")
    first, then = (getattr(torch, name) for name in pair)
    x = torch.arange(10.0, dtype=torch.float64)[:, None] + 0.123456789

    def fn(rows):
        return rows.to(first if xpkit.current_rows().start == 0 else then)

    sizing = {"bytes_per_item": 8.0, "budget_gb": 40 / 2**30}  # (5 rows a batch)
    with pytest.raises(
        TypeError,
        match=f"changed the dtype of its result between batches: {pair[0]} "
        f"before, {pair[1]} for rows 5:10",
    ):
        xpkit.map_batches(fn, x, executor=executor, **sizing)
    same = xpkit.map_batches(lambda r: r.to(first), x, executor=executor, **sizing)
    np.testing.assert_array_equal(same, x.to(first).float().numpy())


def test_an_array_behind_many_lists_in_a_whole_operand_is_copied_quickly():
    """A review: the first bound counted lists, not items (an array after
    20,000 one-element lists came back uncopied), and a million numbers took
    3 s (each asked whether it was an array)."""
    x = np.zeros((4, 2))
    w = np.arange(4.0)
    held = [w] + [[i] for i in range(20_000)]
    got = xpkit.map_batches(lambda rows, h: h[0], x, whole=(held,))
    assert not np.shares_memory(got, w)
    numbers = list(range(200_000))  # (passed over at once: not arrays)
    got = xpkit.map_batches(lambda rows, h: rows[:, 0], x, whole=(numbers,))
    np.testing.assert_array_equal(got, np.zeros(4))
