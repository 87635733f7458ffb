"""Shape-only arrays tell the truth: vector and matrix norms, by every route.

A norm allocates what its library's code makes on the way, not its result:
NumPy's ``norm`` holds ``(x.conj() * x).real`` or ``abs(x)`` and its partial
sums whole, torch's is one kernel, ``jax.numpy``'s vector norm one array an
operation. The same norm reached through ``array_api_compat``'s namespace
(the shape-only one, in a trace) was charged by one rule for every
library: array-api-strict's Frobenius norm of (b, 4, 4) at 8 B/row (true
136: planned at 5.44 times its budget), torch's vector norm at 260 B/row
(true 4), JAX's at 132 (true up to 384: 1.98 times the budget);
``np.linalg.norm(ord=1)`` at 136 (true 160), ``ord=2`` at 136 (true 40),
and ``np.linalg.vector_norm`` had no rule. Each is compared here with its
library's true peak: tracemalloc for NumPy's and array-api-strict's, a
counting malloc in a child for torch's and JAX's.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import BENCHMARKS, counting_malloc_env, run_python
from shape_twins import numpy_peak

from xpkit._adapters._registry import get_adapter
from xpkit._adapters._shapes import ShapeTracer

#: name -> (fn of a (rows, 16) float64 array, its dtype).
NUMPY = {
    "norm-fro": lambda a: np.linalg.norm(a.reshape(-1, 4, 4), axis=(1, 2)),
    "norm-1": lambda a: np.linalg.norm(a.reshape(-1, 4, 4), ord=1, axis=(1, 2)),
    "norm-inf": lambda a: np.linalg.norm(a.reshape(-1, 4, 4), ord=np.inf, axis=(1, 2)),
    "norm-2": lambda a: np.linalg.norm(a.reshape(-1, 4, 4), ord=2, axis=(1, 2)),
    "norm-nuc": lambda a: np.linalg.norm(a.reshape(-1, 4, 4), ord="nuc", axis=(1, 2)),
    "norm-vector": lambda a: np.linalg.norm(a, axis=1),
    "norm-vector-0": lambda a: np.linalg.norm(a, ord=0, axis=1),
    "norm-vector-3": lambda a: np.linalg.norm(a, ord=3, axis=1),
    "norm-int32": lambda a: np.linalg.norm(a.astype(np.int32), axis=1),
    "norm-complex": lambda a: np.linalg.norm(
        (a * 1j).reshape(-1, 4, 4), axis=(1, 2), keepdims=True
    ),
    "vector_norm": lambda a: np.linalg.vector_norm(a, axis=1),
    "vector_norm-merged-axes": lambda a: np.linalg.vector_norm(
        a.reshape(-1, 4, 4), axis=(1, 2)
    ),
    "vector_norm-swapped-axes": lambda a: np.linalg.vector_norm(
        a.reshape(-1, 4, 4), axis=(2, 1), keepdims=True
    ),
    "matrix_norm": lambda a: np.linalg.matrix_norm(a.reshape(-1, 4, 4)),
    "matrix_norm-1": lambda a: np.linalg.matrix_norm(a.reshape(-1, 4, 4), ord=1),
}


@pytest.mark.parametrize("name", list(NUMPY))
def test_numpys_norms_are_traced_as_numpy_computes_them(name):
    fn = NUMPY[name]
    rows = 20_000
    profile = get_adapter("numpy").shape_profile("cpu")
    traced = ShapeTracer(profile, fn, (((16,), "float64"),)).peak(rows)
    real = numpy_peak(fn, np.ones((rows, 16)))
    assert 0.95 * real <= traced <= 1.05 * real + 8192, (traced, real)


STRICT = {
    "matrix_norm": lambda xp, a: xp.linalg.matrix_norm(xp.reshape(a, (-1, 4, 4))),
    "matrix_norm-1": lambda xp, a: xp.linalg.matrix_norm(
        xp.reshape(a, (-1, 4, 4)), ord=1
    ),
    "matrix_norm-2": lambda xp, a: xp.linalg.matrix_norm(
        xp.reshape(a, (-1, 4, 4)), ord=2
    ),
    "vector_norm": lambda xp, a: xp.linalg.vector_norm(a, axis=1),
}


@pytest.mark.parametrize("name", list(STRICT))
def test_the_standard_norms_of_array_api_strict_are_numpys(name):
    """``array_api_compat.array_namespace(x).linalg.matrix_norm`` on
    array-api-strict's arrays is NumPy's ``norm``: traced as it, through the
    shape-only namespace."""
    xs = pytest.importorskip("array_api_strict")
    compat = pytest.importorskip("array_api_compat")

    def fn(a):
        return STRICT[name](compat.array_namespace(a), a)

    rows = 20_000
    profile = get_adapter("array_api_strict").shape_profile("cpu")
    traced = ShapeTracer(profile, fn, (((16,), "float64"),)).peak(rows)
    real = numpy_peak(fn, xs.asarray(np.ones((rows, 16))))
    assert 0.95 * real <= traced <= 1.05 * real + 8192, (traced, real)


#: name -> (library, the input's row shape and dtype, fn(xp, x)), each run
#: on 20,000 rows through ``array_api_compat``'s namespace.
_CASES = {
    "torch-vector_norm": (
        "torch",
        (64,),
        "float32",
        "xp.linalg.vector_norm(x, axis=1)",
    ),
    "torch-vector_norm-3": (
        "torch",
        (64,),
        "float64",
        "xp.linalg.vector_norm(x, axis=1, ord=3)",
    ),
    "torch-matrix_norm": ("torch", (4, 4), "float32", "xp.linalg.matrix_norm(x)"),
    "torch-matrix_norm-1": (
        "torch",
        (4, 4),
        "float32",
        "xp.linalg.matrix_norm(x, ord=1)",
    ),
    "torch-matrix_norm-2": (
        "torch",
        (4, 4),
        "float32",
        "xp.linalg.matrix_norm(x, ord=2)",
    ),
    "jax-vector_norm-1": (
        "jax",
        (32,),
        "float32",
        "xp.linalg.vector_norm(x, axis=1, ord=1)",
    ),
    "jax-vector_norm-3": (
        "jax",
        (32,),
        "float32",
        "xp.linalg.vector_norm(x, axis=1, ord=3)",
    ),
    "jax-vector_norm-0": (
        "jax",
        (32,),
        "float32",
        "xp.linalg.vector_norm(x, axis=1, ord=0)",
    ),
    "jax-matrix_norm-2": ("jax", (4, 4), "float32", "xp.linalg.matrix_norm(x, ord=2)"),
}
_ROWS = 20_000

_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import _true_peak
import array_api_compat
cases = json.loads(sys.argv[2])
peaks = {}
for name, (library, row, dtype, body) in cases.items():
    host = np.ones((int(sys.argv[3]), *row), dtype=dtype)
    if library == "torch":
        import torch
        torch.set_num_threads(1)
        x = torch.from_numpy(host)
    else:
        import jax
        jax.config.update("jax_cpu_enable_async_dispatch", False)
        x = jax.numpy.asarray(host)
    xp = array_api_compat.array_namespace(x)
    op = eval("lambda xp, x: " + body)
    op(xp, x)  # (warm: a first call compiles or allocates its own)
    meter = _true_peak.CounterMeter()
    peaks[name] = max(meter.measure(lambda: op(xp, x))[1] for _ in range(2))
print(json.dumps(peaks))
"""


@pytest.fixture(scope="module")
def true_peaks(tmp_path_factory):
    """Each case's peak by a counting malloc, in a child process."""
    cases = {k: v for k, v in _CASES.items() if pytest.importorskip(v[0]) is not None}
    env = counting_malloc_env(tmp_path_factory.mktemp("counter"))
    env["OMP_NUM_THREADS"] = "1"
    args = (str(BENCHMARKS), json.dumps(cases), str(_ROWS))
    done = run_python(_CHILD, *args, extra_env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    peaks: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return peaks


@pytest.mark.parametrize("name", list(_CASES))
def test_a_norm_through_the_compat_namespace_is_the_librarys(name, true_peaks):
    """torch's vector norm is its result alone (one kernel), its matrix norm
    sums an axis first for 1 and factors a copy for 2; JAX's vector norm
    makes an array an operation, its matrix 2-norm U, S and Vh."""
    compat = pytest.importorskip("array_api_compat")
    library, row, dtype, body = _CASES[name]
    op = eval("lambda xp, x: " + body)

    def fn(x):
        return op(compat.array_namespace(x), x)

    profile = get_adapter(library).shape_profile("cpu")
    traced = ShapeTracer(profile, fn, ((row, dtype),)).peak(_ROWS)
    true = true_peaks[name]
    assert 0.9 * true <= traced <= 1.15 * true + 4096, (name, traced, true)


def test_jax_std_and_2_norm_hold_what_their_worst_run_held():
    """JAX's ``std`` on the CPU (XLA's program) held up to a centred copy
    (138 B/row of a float32 (50,000, 32), 15 at 20,000 rows, 62 at 151,474),
    its 2-norm ``real(x * conj(x))`` two arrays of ``x``'s shape, three
    where asynchronous dispatch frees the first late: each is traced at its
    worst (before: 4 and 132 B/row; planned at 1.45 and 1.98 times a
    budget)."""
    compat = pytest.importorskip("array_api_compat")
    pytest.importorskip("jax")
    profile = get_adapter("jax").shape_profile("cpu")
    rows, row = 50_000, 32 * 4

    def std(x):
        return compat.array_namespace(x).std(x, axis=1)

    def norm(x):
        return compat.array_namespace(x).linalg.vector_norm(x, axis=1)

    spec = (((32,), "float32"),)
    assert row * rows <= ShapeTracer(profile, std, spec).peak(rows) < 1.1 * row * rows
    traced = ShapeTracer(profile, norm, spec).peak(rows)
    assert 3 * row * rows <= traced < 3.1 * row * rows
