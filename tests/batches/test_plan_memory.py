"""What map_batches remembers between calls: costs and the batch size that fits.

A second call with the same signature plans without probing; a changed
dtype probes again, a changed budget replans; an OOM teaches the next call
its batch size, which grows back after enough successes. The memory is
bounded, inspectable, can be cleared and switched off.
"""

from __future__ import annotations

import gc
import types

import numpy as np
import pytest

import xpkit
from xpkit._plan_memory import (
    GROW_AFTER,
    Learned,
    PlanMemory,
    exact_signature,
    signature,
)


class Counted:
    """A row-wise fn that records the rows of every call (and can fail above some)."""

    def __init__(self, fails_above: int | None = None) -> None:
        self.sizes: list[int] = []
        self.fails_above = fails_above

    def __call__(self, x):
        self.sizes.append(int(x.shape[0]))
        if self.fails_above is not None and x.shape[0] > self.fails_above:
            raise MemoryError
        return x * 2.0


def _data(n: int, dtype=np.float64) -> np.ndarray:
    return np.arange(n * 4, dtype=dtype).reshape(n, 4)


def test_a_second_call_with_the_same_signature_does_not_probe():
    fn = Counted()
    x = _data(2000)
    first = xpkit.plan_batches(fn, x)
    if not first.source.startswith("measured"):
        pytest.skip(f"nothing measures here: {first.source}")
    assert first.probe_rows > 0
    assert len(fn.sizes) >= 2  # probes of growing size
    fn.sizes.clear()
    got = xpkit.map_batches(fn, x)
    np.testing.assert_array_equal(got, x * 2.0)
    assert fn.sizes == [2000]  # no probe: one call covers every row
    again = xpkit.plan_batches(fn, x)
    assert again.remembered
    assert again.probe_rows == 0
    assert again.source.startswith("remembered: measured by")
    assert again.bytes_per_item == first.bytes_per_item
    assert again.output_bytes == 2000 * 4 * 8


def test_other_rows_of_the_same_shape_share_the_memory():
    fn = Counted()
    first = xpkit.plan_batches(fn, _data(500))
    if not first.source.startswith("measured"):
        pytest.skip(f"nothing measures here: {first.source}")
    fn.sizes.clear()
    plan = xpkit.plan_batches(fn, _data(64))  # another n, the same rows
    assert plan.remembered
    assert fn.sizes == []


def test_a_changed_dtype_probes_again():
    fn = Counted()
    xpkit.plan_batches(fn, _data(500))
    fn.sizes.clear()
    plan = xpkit.plan_batches(fn, _data(500, np.float32))
    assert not plan.remembered
    if plan.source.startswith("measured"):
        assert fn.sizes[0] == 4  # probed again


def test_a_changed_budget_replans_without_probing():
    fn = Counted()
    x = _data(5000)
    with xpkit.memory_budget(1.0):
        wide = xpkit.plan_batches(fn, x)
    if not wide.source.startswith("measured"):
        pytest.skip(f"nothing measures here: {wide.source}")
    fn.sizes.clear()
    budget = (wide.fixed_bytes + 100 * wide.bytes_per_item) / 2**30  # 100 rows
    with xpkit.memory_budget(budget):
        narrow = xpkit.plan_batches(fn, x)
    assert narrow.remembered
    assert fn.sizes == []
    assert narrow.budget_gb == budget
    assert narrow.batch_size < wide.batch_size
    assert narrow.batch_size == pytest.approx(
        (budget * 2**30 - narrow.fixed_bytes) / narrow.bytes_per_item, abs=1
    )


def test_what_a_closure_holds_is_part_of_the_signature():
    def scaled(k, w):
        return lambda x: x * k + w[0]

    x = _data(10)
    w3, w3b, w5 = np.ones(3), np.zeros(3), np.ones(5)
    key = signature(scaled(2.0, w3), (x,), (), "here")[0]
    assert key is not None
    assert signature(scaled(2.0, w3b), (x,), (), "here")[0] == key  # same shape
    assert signature(scaled(3.0, w3), (x,), (), "here")[0] != key  # another value
    assert signature(scaled(2.0, w5), (x,), (), "here")[0] != key  # another shape
    assert signature(scaled(2.0, w3), (x[:, :2],), (), "here")[0] != key  # rows
    assert signature(scaled(2.0, w3), (x,), (w3,), "here")[0] != key  # whole
    assert signature(scaled(2.0, w3), (x,), (), "there")[0] != key  # device


def test_defaults_are_part_of_the_signature_keyword_only_too():
    def made(w, k):
        def fn(x, w=w, *, k=k):
            return x * k + w[0]

        return fn

    x = _data(10)
    w3, w5 = np.ones(3), np.ones(5)
    key = signature(made(w3, 2.0), (x,), (), "here")[0]
    assert key is not None
    assert signature(made(np.zeros(3), 2.0), (x,), (), "here")[0] == key
    assert signature(made(w5, 2.0), (x,), (), "here")[0] != key  # a default
    assert signature(made(w3, 3.0), (x,), (), "here")[0] != key  # keyword-only
    plain = signature(lambda x: x, (x,), (), "here")[0]
    assert plain is not None
    assert plain != signature(lambda x: x + 1, (x,), (), "here")[0]


def test_the_same_code_in_two_files_is_two_functions():
    code = _twice.__code__
    elsewhere = types.FunctionType(code.replace(co_filename="elsewhere.py"), {})
    assert elsewhere.__code__ == code  # (Python's view: the file is not compared)
    x = _data(4)
    for key_of in (signature, exact_signature):
        here, there = (key_of(fn, (x,), (), "here")[0] for fn in (_twice, elsewhere))
        assert None not in (here, there)
        assert here != there


def test_an_exact_key_tells_inputs_apart_by_all_but_their_values(xpkit_backend):
    b = xpkit_backend

    def key_of(x, where="here"):
        return exact_signature(_twice, (x,), (), where)[0]

    key = key_of(b.asarray(np.arange(12.0).reshape(6, 2)))
    assert key is not None
    assert key_of(b.asarray(np.ones((6, 2)))) == key  # other values
    assert key_of(b.asarray(np.ones((5, 2)))) != key  # other rows
    assert key_of(b.asarray(np.ones((6, 3)))) != key  # another row shape
    assert key_of(b.asarray(np.ones((6, 2), dtype=np.int32))) != key  # dtype
    assert key_of(b.asarray(np.ones((6, 2))), "there") != key  # other options
    assert key_of(np.ones((6, 2))) != key or b.library == "numpy"  # library


def _twice(x):
    return x * 2.0


def test_a_callable_object_is_remembered_while_it_lives():
    memory = PlanMemory()
    fn = Counted()
    key, alive = signature(fn, (_data(4),), (), "here")
    assert key is not None
    memory.learn_cost(key, Learned(8.0, 0.0, "measured by test", alive=alive))
    assert memory.recall(key) is not None
    del fn, alive
    gc.collect()
    assert memory.recall(key) is None  # its object is gone: so is the entry
    assert len(memory) == 0


def test_a_function_over_an_unknowable_value_is_not_remembered():
    held = [1.0]  # a list: neither a value nor weakly referable

    def fn(x):
        return x * held[0]

    assert signature(fn, (_data(4),), (), "here") == (None, ())
    xpkit.map_batches(fn, _data(40))
    assert len(xpkit.plan_memory) == 0


def test_an_oom_teaches_the_next_call_its_batch_size():
    fn = Counted(fails_above=300)
    x = _data(2000)
    given = {"bytes_per_item": 1.0, "budget_gb": 1.0}  # the plan: one batch of 2000
    got = xpkit.map_batches(fn, x, **given)
    np.testing.assert_array_equal(got, x * 2.0)
    worked = max(s for s in fn.sizes if s <= 300)
    fn.sizes.clear()
    xpkit.map_batches(fn, x, **given)
    assert fn.sizes[0] <= worked  # started from what fitted: no OOM this time
    assert max(fn.sizes) <= 300
    assert xpkit.plan_batches(fn, x, **given).batch_size <= worked


def test_batches_grow_back_after_enough_successes():
    fn = Counted(fails_above=100)
    x = _data(40_000)
    given = {"bytes_per_item": 1.0, "budget_gb": 1.0}
    xpkit.map_batches(fn, x, **given)  # learns that 100 rows or fewer fit
    fn.fails_above = None  # the memory is there again
    fn.sizes.clear()
    xpkit.map_batches(fn, x, **given)
    start = fn.sizes[0]
    assert start <= 100
    grown = fn.sizes[GROW_AFTER]
    assert grown == 2 * start  # doubled after GROW_AFTER batches in a row
    assert max(fn.sizes) > grown  # and again, toward the planned size


def test_remember_false_neither_recalls_nor_learns():
    fn = Counted()
    x = _data(500)
    xpkit.map_batches(fn, x, remember=False)
    assert len(xpkit.plan_memory) == 0
    xpkit.map_batches(fn, x)
    fn.sizes.clear()
    plan = xpkit.plan_batches(fn, x, remember=False)
    assert not plan.remembered
    with pytest.raises(TypeError, match="remember must be a bool, got 1"):
        xpkit.map_batches(fn, x, remember=1)


def test_the_memory_can_be_switched_off_cleared_and_read():
    fn = Counted()
    x = _data(500)
    xpkit.plan_memory.enabled = False
    try:
        xpkit.map_batches(fn, x)
        assert len(xpkit.plan_memory) == 0
    finally:
        xpkit.plan_memory.enabled = True
    xpkit.map_batches(fn, x)
    entries = xpkit.plan_memory.entries()
    if entries:  # something measured the cost
        (entry,) = entries
        assert entry.source.startswith("measured by")
        assert entry.output_row_bytes == 4 * 8
        assert entry.learned_at > 0
        assert "1 of 256 signatures, on" in repr(xpkit.plan_memory)
    xpkit.plan_memory.clear()
    assert len(xpkit.plan_memory) == 0


def test_the_memory_is_bounded_least_recently_used_first():
    memory = PlanMemory(maxsize=2)
    for key in ("a", "b"):
        memory.learn_cost((key,), Learned(1.0, 0.0, key))
    assert memory.recall(("a",)) is not None  # "a" is now the most recent
    memory.learn_cost(("c",), Learned(1.0, 0.0, "c"))
    assert [e.source for e in memory.entries()] == ["a", "c"]
    with pytest.raises(ValueError, match="maxsize must be a positive int, got 0"):
        PlanMemory(maxsize=0)


def test_an_oom_fit_survives_a_new_measurement():
    memory = PlanMemory()
    memory.learn_cost(("k",), Learned(1.0, 0.0, "first"))
    memory.learn_fit(("k",), 50)
    memory.learn_fit(("k",), 80)  # a larger fit never loosens an earlier one
    memory.learn_cost(("k",), Learned(2.0, 0.0, "second"))
    entry = memory.recall(("k",))
    assert entry is not None
    assert (entry.source, entry.fits) == ("second", 50)
    memory.relax_fit(("k",), 100, planned=400)
    assert memory.recall(("k",)).fits == 100
    memory.relax_fit(("k",), 400, planned=400)
    assert memory.recall(("k",)).fits is None
