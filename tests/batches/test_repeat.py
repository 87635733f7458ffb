"""Repeated one-batch calls: fn runs again, nothing is planned, nothing else changes.

A call planned as one batch is kept with the state it was planned under;
the same call under the same state runs ``fn`` on all rows at once. Every
change that could change the plan (a host reading, a budget, the plan
memory, the call's own arguments) plans again, and a repeat checks what a
plan would: a bad argument still raises, a traced input is still refused,
a result is never an input.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from types import SimpleNamespace

import numpy as np
import pytest
from ooms import assert_no_failed_size_again

import xpkit
from xpkit import _batches, _memory, _repeat
from xpkit._adapters import get_adapter
from xpkit._adapters._device_memory import MemoryInfo
from xpkit._plan_memory import PlanMemory
from xpkit.testing import assert_equal


class Counted:
    """A row-wise fn recording the rows of each call (and failing above some)."""

    def __init__(self, result=lambda x: x * 2.0, fails_above: int | None = None):
        self.sizes: list[int] = []
        self.results: list[object] = []
        self.result = result
        self.fails_above = fails_above

    def __call__(self, x, *whole, **named):
        self.sizes.append(int(x.shape[0]))
        if self.fails_above is not None and x.shape[0] > self.fails_above:
            raise MemoryError
        self.results.append(self.result(x, *whole, **named))
        return self.results[-1]


@pytest.fixture
def plans(monkeypatch, host_reading_held):
    """Counts the plans `map_batches` makes; the host reading does not age."""
    xpkit.plan_memory.clear()
    made: list[object] = []
    make_plan = _batches.make_plan

    def counted(*args, **kwargs):
        plan = make_plan(*args, **kwargs)
        made.append(plan)
        return plan

    monkeypatch.setattr(_batches, "make_plan", counted)
    return made


def _data(n: int = 200, cols: int = 4, dtype=np.float64) -> np.ndarray:
    return np.arange(n * cols, dtype=dtype).reshape(n, cols)


def _learned(fn, *arrays, **options):
    """Two calls: the second is planned from a known cost and kept as a repeat."""
    xpkit.map_batches(fn, *arrays, **options)
    xpkit.map_batches(fn, *arrays, **options)


GIVEN = {"bytes_per_item": 64.0}


def test_the_third_call_repeats_the_second_plan(plans):
    fn = Counted()
    x = _data()
    xpkit.map_batches(fn, x)  # probes (a cost is learned: not kept)
    xpkit.map_batches(fn, x)  # planned from the cost: kept
    assert len(plans) == 2
    fn.sizes.clear()
    got = xpkit.map_batches(fn, x)
    assert_equal(got, x * 2.0)
    assert len(plans) == 2  # no third plan
    assert fn.sizes == [200]  # fn once, on all rows


def test_a_given_cost_repeats_from_the_second_call(plans):
    fn = Counted()
    x = _data()
    xpkit.map_batches(fn, x, **GIVEN)
    xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 1


def test_a_repeat_gives_the_planned_result_on_every_backend(xpkit_backend, plans):
    b = xpkit_backend
    host = np.arange(120.0).reshape(60, 2)
    x = b.asarray(host)
    fn = Counted(lambda rows: rows * 2.0 + 1.0)
    planned = xpkit.map_batches(fn, x, **GIVEN)
    fn.sizes.clear()
    repeated = xpkit.map_batches(fn, x, **GIVEN)
    assert type(repeated) is np.ndarray  # (outputs on the host)
    assert_equal(repeated, planned, check_namespace=False)
    assert fn.sizes == [60]
    # Repeated where the device's memory is the host's, planned where not.
    host_memory = get_adapter(b.library).memory_info(b.device) is None
    assert len(plans) == (1 if host_memory else 2)


@pytest.mark.parametrize(
    ("name", "result"),
    [
        ("the input", lambda x: x),
        ("a view of the input", lambda x: x[:, ::-1]),
        ("a read-only array", lambda x: np.broadcast_to(x[:1], x.shape)),
    ],
)
def test_a_repeated_result_is_never_an_input_or_unwritable(plans, name, result):
    fn = Counted(result)
    x = _data()
    _learned(fn, x, **GIVEN)
    got = xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 1, name
    assert_equal(got, result(x))
    assert not np.shares_memory(got, x)
    assert got.flags.writeable


@pytest.mark.parametrize(
    ("name", "result"),
    [
        ("the input", lambda x: x),
        ("a view of the input", lambda x: x[:, 1:]),
        ("the input expanded", lambda x: x[:1].expand(x.shape)),
        ("a fresh tensor", lambda x: x * 2.0),
    ],
)
def test_a_repeated_tensor_is_held_only_where_it_shares_nothing(plans, name, result):
    """A CPU tensor's result is held as its host view unless that view is an input's."""
    torch = pytest.importorskip("torch")
    fn = Counted(result)
    x = torch.arange(800.0, dtype=torch.float64).reshape(200, 4)
    before = x.clone()
    _learned(fn, x, **GIVEN)
    got = xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 1, name
    assert type(got) is np.ndarray
    assert_equal(got, result(x).numpy())
    shares = np.shares_memory(got, fn.results[-1].numpy())
    assert shares == (name == "a fresh tensor")  # (held: no copy)
    got[...] = -1.0
    assert torch.equal(x, before)


@pytest.mark.parametrize("bit", ["conj", "neg"])
def test_a_result_resolved_from_a_lazy_torch_view_is_not_the_input(plans, bit):
    """``x.conj()`` of a conjugate view is its very memory (a host view of
    the input there was none): writing the result changed the input."""
    torch = pytest.importorskip("torch")
    base = torch.arange(12.0, dtype=torch.float64).reshape(6, 2) * (1 + 1j)
    before = base.clone()
    lazy = base.conj() if bit == "conj" else torch._neg_view(base)
    undo = torch.conj if bit == "conj" else torch._neg_view
    for got in (
        xpkit.map_batches(undo, lazy, **GIVEN),  # (planned as one batch)
        xpkit.map_batches(undo, lazy, **GIVEN),  # (repeated)
        xpkit.compute_oom_safe(undo, lazy),
    ):
        got[0, 0] = 99.0
        assert torch.equal(base, before)
    assert len(plans) == 1


def test_a_fresh_result_is_kept_as_it_is(plans):
    fn = Counted()
    x = _data()
    _learned(fn, x, **GIVEN)
    got = xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 1
    assert got is fn.results[-1]  # held once: no copy


@pytest.mark.parametrize(
    "result",
    [
        lambda x: (x * 2.0, x.sum(axis=1)),
        lambda x: [x * 2.0, x[:, 0] > 3],
        lambda x: {"double": x * 2.0, "sum": x.sum(axis=1)},
    ],
    ids=["tuple", "list", "dict"],
)
def test_a_repeated_structure_is_the_planned_one(plans, result):
    x = _data()
    planned = xpkit.map_batches(result, x, **GIVEN)
    repeated = xpkit.map_batches(result, x, **GIVEN)
    assert len(plans) == 1
    assert type(repeated) is type(planned)
    pairs = (
        [(repeated[k], planned[k]) for k in planned]
        if isinstance(planned, dict)
        else list(zip(repeated, planned, strict=True))
    )
    for got, expected in pairs:
        assert_equal(got, expected)


def test_whole_operands_are_part_of_the_call(plans):
    def fn(x, w, *, shift):
        return x @ w + shift

    x, w = _data(), np.ones((4, 3))
    shift = np.full((3,), 0.5)
    for whole in ((w, shift), {"w": w, "shift": shift}):
        call = fn if isinstance(whole, dict) else (lambda x, w, s: fn(x, w, shift=s))
        expected = x @ w + shift
        _learned(call, x, whole=whole, **GIVEN)
        made = len(plans)
        assert_equal(xpkit.map_batches(call, x, whole=whole, **GIVEN), expected)
        assert len(plans) == made  # repeated
    # Another shape of a whole operand: planned again.
    made = len(plans)
    got = xpkit.map_batches(fn, x, whole={"w": np.ones((4, 5)), "shift": 0.0}, **GIVEN)
    assert got.shape == (200, 5)
    assert len(plans) == made + 1


@pytest.mark.parametrize(
    "change",
    [
        "a new host reading",
        "a memory_budget block",
        "the environment's budget",
        "a cleared plan memory",
        "a plan memory switched off",
        "remember=False",
        "other rows",
        "another dtype",
        "another cost",
        "a backend",
    ],
)
def test_what_could_change_the_plan_plans_again(plans, monkeypatch, change):
    fn = Counted()
    x = _data()
    _learned(fn, x, **GIVEN)
    made = len(plans)
    options: dict[str, object] = dict(GIVEN)
    if change == "a new host reading":
        reader, _, available = _memory._host_reading
        monkeypatch.setattr(
            _memory, "_host_reading", (reader, time.monotonic(), available)
        )
    elif change == "the environment's budget":
        monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", "0.5")
    elif change == "a cleared plan memory":
        xpkit.plan_memory.clear()
    elif change == "a plan memory switched off":
        monkeypatch.setattr(xpkit.plan_memory, "enabled", False)
    elif change == "remember=False":
        options["remember"] = False
    elif change == "other rows":
        x = _data(150)
    elif change == "another dtype":
        x = _data(dtype=np.float32)
    elif change == "another cost":
        options["bytes_per_item"] = 65.0
    elif change == "a backend":
        options["backend"] = "numpy"
    if change == "a memory_budget block":
        with xpkit.memory_budget(0.25):
            got = xpkit.map_batches(fn, x, **options)
    else:
        got = xpkit.map_batches(fn, x, **options)
    assert_equal(got, x * 2.0)
    assert len(plans) == made + 1, change


def test_a_backend_that_holds_the_inputs_as_they_are_repeats(plans):
    """``backend=b``, b the inputs' own, moves nothing: it repeated never
    (82 us a call where the same call without it took 12 us; the README's
    example passes one)."""
    fn = Counted()
    x = _data()
    b = xpkit.Backend("numpy")
    _learned(fn, x, backend=b, **GIVEN)
    made = len(plans)
    fn.sizes.clear()
    assert_equal(xpkit.map_batches(fn, x, backend=b, **GIVEN), x * 2.0)
    assert_equal(xpkit.map_batches(fn, x, **GIVEN), x * 2.0)  # (the same call)
    assert len(plans) == made
    assert fn.sizes == [200, 200]
    w = np.ones((4, 4))

    def times(a, m):
        return a @ m

    _learned(times, x, whole=(w,), backend=b, **GIVEN)
    made = len(plans)
    got = xpkit.map_batches(times, x, whole=(w,), backend=b, **GIVEN)
    assert_equal(got, x @ w)
    assert len(plans) == made


def test_a_backend_that_would_move_the_inputs_plans_every_call(plans):
    """One that moves the rows (another library, a name to resolve) is planned."""
    torch = pytest.importorskip("torch")
    fn = Counted()
    x = _data()
    b = xpkit.Backend("torch")
    for _ in range(3):
        got = xpkit.map_batches(fn, x, backend=b, **GIVEN)
        assert_equal(got, x * 2.0)
    assert len(plans) == 3
    t = torch.asarray(x)  # (a torch input under a NumPy backend moves too)
    for _ in range(3):
        xpkit.map_batches(lambda a: a * 2.0, t, backend=xpkit.Backend("numpy"), **GIVEN)
    assert len(plans) == 6


def test_a_budget_that_splits_the_call_is_followed_at_once(plans):
    """Under a budget that no longer holds all rows, the repeat gives way."""
    fn = Counted()
    x = _data(1000)
    _learned(fn, x, **GIVEN)
    fn.sizes.clear()
    with xpkit.memory_budget(100 * 64 / 2**30):  # room for 100 rows
        got = xpkit.map_batches(fn, x, **GIVEN)
    assert_equal(got, x * 2.0)
    assert max(fn.sizes) <= 100


@pytest.mark.parametrize(
    ("option", "good", "bad", "error"),
    [
        ("min_batch", 1, True, TypeError),
        ("min_batch", 1, 1.0, TypeError),
        ("min_batch", 2, 2.0, TypeError),
        ("bytes_per_item", 1, True, TypeError),
        ("fallback_bytes_per_item", 1.0, True, TypeError),
        ("pad", True, 1, TypeError),
        ("overhead", 1.0, float("nan"), ValueError),
    ],
)
def test_a_bad_value_equal_to_a_good_one_still_raises(plans, option, good, bad, error):
    """True == 1 == 1.0, but only the checked value's call is repeated."""
    fn = Counted()
    x = _data()
    _learned(fn, x, **{**GIVEN, option: good})
    assert len(plans) == 1  # kept
    with pytest.raises(error, match=option):
        xpkit.map_batches(fn, x, **{**GIVEN, option: bad})


def test_a_whole_dict_keyed_like_a_tuple_still_raises_the_check_s_error(plans):
    w = np.ones((4, 3))

    def fn(x, w):
        return x @ w

    x = _data()
    _learned(fn, x, whole=(w,), **GIVEN)
    with pytest.raises(TypeError, match="whole must map fn's keyword names"):
        xpkit.map_batches(fn, x, whole={0: w}, **GIVEN)


def test_a_given_budget_never_reads_the_environment_s(plans, monkeypatch):
    """budget_gb= wins: a bad XPKIT_MEMORY_BUDGET_GB is not read, planned or repeated."""
    fn = Counted()
    x = _data()
    monkeypatch.setenv("XPKIT_MEMORY_BUDGET_GB", "abc")
    for _ in range(3):
        assert_equal(xpkit.map_batches(fn, x, budget_gb=1.0, **GIVEN), x * 2.0)
    assert len(plans) == 1  # planned once, then repeated
    with pytest.raises(ValueError, match="XPKIT_MEMORY_BUDGET_GB"):
        xpkit.map_batches(fn, x, **GIVEN)  # no budget given: it is read


def test_a_lesson_learned_while_a_plan_is_made_is_never_repeated(plans, monkeypatch):
    """The state is taken before the plan: a change during it makes it stale."""
    fn = Counted()
    x = _data()
    make_plan = _batches.make_plan

    def teaching(*args, **kwargs):  # another thread learns while this plans
        plan = make_plan(*args, **kwargs)
        xpkit.plan_memory.learn_fit(("elsewhere",), 10)
        return plan

    monkeypatch.setattr(_batches, "make_plan", teaching)
    for _ in range(3):
        xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 3  # (the counter sits under the teaching plan)


def test_inputs_that_no_longer_share_their_rows_raise(plans):
    fn = Counted(lambda x, y: x + y)
    x, y = _data(), _data()
    _learned(fn, x, y, **GIVEN)
    with pytest.raises(ValueError, match="axis-0 length"):
        xpkit.map_batches(fn, x, _data(150), **GIVEN)


def test_an_oom_in_a_repeat_is_planned_and_split_then_remembered(plans):
    fn = Counted()
    x = _data(400)
    _learned(fn, x, **GIVEN)
    fn.fails_above = 100  # the memory went away
    fn.sizes.clear()
    got = xpkit.map_batches(fn, x, **GIVEN)
    assert_equal(got, x * 2.0)
    assert fn.sizes[0] == 400  # the repeat's try
    assert max(fn.sizes[1:][-4:]) <= 100  # then halves that fit
    fn.sizes.clear()
    xpkit.map_batches(fn, x, **GIVEN)
    assert max(fn.sizes) <= 100  # the next call starts from what fitted


def test_an_oom_in_a_repeat_never_runs_its_size_again(plans):
    """An OOM at n rows in a repeat: the planned path goes on at n // 2 rows."""
    fn = Counted()
    x = _data(1000)
    _learned(fn, x, **GIVEN)
    fn.fails_above = 300
    fn.sizes.clear()
    got = xpkit.map_batches(fn, x, **GIVEN)
    assert_equal(got, x * 2.0)
    assert fn.sizes[:2] == [1000, 500]  # (it was [1000, 1000, 500, ...])
    assert_no_failed_size_again(fn.sizes, 300)
    assert xpkit.plan_memory.entries()[-1].fits == 250  # what the OOM taught
    fn.sizes.clear()
    xpkit.map_batches(fn, x, **GIVEN)
    assert max(fn.sizes) <= 250  # the next call starts from what fitted


def _failing_repeat(*, min_batch, fails_above):
    """A learned one-batch call of 200 rows whose ``fn`` now fails above some."""
    fn = Counted()
    x = _data(200)
    options = {**GIVEN, "min_batch": min_batch}
    _learned(fn, x, **options)
    fn.fails_above = fails_above
    fn.sizes.clear()
    return fn, x, options


def test_an_oom_in_a_repeat_of_min_batch_rows_raises_at_once(plans):
    """No fewer rows may run: the error, not a second try."""
    fn, x, options = _failing_repeat(min_batch=200, fails_above=100)
    # (named as the planned path names them: fn's own error came back bare)
    with pytest.raises(
        MemoryError,
        match=r"^map_batches: rows 0:200 \(200 rows\) could not run on numpy even "
        r"at min_batch=200: out of memory",
    ) as info:
        xpkit.map_batches(fn, x, **options)
    assert fn.sizes == [200]  # (it was [200, 200])
    assert isinstance(info.value.__cause__, MemoryError)  # fn's own


def test_an_oom_in_a_repeat_whose_half_is_under_min_batch_runs_min_batch_rows(plans):
    """min_batch rows, then the rest, as a split runs them: the repeat raised
    at once where half its rows was under min_batch (a planned call ran)."""
    fn, x, options = _failing_repeat(min_batch=150, fails_above=160)
    np.testing.assert_array_equal(xpkit.map_batches(fn, x, **options), x * 2.0)
    assert fn.sizes == [200, 150, 50]
    fn.fails_above = 100  # (150 rows no longer fit: the error names them)
    with pytest.raises(MemoryError, match=r"rows 0:150 \(150 rows.*min_batch=150"):
        xpkit.map_batches(fn, x, **options)


def test_a_device_measured_on_each_call_is_never_repeated(plans, monkeypatch):
    """Memory that is not the host's (a GPU) is read on every call: no repeat."""
    numpy = get_adapter("numpy")
    info = MemoryInfo(free=8 * 2**30, total=16 * 2**30)
    monkeypatch.setattr(type(numpy), "memory_info", lambda self, device: info)
    fn = Counted()
    x = _data()
    for _ in range(3):
        xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 3


def test_a_large_batch_of_a_library_that_keeps_freed_memory_is_not_repeated(
    plans, monkeypatch
):
    numpy = get_adapter("numpy")
    monkeypatch.setattr(type(numpy), "keeps_freed_host_memory", True)
    monkeypatch.setattr(_repeat, "TRIM_ABOVE_BYTES", 1)
    fn = Counted()
    x = _data()
    for _ in range(3):
        xpkit.map_batches(fn, x, **GIVEN)
    assert len(plans) == 3


def test_a_repeat_is_logged(plans, caplog):
    fn = Counted()
    x = _data()
    _learned(fn, x, **GIVEN)
    with caplog.at_level(logging.INFO, logger="xpkit"):
        xpkit.map_batches(fn, x, **GIVEN)
    assert "200 items in one batch, as the last call planned" in caplog.text


def test_a_traced_input_is_refused_in_a_repeat_too(plans):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x = jnp.arange(12.0).reshape(6, 2)

    def fn(rows):
        return rows * 2.0

    _learned(fn, x, **GIVEN)
    assert_equal(xpkit.map_batches(fn, x, **GIVEN), np.arange(12.0).reshape(6, 2) * 2)
    assert len(plans) == 1  # JAX on the CPU repeats too
    with pytest.raises(RuntimeError, match="cannot run inside jax.jit"):
        jax.jit(lambda a: xpkit.map_batches(fn, a, **GIVEN))(x)


def test_threads_repeating_calls_get_their_own_results(plans):
    """8 threads, each its own rows and shapes, calling again and again.

    What any thread learns ends every kept call (the memory's version), so
    a thread's first calls may plan again while the others learn theirs;
    once every thread has learned (the barrier), each plans once at most.
    """
    errors: list[BaseException] = []
    learned = threading.Barrier(8)
    after: list[int] = []

    def work(k: int) -> None:
        try:
            x = _data(50 + k, cols=2 + k % 3)

            def fn(rows):
                return rows * float(k)

            for i in range(200):
                if i == 2:
                    learned.wait(timeout=60)
                    after.append(len(plans))
                got = xpkit.map_batches(fn, x, **GIVEN)
                np.testing.assert_array_equal(got, x * float(k))
                assert not np.shares_memory(got, x)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(plans) - min(after) <= 8  # (each thread's kept call, once again)


# -- the plan memory's record of one-batch calls ------------------------------------
def test_a_kept_call_needs_the_same_state_version_and_living_objects():
    memory = PlanMemory()

    class Named:
        pass

    obj = Named()
    memory.learn_one_batch(
        "call", "state", (weakref.ref(obj),), memory.version, "numpy"
    )
    assert memory.one_batch("call", "state")
    assert not memory.one_batch("call", "another state")
    assert not memory.one_batch("another call", "state")
    del obj
    gc.collect()
    assert not memory.one_batch("call", "state")  # what it named is gone


def test_a_call_planned_before_something_was_learned_is_not_kept():
    memory = PlanMemory()
    before = memory.version
    memory.learn_fit(("key",), 10)
    assert memory.version != before
    memory.learn_one_batch("call", "state", (), before, "numpy")
    assert not memory.one_batch("call", "state")
    memory.learn_one_batch("call", "state", (), memory.version, "numpy")
    assert memory.one_batch("call", "state")
    memory.relax_fit(("key",), 20, 40)  # anything learned ends it
    assert not memory.one_batch("call", "state")


def test_kept_calls_are_bounded_cleared_and_switched_off():
    memory = PlanMemory(maxsize=2)
    for call in ("a", "b", "c"):
        memory.learn_one_batch(call, "s", (), memory.version, "numpy")
    assert not memory.one_batch("a", "s")  # the oldest went
    assert memory.one_batch("b", "s")
    assert memory.one_batch("c", "s")
    memory.enabled = False
    assert not memory.one_batch("c", "s")
    memory.enabled = True
    memory.clear()
    assert not memory.one_batch("c", "s")


def test_a_host_reading_is_fresh_for_its_documented_time(monkeypatch):
    _memory.recent_host_bytes()
    reading = _memory.fresh_host_reading()
    assert reading is not None
    _, when, value = reading
    assert value == _memory.recent_host_bytes()  # the same reading, reused
    late = when + _memory.HOST_READING_REUSED_FOR * 1.01
    monkeypatch.setattr(_memory, "time", SimpleNamespace(monotonic=lambda: late))
    assert _memory.fresh_host_reading() is None


def test_an_empty_input_runs_fn_every_time_and_is_never_kept(plans):
    fn = Counted()
    x = _data(0)
    for _ in range(3):
        got = xpkit.map_batches(fn, x, **GIVEN)
        assert got.shape == (0, 4)
    assert fn.sizes == [0, 0, 0]  # fn still runs once, its result checked
    assert plans == []  # no rows: nothing to plan, nothing kept
