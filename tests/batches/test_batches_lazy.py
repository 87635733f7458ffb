"""map_batches in traced, compiled and lazy code: what its statement says, and why.

`map_batches` is an eager loop on the host (it sizes batches from memory
measured now and reads each batch's result), and its capability statement
says so (`xpkit capabilities xpkit`). Declared with that statement, a
library function that calls it runs eagerly in the plugin's ``*-jit`` and
``*-compile`` variants and computes each batch in ``*-lazy``. Forced into
those modes it fails with xpkit's own words, not a library's internals:
under ``jax.jit`` a RuntimeError naming jax.jit, under
``torch.compile(fullgraph=True)`` dynamo's refusal carrying xpkit's reason,
and under the lazy variant the compute refused, naming ``computes=``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from helpers import run_python

import xpkit
from xpkit.testing import capabilities, lazy_xp_function

A = np.arange(12.0).reshape(6, 2)


def _doubled(x: Any) -> Any:
    return xpkit.map_batches(
        lambda rows: rows * 2.0, x, bytes_per_item=16.0, result_on="device"
    )


@capabilities(
    modes=dict(xpkit.map_batches.__xpkit_capabilities__.modes),
    computes=True,
)
def doubled_as_stated(x: Any) -> Any:
    """A library function that calls map_batches, declared as map_batches is."""
    return _doubled(x)


def doubled_forced(x: Any) -> Any:
    """The same, declared with no statement: forced into every mode."""
    return _doubled(x)


lazy_xp_function(doubled_as_stated)
lazy_xp_function(doubled_forced)


def test_map_batches_runs_where_its_statement_says(xpkit_backend):
    b = xpkit_backend
    got = doubled_as_stated(b.asarray(A))
    np.testing.assert_array_equal(b.to_numpy(got), A * 2.0)


def test_forced_into_a_mode_it_fails_with_xpkit_s_words(xpkit_backend, request):
    b = xpkit_backend
    mode = request.node.callspec.params["xpkit_backend"].mode
    reasons = {
        "jit": "map_batches cannot run inside jax.jit",
        "compile": "is an eager loop on the host",
        "lazy": "computes=",
    }
    if mode not in reasons:  # eager variants: it just runs
        got = doubled_forced(b.asarray(A))
        np.testing.assert_array_equal(b.to_numpy(got), A * 2.0)
        return
    with pytest.raises(Exception, match=reasons[mode]) as caught:
        doubled_forced(b.asarray(A))
    assert "Tracer" not in type(caught.value).__name__


def test_the_batching_functions_carry_one_checked_statement():
    """An eager loop on the host, as `capabilities` would record it."""
    from xpkit import _batches
    from xpkit.testing._capabilities import checked_statement

    stated = _batches.EAGER_LOOP
    assert stated == checked_statement(
        modes=dict(stated.modes), computes=stated.computes
    )
    assert sorted(stated.modes) == ["compile", "jit", "lazy"]
    assert stated.computes is True
    for name in ("map_batches", "plan_batches", "compute_oom_safe"):
        assert xpkit.testing.statements_of("xpkit")[name] is stated


@pytest.mark.parametrize(
    ("transform", "named"),
    [
        ("grad", "jax.grad (or another autodiff transform)"),
        ("vmap", "jax.vmap"),
        ("jit", "jax.jit (or a traced lax.scan, fori_loop or cond body)"),
    ],
)
def test_a_traced_input_is_refused_naming_its_transform(transform, named):
    """Under jax.grad and jax.vmap the refusal said "inside jax.jit"."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def batched(a):
        return xpkit.map_batches(lambda r: r * 2.0, a).sum()

    wrap = {"grad": jax.grad, "vmap": jax.vmap, "jit": jax.jit}[transform]
    x = jnp.ones((3, 2, 2)) if transform == "vmap" else jnp.ones((3, 2))
    with pytest.raises(
        RuntimeError, match=f"^map_batches cannot run inside {re.escape(named)}: arrays"
    ):
        wrap(batched)(x)


_CLOSED_OVER = {
    "a fori_loop body": (
        "jax.jit (or a traced lax.scan, fori_loop or cond body)",
        lambda jax, x, run: jax.lax.fori_loop(
            0, 2, lambda i, c: c + run(lambda r: r.sum(1)), jax.numpy.zeros(4)
        ),
    ),
    "jit, a traced weight": (
        "jax.jit (or a traced lax.scan, fori_loop or cond body)",
        lambda jax, x, run: jax.jit(lambda w: run(lambda r: r.sum(1) * w))(2.0),
    ),
    "grad, a traced weight": (
        "jax.grad (or another autodiff transform)",
        lambda jax, x, run: jax.grad(lambda w: run(lambda r: r.sum(1) * w).sum())(2.0),
    ),
}


@pytest.mark.parametrize("case", sorted(_CLOSED_OVER))
def test_a_traced_result_of_untraced_inputs_is_refused_naming_the_transform(case):
    """Inputs not traced, but fn's results are (a weight fn closes over, or
    map_batches under a trace): JAX's TracerArrayConversionError came from
    deep inside xpkit's conversion of each batch to the host."""
    jax = pytest.importorskip("jax")
    named, run_case = _CLOSED_OVER[case]
    x = jax.numpy.arange(12.0).reshape(4, 3)

    def run(fn):
        return xpkit.map_batches(fn, x, result_on="device")

    message = f"batches cannot be read inside {re.escape(named)}: fn="
    with pytest.raises(RuntimeError, match=message):
        run_case(jax, x, run)


_COMPILED_FN = """
import gc, sys, warnings
seen = []
sys.unraisablehook = lambda u: seen.append(f"{type(u.exc_value).__name__}: {u.exc_value}")
import torch
import xpkit

fn = torch.compile(lambda r: torch.sin(r).sum(1), backend="eager")
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # (dynamo's own notes)
    got = xpkit.map_batches(fn, torch.ones(40, 8))
gc.collect()
print(tuple(got.shape), float(got.sum()), seen)
"""


def test_a_compiled_fn_is_traced_without_errors_in_finalizers():
    """torch's compiler makes shape-only arrays without ``__init__`` as it
    traces a compiled fn: their ``__del__`` raised AttributeError, which
    ``filterwarnings = error`` turns into a failed test."""
    pytest.importorskip("torch")
    done = run_python(_COMPILED_FN)
    assert done.returncode == 0, done.stderr[-2000:]
    expected = float(40 * 8 * np.sin(1.0))
    shape, rest = done.stdout.strip().split(") ", 1)
    total, seen = rest.split(" ", 1)
    assert shape == "(40,"
    assert float(total) == pytest.approx(expected, rel=1e-6)
    assert seen == "[]"
