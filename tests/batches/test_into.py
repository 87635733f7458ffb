"""map_batches(..., out=): results written into the caller's arrays (issue #32 item 1)."""

from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest
from helpers import run_python, written_marks
from numpy.lib.stride_tricks import as_strided

import xpkit
from xpkit._adapters import get_adapter
from xpkit.testing import assert_equal

GB = 1024**3
#: bytes_per_item=1 with this budget gives batches of 7 rows.
SEVEN = {"bytes_per_item": 1.0, "budget_gb": 7 / GB}


def _data(n: int, cols: int = 3) -> np.ndarray:
    return np.arange(n * cols, dtype=np.float64).reshape(n, cols) - 5.0


class Counted:
    """``x * 2`` (or what ``fn`` gives), counting its calls."""

    def __init__(self, fn=lambda x: x * 2.0) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return self.fn(x)


def test_rows_land_in_out_and_out_is_returned():
    a = _data(50)
    out = np.full((50, 3), np.nan)
    got = xpkit.map_batches(lambda x: x * 2.0, a, out=out, **SEVEN)
    assert got is out
    np.testing.assert_array_equal(out, a * 2.0)


def test_into_a_memmap_in_many_batches(tmp_path):
    a = _data(300)
    mm = np.lib.format.open_memmap(
        tmp_path / "sums.npy", mode="w+", dtype=np.float64, shape=(300,)
    )
    got = xpkit.map_batches(lambda x: x.sum(axis=1), a, out=mm, **SEVEN)
    assert got is mm
    mm.flush()
    np.testing.assert_array_equal(np.load(tmp_path / "sums.npy"), a.sum(axis=1))


@pytest.mark.parametrize("kind", ["tuple", "list", "dict"])
def test_every_structure(kind):
    a = _data(40)
    twice, sums = np.empty((40, 3)), np.empty(40)
    if kind == "dict":  # (fn's keys in another order than out's)
        out = {"s": sums, "t": twice}

        def fn(x):
            return {"t": x * 2.0, "s": x.sum(axis=1)}
    else:
        out = (twice, sums) if kind == "tuple" else [twice, sums]

        def fn(x):
            result = (x * 2.0, x.sum(axis=1))
            return result if kind == "tuple" else list(result)

    assert xpkit.map_batches(fn, a, out=out, **SEVEN) is out
    np.testing.assert_array_equal(twice, a * 2.0)
    np.testing.assert_array_equal(sums, a.sum(axis=1))


def test_rows_the_probe_computed_land_in_out():
    def reads(x):  # reads a value: the trace cannot follow it, a probe runs
        return x * float(x[0, 0] * 0 + 3)

    a = _data(200)
    out = np.zeros((200, 3))
    plan = xpkit.plan_batches(reads, a, budget_gb=1e-4, remember=False)
    assert plan.probe_rows > 0
    assert xpkit.map_batches(reads, a, out=out, budget_gb=1e-4, remember=False) is out
    np.testing.assert_array_equal(out, a * 3.0)


def test_rows_an_oom_split_recovered_land_in_out():
    sizes: list[int] = []

    def fn(x):
        sizes.append(int(x.shape[0]))
        if x.shape[0] > 3:
            raise MemoryError
        return x - 1.0

    a = _data(60)
    out = np.zeros((60, 3))
    assert xpkit.map_batches(fn, a, out=out, **SEVEN) is out
    np.testing.assert_array_equal(out, a - 1.0)
    assert max(sizes) == 7
    assert min(sizes) <= 3


def test_outputs_that_do_not_fit_memory_are_not_refused(monkeypatch):
    """With out, the outputs need no room: the 'outputs must fit' refusal is off."""
    import xpkit._outputs as outputs_module
    import xpkit._plan as plan_module

    monkeypatch.setattr(plan_module, "available_bytes", lambda place: 10)
    monkeypatch.setattr(outputs_module, "available_bytes", lambda place: 10)
    a = _data(30)
    with pytest.raises(MemoryError, match="outputs"):  # (the control)
        xpkit.map_batches(lambda x: x * 2.0, a, **SEVEN)
    out = np.zeros((30, 3))
    assert xpkit.map_batches(lambda x: x * 2.0, a, out=out, **SEVEN) is out
    np.testing.assert_array_equal(out, a * 2.0)


def test_out_on_the_backends_device(xpkit_backend):
    """An array of the backend's library gets its rows there, in place."""
    b = xpkit_backend
    dtype = b.xp.float64 if b.has_float64 else b.xp.float32
    a = _data(20)
    x, out = b.asarray(a, dtype=dtype), b.full((20, 3), 0.0, dtype=dtype)
    fn = Counted()
    if not get_adapter(b.library).writable_rows:
        with pytest.raises(
            TypeError, match=r"^out is an array of .* cannot be written"
        ):
            xpkit.map_batches(fn, x, out=out, **SEVEN)
        assert fn.calls == 0
        return
    if isinstance(out, np.ndarray) and not out.flags.writeable:  # (numpy-readonly)
        with pytest.raises(ValueError, match=r"^out is read-only"):
            xpkit.map_batches(fn, x, out=out, **SEVEN)
        assert fn.calls == 0
        return
    got = xpkit.map_batches(fn, x, out=out, **SEVEN)
    assert got is out
    assert_equal(out, b.asarray(a * 2.0, dtype=dtype))


@pytest.mark.parametrize("in_a_dict", [False, True])
def test_a_masked_out_is_refused_before_its_mask_is_wiped(in_a_dict):
    """Masked inputs, operands and results were refused; a masked ``out`` had
    its mask overwritten with False, silently."""
    x = np.arange(12.0).reshape(6, 2)
    mask = np.array([0, 1, 0, 0, 0, 0], dtype=bool)
    out = np.ma.masked_array(np.zeros(6), mask=mask)
    fn = Counted()
    given, name = ({"a": out}, r"out\['a'\]") if in_a_dict else (out, "out")
    with pytest.raises(TypeError, match=f"^{name} is a NumPy masked array: writing"):
        xpkit.map_batches(
            (lambda r: {"a": fn(r)[:, 0]}) if in_a_dict else (lambda r: fn(r)[:, 0]),
            x,
            out=given,
        )
    assert fn.calls == 0
    np.testing.assert_array_equal(out.mask, mask)
    np.testing.assert_array_equal(out.data, np.zeros(6))


def test_nothing_the_size_of_all_outputs_is_allocated(tmp_path):
    """64 MiB of results into a memmap under a 1 MiB budget: tracemalloc's peak, in a child."""
    code = f"""
import json, tracemalloc, numpy as np, xpkit
a = np.ones((2**20, 8))
out = np.lib.format.open_memmap({str(tmp_path / "o.npy")!r}, mode="w+", dtype=np.float64, shape=(2**20, 8))
tracemalloc.start()
xpkit.map_batches(lambda x: x * 2.0, a, out=out, budget_gb=2**-10, bytes_per_item=128)
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({{"peak": peak, "ok": bool((out[::4099] == 2.0).all())}}))
"""
    got = json.loads(run_python(code, check=True).stdout.strip().splitlines()[-1])
    assert got["ok"]
    assert got["peak"] < 8 * 2**20  # (the outputs: 64 MiB)


def _bad_outs(n: int):
    ro = np.zeros((n, 3))
    ro.flags.writeable = False
    return [
        (np.zeros((n - 1, 3)), ValueError, r"^out must have 20 rows"),
        (np.zeros(()), ValueError, r"^out must have 20 rows"),
        (ro, ValueError, r"^out is read-only"),
        (5, TypeError, r"^out must be an array"),
        ([np.zeros((n, 3)), "no"], TypeError, r"^out\[1\] must be an array"),
        ((), ValueError, r"^out must be an array or a non-empty"),
        ({1: np.zeros((n, 3))}, TypeError, r"^out must map"),
    ]


@pytest.mark.parametrize(("out", "exc", "match"), _bad_outs(20))
def test_a_wrong_out_is_refused_before_fn_runs(out, exc, match):
    fn = Counted()
    with pytest.raises(exc, match=match):
        xpkit.map_batches(fn, _data(20), out=out, **SEVEN)
    assert fn.calls == 0


@pytest.mark.parametrize(
    ("out", "exc", "match"),
    [
        (np.zeros((20, 4)), ValueError, r"^out has rows of shape \(4,\), but fn="),
        (np.zeros((20, 3), np.float32), TypeError, r"^out has dtype float32, but fn="),
        ((np.zeros((20, 3)),), ValueError, r"^out does not match fn=.*one array"),
        ({"y": np.zeros((20, 3))}, ValueError, r"^out does not match fn="),
    ],
)
def test_an_out_unlike_fns_result_is_refused_at_the_first_batch(out, exc, match):
    fn = Counted()
    with pytest.raises(exc, match=match):
        xpkit.map_batches(fn, _data(20), out=out, **SEVEN)
    assert fn.calls == 1  # (the first batch, of 7 rows of 20: none after it)


def test_out_and_result_on_device_are_refused_together():
    with pytest.raises(ValueError, match=r"^out and result_on='device'"):
        xpkit.map_batches(
            lambda x: x, _data(5), out=np.zeros((5, 3)), result_on="device"
        )


def test_out_on_the_joblib_executor():
    pytest.importorskip("joblib")
    a = _data(40)
    out = np.zeros((40, 3))
    got = xpkit.map_batches(lambda x: x * 2.0, a, out=out, executor="joblib", **SEVEN)
    assert got is out
    np.testing.assert_array_equal(out, a * 2.0)


# -- a store cut in chunks of rows --------------------------------------------


def _recording(monkeypatch, z):
    """The row spans written into ``z``'s class, in order."""
    spans: list[tuple[int, int]] = []
    write = type(z).__setitem__

    def recorded(self, key, value):
        rows = key[0] if isinstance(key, tuple) else key
        spans.append((rows.start, rows.stop))
        write(self, key, value)

    monkeypatch.setattr(type(z), "__setitem__", recorded)
    return spans


def _store(tmp_path, n, chunk):
    zarr = pytest.importorskip("zarr")
    return zarr.create_array(
        store=str(tmp_path / "z"), shape=(n, 3), chunks=(chunk, 3), dtype="float64"
    )


@pytest.mark.parametrize("n", [1000, 1003])
def test_a_chunked_store_gets_every_chunk_once_whole(
    tmp_path, monkeypatch, n, writing_holds_nothing
):
    z = _store(tmp_path, n, 64)
    spans = _recording(monkeypatch, z)
    a = _data(n)
    sizes: list[int] = []

    def fn(x):  # batches of 7 rows, and an OOM above 5 rows after row 500
        sizes.append(int(x.shape[0]))
        if x[0, 0] > 1495 and x.shape[0] > 5:
            raise MemoryError
        return x * 2.0

    assert xpkit.map_batches(fn, a, out=z, **SEVEN) is z
    monkeypatch.undo()
    np.testing.assert_array_equal(z[:], a * 2.0)
    assert len(set(sizes)) > 1  # (split on the OOM)
    covered = np.zeros(n, dtype=int)
    for start, stop in spans:
        assert start % 64 == 0, spans
        assert stop % 64 == 0 or stop == n, spans
        covered[start:stop] += 1
    assert (covered == 1).all()


def test_a_read_only_store_is_refused(tmp_path):
    zarr = pytest.importorskip("zarr")
    z = _store(tmp_path, 20, 8)
    read_only = zarr.open_array(z.store, mode="r")
    fn = Counted()
    with pytest.raises(ValueError, match=r"^out is read-only"):
        xpkit.map_batches(fn, _data(20), out=read_only, **SEVEN)
    assert fn.calls == 0


def test_chunks_that_are_not_one_size_are_refused():
    class Irregular:
        shape, dtype, chunks = (20, 3), np.dtype("float64"), ((10, 10), (3,))

        def __setitem__(self, key, value):  # pragma: no cover - never reached
            raise AssertionError

    fn = Counted()
    with pytest.raises(ValueError, match=r"^out has chunks"):
        xpkit.map_batches(fn, _data(20), out=Irregular(), **SEVEN)
    assert fn.calls == 0


def test_batches_cover_whole_chunks_where_they_hold_one(
    tmp_path, monkeypatch, writing_holds_nothing
):
    """Batches of 20 rows into chunks of 8: batches of 16, nothing buffered."""
    z = _store(tmp_path, 100, 8)
    spans = _recording(monkeypatch, z)
    sizes: list[int] = []

    def fn(x):
        sizes.append(int(x.shape[0]))
        return x * 2.0

    a = _data(100)
    xpkit.map_batches(fn, a, out=z, bytes_per_item=1.0, budget_gb=20 / GB)
    monkeypatch.undo()
    np.testing.assert_array_equal(z[:], a * 2.0)
    assert sizes == [16] * 6 + [4]
    assert spans == [(s, min(s + 16, 100)) for s in range(0, 100, 16)]


def test_after_the_probes_rows_a_batch_ends_on_a_chunk(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="xpkit")
    ranges: list[range] = []

    def reads(x):  # reads a value: the trace cannot follow it, a probe runs
        ranges.append(xpkit.current_rows())
        return x * float(x[0, 0] * 0 + 3)

    n = 50_000
    z = _store(tmp_path, n, 1000)
    spans = _recording(monkeypatch, z)
    a = _data(n)
    xpkit.map_batches(reads, a, out=z, budget_gb=1e-3, remember=False)
    monkeypatch.undo()
    np.testing.assert_array_equal(z[:], a * 3.0)
    for start, stop in spans:
        assert start % 1000 == 0, spans
        assert stop % 1000 == 0 or stop == n, spans
    said = [r.getMessage() for r in caplog.records if "by the probe" in r.getMessage()]
    probe_end = int(re.search(r"items, (\d+) by the probe", said[-1]).group(1))
    assert probe_end % 1000, said  # (else there is nothing to align)
    batches = [r for r in ranges if r.start >= probe_end]
    assert batches, ranges
    assert batches[0].stop % 1000 == 0, ranges  # (back to a chunk's end)
    assert all(r.start % 1000 == 0 for r in batches[1:]), ranges


def _joblib_writes_its_own_rows(z, n, sizing, monkeypatch):
    """x * 2 of n rows into z on joblib's workers: z holds the rows, and
    every task wrote its own (nothing of them came back: xpkit._written)."""
    came = written_marks(monkeypatch)
    a = _data(n)
    got = xpkit.map_batches(lambda x: x * 2.0, a, out=z, executor="joblib", **sizing)
    monkeypatch.undo()
    assert got is z
    np.testing.assert_array_equal(z[:], a * 2.0)
    assert came
    assert all(came)


def test_joblib_workers_write_their_own_rows_into_a_shared_store(
    tmp_path, monkeypatch, writing_holds_nothing
):
    """out= a zarr store in a directory, on joblib's worker processes: nothing
    of the rows comes back (xpkit._written)."""
    pytest.importorskip("joblib")
    z = _store(tmp_path, 100, 8)
    _joblib_writes_its_own_rows(
        z, 100, {"bytes_per_item": 1.0, "budget_gb": 20 / GB}, monkeypatch
    )


def _fails_above(rows):
    """``x * 2``, out of memory (injected) above ``rows`` rows."""

    def fn(x):
        if x.shape[0] > rows:
            raise MemoryError(f"injected: more than {rows} rows")
        return x * 2.0

    return fn


def test_a_worker_s_chunk_that_runs_out_of_memory_names_the_chunk(
    tmp_path, writing_holds_nothing
):
    """Workers writing whole chunks of 8 rows split down to one chunk, not to
    min_batch: the message says so (it said "even at min_batch=1")."""
    pytest.importorskip("joblib")
    z = _store(tmp_path, 64, 8)
    sizing = {"bytes_per_item": 1.0, "budget_gb": 16 / GB}
    with pytest.raises(MemoryError, match=r"even at one chunk of out \(8 rows: the"):
        xpkit.map_batches(
            _fails_above(4), _data(64), out=z, executor="joblib", **sizing
        )


def test_a_worker_s_last_task_of_a_chunk_and_a_part_is_cut_after_its_chunk(
    tmp_path, writing_holds_nothing
):
    """47 rows into chunks of 4: the last task, rows 40:47, halved on chunk
    boundaries gave 0 rows, and it was given up "even at one chunk" though
    40:44 and 44:47 each fit."""
    pytest.importorskip("joblib")
    z = _store(tmp_path, 47, 4)
    a = _data(47)
    sizing = {"bytes_per_item": 1.0, "budget_gb": 16 / GB}
    got = xpkit.map_batches(_fails_above(5), a, out=z, executor="joblib", **sizing)
    assert got is z
    np.testing.assert_array_equal(z[:], a * 2.0)


def test_tasks_smaller_than_a_chunk_bring_their_rows_back(tmp_path, monkeypatch):
    """Batches of 7 rows into chunks of 8: the workers would write parts of
    chunks, so the rows come back and are written here, each chunk once."""
    pytest.importorskip("joblib")
    z = _store(tmp_path, 40, 8)
    came = written_marks(monkeypatch)
    a = _data(40)
    got = xpkit.map_batches(lambda x: x + 1.0, a, out=z, executor="joblib", **SEVEN)
    monkeypatch.undo()
    assert got is z
    np.testing.assert_array_equal(z[:], a + 1.0)
    assert came
    assert not any(came)


def test_outputs_that_share_memory_are_refused():
    a = np.zeros((20, 6))
    fn = Counted()
    for out, match in (
        ((a[:, :3], a[:, 2:5]), r"^out\[0\] and out\[1\] share memory"),
        ({"x": a, "y": a}, r"^out\['x'\] and out\['y'\] share memory"),
    ):
        with pytest.raises(ValueError, match=match):
            xpkit.map_batches(fn, _data(20), out=out, **SEVEN)
    assert fn.calls == 0


def _shifted(x):
    big = np.zeros((x.shape[0] + 1, x.shape[1]))
    big[:-1] = x
    return big[:-1], big[1:]


@pytest.mark.parametrize(
    "case", ["shifted", "reversed", "one column", "a torch view of the input"]
)
def test_an_out_that_overlaps_an_input_without_being_it_is_refused(case):
    """Each batch's rows overwrote rows a later batch had yet to read
    (silently wrong: rows 3 and 6 of a shifted buffer)."""
    x = _data(8)
    if case == "shifted":
        x, out = _shifted(x)
    elif case == "reversed":
        out = x[::-1]
    elif case == "one column":
        out = x[:, 1]
    else:
        torch = pytest.importorskip("torch")
        x, shifted = _shifted(x)
        out = torch.from_numpy(shifted)  # (the same memory, seen by torch)
    before = x.copy()
    fn = Counted(lambda r: r[:, 0] * 2.0) if case == "one column" else Counted()
    with pytest.raises(
        ValueError,
        match=r"^out shares memory with the input arrays\[0\] without being it",
    ):
        xpkit.map_batches(fn, x, out=out, bytes_per_item=24, budget_gb=72 / GB)
    assert fn.calls == 0
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("kind", ["tuple", "dict"])
def test_an_out_that_overlaps_a_whole_operand_is_refused(kind):
    """Every batch reads all of it: a batch's rows changed what the next read."""
    x, w = _data(8), np.ones((8, 3))
    fn = Counted(lambda r, w: (r, r + w.sum()))
    whole = (w,) if kind == "tuple" else {"w": w}
    name = r"whole\[0\]" if kind == "tuple" else r"whole\['w'\]"
    with pytest.raises(
        ValueError, match=rf"^out\[1\] shares memory with the whole operand {name}"
    ):
        xpkit.map_batches(
            fn,
            x,
            whole=whole,
            out=(np.zeros((8, 3)), w[::-1]),
            bytes_per_item=24,
            budget_gb=72 / GB,
        )
    assert fn.calls == 0
    np.testing.assert_array_equal(w, 1.0)


def _written_in_place(b):
    """``_data(20)`` on ``b`` and its dtype; skipped where it cannot be an ``out``."""
    dtype = b.xp.float64 if b.has_float64 else b.xp.float32
    x = b.asarray(_data(20), dtype=dtype)
    if not get_adapter(b.library).writable_rows or (
        isinstance(x, np.ndarray) and not x.flags.writeable
    ):
        pytest.skip(f"{b.name}: its arrays cannot be written in place")
    return x, dtype


def test_an_out_that_is_the_input_itself_is_written_in_place(xpkit_backend):
    """The same elements in the same order: each batch writes the rows it read."""
    b = xpkit_backend
    x, dtype = _written_in_place(b)
    got = xpkit.map_batches(lambda r: r * 2.0, x, out=x, **SEVEN)
    assert got is x
    assert_equal(x, b.asarray(_data(20) * 2.0, dtype=dtype))


def test_an_output_in_place_never_changes_another_output_s_rows_first(
    xpkit_backend,
):
    """``fn`` returns ``r + 100`` into ``x`` itself and ``r[:, 0]`` (a view of
    its rows) into ``y``: writing ``x`` first changed the view before it was
    copied (``[100, 102, ...]`` for ``[0, 2, ...]``). Two outputs in place,
    each the other's rows, swap as ``fn`` returned them."""
    b = xpkit_backend
    x, dtype = _written_in_place(b)
    xp = b.xp
    y = xp.zeros((20,), dtype=dtype, device=b.native_device)
    got = xpkit.map_batches(lambda r: (r + 100.0, r[:, 0]), x, out=(x, y), **SEVEN)
    assert got[0] is x
    assert_equal(x, b.asarray(_data(20) + 100.0, dtype=dtype))
    assert_equal(y, b.asarray(_data(20)[:, 0], dtype=dtype))
    u = b.asarray(_data(20), dtype=dtype)
    v = b.asarray(_data(20) * 10.0, dtype=dtype)
    xpkit.map_batches(lambda r, s: (s, r), u, v, out=(u, v), **SEVEN)
    assert_equal(u, b.asarray(_data(20) * 10.0, dtype=dtype))
    assert_equal(v, b.asarray(_data(20), dtype=dtype))


def test_tensor_outputs_that_overlap_are_refused():
    """Two torch views sharing a column were accepted (NumPy's refused):
    the second output overwrote the first's column."""
    torch = pytest.importorskip("torch")
    base = torch.zeros((10, 3), dtype=torch.float64)
    fn = Counted(lambda r: (r[:, :2], r[:, 1:]))
    with pytest.raises(ValueError, match=r"^out\[0\] and out\[1\] share memory"):
        xpkit.map_batches(fn, _data(10), out=(base[:, 0:2], base[:, 1:3]), **SEVEN)
    assert fn.calls == 0


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_columns_of_one_buffer_share_no_memory_and_are_written(library):
    """Interleaved but disjoint: two output columns of one buffer, and an
    input column written into the next (refused once, by their bounds)."""
    if library == "torch":
        torch = pytest.importorskip("torch")
        buf = torch.zeros((20, 3), dtype=torch.float64)
        host = buf.numpy()
    else:
        buf = host = np.zeros((20, 3))
    host[:, 0] = np.arange(20.0)
    got = xpkit.map_batches(
        lambda r: (r * 2.0, r * 3.0), buf[:, 0], out=(buf[:, 1], buf[:, 2]), **SEVEN
    )
    assert got[0] is not None
    np.testing.assert_array_equal(host[:, 1], np.arange(20.0) * 2.0)
    np.testing.assert_array_equal(host[:, 2], np.arange(20.0) * 3.0)
    np.testing.assert_array_equal(host[:, 0], np.arange(20.0))  # (read, unchanged)


def test_a_tensor_that_cannot_be_written_is_refused_before_fn_runs():
    torch = pytest.importorskip("torch")
    fn = Counted()
    x = torch.from_numpy(_data(20))
    grad = torch.zeros((20, 3), dtype=torch.float64, requires_grad=True)
    expanded = torch.zeros((1, 3), dtype=torch.float64).expand(20, 3)
    with torch.inference_mode():
        inference = torch.zeros((20, 3), dtype=torch.float64)
    overlapping = torch.zeros(62, dtype=torch.float64).as_strided((20, 3), (3, 2))
    meta = torch.empty((20, 3), dtype=torch.float64, device="meta")
    sparse = torch.zeros((20, 3), dtype=torch.float64).to_sparse()
    for out, match in (
        (grad, "requires grad"),
        (expanded, "share memory"),
        (overlapping, r"share memory \(strides \(3, 2\)"),
        (inference, "an inference tensor"),  # (torch refused it after fn ran)
        (meta, "a meta tensor"),  # (every result was dropped)
        (sparse, "a sparse tensor"),  # (named an expanded one)
    ):
        with pytest.raises(ValueError, match=rf"^out cannot be written: .*{match}"):
            xpkit.map_batches(fn, x, out=out, **SEVEN)
    assert fn.calls == 0
    with torch.inference_mode():  # (where torch writes into it)
        xpkit.map_batches(fn, x, out=inference, **SEVEN)
    np.testing.assert_array_equal(inference.numpy(), _data(20) * 2.0)


def test_a_numpy_out_whose_elements_overlap_is_refused_before_fn_runs():
    """``as_strided`` rows over one buffer: each batch overwrote the last."""
    fn = Counted()
    x = _data(20)
    for out in (
        as_strided(np.zeros(1), (20, 3), (0, 0)),
        as_strided(np.zeros(62), (20, 3), (24, 16)),  # (rows overlap their neighbours)
    ):
        with pytest.raises(
            ValueError,
            match=r"^out cannot be written: it is an array whose elements share",
        ):
            xpkit.map_batches(fn, x, out=out, **SEVEN)
    assert fn.calls == 0
    for fine in (
        np.zeros((3, 20)).T,
        np.zeros((20, 6))[:, ::2],
        np.zeros((20, 3))[::-1],
    ):
        xpkit.map_batches(fn, x, out=fine, **SEVEN)
        np.testing.assert_array_equal(fine, x * 2.0)


def test_an_empty_out_of_zero_strides_is_taken_for_zero_rows():
    """NumPy makes an empty array with zero strides: read as one whose
    elements share memory, though it has none."""
    out = np.empty((0, 2))
    got = xpkit.map_batches(lambda r: r[:, :2] * 2.0, np.zeros((0, 3)), out=out)
    assert got is out


def test_a_sharded_store_is_written_a_whole_shard_at_a_time(tmp_path, monkeypatch):
    """Its chunks are inner ones: two writers of one shard would lose rows."""
    zarr = pytest.importorskip("zarr")
    z = zarr.create_array(
        store=str(tmp_path / "s"),
        shape=(100, 3),
        chunks=(5, 3),
        shards=(20, 3),
        dtype="float64",
    )
    spans = _recording(monkeypatch, z)
    a = _data(100)
    xpkit.map_batches(lambda x: x * 2.0, a, out=z, **SEVEN)
    monkeypatch.undo()
    np.testing.assert_array_equal(z[:], a * 2.0)
    assert all(start % 20 == 0 and stop % 20 == 0 for start, stop in spans), spans


@pytest.mark.parametrize("chunks", [(100, 16), None])
def test_into_an_h5py_dataset(tmp_path, chunks):
    """h5py's datasets through the same protocol (chunked, or contiguous)."""
    h5py = pytest.importorskip("h5py")
    n = 2_000
    a = _data(n, 16)
    with h5py.File(tmp_path / "a.h5", "w") as f:
        ds = f.create_dataset("d", shape=(n, 16), dtype="float64", chunks=chunks)
        got = xpkit.map_batches(lambda x: x * 2.0, a, out=ds, budget_gb=0.05)
        assert got is ds
        np.testing.assert_array_equal(ds[:], a * 2.0)


def test_an_h5py_dataset_of_a_read_only_file_is_refused_before_fn_runs(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("d", shape=(20, 3), dtype="float64", chunks=(5, 3))
    fn = Counted()
    with (
        h5py.File(tmp_path / "a.h5", "r") as f,
        pytest.raises(
            ValueError, match=r"^out is an h5py dataset of a file opened read-only"
        ),
    ):
        xpkit.map_batches(fn, _data(20), out=f["d"], **SEVEN)
    assert fn.calls == 0
    with h5py.File(tmp_path / "a.h5", "r+") as f:  # (the same, writable)
        xpkit.map_batches(fn, _data(20), out=f["d"], budget_gb=0.05)
        np.testing.assert_array_equal(f["d"][:], _data(20) * 2.0)


def test_an_h5py_dataset_of_a_closed_file_is_refused_before_fn_runs(tmp_path):
    """h5py's "Unable to synchronously get dataspace" came at the first write."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "a.h5", "w") as f:
        d = f.create_dataset("d", shape=(20, 3), dtype="float64")
    fn = Counted()
    with pytest.raises(
        ValueError,
        match=r"^out\[1\] cannot be written: it is an h5py dataset of a file that is "
        "closed$",
    ):
        xpkit.map_batches(fn, _data(20), out=(np.zeros((20, 3)), d), **SEVEN)
    assert fn.calls == 0


def test_joblib_workers_write_their_own_rows_into_an_fsspec_store(
    tmp_path, monkeypatch
):
    """A zarr array in an fsspec store on a filesystem every worker reaches
    (here the local one; zarr needs auto_mkdir there) is written by them."""
    pytest.importorskip("joblib")
    zarr = pytest.importorskip("zarr")
    pytest.importorskip("fsspec")
    (tmp_path / "z").mkdir()
    store = zarr.storage.FsspecStore.from_url(
        f"file://{tmp_path / 'z'}", storage_options={"auto_mkdir": True}
    )
    z = zarr.create_array(store=store, shape=(400, 3), chunks=(50, 3), dtype="float64")
    _joblib_writes_its_own_rows(
        z, 400, {"bytes_per_item": 24.0, "budget_gb": 0.01}, monkeypatch
    )


def test_plan_batches_checks_the_probe_s_rows_against_out_and_writes_nothing():
    """Its probe ran fn (the trace could not follow it): the rows it gave are
    checked as map_batches checks them, and out is left as it was."""

    def value_dependent(rows):
        return rows * 2.0 if float(rows[0, 0]) > -100 else rows

    x = _data(20)
    wrong = np.zeros((20, 3), dtype=np.int8)
    with pytest.raises(
        TypeError, match=r"^out has dtype int8, but fn=.* returns float64"
    ):
        xpkit.plan_batches(value_dependent, x, out=wrong, remember=False)
    out = np.full((20, 3), 7.0)
    plan = xpkit.plan_batches(value_dependent, x, out=out, remember=False)
    assert plan.probe_rows > 0
    np.testing.assert_array_equal(out, 7.0)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "complex32"])
def test_a_tensor_out_takes_rows_of_a_dtype_outside_the_standard(dtype):
    """A float8 or complex32 tensor as out raised "x has dtype ..., which is
    not a numeric or boolean dtype of the standard": the rows, already
    tensors of out's library and device, were converted again."""
    torch = pytest.importorskip("torch")
    kind = getattr(torch, dtype, None)
    if kind is None:
        pytest.skip(f"this torch has no {dtype}")
    x = torch.arange(20.0).reshape(10, 2).to(kind)
    out = torch.zeros((10, 2), dtype=kind)
    got = xpkit.map_batches(lambda r: r.clone(), x, out=out, **SEVEN)
    assert got is out
    assert out.dtype == kind
    assert torch.equal(out.view(torch.uint8), x.view(torch.uint8))  # bit for bit
    wrong = torch.zeros((10, 2), dtype=torch.float32)
    with pytest.raises(TypeError, match=rf"^out has dtype float32, but fn=.* {dtype}"):
        xpkit.map_batches(lambda r: r.clone(), x, out=wrong, **SEVEN)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn"])
def test_a_tensor_result_widened_on_the_host_is_compared_by_its_own_dtype(dtype):
    """fn's bfloat16 tensor into a bfloat16 NumPy out was refused as
    "returns float32" (its host copy's dtype), and a float32 out took it,
    widened, although nothing is cast."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = torch.arange(20.0).reshape(10, 2).to(getattr(torch, dtype))
    out = np.zeros((10, 2), getattr(ml_dtypes, dtype))
    got = xpkit.map_batches(lambda r: r.clone(), x, out=out, **SEVEN)
    assert got is out
    np.testing.assert_array_equal(out.astype(np.float32), x.float().numpy())
    wide = np.zeros((10, 2), np.float32)
    with pytest.raises(TypeError, match=rf"^out has dtype float32, but fn=.* {dtype} "):
        xpkit.map_batches(lambda r: r.clone(), x, out=wide, **SEVEN)
    assert not wide.any()
    keyed = {"a": np.zeros((10, 2), np.float32), "b": np.zeros((10, 2), np.float16)}
    with pytest.raises(TypeError, match=rf"^out\['b'\] has dtype float16, .* {dtype} "):
        xpkit.map_batches(lambda r: {"b": r.clone(), "a": r.float()}, x, out=keyed)
