"""The meter of map_batches: planned batch, estimate, true peak, probe (issue #28).

Run: ``python benchmarks/bench_meter.py`` (Linux, glibc; a C compiler for
the counting malloc, else glibc's mtrace, much slower). ``--write`` also
writes ``benchmarks/results/meter.md``; ``--quick`` runs a few cells for a
smoke run; ``--big`` adds the 1 GB budgets; ``--jobs 1`` measures one cell
at a time (probe times on a quiet machine; the memory figures are per
process either way).

For each library (NumPy, torch CPU, array-api-strict, JAX CPU, Dask), each
``fn`` (written once against the Array API standard, ``xp =
array_namespace(x)``) and each budget, two fresh child processes:

1. **plan**: builds the inputs (seeded), calls `xpkit.plan_batches` once on
   64 rows with another ``fn`` (imports and first-call paths), then
   ``plan_batches(fn, ..., budget_gb=budget / 2**30, remember=False)``
   (timed with ``perf_counter``: *probe s*): the planned *batch* and the
   *estimate*, ``plan.batch_peak_bytes``. Then the same call again under the
   independent meter of the library (see below): the *probe peak*
   (measured in a second call so that tracing cannot change the timed plan;
   a traced plan that differs is noted), and once more with
   ``bytes_per_item`` given: *plan alone*. Before the timed call, a 128 MiB
   buffer is touched and freed: VmHWM after the call below VmHWM before it
   means the plan reset the process's peak statistic (*lowers VmHWM*;
   issue #28, "What was seen" 2).
2. **true**: builds the same inputs, slices the planned batch, runs slice +
   ``fn`` + the result to the host once unmeasured (JAX compiles, torch
   initialises), then measures the same three times: the *true peak*, the
   most bytes in use above the start of a run, the most of the three.

The independent meters (``_true_peak.py``): tracemalloc for NumPy,
array-api-strict and Dask (NumPy reports its data buffers to tracemalloc;
Dask's threads are traced too); for torch and JAX, whose allocators
tracemalloc does not see, a counting malloc preloaded into the child,
which reads what glibc's mtrace reads (``LD_PRELOAD`` of glibc's
``libc_malloc_debug.so.0``, ``mtrace()``/``muntrace()`` around the run, the
trace replayed to the exact peak) without mtrace's ``dladdr`` of every
call's caller (about 1 ms a call from torch's library). Each child first
checks that its meter sees an 8 MiB array of its library; where it does
not, it falls back to the child's own VmHWM (after ``5`` to
``/proc/self/clear_refs``) and the table says so. The section "The
independent meters" shows what each meter sees of each library, and the
counter, mtrace and tracemalloc on the same ``fn``.

The verdict of a cell, against issue #28's acceptance: *over*: true peak >
1.15 x budget + 4096 bytes; *under*: true peak < 0.3 x budget where the
budget, not the rows, bounds the batch (batch >= 4 and batch < the rows left
after the probe); *est*: estimate / true outside 0.9-2.0; *probe*: probe peak >
budget + 4096 bytes. Sizes are decimal (1 kB = 1,000 bytes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "meter.md"
PAGE = 4096
SEED = 0
LIBS = ("numpy", "torch-cpu", "array_api_strict", "jax-cpu", "dask")
#: The independent meter of each library (see the module docstring).
METER = {
    "numpy": "tracemalloc",
    "array_api_strict": "tracemalloc",
    "dask": "tracemalloc",
    "torch-cpu": "counter",
    "jax-cpu": "counter",
}
BUDGETS = (1e3, 1e5, 1e7)
BIG_BUDGETS = (1e9,)
QUICK_BUDGETS = (1e5,)
QUICK_FNS = ("elementwise", "outer", "loop", "matmul")
#: Rows: three times the batch a nominal cost predicts, within these bounds.
N_MIN, N_MAX = 2_000, 8_000_000
#: A Python loop runs each row through the library: at most this many rows.
LOOP_ROWS = {
    "numpy": 30_000,
    "torch-cpu": 20_000,
    "array_api_strict": 20_000,
    "jax-cpu": 5_000,
    "dask": 2_000,
}
#: Budgets above this leave out the loop (its capped rows all fit).
LOOP_MAX_BUDGET = 1e8
CHILD_TIMEOUT_S = 300.0
#: Runs of a child measuring with mtrace that a signal killed.
MTRACE_ATTEMPTS = 3
#: Measured runs in a true child; the true peak is the most of them.
TRUE_RUNS = 3
#: The acceptance of issue #28.
OVER, UNDER, EST_LOW, EST_HIGH = 1.15, 0.3, 0.9, 2.0


# --- the functions, written once against the Array API standard -------------


def _xp(x: Any) -> Any:
    import array_api_compat

    return array_api_compat.array_namespace(x)


def elementwise(x):
    xp = _xp(x)
    return xp.exp(x) * 2.0 + 1.0


def broadcast(x, c):
    """Each row against every row of a whole operand ``c`` (k, d)."""
    xp = _xp(x)
    diff = x[:, None, :] - c[None, :, :]
    return xp.sum(diff * diff, axis=2)


def temporaries(x):
    xp = _xp(x)
    t = xp.tanh(x)
    u = t * 3.0
    v = x * x
    w = u - v
    s = xp.sqrt(xp.abs(w) + 1.0)
    return xp.sum(s, axis=1)


def loop(x):
    """A Python loop of small per-row arrays, stacked."""
    xp = _xp(x)
    rows = [x[i, :] * 2.0 + 1.0 for i in range(x.shape[0])]
    return xp.stack(rows)


def outer(x):
    """The batch's first column against itself: a (rows, rows) temporary."""
    xp = _xp(x)
    v = x[:, 0]
    o = v[:, None] * v[None, :]
    return xp.sum(o, axis=1)


def matmul(x, w):
    xp = _xp(x)
    return xp.tanh(x @ w)


def sort(x):
    xp = _xp(x)
    return xp.sort(x, axis=1)


# --- the issue's cases, written with NumPy directly as the issue does -------


def issue_mul_sum(x, y):
    return (x * y).sum(1)


def issue_loop(x):
    import numpy as np

    return np.stack([np.sqrt(r * r + 1.0) for r in x])


def issue_outer(x):
    v = x[:, :1]
    return (v * v.T).sum(1)


def issue_expr(x):
    import numpy as np

    return np.sqrt(np.abs(np.tanh(x) * 3 - x**2) + 1).sum(1)


@dataclass(frozen=True)
class Workload:
    """One ``fn`` and the inputs it gets (float64, seeded)."""

    fn: Callable[..., Any]
    d: int  # columns of each row input
    label: str
    inputs: int = 1  # row inputs, each (n, d)
    whole: tuple[tuple[int, ...], ...] = ()  # shapes of the whole operands
    row_bytes: float = 0.0  # nominal working set of a row (sizes n only)
    quadratic: bool = False  # working set ~ 8 x rows**2
    loop: bool = False


WORKLOADS = {
    "elementwise": Workload(
        elementwise, 32, "`exp(x) * 2 + 1`, x (n, 32)", row_bytes=512
    ),
    "broadcast": Workload(
        broadcast,
        8,
        "`sum((x[:, None] - c[None]) ** 2, 2)`, x (n, 8), c (8, 8) whole",
        whole=((8, 8),),
        row_bytes=1100,
    ),
    "temporaries": Workload(
        temporaries,
        32,
        "t = tanh(x), u = 3t, v = x*x, w = u - v, sum(sqrt(abs(w) + 1), 1); x (n, 32)",
        row_bytes=1800,
    ),
    "loop": Workload(
        loop,
        8,
        "`stack([x[i] * 2 + 1 for i in rows])`, x (n, 8)",
        row_bytes=600,
        loop=True,
    ),
    "outer": Workload(
        outer,
        4,
        "`sum(v[:, None] * v[None, :], 1)`, v = x[:, 0], x (n, 4)",
        quadratic=True,
    ),
    "matmul": Workload(
        matmul,
        32,
        "`tanh(x @ w)`, x (n, 32), w (32, 64) whole",
        whole=((32, 64),),
        row_bytes=1100,
    ),
    "sort": Workload(sort, 32, "`sort(x, axis=1)`, x (n, 32)", row_bytes=600),
    # the issue's cases (NumPy only; fixed rows)
    "issue_mul_sum": Workload(issue_mul_sum, 125, "`(x * y).sum(1)`", inputs=2),
    "issue_loop": Workload(
        issue_loop, 64, "`np.stack([np.sqrt(r * r + 1.0) for r in x])`"
    ),
    "issue_outer": Workload(issue_outer, 8, "`(v * v.T).sum(1)`, v = x[:, :1]"),
    "issue_expr": Workload(
        issue_expr, 32, "`np.sqrt(np.abs(np.tanh(x) * 3 - x**2) + 1).sum(1)`"
    ),
}

#: The fns of the table's cells.
CELL_FNS = tuple(k for k in WORKLOADS if not k.startswith("issue_"))

#: (workload, rows, budget bytes, what the issue saw), issue #28 "What was seen" 1.
ISSUE_CASES = (
    (
        "issue_mul_sum",
        1_000,
        1e-4 * 2**30,
        "two (1000, 125) float64 arrays, 107 kB budget: batch 131-251, true 1.2-2.3x budget",
    ),
    (
        "issue_loop",
        5_000,
        1e5,
        "a Python loop of small per-row arrays, 100 kB: batch 73, true 1.67x budget, estimate 0.60x true",
    ),
    (
        "issue_outer",
        20_000,
        1e6,
        "an outer product, 1 MB: batch 398, true 1.27x budget",
    ),
    (
        "issue_expr",
        200_000,
        1e7,
        "(200000, 32), 10 MB: batch 25,886, true 1.33x budget",
    ),
    (
        "issue_outer",
        20_000,
        1e8,
        "an outer product, 100 MB: the probe itself (4096 rows) 1.34x budget",
    ),
)


def rows_for(workload: Workload, lib: str, budget: float) -> int:
    """Rows of a cell: three times the nominal batch, within the bounds."""
    guess = math.sqrt(budget / 8) if workload.quadratic else budget / workload.row_bytes
    n = int(min(max(3 * guess, N_MIN), N_MAX))
    return min(n, LOOP_ROWS[lib]) if workload.loop else n


# --- the child processes ------------------------------------------------------


def _library(
    lib: str,
) -> tuple[Callable[[Any], Any], Callable[[Any], Any], Callable[[int], Any]]:
    """(from host, to host, ones of k float64) for ``lib``; imports it."""
    import numpy as np

    if lib == "numpy":
        return (lambda a: a), np.asarray, lambda k: np.ones(k)
    if lib == "torch-cpu":
        import torch

        return (
            torch.from_numpy,
            lambda r: r.numpy(),
            lambda k: torch.ones(k, dtype=torch.float64),
        )
    if lib == "array_api_strict":
        import array_api_strict as strict

        return (
            strict.asarray,
            np.from_dlpack,
            lambda k: strict.ones(k, dtype=strict.float64),
        )
    if lib == "jax-cpu":
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        return jnp.asarray, np.asarray, lambda k: jnp.ones(k, dtype=jnp.float64)
    if lib == "dask":
        import dask.array as da

        return da.from_array, np.asarray, lambda k: np.asarray(da.ones(k, chunks=-1))
    msg = f"unknown library {lib!r}"
    raise ValueError(msg)


def _inputs(spec: dict, from_host: Callable[[Any], Any]) -> tuple[tuple, tuple]:
    """The cell's row inputs and whole operands, the same in every child."""
    import numpy as np

    workload = WORKLOADS[spec["fn"]]
    rng = np.random.default_rng(SEED)
    rows = tuple(
        from_host(rng.standard_normal((spec["n"], workload.d)))
        for _ in range(workload.inputs)
    )
    whole = tuple(from_host(rng.standard_normal(shape)) for shape in workload.whole)
    return rows, whole


def _meter(kind: str, ones: Callable[[int], Any], guard: Any) -> tuple[Any, str]:
    """The child's independent meter, checked on an 8 MiB array; its name."""
    import _true_peak as tp

    k = 2**20
    nbytes = 8 * k
    if kind == "tracemalloc":
        meter: Any = tp.TracemallocMeter(guard)
    elif kind == "counter":
        meter = tp.CounterMeter()
    else:
        meter = tp.MtraceMeter()
    ok, seen = tp.sees(meter, lambda: ones(k), nbytes)
    if ok:
        return meter, meter.name
    fallback = tp.HwmMeter()
    return fallback, f"VmHWM ({meter.name} saw {seen:,} B of an {nbytes:,} B array)"


def child(spec: dict) -> dict:
    """One child's measurement (``spec["mode"]``: plan, true or meters)."""
    import _true_peak as tp

    kind = spec["meter"]
    guard = tp.TracemallocGuard() if kind == "tracemalloc" else None
    if spec["mode"] == "meters":
        return _child_meters(spec)
    from_host, to_host, ones = _library(spec["lib"])
    rows, whole = _inputs(spec, from_host)
    fn = WORKLOADS[spec["fn"]].fn
    if spec["mode"] == "plan":
        return _child_plan(spec, rows, whole, fn, ones, guard)
    batch = spec["batch"]

    def run() -> Any:
        part = tuple(a[:batch, ...] for a in rows)
        return to_host(fn(*part, *whole))

    warm = run()
    shape = list(warm.shape)
    del warm
    tp.settle()
    meter, name = _meter(kind, ones, guard)
    peaks = []
    for _ in range(spec["runs"]):
        result, peak = meter.measure(run)
        del result
        peaks.append(peak)
    out = {"peak": max(peaks), "peaks": peaks, "meter": name, "out_shape": shape}
    if guard is not None and guard.calls:
        out["interference"] = sorted(set(guard.calls))
    return out


def _child_plan(spec, rows, whole, fn, ones, guard) -> dict:
    import numpy as np
    from _true_peak import settle, status_bytes

    import xpkit

    budget_gb = spec["budget"] / 2**30
    xpkit.plan_batches(
        lambda r: r * 2.0, rows[0][:64, ...], budget_gb=budget_gb, remember=False
    )

    def plan_call(**given: float) -> Any:
        return xpkit.plan_batches(
            fn, *rows, whole=whole, budget_gb=budget_gb, remember=False, **given
        )

    big = np.ones(2**24)  # 128 MiB touched and freed: VmHWM above VmRSS now
    del big
    hwm_before = status_bytes("VmHWM")
    t0 = time.perf_counter()
    plan = plan_call()
    seconds = time.perf_counter() - t0
    hwm_after = status_bytes("VmHWM")
    settle()
    meter, name = _meter(spec["meter"], ones, guard)
    traced, probe_peak = meter.measure(plan_call)
    # (bytes_per_item=1: planning does the same work whatever the cost given)
    _, alone = meter.measure(lambda: plan_call(bytes_per_item=1.0))
    out = {
        "batch": plan.batch_size,
        "n": plan.n_items,
        "probe_rows": plan.probe_rows,
        "estimate": plan.batch_peak_bytes,
        "per_item": plan.bytes_per_item,
        "fixed": plan.fixed_bytes,
        "squared": getattr(plan, "bytes_per_item_squared", None),
        "source": plan.source,
        "seconds": seconds,
        "probe_peak": probe_peak,
        "plan_alone": alone,
        "probe_meter": name,
        "traced_batch": traced.batch_size,
        "traced_probe_rows": traced.probe_rows,
        "hwm_before": hwm_before,
        "hwm_after": hwm_after,
    }
    if guard is not None and guard.calls:
        out["interference"] = sorted(set(guard.calls))
    return out


#: Rows of each fn in the meters' comparison (few mallocs: mtrace is slow).
COMPARE_ROWS = {
    "elementwise": 20_000,
    "broadcast": 10_000,
    "temporaries": 5_000,
    "loop": 300,
    "outer": 400,
    "matmul": 10_000,
    "sort": 500,
}
COMPARE_LIBS = ("numpy", "torch-cpu", "jax-cpu")
#: Runs under each meter in the comparison (JAX's peak varies between runs).
COMPARE_RUNS = 3


def _child_meters(spec: dict) -> dict:
    """What the meters see, in a child preloaded with ``spec["meter"]``.

    The counter's child: tracemalloc, the counter and VmHWM (tracemalloc
    stopped before the others measure); mtrace's child: mtrace. First an
    8 MiB and a 128 MiB array of ``lib``, then (`COMPARE_LIBS`) each ``fn``
    at `COMPARE_ROWS` rows: one warm-up run, then one run under each meter.
    """
    import tracemalloc

    import _true_peak as tp
    import numpy as np

    k = 2**20
    from_host, to_host, ones = _library(spec["lib"])
    if spec["lib"] == "jax-cpu":  # one peak per run, to compare the meters
        import jax

        jax.config.update("jax_cpu_enable_async_dispatch", False)
    if spec["meter"] == "counter":
        meters: dict[str, Any] = {"counter": tp.CounterMeter(), "hwm": tp.HwmMeter()}
    else:
        meters = {"mtrace": tp.MtraceMeter()}

    def under_each(make: Callable[[], Any]) -> dict[str, int]:
        """The most each meter read in ``COMPARE_RUNS`` runs of ``make``."""
        seen: dict[str, int] = {}
        if spec["meter"] == "counter":
            meter = tp.TracemallocMeter()
            seen["tracemalloc"] = max(
                meter.measure(make)[1] for _ in range(COMPARE_RUNS)
            )
            tracemalloc.stop()
        for name, meter in meters.items():
            seen[name] = max(meter.measure(make)[1] for _ in range(COMPARE_RUNS))
        return seen

    out: dict[str, Any] = {}
    ones(k)
    tp.settle()
    out["8 MiB"] = {"nbytes": 8 * k, **under_each(lambda: ones(k))}
    out["128 MiB"] = {"nbytes": 128 * k, **under_each(lambda: ones(16 * k))}
    if spec["lib"] in COMPARE_LIBS:
        rng = np.random.default_rng(SEED)
        for name, rows in COMPARE_ROWS.items():
            workload = WORKLOADS[name]
            x = from_host(rng.standard_normal((rows, workload.d)))
            whole = tuple(from_host(rng.standard_normal(s)) for s in workload.whole)

            def run(fn=workload.fn, x=x, whole=whole) -> Any:
                return to_host(fn(x, *whole))

            run()
            out[name] = {"rows": rows, **under_each(run)}
    return out


# --- the parent ---------------------------------------------------------------


@dataclass
class Cell:
    lib: str
    fn: str
    budget: float
    n: int
    note: str = ""
    plan: dict = field(default_factory=dict)
    true: dict = field(default_factory=dict)
    error: str = ""
    fails: list[str] = field(default_factory=list)


@dataclass
class Run:
    """What the children of one run share: a work folder, the counter, limits."""

    workdir: str
    counter: str | None
    timeout: float
    true_runs: int = TRUE_RUNS

    def meter(self, lib: str) -> str:
        """The independent meter of ``lib``'s children."""
        kind = METER[lib]
        if kind == "counter" and self.counter is None:
            return "mtrace"  # (no C compiler: slow, but the same figures)
        return kind


def run_child(spec: dict, run: Run) -> dict:
    """A fresh interpreter runs `child` on ``spec``; its JSON, or {"error": ...}."""
    import _true_peak as tp

    trace = None
    if spec["meter"] == "mtrace":
        fd, trace = tempfile.mkstemp(suffix=".mtrace", dir=run.workdir)
        os.close(fd)
    env = tp.preload_env(
        spec["meter"], {**os.environ, "JAX_PLATFORMS": "cpu"}, run.counter, trace
    )
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    try:
        for attempt in range(MTRACE_ATTEMPTS if trace is not None else 1):
            proc = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=run.timeout,
                env=env,
                cwd=HERE,
                check=False,
            )
            if proc.returncode >= 0:
                break
            # mtrace crashes now and then in a process whose other threads
            # allocate while muntrace closes the trace (JAX's): run it again.
            print(
                f"  ({spec['lib']} mtrace child: signal {-proc.returncode}, "
                f"attempt {attempt + 1})",
                file=sys.stderr,
            )
    except subprocess.TimeoutExpired:
        return {"error": f"{spec['mode']} child timed out after {run.timeout:.0f} s"}
    finally:
        if trace is not None:
            Path(trace).unlink(missing_ok=True)
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        why = last[-1] if last else f"exit status {proc.returncode}"
        return {"error": f"{spec['mode']} child failed: {why}"[:300]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_cell(cell: Cell, run: Run) -> Cell:
    base = {
        "lib": cell.lib,
        "fn": cell.fn,
        "n": cell.n,
        "budget": cell.budget,
        "meter": run.meter(cell.lib),
    }
    plan = run_child({**base, "mode": "plan"}, run)
    if "error" in plan:
        cell.error = plan["error"]
        cell.fails = ["error"]
        return cell
    cell.plan = plan
    spec = {**base, "mode": "true", "batch": plan["batch"], "runs": run.true_runs}
    true = run_child(spec, run)
    if "error" in true:
        cell.error = true["error"]
        cell.fails = ["error"]
        return cell
    cell.true = true
    cell.fails = verdict(cell)
    return cell


def verdict(cell: Cell) -> list[str]:
    """The acceptance criteria ``cell`` fails (module docstring)."""
    budget, plan, true = cell.budget, cell.plan, cell.true["peak"]
    fails = []
    if true > OVER * budget + PAGE:
        fails.append("over")
    left = plan["n"] - plan["probe_rows"]
    if 4 <= plan["batch"] < left and true < UNDER * budget:
        fails.append("under")
    ratio = plan["estimate"] / true if true > 0 else math.inf
    if not EST_LOW <= ratio <= EST_HIGH:
        fails.append("est")
    if plan["probe_peak"] < 0 or plan["probe_peak"] > budget + PAGE:
        fails.append("probe")
    return fails


def one_row_over(cell: Cell) -> bool:
    """Over the budget at a batch of one row: no plan could have kept it."""
    return "over" in cell.fails and cell.plan["batch"] == 1


def lowers_hwm(cell: Cell) -> bool:
    return bool(cell.plan) and cell.plan["hwm_after"] < cell.plan["hwm_before"]


def fmt_bytes(b: float) -> str:
    if b < 0:
        return "n/a"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.0f} B"


def _notes(cell: Cell) -> str:
    notes = []
    plan, true = cell.plan, cell.true
    if plan and (
        plan["traced_batch"] != plan["batch"]
        or plan["traced_probe_rows"] != plan["probe_rows"]
    ):
        compiled = (
            " (new shapes: XLA's compiler is in the probe peak)"
            if cell.lib == "jax-cpu" and plan["traced_probe_rows"] != plan["probe_rows"]
            else ""
        )
        notes.append(
            f"traced plan: batch {plan['traced_batch']:,}, "
            f"probe rows {plan['traced_probe_rows']:,}{compiled}"
        )
    for what, part in (("plan", plan), ("true", true)):
        meter = part.get("probe_meter" if what == "plan" else "meter", "")
        if meter.startswith("VmHWM"):
            notes.append(f"{what}: {meter}")
        if part.get("interference"):
            called = "/".join(part["interference"])
            notes.append(f"{what}: xpkit called tracemalloc.{called}")
    peaks = true.get("peaks", [])
    if peaks and min(peaks) < 0.9 * max(peaks):
        notes.append(f"true peak {fmt_bytes(min(peaks))}-{fmt_bytes(max(peaks))}")
    if plan.get("squared"):
        notes.append(f"{plan['squared']:.4g} B/row^2")
    if plan.get("probe_rows"):
        notes.append(f"probe rows {plan['probe_rows']:,}")
    if plan and plan["batch"] >= cell.n:
        notes.append(f"all {cell.n:,} rows")
    if lowers_hwm(cell):
        notes.append("lowers VmHWM")
    return "; ".join(notes)


TABLE_HEAD = (
    "| library | fn | budget | batch | estimate | true peak | est / true "
    "| true / budget | probe peak | probe (s) | source | verdict | notes |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"
)


def short_source(source: str) -> str:
    """``plan.source`` in a word, for the table: *trace* for the shape-only
    trace, *probe* for a measured probe, else its words up to a parenthesis."""
    if source.startswith("traced by shape-only arrays"):
        return "trace"
    if source.startswith("measured by"):
        return "probe"
    return source.split(" (", maxsplit=1)[0]


def table_row(cell: Cell, label: str | None = None) -> str:
    name = label or cell.fn
    head = f"| {cell.lib} | {name} | {fmt_bytes(cell.budget)} "
    if cell.error:
        return head + f"| | | | | | | | | **error** | {cell.error} |"
    plan, true = cell.plan, cell.true["peak"]
    ratio = plan["estimate"] / true if true > 0 else math.inf
    fails = [
        "over (1 row)" if f == "over" and one_row_over(cell) else f for f in cell.fails
    ]
    verdict_text = "ok" if not fails else "**" + ", ".join(fails) + "**"
    return (
        head
        + f"| {plan['batch']:,} | {fmt_bytes(plan['estimate'])} | {fmt_bytes(true)} "
        f"| {ratio:.2f} | {true / cell.budget:.2f} | {fmt_bytes(plan['probe_peak'])} "
        f"| {plan['seconds']:.3f} | {short_source(plan['source'])} "
        f"| {verdict_text} | {_notes(cell)} |"
    )


def summary(cells: list[Cell]) -> str:
    counted = [c for c in cells if not c.error]
    per = {
        k: sum(k in c.fails for c in cells)
        for k in ("over", "under", "est", "probe", "error")
    }
    failing = sum(bool(c.fails) for c in cells)
    lines = [
        f"**{failing} of {len(cells)} cells fail**: over {per['over']} (of which "
        f"{sum(map(one_row_over, cells))} at a batch of one row, which no plan "
        f"could keep), under {per['under']}, est {per['est']}, probe "
        f"{per['probe']}, errors {per['error']}. The timed plan lowered VmHWM "
        f"in {sum(map(lowers_hwm, cells))} of {len(cells)}."
    ]
    if counted:

        def worst(key: Callable[[Cell], float], what: str, highest: bool = True) -> str:
            c = (max if highest else min)(counted, key=key)
            return f"{what} {key(c):.2f} ({c.lib}, {c.fn}, {fmt_bytes(c.budget)})"

        def est(c: Cell) -> float:
            t = c.true["peak"]
            return c.plan["estimate"] / t if t > 0 else math.inf

        def over(c: Cell) -> float:
            return c.true["peak"] / c.budget if c.plan["batch"] > 1 else 0.0

        lines.append(
            "Worst: "
            + "; ".join(
                (
                    worst(over, "true / budget (batch > 1)"),
                    worst(est, "estimate / true", highest=False),
                    worst(est, "estimate / true"),
                    worst(lambda c: c.plan["probe_peak"] / c.budget, "probe / budget"),
                )
            )
            + "."
        )
        alone = [c.plan["plan_alone"] for c in counted]
        lines.append(
            "Planning alone (the same call with `bytes_per_item` given, no trace "
            f"or probe) allocated {fmt_bytes(min(alone))}-{fmt_bytes(max(alone))}."
        )
    return "\n\n".join(lines)


def meters_section(run: Run, jobs: int) -> str:
    specs = [
        {"lib": lib, "mode": "meters", "meter": meter}
        for lib in LIBS
        for meter in ("counter", "mtrace")
        if meter == "mtrace" or run.counter is not None
    ]
    with ThreadPoolExecutor(max(jobs, 1)) as pool:
        results = list(pool.map(lambda spec: run_child(spec, run), specs))
    libs_seen: dict[str, dict[str, dict]] = {lib: {} for lib in LIBS}
    errors = []
    for spec, r in zip(specs, results, strict=True):
        if "error" in r:
            errors.append(f"{spec['lib']}, {spec['meter']}: {r['error']}")
            continue
        for key, seen in r.items():
            libs_seen[spec["lib"]].setdefault(key, {}).update(seen)
    lines = [
        "Each library's float64 arrays of 8 MiB and 128 MiB (`ones`, made once "
        "first, then measured) under each meter: the bytes it read / the "
        "array's `nbytes`, in two children per library (the counter's, with "
        "tracemalloc and VmHWM; mtrace's: each replaces malloc). Bold: the "
        "meter the library's cells use.",
        "",
        "| library | array | tracemalloc | counter | mtrace | VmHWM |",
        "|---|---|---:|---:|---:|---:|",
    ]
    names = ("tracemalloc", "counter", "mtrace", "hwm")
    for lib, seen in libs_seen.items():
        for key in ("8 MiB", "128 MiB"):
            s = seen.get(key, {})
            cols = []
            for name in names:
                text = f"{s[name] / s['nbytes']:.4f}" if name in s else ""
                cols.append(f"**{text}**" if text and name == run.meter(lib) else text)
            lines.append(f"| {lib} | {key} | {' | '.join(cols)} |")
    lines += [
        "",
        "Each `fn` of the table (as in the cells: `fn` + the result to the "
        f"host), one warm-up run, then {COMPARE_RUNS} runs under each meter: the "
        "most each read, in bytes. JAX runs here with "
        "`jax_cpu_enable_async_dispatch` off: with it on, as in the cells, its "
        "peak moves between runs by whole buffers (a temporary is freed when "
        "the computation reading it ends), so two processes cannot be "
        "compared. "
        "The malloc meters' children run with `PYTHONMALLOC=malloc`, so that "
        "they see Python's small objects as tracemalloc does; the counter "
        "counts `malloc_usable_size` (up to 16 bytes more a block), mtrace and "
        "tracemalloc the bytes asked for.",
        "",
        "| library | fn | rows | tracemalloc | counter | mtrace | VmHWM "
        "| counter / mtrace | mtrace / tracemalloc |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for lib in COMPARE_LIBS:
        for name in COMPARE_ROWS:
            m = libs_seen.get(lib, {}).get(name)
            if not m:
                continue

            def col(key: str, m: dict = m) -> str:
                return f"{m[key]:,}" if key in m else ""

            def ratio(a: str, b: str, m: dict = m) -> str:
                return f"{m[a] / m[b]:.3f}" if a in m and b in m and m[b] > 0 else ""

            lines.append(
                f"| {lib} | {name} | {m['rows']:,} | {col('tracemalloc')} "
                f"| {col('counter')} | {col('mtrace')} | {col('hwm')} "
                f"| {ratio('counter', 'mtrace')} | {ratio('mtrace', 'tracemalloc')} |"
            )
    lines += [f"\nError: {e}" for e in errors]
    return "\n".join(lines)


def header(command: str, run: Run, seconds: float | None = None) -> str:
    import xpkit

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=HERE,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    took = "" if seconds is None else f"; the run took {seconds / 60:.1f} min"
    counter = (
        "the counting malloc compiled with `cc`"
        if run.counter
        else "no C compiler: glibc's mtrace (slow) instead of the counting malloc"
    )
    return (
        f"Measured with `{command}` (xpkit {xpkit.__version__}"
        f"{' at ' + commit if commit else ''}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, glibc {platform.libc_ver()[1]}, "
        f"{os.cpu_count()} cores, {mem:.0f} GiB; {counter}{took}). No GPU: torch "
        "and JAX on the CPU; JAX with x64 enabled (all inputs float64). Sizes "
        "decimal (1 kB = 1,000 bytes)."
    )


HOW = """\
How each figure is measured, per cell, in two fresh child processes (`benchmarks/bench_meter.py`, meters in `benchmarks/_true_peak.py`):

- *batch*, *estimate*: `plan_batches(fn, *rows, whole=..., budget_gb=budget / 2**30, remember=False)` in a child that first planned another `fn` on 64 rows (imports, first calls): `plan.batch_size` and `plan.batch_peak_bytes`. *probe (s)*: `perf_counter` around that call; *source*: `plan.source` in a word (*trace*: "traced by shape-only arrays"; *probe*: "measured by ..."); the notes give `plan.probe_rows` where a probe ran rows.
- *probe peak*: the same call again, in the same child, under the independent meter (below): the most bytes in use above the call's start. (A second call, so that tracing cannot change the timed plan; where the traced plan differs, the notes say so. For JAX, the probe's shapes are compiled by then, unless the traced plan probes others: then XLA's compiler is in its peak.) *plan alone*: the same again with `bytes_per_item` given (no probe): what planning itself allocates (its range under each table).
- *true peak*: a second child builds the same inputs (seeded), runs slice of the planned batch + `fn` + the result to the host (`np.asarray`, `.numpy()`, `np.from_dlpack`; on JAX the slice is a copy) once unmeasured, then measures the same again, three times: the most bytes in use above the start of a run, the most of the three (the notes give the range where they differ by over 10%: JAX's async dispatch frees temporaries when the computation reading them ends).
- Independent meters: **tracemalloc** for NumPy, array-api-strict and Dask (`reset_peak`, `get_traced_memory`; every Python object, NumPy's buffers, every thread); for torch CPU and JAX CPU, whose allocators tracemalloc does not see, a **counting malloc** preloaded into the child (`LD_PRELOAD`; it forwards to glibc's malloc and keeps the peak of `malloc_usable_size` in use, in every thread; the child runs with `PYTHONMALLOC=malloc`, so that Python's small objects are malloc'ed and counted too). It reads what glibc's **mtrace** reads (the section "The independent meters" compares them), which resolves each call's caller with `dladdr`: about 1 ms a free called from `libtorch_cpu.so`, 32 s for one torch `sort` of 18,750 rows. Each child first checks that its meter sees an 8 MiB array of its library, else falls back to its own VmHWM (noted).
- Verdict (issue #28's acceptance): *over*: true > 1.15 x budget + 4096 B (*over (1 row)*: at a batch of one row, which no plan can keep); *under*: true < 0.3 x budget where the budget bounds the batch (4 <= batch < rows left after the probe); *est*: estimate / true outside 0.9-2.0; *probe*: probe peak > budget + 4096 B. *lowers VmHWM*: VmHWM after the timed plan below VmHWM before it (a 128 MiB buffer freed just before; issue #28, "What was seen" 2)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument(
        "--write", action="store_true", help=f"also write the tables to {RESULTS}"
    )
    parser.add_argument(
        "--out", type=Path, default=RESULTS, help="where --write writes"
    )
    parser.add_argument("--quick", action="store_true", help="a few cells (smoke run)")
    parser.add_argument("--big", action="store_true", help="add the 1 GB budgets")
    parser.add_argument(
        "--libs", default=",".join(LIBS), help="comma-separated libraries"
    )
    parser.add_argument(
        "--fns", default=None, help=f"comma-separated fns ({', '.join(CELL_FNS)})"
    )
    parser.add_argument(
        "--budgets", default=None, help="comma-separated budgets in bytes"
    )
    parser.add_argument(
        "--only", default="cells,issue,meters", help="sections: cells, issue, meters"
    )
    parser.add_argument(
        "--issue-repeats", type=int, default=3, help="runs of each of the issue's cases"
    )
    parser.add_argument(
        "--true-runs",
        type=int,
        default=TRUE_RUNS,
        help="measured runs of each true peak (the most is reported)",
    )
    parser.add_argument(
        "--timeout", type=float, default=CHILD_TIMEOUT_S, help="seconds per child"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="cells measured side by side (1: probe times on a quiet machine)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child))))
        return
    libs = [x for x in args.libs.split(",") if x]
    unknown = sorted(set(libs) - set(LIBS))
    if unknown:
        parser.error(f"--libs: unknown {unknown}; known: {list(LIBS)}")
    if args.fns:
        fns = [x for x in args.fns.split(",") if x]
    else:
        fns = list(QUICK_FNS if args.quick else CELL_FNS)
    unknown = sorted(set(fns) - set(CELL_FNS))
    if unknown:
        parser.error(f"--fns: unknown {unknown}; known: {list(CELL_FNS)}")
    if args.budgets:
        budgets = [float(x) for x in args.budgets.split(",") if x]
    else:
        budgets = list(QUICK_BUDGETS if args.quick else BUDGETS)
        if args.big:
            budgets += list(BIG_BUDGETS)
    sections = [x for x in args.only.split(",") if x]
    command = " ".join(["python benchmarks/bench_meter.py", *sys.argv[1:]])
    started = time.perf_counter()
    parts = []
    totals = []
    with tempfile.TemporaryDirectory(prefix="bench-meter-") as workdir:
        import _true_peak as tp

        run = Run(workdir, tp.build_counter(workdir), args.timeout, args.true_runs)
        if "cells" in sections:
            cells = [
                Cell(lib, fn, budget, rows_for(WORKLOADS[fn], lib, budget))
                for lib in libs
                for fn in fns
                for budget in budgets
                if not (WORKLOADS[fn].loop and budget > LOOP_MAX_BUDGET)
            ]
            done = _measure_all(cells, run, args.jobs)
            totals.append(("cells", done))
            fn_lines = "\n".join(f"- *{name}*: {WORKLOADS[name].label}" for name in fns)
            if "loop" in fns and max(budgets) > LOOP_MAX_BUDGET:
                fn_lines += (
                    f"\n\n(*loop* runs to {fmt_bytes(LOOP_MAX_BUDGET)}: its rows are "
                    "capped, so a larger budget would not bound its batch.)"
                )
            parts.append(
                "### The meter, per library, fn and budget\n\n"
                f"{fn_lines}\n\n{TABLE_HEAD}\n"
                + "\n".join(table_row(c) for c in done)
                + f"\n\n{summary(done)}\n"
            )
        if "issue" in sections:
            cells = [
                Cell("numpy", name, budget, n, note=saw)
                for name, n, budget, saw in ISSUE_CASES
                for _ in range(args.issue_repeats)
            ]
            done = _measure_all(cells, run, args.jobs)
            totals.append(("issue cases", done))
            number = {name: i for i, (name, *_) in enumerate(ISSUE_CASES, 1)}
            rows = "\n".join(table_row(c, label=f"case {number[c.fn]}") for c in done)
            seen = "\n".join(
                f"{i}. {WORKLOADS[name].label} on {n:,} rows, budget "
                f"{fmt_bytes(budget)}: the issue saw {saw}."
                for i, (name, n, budget, saw) in enumerate(ISSUE_CASES, 1)
            )
            parts.append(
                "### The cases of issue #28 (NumPy, written with NumPy directly)\n\n"
                f"{seen}\n\nEach case {args.issue_repeats} times, each in fresh "
                f"children.\n\n{TABLE_HEAD}\n{rows}\n\n{summary(done)}\n"
            )
        if "meters" in sections:
            parts.append(
                "### The independent meters\n\n" + meters_section(run, args.jobs) + "\n"
            )
        seconds = time.perf_counter() - started
        text = f"{header(command, run, seconds)}\n\n{HOW}\n\n" + "\n".join(parts)
    failing = "; ".join(
        f"{sum(bool(c.fails) for c in done)} of {len(done)} {what}"
        for what, done in totals
    )
    if failing:
        text += f"\n**Failing: {failing}.**\n"
    print(text)
    if args.write:
        args.out.write_text(text, encoding="utf-8")


def _measure_all(cells: list[Cell], run: Run, jobs: int) -> list[Cell]:
    def one(cell: Cell) -> Cell:
        t0 = time.perf_counter()
        measure_cell(cell, run)
        status = ", ".join(cell.fails) or "ok"
        print(
            f"  {cell.lib} {cell.fn} {fmt_bytes(cell.budget)}: {status} "
            f"({time.perf_counter() - t0:.1f} s)",
            file=sys.stderr,
            flush=True,
        )
        return cell

    if jobs <= 1:
        return [one(c) for c in cells]
    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, cells))


if __name__ == "__main__":
    main()
