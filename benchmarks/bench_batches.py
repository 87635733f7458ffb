"""map_batches on real workloads: peak memory, the probe's estimate, time.

Run: ``python benchmarks/bench_batches.py`` (Linux: it reads the process's
peak RSS, VmHWM). ``--write`` also writes ``benchmarks/results/batches.md``.

Every measurement runs in a fresh subprocess, so earlier allocations do not
hide a peak. In each one the inputs are made first, then glibc's heap is
trimmed and VmHWM reset (``/proc/self/clear_refs``); the *peak growth* is
VmHWM after the run minus RSS before it.

1. **Peak memory, pairwise squared distances** of 12,000 x 64 rows against
   themselves (a 1.07 GiB float64 output) under ``budget_gb=0.1``:
   ``map_batches`` with the probe measuring ``fn`` and with ``bytes_per_item``
   given, against scikit-learn's ``pairwise_distances_chunked(
   working_memory=100)`` assembled into a preallocated array, side by side.
   Target: growth <= output + 1.5 x budget.
2. **The probe's estimate** on three workloads (pairwise distances, a
   max-statistic permutation test, a k-means assignment step), for NumPy and
   torch CPU: the plan's predicted peak for one batch (``fixed_bytes +
   batch_size * bytes_per_item``) against the peak growth of ``fn`` run
   alone on a batch of that many rows. Target: within 2x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "batches.md"
BUDGET_GB = 0.1
MIB = 2**20
GIB = 2**30

# The child: builds one workload, resets VmHWM, runs one variant, prints JSON.
CHILD = textwrap.dedent(
    """
    import ctypes, json, sys, time
    import numpy as np

    workload, lib, variant, budget_gb = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise SystemExit(field + " missing")

    def reset_peak():
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return status("VmRSS")

    if lib == "torch":
        import torch
        xp = torch
        def to(a):
            return torch.from_numpy(a)
    elif lib == "jax":
        import jax.numpy as xp
        def to(a):
            return xp.asarray(a)
    elif lib == "ndonnx":
        import warnings
        warnings.simplefilter("ignore")
        import ndonnx as xp
        def to(a):
            return xp.asarray(a)
    else:
        xp = np
        def to(a):
            return a
    import xpkit

    rng = np.random.default_rng(0)
    if workload.startswith("pairwise-"):  # any namespace: float32, n rows
        n_rows = int(workload.split("-")[1])
        A = to(rng.standard_normal((n_rows, 64)).astype(np.float32))
        import array_api_compat
        ns = array_api_compat.array_namespace(A)
        def fn(a, B):
            sq = ns.sum(a * a, axis=1)[:, None] + ns.sum(B * B, axis=1)[None, :]
            return sq - 2.0 * (a @ ns.permute_dims(B, (1, 0)))
        arrays, whole = (A,), (A,)
        given = 3 * n_rows * 4  # three rows of n float32 per item
        out_bytes = n_rows * n_rows * 4
    elif workload == "pairwise":
        A = to(rng.standard_normal((12_000, 64)))
        def fn(a, B):
            sq = (a * a).sum(1)[:, None] + (B * B).sum(1)[None, :]
            return sq - 2.0 * (a @ B.T)
        arrays, whole = (A,), (A,)
        given = 3 * 12_000 * 8  # three rows of 12,000 float64 per item
        out_bytes = 12_000 * 12_000 * 8
    elif workload == "permutation":
        n, p, n_perm = 1_000, 4_000, 4_000
        X = rng.standard_normal((n, p))
        X = (X - X.mean(0)) / X.std(0)
        y = rng.standard_normal(n)
        y = (y - y.mean()) / y.std()
        perms = np.argsort(rng.random((n_perm, n)), axis=1)
        X, y, perms = to(X), to(y), to(perms)
        def fn(idx, X, y):
            corr = (y[idx] @ X) / X.shape[0]
            return abs(corr).max(1) if lib == "numpy" else corr.abs().amax(1)
        arrays, whole = (perms,), (X, y)
        given = (n + 2 * p) * 8
        out_bytes = n_perm * 8
    else:  # kmeans: one assignment step
        N, d, k = 400_000, 16, 256
        X = to(rng.standard_normal((N, d)))
        C = to(rng.standard_normal((k, d)))
        def fn(x, C):
            dist = (x * x).sum(1)[:, None] - 2.0 * (x @ C.T) + (C * C).sum(1)[None, :]
            if lib == "numpy":
                return dist.argmin(1), dist.min(1)
            m = dist.min(1)
            return m.indices, m.values
        arrays, whole = (X,), (C,)
        given = 3 * k * 8
        out_bytes = N * 16

    if variant == "budget":  # the device's own plan, under memory_budget(budget_gb)
        small = tuple(a[:64, ...] for a in arrays)
        xpkit.map_batches(fn, *small, whole=whole, remember=False)  # warm up
        base = reset_peak()
        t0 = time.perf_counter()
        with xpkit.memory_budget(budget_gb):
            out = xpkit.map_batches(fn, *arrays, whole=whole)
            plan = xpkit.plan_batches(fn, *arrays, whole=whole)
        seconds = time.perf_counter() - t0
        peak = status("VmHWM") - base
        print(json.dumps({"seconds": seconds, "growth": peak, "out_bytes": out_bytes,
                          "rows": plan.batch_size, "per_item": plan.bytes_per_item,
                          "fixed": plan.fixed_bytes, "source": plan.source}))
        raise SystemExit
    if variant == "estimate":
        plan = xpkit.plan_batches(fn, *arrays, whole=whole, budget_gb=budget_gb)
        rows = plan.batch_size
        predicted = plan.fixed_bytes + rows * plan.bytes_per_item
        part = tuple(a[:rows] for a in arrays)
        fn(*part, *whole)  # warm up this size (libraries' one-time buffers)
        base = reset_peak()
        fn(*part, *whole)
        measured = status("VmHWM") - base
        print(json.dumps({"rows": rows, "per_item": plan.bytes_per_item,
                          "fixed": plan.fixed_bytes, "predicted": predicted,
                          "measured": measured, "source": plan.source}))
        raise SystemExit
    # warm up the code paths (first calls import and initialise), then forget
    # what the warm-up measured: the "probe" variant measures anew
    small = tuple(a[:64, ...] for a in arrays)
    xpkit.map_batches(fn, *small, whole=whole, budget_gb=budget_gb)
    xpkit.plan_memory.clear()
    base = reset_peak()
    t0 = time.perf_counter()
    if variant == "probe":
        out = xpkit.map_batches(fn, *arrays, whole=whole, budget_gb=budget_gb)
    elif variant == "given":
        out = xpkit.map_batches(fn, *arrays, whole=whole, budget_gb=budget_gb,
                                bytes_per_item=given)
    elif variant == "unbatched":
        out = np.asarray(fn(*arrays, *whole))
    elif variant == "sklearn":
        from sklearn.metrics import pairwise_distances_chunked
        out = np.empty((12_000, 12_000))
        at = 0
        for chunk in pairwise_distances_chunked(
            A, A, metric="euclidean", squared=True, working_memory=int(budget_gb * 1024)
        ):
            out[at:at + chunk.shape[0]] = chunk
            at += chunk.shape[0]
    seconds = time.perf_counter() - t0
    peak = status("VmHWM") - base
    first = out[0] if isinstance(out, tuple) else out
    check = float(np.asarray(first[:3]).sum())
    print(json.dumps({"seconds": seconds, "growth": peak, "out_bytes": out_bytes,
                      "check": check}))
    """
)


def run(workload: str, lib: str, variant: str, budget_gb: float = BUDGET_GB) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, workload, lib, variant, str(budget_gb)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        msg = f"{workload}/{lib}/{variant} failed:\n{proc.stderr[-3000:]}"
        raise RuntimeError(msg)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def peak_table(repeats: int) -> str:
    lines = [
        f"Pairwise squared distances, 12,000 x 64 float64 against themselves "
        f"(output {12_000**2 * 8 / GIB:.2f} GiB), budget {BUDGET_GB} GB "
        f"({BUDGET_GB * 1024:.0f} MiB). Target: peak growth <= output + 1.5 x budget. "
        f"Each variant {repeats} times, interleaved, each in a fresh process: the "
        "median time, the largest growth.",
        "",
        "| variant | seconds | peak growth (MiB) | growth - output (MiB) "
        "| (growth - output) / budget | within target? |",
        "|---|---:|---:|---:|---:|---|",
    ]
    rows = [
        ("map_batches, cost measured by the probe (NumPy)", "numpy", "probe"),
        ("map_batches, bytes_per_item given (NumPy)", "numpy", "given"),
        (
            "sklearn pairwise_distances_chunked(working_memory=100) (NumPy)",
            "numpy",
            "sklearn",
        ),
        ("map_batches, cost measured by the probe (torch CPU)", "torch", "probe"),
        ("map_batches, bytes_per_item given (torch CPU)", "torch", "given"),
    ]
    checks = set()
    runs: dict[str, list[dict]] = {variant + lib: [] for _, lib, variant in rows}
    for _ in range(repeats):
        for _, lib, variant in rows:
            runs[variant + lib].append(run("pairwise", lib, variant))
    for label, lib, variant in rows:
        done = runs[variant + lib]
        checks.update(round(r["check"], 6) for r in done)
        r = {
            "seconds": statistics.median(r["seconds"] for r in done),
            "growth": max(r["growth"] for r in done),
            "out_bytes": done[0]["out_bytes"],
        }
        extra = (r["growth"] - r["out_bytes"]) / MIB
        budget_mib = BUDGET_GB * 1024
        ok = r["growth"] <= r["out_bytes"] + 1.5 * BUDGET_GB * GIB
        lines.append(
            f"| {label} | {r['seconds']:.2f} | {r['growth'] / MIB:,.0f} | {extra:,.0f} "
            f"| {extra / budget_mib:.2f} | {'yes' if ok else 'NO'} |"
        )
    if len(checks) != 1:
        lines.append(f"\nRESULTS DIFFER between variants: {sorted(checks)}")
    return "\n".join(lines)


def estimate_table() -> str:
    lines = [
        f"The probe's plan under budget_gb={BUDGET_GB}: its predicted peak for one batch "
        "(fixed + batch x per-item) against the peak growth of `fn` alone on a batch "
        "that size (after one warm-up call). Target: ratio within 0.5-2.",
        "",
        "| workload | library | meter | per item (kB) | fixed (MiB) | batch rows "
        "| predicted (MiB) | measured (MiB) | predicted / measured | within 2x? |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    names = {
        "pairwise": "pairwise distances (12,000 x 64)",
        "permutation": "permutation test (1,000 x 4,000, 4,000 perms)",
        "kmeans": "k-means step (400,000 x 16, k=256)",
    }
    for workload, name in names.items():
        for lib in ("numpy", "torch"):
            r = run(workload, lib, "estimate")
            ratio = r["predicted"] / max(r["measured"], 1)
            ok = 0.5 <= ratio <= 2.0
            lines.append(
                f"| {name} | {'torch CPU' if lib == 'torch' else 'NumPy'} "
                f"| {r['source'].removeprefix('measured by ')} | {r['per_item'] / 1e3:,.1f} "
                f"| {r['fixed'] / MIB:,.1f} | {r['rows']:,} | {r['predicted'] / MIB:,.1f} "
                f"| {r['measured'] / MIB:,.1f} | {ratio:.2f} | {'yes' if ok else 'NO'} |"
            )
    return "\n".join(lines)


def budget_table(repeats: int) -> str:
    """The budget kept on every backend: the batches' working set against it."""
    budget = 0.2
    lines = [
        f"Pairwise squared distances of n x 64 float32 rows against themselves under "
        f"`memory_budget({budget})` (the plan the device's meter gives; JAX runs "
        "without x64). The batches' working set is the peak growth less the "
        "output. Target: within 2x of the budget. Each case in a fresh process; "
        f"the largest growth and median time of {repeats}.",
        "",
        "| n | library | how the cost was found | per item (kB) | batch rows "
        "| peak growth (MiB) | output (MiB) | working set / budget | within 2x? "
        "| seconds |",
        "|---:|---|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for n, lib in (
        (20_000, "numpy"),
        (20_000, "torch"),
        (20_000, "jax"),
        (3_000, "ndonnx"),
    ):
        done = [run(f"pairwise-{n}", lib, "budget", budget) for _ in range(repeats)]
        growth = max(r["growth"] for r in done)
        r = done[0]
        working = (growth - r["out_bytes"]) / (budget * GIB)
        ok = working <= 2.0
        lines.append(
            f"| {n:,} | {lib} | {r['source']} | {r['per_item'] / 1e3:,.1f} "
            f"| {r['rows']:,} | {growth / MIB:,.0f} | {r['out_bytes'] / MIB:,.0f} "
            f"| {working:.2f} | {'yes' if ok else 'NO'} "
            f"| {statistics.median(x['seconds'] for x in done):.2f} |"
        )
    return "\n".join(lines)


def ndonnx_table(repeats: int) -> str:
    """ndonnx: the measured plan against a realistic cost given, side by side."""
    lines = [
        "ndonnx, pairwise squared distances of 3,000 x 64 float32 rows (3,000 x "
        "3,000 output), the device's own budget: the probe's plan against "
        "`bytes_per_item` given as three rows of the output (a realistic cost). "
        f"Median of {repeats}, interleaved, each in a fresh process. Target: the "
        "probe within 2x of the given cost's time.",
        "",
        "| variant | seconds | x given |",
        "|---|---:|---:|",
    ]
    runs: dict[str, list[float]] = {"probe": [], "given": []}
    for _ in range(repeats):
        for variant, times in runs.items():
            times.append(run("pairwise-3000", "ndonnx", variant, 1e3)["seconds"])
    given = statistics.median(runs["given"])
    for variant, times in runs.items():
        t = statistics.median(times)
        lines.append(f"| {variant} | {t:.2f} | {t / given:.2f} |")
    return "\n".join(lines)


def overhead_table(repeats: int) -> str:
    """Per-call cost of map_batches against fn alone, in one process, interleaved."""
    import numpy as np

    lines = [
        "Per call, `fn = lambda x: x * 2.0` on n x 8 float64 rows (n x 64 from "
        "100,000 rows), in one process: the median of "
        f"{repeats} rounds of each, the ratios the median of each round's ratio "
        "(fn, repeated, given and planned are timed in turn in every round; "
        "first in rounds of its own). *first*: with an empty plan memory (the probe "
        "runs); *repeated*: the same call again (one batch: repeated without a "
        "plan); *given*: `bytes_per_item` passed; *planned*: `bytes_per_item` "
        "passed and `remember=False` (checked and planned on every call). "
        "Targets (NumPy): repeated <= fn + 50 us at 100 rows, <= 1.5x fn at "
        "10,000.",
        "",
        "| library | n | fn (us) | first (us) | repeated (us) | repeated - fn (us) "
        "| repeated / fn | given (us) | given / fn | planned (us) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    libs = ["numpy"]
    try:
        import torch

        libs.append("torch")
    except ImportError:
        torch = None
    for lib in libs:
        for n in (10, 100, 10_000, 100_000, 1_000_000):
            cols = 64 if n >= 100_000 else 8
            host = np.random.default_rng(0).standard_normal((n, cols))
            x = host if lib == "numpy" else torch.from_numpy(host)
            med = _overhead_medians(x, cols * 16.0, repeats)
            lines.append(
                f"| {'torch CPU' if lib == 'torch' else 'NumPy'} | {n:,} "
                f"| {med['fn']:,.1f} | {med['first']:,.0f} | {med['repeated']:,.1f} "
                f"| {med['repeated'] - med['fn']:,.1f} "
                f"| {med['repeated/fn']:.2f} | {med['given']:,.1f} "
                f"| {med['given/fn']:.2f} | {med['planned']:,.1f} |"
            )
    return "\n".join(lines)


def _overhead_medians(x, per_item: float, repeats: int) -> dict[str, float]:
    """Median microseconds per call of fn alone and of map_batches' variants.

    ``first`` is timed in rounds of its own (its probe trims the heap, which
    would slow whatever is timed after it). The others are timed in rounds
    of fn, repeated, given, planned; ``<case>/fn`` is the median of each
    round's ratio, so that a machine that slows down for a while slows both.
    """
    import timeit

    import xpkit

    def fn(x):
        return x * 2.0

    n = int(x.shape[0])
    number = max(1, 20_000 // max(n // 100, 1))

    def first():
        xpkit.plan_memory.clear()
        xpkit.map_batches(fn, x)

    firsts = [timeit.timeit(first, number=1) * 1e6 for _ in range(repeats)]
    xpkit.map_batches(fn, x)  # learned again: the next calls repeat
    cases = {
        "fn": lambda: fn(x),
        "repeated": lambda: xpkit.map_batches(fn, x),
        "given": lambda: xpkit.map_batches(fn, x, bytes_per_item=per_item),
        "planned": lambda: xpkit.map_batches(
            fn, x, bytes_per_item=per_item, remember=False
        ),
    }
    for call in cases.values():
        call()  # (warm)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, call in cases.items():
            times[name].append(timeit.timeit(call, number=number) / number * 1e6)
    medians = {k: statistics.median(v) for k, v in times.items()}
    medians["first"] = statistics.median(firsts)
    for name in ("repeated", "given"):
        rounds = zip(times[name], times["fn"], strict=True)
        medians[f"{name}/fn"] = statistics.median(t / f for t, f in rounds)
    return medians


SECTIONS = {
    "peak": ("Peak memory", peak_table),
    "estimate": ("The probe's estimate", lambda _repeats: estimate_table()),
    "budget": ("The budget kept on every backend", budget_table),
    "ndonnx": ("ndonnx: the probe against a given cost", ndonnx_table),
    "overhead": ("Per-call overhead", overhead_table),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help=f"also write the tables to {RESULTS}"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each peak-memory variant"
    )
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run ({', '.join(SECTIONS)})",
    )
    args = parser.parse_args()
    chosen = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: unknown sections {unknown}; known: {list(SECTIONS)}")
    parts = []
    for key in chosen:
        title, table = SECTIONS[key]
        parts.append(f"### {title}\n\n{table(args.repeats)}\n")
    text = "\n".join(parts)
    print(text)
    if args.write:
        RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
