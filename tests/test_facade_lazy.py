"""Every facade method inside traced, compiled and lazy code.

Each method is called from a small function declared with the facade's own
capability statements (`xpkit.testing.facade_capabilities`), so the
plugin's ``jax-cpu-jit``, ``torch-cpu-compile`` and ``dask-lazy`` variants
run it jitted, compiled whole or with lazy computes refused; a method stated not to support a mode runs eagerly there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

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


def zeros_like(b: xpkit.Backend, x: Any) -> Any:
    return b.zeros_like(x)


CALLS: dict[str, Callable[[xpkit.Backend, Any], Any]] = {
    f.__name__: f
    for f in (
        asarray,
        asarray_like,
        at,
        check_arrays,
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
        zeros_like,
    )
}

STATEMENTS = facade_capabilities()
for _name, _call in CALLS.items():
    _stated = STATEMENTS[_name]
    lazy_xp_function(
        _call,
        jit="jit" not in _stated.modes,
        compiled="compile" not in _stated.modes,
        computes=_stated.computes,
    )


@pytest.mark.parametrize("name", sorted(CALLS))
def test_facade_method_in_every_mode(xpkit_backend, request, name):
    b = xpkit_backend
    stated = STATEMENTS[name]
    param = request.node.callspec.params["xpkit_backend"]
    lacking = [c for c in stated.requires if c not in param.capabilities]
    if lacking:
        pytest.skip(f"{param.id} has no {', '.join(lacking)}")
    x = b.asarray(A)
    call = globals()[name]  # the module's name: what the lazy variants replace
    got = np.asarray(b.to_numpy(call(b, x)), dtype=np.float64)
    eager = xpkit.Backend("numpy")
    expected = np.asarray(CALLS[name](eager, A), dtype=np.float64)
    if name == "svd":
        got, expected = np.sort(got), np.sort(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
