"""Every facade method inside traced, compiled and lazy code.

Each method is called from a small function declared with the facade's own
capability statements (`xpkit.testing.facade_capabilities`), so the
plugin's ``jax-cpu-jit``, ``torch-cpu-compile`` and ``dask-lazy`` variants
run it jitted, compiled whole or with lazy computes refused; a method stated
not to support a mode runs eagerly there. The methods that take host data
are also called with a NumPy array (``*_host``).

The statements are held to the runs both ways: what a statement says runs
in a mode runs there (`test_facade_method_in_every_mode`), and what it says
does not, forced into that mode, fails there
(`test_a_statement_refuses_only_what_fails`). So the table built from them
(docs/capabilities.md) says what the runs show. The first calls of a
process under ``torch.compile`` run in a fresh process
(`test_compiled_first_calls_in_a_fresh_process`).
"""

from __future__ import annotations

import textwrap
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import run_python

import xpkit
from xpkit.testing import facade_capabilities, lazy_xp_function

pytest.importorskip(
    "array_api_extra", reason="needs array-api-extra: pip install 'xpkit[test]'"
)

A = np.array([[3.0, -1.0, 2.0], [0.0, 5.0, -4.0]])


def asarray(b: xpkit.Backend, x: Any) -> Any:
    return b.asarray(x)


def asarray_like(b: xpkit.Backend, x: Any) -> Any:
    return b.asarray_like(x, x)


def asarray_host(b: xpkit.Backend, x: Any) -> Any:
    return b.asarray(A) + 0 * x


def asarray_like_host(b: xpkit.Backend, x: Any) -> Any:
    return b.asarray_like(A, x)


def check_arrays_host(b: xpkit.Backend, x: Any) -> Any:
    return b.check_arrays(x, A)[1]


def at(b: xpkit.Backend, x: Any) -> Any:
    return b.at(x, (0, 1)).add(7.0, copy=True)


def check_arrays(b: xpkit.Backend, x: Any) -> Any:
    return b.check_arrays(x, x)[1]


def concatenate(b: xpkit.Backend, x: Any) -> Any:
    return b.concatenate([x, x], axis=0)


def copy(b: xpkit.Backend, x: Any) -> Any:
    return b.copy(x)


def expand_dims(b: xpkit.Backend, x: Any) -> Any:
    return b.expand_dims(x, 0)


def flatnonzero(b: xpkit.Backend, x: Any) -> Any:
    return b.flatnonzero(x)


def full(b: xpkit.Backend, x: Any) -> Any:
    return b.full((2, 3), 1.5) + x


def full_like(b: xpkit.Backend, x: Any) -> Any:
    return b.full_like(x, 2.0)


def matmul(b: xpkit.Backend, x: Any) -> Any:
    return b.matmul(x, b.xp.permute_dims(x, (1, 0)))


def move(b: xpkit.Backend, x: Any) -> Any:
    return b.move(x)


def ones_like(b: xpkit.Backend, x: Any) -> Any:
    return b.ones_like(x, shape=(3,))


def sort(b: xpkit.Backend, x: Any) -> Any:
    return b.sort(x, axis=1)


def svd(b: xpkit.Backend, x: Any) -> Any:
    return b.svd(x)[1]


def to_cpu(b: xpkit.Backend, x: Any) -> Any:
    return b.to_cpu(x)


def to_device(b: xpkit.Backend, x: Any) -> Any:
    return b.to_device(x)


def to_gpu(b: xpkit.Backend, x: Any) -> Any:
    return b.to_gpu(x)


def to_numpy(b: xpkit.Backend, x: Any) -> Any:
    return b.to_numpy(x)


def top_k(b: xpkit.Backend, x: Any) -> Any:
    return b.top_k(x, 2, axis=0)[0]


def zeros_like(b: xpkit.Backend, x: Any) -> Any:
    return b.zeros_like(x)


CALLS: dict[str, Callable[[xpkit.Backend, Any], Any]] = {
    f.__name__: f
    for f in (
        asarray,
        asarray_host,
        asarray_like,
        asarray_like_host,
        at,
        check_arrays,
        check_arrays_host,
        concatenate,
        copy,
        expand_dims,
        flatnonzero,
        full,
        full_like,
        matmul,
        move,
        ones_like,
        sort,
        svd,
        to_cpu,
        to_device,
        to_gpu,
        to_numpy,
        top_k,
        zeros_like,
    )
}

STATEMENTS = facade_capabilities()


def method_of(name: str) -> str:
    """The facade method a call exercises (``asarray_host`` -> ``asarray``)."""
    return name.removesuffix("_host")


for _name, _call in CALLS.items():
    _stated = STATEMENTS[method_of(_name)]
    lazy_xp_function(
        _call,
        jit="jit" not in _stated.modes,
        compiled="compile" not in _stated.modes,
        computes=_stated.computes,
    )


def refused_modes(name: str) -> list[str]:
    """The modes the statement of ``name``'s method keeps it out of."""
    stated = STATEMENTS[method_of(name)]
    return [m for m in ("jit", "compile") if m in stated.modes] + (
        ["lazy"] if stated.computes else []
    )


#: Calls the statements keep out of some mode: each also runs forced into it.
REFUSED = sorted(name for name in CALLS if refused_modes(name))
for _name in REFUSED:
    _f = CALLS[_name]
    globals()[f"forced_{_name}"] = _forced = types.FunctionType(
        _f.__code__, _f.__globals__, f"forced_{_name}"
    )
    lazy_xp_function(_forced, jit=True, compiled=True, computes=0)


def _host_expected(name: str) -> np.ndarray:
    eager = xpkit.Backend("numpy")
    return np.asarray(CALLS[name](eager, A), dtype=np.float64)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_facade_method_in_every_mode(xpkit_backend, request, name):
    b = xpkit_backend
    stated = STATEMENTS[method_of(name)]
    param = request.node.callspec.params["xpkit_backend"]
    lacking = [c for c in stated.requires if c not in param.capabilities]
    if lacking:
        pytest.skip(f"{param.id} has no {', '.join(lacking)}")
    x = b.asarray(A)
    call = globals()[name]  # the module's name: what the lazy variants replace
    got = np.asarray(b.to_numpy(call(b, x)), dtype=np.float64)
    expected = _host_expected(name)
    if name == "svd":
        got, expected = np.sort(got), np.sort(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", REFUSED)
def test_a_statement_refuses_only_what_fails(xpkit_backend, request, name):
    """A call the statement keeps out of a mode, forced into it, fails there."""
    param = request.node.callspec.params["xpkit_backend"]
    if param.mode not in refused_modes(name):
        pytest.skip(f"the statement of {method_of(name)} lets {param.id} run it")
    b = xpkit_backend
    forced = globals()[f"forced_{name}"]
    try:
        b.to_numpy(forced(b, b.asarray(A)))
    except Exception:  # noqa: BLE001 - any failure is the statement's point
        return
    pytest.fail(
        f"the facade's statement keeps {method_of(name)} out of the "
        f"{param.mode} mode, but it ran there on {param.id}: the statement "
        "claims too little"
    )


FIRST_CALLS = textwrap.dedent(
    """
    import warnings

    import numpy as np
    import torch

    import xpkit

    warnings.simplefilter("ignore")
    A = np.array([[1.0, 2.0], [3.0, 4.0]])


    def from_arrays(x):
        return xpkit.Backend.from_arrays(x).xp.sum(x)


    def asarray(x):
        return xpkit.Backend.from_arrays(x).asarray(A) + x


    def asarray_like(x):
        return xpkit.Backend.from_arrays(x).asarray_like(A, x) + x


    def check_arrays(x):
        return xpkit.Backend.from_arrays(x).check_arrays(x, A)[1] + x


    for f in (from_arrays, asarray, asarray_like, check_arrays):
        compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
        try:
            compiled(torch.ones((2, 2), dtype=torch.float64))
        except Exception as exc:
            print(f.__name__, "FAILED", type(exc).__name__, str(exc).splitlines()[0])
        else:
            print(f.__name__, "ok")
    """
)


def test_compiled_first_calls_in_a_fresh_process():
    """from_arrays first in a process, then NumPy inputs, under torch.compile (#21).

    ``Backend.from_arrays`` made its Backend inside the trace on a process's
    first call, asking torch whether MPS is available (which the trace
    cannot hold); NumPy arrays handed to asarray, asarray_like and
    check_arrays had their ``dtype`` read, which Dynamo cannot trace.
    """
    pytest.importorskip("torch")
    proc = run_python(FIRST_CALLS, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.split("\n")
    assert [line for line in lines if line] == [
        "from_arrays ok",
        "asarray ok",
        "asarray_like ok",
        "check_arrays ok",
    ], proc.stdout
