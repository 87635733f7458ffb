"""OOM recovery cost: xpkit's split-and-retry vs accelerate-style restarts.

Run: ``python benchmarks/bench_oom.py``. All strategies run side by side in
one process on the same simulated OOM workload: ``fn`` does real work (a
``rows x 64 @ 64 x 64`` product and a reduction, so its time grows with its
rows) and raises ``MemoryError`` above a capacity, as an allocation that does
not fit would. Every strategy releases memory the same way after an OOM
(``xpkit.empty_device_cache()``, i.e. ``gc.collect()`` plus cache release).

- ``compute_oom_safe``: the whole input at once; halves are retried.
- ``map_batches``: batches sized from a budget that overestimates the device
  (the first batch does not fit); after the first OOM later batches use the
  size that fitted.
- ``restart x0.9`` / ``restart x0.5``: accelerate's ``find_executable_batch_size``
  pattern: on an OOM the whole job restarts with ``batch * 0.9`` (or ``* 0.5``)
  and the rows already done are thrown away.

Also measures the peak RSS of ``map_batches`` against its budget (in a fresh
subprocess, so earlier allocations do not hide the peak).

Prints markdown tables; ``--out FILE`` also writes them to a file.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import numpy as np

import xpkit

N_ROWS = 60_000
CAPACITY = 3_000  # rows that fit "on the device"
START_BATCH = (
    16_384  # accelerate's default starting batch size is 128; any oversize start
)
W = np.random.default_rng(0).standard_normal((64, 64))


class Workload:
    """Fails when the rows' summed memory weight exceeds ``capacity``.

    Column 0 of the input carries each row's weight (1.0 for uniform rows).
    """

    def __init__(self, capacity: float) -> None:
        self.capacity = capacity
        self.rows_computed = 0
        self.ooms = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if float(np.sum(x[:, 0])) > self.capacity:
            self.ooms += 1
            raise MemoryError
        self.rows_computed += x.shape[0]
        return np.tanh(x @ W).sum(axis=1)


def strategy_compute_oom_safe(x: np.ndarray, work: Workload) -> np.ndarray:
    return xpkit.compute_oom_safe(work, x)


def strategy_map_batches(x: np.ndarray, work: Workload) -> np.ndarray:
    per_row = x.shape[1] * 8
    return xpkit.map_batches(work, x, budget_gb=START_BATCH * per_row / 1024**3)


def restart(factor: float) -> Callable[[np.ndarray, Workload], np.ndarray]:
    def run(x: np.ndarray, work: Workload) -> np.ndarray:
        batch = START_BATCH
        while True:
            try:
                return np.concatenate(
                    [work(x[i : i + batch]) for i in range(0, x.shape[0], batch)]
                )
            except MemoryError:
                pass
            xpkit.empty_device_cache()
            batch = max(int(batch * factor), 1)

    return run


STRATEGIES = {
    "compute_oom_safe": strategy_compute_oom_safe,
    "map_batches": strategy_map_batches,
    "restart x0.9 (accelerate)": restart(0.9),
    "restart x0.5": restart(0.5),
}


def make_input(weights: np.ndarray) -> np.ndarray:
    x = np.random.default_rng(1).standard_normal((N_ROWS, 64))
    x[:, 0] = weights
    return x


SCENARIOS = {
    "uniform rows (a permutation test)": np.ones(N_ROWS),
    # rows get heavier along the input (e.g. longer sequences last): a batch
    # that fitted early no longer fits late in the job
    "rows heavier later (1x to 3x)": np.linspace(1.0, 3.0, N_ROWS),
}


def oom_table(repeats: int, title: str, weights: np.ndarray) -> str:
    x = make_input(weights)
    expected = np.tanh(x @ W).sum(axis=1)
    times: dict[str, list[float]] = {k: [] for k in STRATEGIES}
    counts: dict[str, tuple[int, int]] = {}
    for _ in range(repeats):
        for name, strategy in STRATEGIES.items():  # interleaved: same machine state
            work = Workload(CAPACITY)
            t0 = time.perf_counter()
            got = strategy(x, work)
            times[name].append(time.perf_counter() - t0)
            np.testing.assert_allclose(got, expected, rtol=1e-12)
            counts[name] = (work.rows_computed - N_ROWS, work.ooms)
    ideal_batch = int(CAPACITY / weights.max())
    t_ideal = statistics.median(
        _timed(
            lambda: [
                Workload(CAPACITY)(x[i : i + ideal_batch])
                for i in range(0, N_ROWS, ideal_batch)
            ]
        )
        for _ in range(repeats)
    )
    lines = [
        f"**{title}**: {N_ROWS:,} rows, capacity {CAPACITY:,} units, first attempt "
        f"{START_BATCH:,} rows; median of {repeats}. 'ideal' = the largest fixed batch that "
        f"always fits ({ideal_batch:,} rows), known in advance: {t_ideal:.3f} s.",
        "",
        "| strategy | time (s) | x ideal | wasted rows | OOMs |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in STRATEGIES:
        t = statistics.median(times[name])
        wasted, ooms = counts[name]
        lines.append(f"| {name} | {t:.3f} | {t / t_ideal:.2f} | {wasted:,} | {ooms} |")
    return "\n".join(lines)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


RSS_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import xpkit

    def status(field: str) -> int:
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise SystemExit(field + " missing")

    budget_gb = float(sys.argv[1])
    x = np.random.default_rng(0).standard_normal((200_000, 128))   # 195 MiB of input
    def fn(rows):                              # holds 8x its rows' bytes
        big = np.repeat(rows[:, None, :], 8, axis=1)
        np.multiply(big, 1.0001, out=big)
        return big.sum(axis=(1, 2))
    # warm up numpy's and xpkit's code paths (first use imports array_api_compat.numpy)
    xpkit.map_batches(fn, x[:16], overhead=9.0, budget_gb=budget_gb)
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")                          # reset the high-water mark (VmHWM)
    rss = status("VmRSS")
    out = xpkit.map_batches(fn, x, overhead=9.0, budget_gb=budget_gb)
    print(rss, status("VmHWM"), out.nbytes, x.nbytes)
    """
)


def rss_table() -> str:
    lines = [
        "Linux only: the high-water mark (VmHWM) is reset once the inputs exist, so "
        "the growth is what map_batches itself held at its peak. `fn` holds 8x its "
        "rows' bytes and is called with `overhead=9`. Target: peak ≤ inputs + budget "
        "(+ the output), i.e. growth ≤ budget + output. The growth includes what glibc's "
        "heap keeps between batches.",
        "",
        "| budget (MiB) | inputs (MiB) | output (MiB) | peak growth (MiB) | growth / budget "
        "| growth ≤ budget + output? |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for budget_mib in (32, 128, 512):
        out = subprocess.run(
            [sys.executable, "-c", RSS_SCRIPT, str(budget_mib / 1024)],
            capture_output=True,
            text=True,
            check=True,
        )
        rss, hwm, out_bytes, in_bytes = map(int, out.stdout.split())
        mib = 2**20
        growth = (hwm - rss) / mib
        ok = growth <= budget_mib + out_bytes / mib
        lines.append(
            f"| {budget_mib} | {in_bytes / mib:.0f} | {out_bytes / mib:.1f} | {growth:.1f} "
            f"| {growth / budget_mib:.2f} | {'yes' if ok else 'NO'} |"
        )
    return "\n".join(lines)


SPLIT_SCRIPT = textwrap.dedent(
    """
    import statistics, sys, time
    import numpy as np
    import xpkit
    from xpkit._oom import release_after_oom

    imported = "none"
    if sys.argv[1] == "torch":
        import torch  # noqa: F401 - what makes a full gc.collect() slow
        imported = "torch"
    repeats = int(sys.argv[2])
    x = np.random.default_rng(0).standard_normal((20_000, 64))
    w = np.random.default_rng(1).standard_normal((64, 64))

    def capped(cap):
        def fn(rows):
            if rows.shape[0] > cap:
                raise MemoryError("simulated")
            return np.tanh(rows @ w)
        return fn

    def median(f):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def timed(f):
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0

    pairs = []  # interleaved: drift hits both alike
    for _ in range(repeats):
        pairs.append((
            timed(lambda: xpkit.compute_oom_safe(capped(10_000), x)),  # one split
            timed(lambda: xpkit.compute_oom_safe(capped(20_000), x)),  # none
        ))
    split = statistics.median(p[0] for p in pairs)
    whole = statistics.median(p[1] for p in pairs)
    paired = statistics.median(p[0] - p[1] for p in pairs)
    release = median(release_after_oom)
    full = median(xpkit.empty_device_cache)
    print(imported, split, whole, paired, release, full)
    """
)


def split_cost_table(repeats: int) -> str:
    lines = [
        "One OOM split of `compute_oom_safe` (20,000 x 64 rows, `fn = tanh(rows @ W)` "
        "fails above 10,000): "
        "its time minus the same call without the OOM (the median of paired, "
        "interleaved runs), in a fresh process, with and "
        "without torch imported (torch makes a full `gc.collect()` slow). Recovery "
        "frees the failed attempt with `release_after_oom` (cleared frames, a "
        "young-generation collection, device caches); `empty_device_cache` (a "
        f"full collection) for comparison. Medians of {repeats}. Target: under 20 ms "
        "of recovery overhead with torch imported.",
        "",
        "| imported | call with one split (ms) | same call, no OOM (ms) | overhead of the "
        "split (ms) | release_after_oom (ms) | empty_device_cache (ms) | under 20 ms? |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for lib in ("none", "torch"):
        proc = subprocess.run(
            [sys.executable, "-c", SPLIT_SCRIPT, lib, str(repeats)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            lines.append(f"| {lib} | failed: {proc.stderr.strip().splitlines()[-1]} |")
            continue
        name, split, whole, paired, release, full = proc.stdout.split()
        overhead = float(paired) * 1e3
        lines.append(
            f"| {name} | {float(split) * 1e3:.2f} | {float(whole) * 1e3:.2f} "
            f"| {overhead:.2f} | {float(release) * 1e3:.3f} | {float(full) * 1e3:.1f} "
            f"| {'yes' if overhead < 20 else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    text = (
        "### OOM recovery\n\n"
        + "\n\n".join(oom_table(args.repeats, t, w) for t, w in SCENARIOS.items())
        + "\n\n### What a split costs\n\n"
        + split_cost_table(max(args.repeats, 15))
        + "\n\n### Peak memory of map_batches\n\n"
        + rss_table()
        + "\n"
    )
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
