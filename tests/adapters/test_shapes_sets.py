"""``nonzero`` and the ``unique_*`` family on shape-only arrays, at their largest.

Where NumPy computes them (NumPy, array-api-strict) the trace follows them
with every element nonzero and every element unique (`_sets`): on random
floats, which are so, the traced peak is tracemalloc's (within a tenth);
on fewer distinct values it is more than the true peak, never less.
Before, they were refused, and the sampled host meter planned them at 2.3
to 4.3 times a 100 kB budget.
"""

from __future__ import annotations

import array_api_compat
import numpy as np
import pytest
from shape_twins import numpy_peak

import xpkit
from xpkit._adapters._registry import get_adapter
from xpkit._adapters._shapes import ShapeTracer


def _ns(a):
    return array_api_compat.array_namespace(a)


#: name -> fn of a (rows, 64) batch that returns a row each (the set's size folded in).
CASES = {
    "unique_values": lambda a: a[:, 0] + _ns(a).sum(_ns(a).unique_values(a)),
    "unique_counts": lambda a: a[:, 0] * _ns(a).max(_ns(a).unique_counts(a).counts),
    "unique_inverse": lambda a: _ns(a).unique_inverse(a).inverse_indices,
    "unique_all": lambda a: _ns(a).unique_all(a).inverse_indices * 2,
    "nonzero": lambda a: a[:, 0] + _ns(a).sum(_ns(a).nonzero(a)[1]),
    "np.nonzero": lambda a: a[:, 0] + np.sum(np.nonzero(a)[0]),
    "np.unique_values": lambda a: a[:, 0] + np.sum(np.unique_values(a)),
    "np.unique_counts": lambda a: a[:, 0] * np.max(np.unique_counts(a).counts),
}


@pytest.fixture(scope="module")
def numpy_profile():
    return get_adapter("numpy").shape_profile("cpu")


@pytest.mark.parametrize("name", list(CASES))
def test_a_set_function_is_traced_at_its_largest(numpy_profile, name):
    fn = CASES[name]
    rows = 4000
    traced = ShapeTracer(numpy_profile, fn, (((64,), "float64"),)).peak(rows)
    distinct = np.random.default_rng(0).standard_normal((rows, 64))
    real = numpy_peak(fn, distinct)
    assert 0.9 * real <= traced <= 1.1 * real + 8192, (traced, real)
    few = np.round(distinct * 3.0) + 0.5  # (about twenty values, none zero)
    assert numpy_peak(fn, few) <= 1.1 * traced + 8192


@pytest.mark.parametrize("library", ["numpy", "array_api_strict"])
def test_a_plan_of_unique_counts_keeps_a_small_budget(library):
    """The reviewer's ``unique_counts`` at 100 kB: 2.7 times it, probed."""
    xp = pytest.importorskip(library)
    x = xp.asarray(np.random.default_rng(1).standard_normal((20_000, 32)))

    def fn(a):
        ns = _ns(a)
        return ns.astype(a, ns.float64) * ns.astype(
            ns.max(ns.unique_counts(a)[1]), ns.float64
        )

    budget = 100_000
    plan = xpkit.plan_batches(fn, x, budget_gb=budget / 2**30, remember=False)
    assert plan.source == "traced by shape-only arrays", plan.source
    real = numpy_peak(fn, x[: plan.batch_size, ...])
    assert real <= 1.15 * budget + 4096, (plan.batch_size, real)
    assert real >= 0.3 * budget, (plan.batch_size, real)


def test_torch_s_set_functions_are_left_to_its_meter():
    """torch's own ``unique`` is not NumPy's: refused, and measured."""
    pytest.importorskip("torch")
    from xpkit._adapters._shapes import CannotFollow

    profile = get_adapter("torch").shape_profile("cpu")
    with pytest.raises(CannotFollow, match="depends on values"):
        ShapeTracer(profile, CASES["unique_values"], (((64,), "float64"),)).peak(100)
