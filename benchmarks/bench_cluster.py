"""The demo's permutation workload: local `map_batches` vs a cluster vs joblib.

Run: ``python benchmarks/bench_cluster.py [--out benchmarks/results/cluster.md]``.

Side by side in one process, on one machine: ``map_batches`` running the
batches here (NumPy's BLAS threads use every core), on a
``dask.distributed.LocalCluster`` of 2 worker processes with 1 thread each
(dask pins each worker's BLAS to 1 thread), and on joblib's worker processes
(``executor="joblib"``). Every executor run includes its overheads: shipping
``fn`` and the inputs, scheduling, gathering; the cluster's start-up is
reported on its own line. Medians of repeated runs, interleaved so drift hits
every variant alike; the results are checked equal to the local ones.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

import xpkit
from xpkit._demo import demo_data, permutation_null_fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    startup = time.perf_counter() - started
    workers = client.scheduler_info()["workers"].values()
    limits = ", ".join(f"{w['memory_limit'] / 2**30:.1f}" for w in workers)

    sizes = [(5000, 400, 500), (20000, 400, 4000)]  # the demo's; 32x the work
    lines = [
        f"Measured with `python benchmarks/bench_cluster.py` (xpkit {xpkit.__version__}, "
        f"{os.cpu_count()} cores). LocalCluster: 2 worker processes x 1 thread, "
        f"memory limits {limits} GB; started in {startup:.2f} s (not in the table).",
        "",
        "| permutations | samples x features | executor | batches | seconds "
        "(median) | vs local |",
        "|---:|---|---|---:|---:|---:|",
    ]
    backend = xpkit.Backend("numpy")
    for n_perm, n_samples, n_features in sizes:
        X, y, perms = demo_data(n_perm, n_samples, n_features)
        fn, per_perm = permutation_null_fn(backend, X, y)
        variants = {"local": None, "dask LocalCluster": client, "joblib": "joblib"}
        times: dict[str, list[float]] = {k: [] for k in variants}
        results = {}
        for _ in range(args.repeats):
            for name, executor in variants.items():
                t0 = time.perf_counter()
                results[name] = xpkit.map_batches(
                    fn, perms, bytes_per_item=per_perm, overhead=2.0, executor=executor
                )
                times[name].append(time.perf_counter() - t0)
        for result in results.values():
            np.testing.assert_allclose(result, results["local"], rtol=1e-12)
        local = statistics.median(times["local"])
        for name, executor in variants.items():
            med = statistics.median(times[name])
            lines.append(
                f"| {n_perm:,} | {n_samples} x {n_features} | {name} | "
                f"{_batches(per_perm, executor, perms)} | {med:.3f} | "
                f"{med / local:.2f}x |"
            )
    client.close()
    cluster.close()
    lines += [
        "",
        "Ratios above 1 mean slower than running the batches here. On a 2-core "
        "machine local NumPy already uses both cores through BLAS, so a cluster "
        "of the same 2 cores can only add overhead (shipping inputs, scheduling, "
        "process start-up for joblib); executors pay off when workers bring "
        "cores or memory this process does not have.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)


def _batches(per_perm: int, executor: object, perms: np.ndarray) -> int:
    """How many batches map_batches chose (its log line, replayed cheaply)."""
    import logging

    seen: list[str] = []

    class _Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    log = logging.getLogger("xpkit")
    handler, level = _Grab(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        xpkit.map_batches(
            lambda idx: np.zeros(idx.shape[0]),
            perms,
            bytes_per_item=per_perm,
            overhead=2.0,
            executor=executor,
        )
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    first = next(m for m in seen if " batches of " in m)
    return int(first.split(" then ")[1].split()[0])


if __name__ == "__main__":
    main()
