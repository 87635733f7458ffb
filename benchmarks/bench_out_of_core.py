"""Outputs larger than memory: a pairwise-distance matrix written to disk (issue #32).

Run: ``python benchmarks/bench_out_of_core.py`` (Linux: it reads the
anonymous resident memory, ``RssAnon``; zarr and scikit-learn for their
rows, distributed for the cluster's). ``--times 1.5`` (the default) sizes
the output at 1.5 x the machine's total memory; ``--quick`` at 0.05 x for a
smoke run; ``--write`` also writes ``benchmarks/results/out_of_core.md``.

The job: the Euclidean distances between every pair of n rows of an
(n, 16) float64 matrix, an (n, n) float64 output on disk. Each variant runs
in a fresh child process, one after the other (the disk is shared), and its
file is deleted before the next:

- *memmap*: ``map_batches(fn, X, whole=(X, sq), out=np.memmap, budget_gb=B)``;
- *zarr*: the same into a zarr array in a directory, chunks of 64 rows (no
  compression: the disk, not a codec, is measured);
- *scikit-learn*: ``pairwise_distances_chunked(X, working_memory=B)`` with
  each chunk assigned into an ``np.memmap`` (the same file format);
- *zarr, 2 workers*: ``map_batches(..., executor=client, out=zarr)`` on a
  ``LocalCluster`` of two single-threaded worker processes, each task
  writing its own rows into the store (nothing of them comes back).

For each: the seconds of the call (the output flushed: ``memmap.flush()``),
the growth of the calling process's anonymous resident memory (``RssAnon``,
sampled every 5 ms by a thread, the most above its value before the call;
file-backed pages, the page cache's, are not the process's), against the
target of issue #32 (in process: <= 1.5 x B + 64 MiB; the cluster's client:
<= B + 64 MiB), and 16 rows chosen at random read back from the file and
compared with NumPy's distances.

``--neighbours N`` (200000; 0: none) adds a second table: each row's 5
nearest other rows in an (N, 64) matrix, by ``iter_batches`` keeping only
each batch's ``top_k`` indices (into an (N, 5) array), against
``map_batches`` of the same ``fn`` holding them all (the in-memory result):
the seconds of each, whether the indices are equal, and the anonymous RSS
growth of the ``iter_batches`` loop against its target, the budget plus the
kept results.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "out_of_core.md"
MIB = 2**20
GIB = 2**30
COLS = 16
CHUNK_ROWS = 64
VARIANTS = ("memmap", "zarr", "scikit-learn", "zarr, 2 workers")

CHILD = textwrap.dedent(
    """
    import json, math, sys, threading, time
    import numpy as np

    variant, n, budget_gb, where = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    COLS, CHUNK_ROWS = 16, 64

    def rss_anon():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        raise SystemExit("RssAnon missing")

    class Sampler(threading.Thread):
        def __init__(self):
            super().__init__(daemon=True)
            self.base = rss_anon()
            self.most = self.base
            self.done = threading.Event()
        def run(self):
            while not self.done.wait(0.005):
                self.most = max(self.most, rss_anon())
        def stop(self):
            self.done.set(); self.join()
            self.most = max(self.most, rss_anon())
            return self.most - self.base

    import array_api_compat
    import xpkit

    def distances(rows, X, sq):
        xp = array_api_compat.array_namespace(rows)
        d = xp.sum(rows * rows, axis=1)[:, None] + sq[None, :] - 2.0 * (rows @ X.T)
        return xp.sqrt(xp.clip(d, 0.0, None))

    X = np.random.default_rng(0).standard_normal((n, COLS))
    sq = (X * X).sum(axis=1)
    client = cluster = None
    if variant == "memmap" or variant == "scikit-learn":
        out = np.lib.format.open_memmap(where, mode="w+", dtype=np.float64, shape=(n, n))
    else:
        import zarr
        out = zarr.create_array(store=where, shape=(n, n), chunks=(CHUNK_ROWS, n),
                                dtype="float64", compressors=None)
    if variant == "zarr, 2 workers":
        from distributed import Client, LocalCluster
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None, memory_limit=None)
        client = Client(cluster)
        client.wait_for_workers(2)
    if variant == "scikit-learn":
        from sklearn.metrics import pairwise_distances_chunked
    xpkit.map_batches(distances, X[:64], whole=(X[:64], sq[:64]), bytes_per_item=1e3)  # (imports)
    sampler = Sampler(); sampler.start()
    start = time.perf_counter()
    if variant == "scikit-learn":
        at = 0
        for block in pairwise_distances_chunked(X, working_memory=budget_gb * 2**30 / 2**20):
            out[at : at + len(block)] = block
            at += len(block)
    else:
        xpkit.map_batches(distances, X, whole=(X, sq), out=out, budget_gb=budget_gb,
                          executor=client)
    if hasattr(out, "flush"):
        out.flush()
    seconds = time.perf_counter() - start
    growth = sampler.stop()
    rng = np.random.default_rng(1)
    rows = sorted(rng.choice(n, size=16, replace=False).tolist())
    ok = all(
        np.allclose(np.asarray(out[i]), np.sqrt(((X[i] - X) ** 2).sum(axis=1)), rtol=1e-6, atol=1e-6)
        for i in rows
    )
    if client is not None:
        client.close(); cluster.close()
    print(json.dumps({"seconds": seconds, "growth": growth, "ok": ok}))
    """
)


NEIGHBOURS = textwrap.dedent(
    """
    import json, sys, threading, time
    import numpy as np
    import xpkit

    n, budget_gb, how = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    K = 5

    def rss_anon():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024

    X = np.random.default_rng(0).standard_normal((n, 64))
    b = xpkit.Backend("numpy")
    sq = (X * X).sum(axis=1)

    def nearest(rows, X, sq):
        where = xpkit.current_rows()
        xp = b.xp
        d = sq[None, :] - 2.0 * (rows @ X.T)
        own = (slice(None), slice(where.start, where.stop))
        eye = xp.eye(rows.shape[0], dtype=xp.bool)
        d = b.at(d, own).set(xp.where(eye, xp.inf, d[own]))
        return b.top_k(d, K, mode="smallest")[1]

    xpkit.map_batches(nearest, X[:300], whole=(X[:300], sq[:300]))  # (imports)
    base = rss_anon(); most = [base]; done = threading.Event()
    def sample():
        while not done.wait(0.005):
            most[0] = max(most[0], rss_anon())
    t = threading.Thread(target=sample, daemon=True); t.start()
    start = time.perf_counter()
    if how == "iter":
        kept = np.empty((n, K), dtype=np.int64)
        for rows, idx in xpkit.iter_batches(nearest, X, whole=(X, sq), budget_gb=budget_gb):
            kept[rows.start : rows.stop] = idx
    else:
        kept = xpkit.map_batches(nearest, X, whole=(X, sq), budget_gb=budget_gb)
    seconds = time.perf_counter() - start
    done.set(); t.join(); most[0] = max(most[0], rss_anon())
    np.save(sys.argv[4], kept)
    print(json.dumps({"seconds": seconds, "growth": most[0] - base, "kept": kept.nbytes}))
    """
)


def _neighbours(n: int, budget_gb: float, base: Path) -> list[str]:
    import numpy as np

    got = {}
    for how in ("iter", "map"):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                NEIGHBOURS,
                str(n),
                str(budget_gb),
                how,
                str(base / f"{how}.npy"),
            ],
            capture_output=True,
            text=True,
            timeout=7200,
            check=False,
        )
        if proc.returncode != 0:
            return [f"neighbours: {how} failed: {proc.stderr.strip()[-300:]}"]
        got[how] = json.loads(proc.stdout.strip().splitlines()[-1])
    equal = np.array_equal(np.load(base / "iter.npy"), np.load(base / "map.npy"))
    it = got["iter"]
    target = budget_gb * GIB + it["kept"]
    return [
        f"Each row's 5 nearest other rows of ({n:,}, 64) float64, budget "
        f"{budget_gb:g} GiB a batch: `iter_batches` keeping each batch's "
        "`top_k` indices against `map_batches` of the same `fn` (each in a "
        "child process of its own).",
        "",
        "| form | seconds | anon RSS growth (MiB) | target: budget + kept (MiB) | within "
        "| indices equal |",
        "|---|---:|---:|---:|---|---|",
        f"| iter_batches | {it['seconds']:,.1f} | {it['growth'] / MIB:,.1f} | "
        f"{target / MIB:,.0f} | {'yes' if it['growth'] <= target else 'no'} | "
        f"{'yes' if equal else 'NO'} |",
        f"| map_batches | {got['map']['seconds']:,.1f} | "
        f"{got['map']['growth'] / MIB:,.1f} | - | - | (the reference) |",
    ]


def _run_child(variant: str, n: int, budget_gb: float, where: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, variant, str(n), str(budget_gb), str(where)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _available(variant: str) -> str | None:
    """Why ``variant`` cannot run here (None: it can)."""
    import importlib.util

    need = {"zarr": ["zarr"], "scikit-learn": ["sklearn"]}.get(variant, [])
    if variant == "zarr, 2 workers":
        need = ["zarr", "distributed"]
    missing = [m for m in need if importlib.util.find_spec(m) is None]
    return f"{', '.join(missing)} not installed" if missing else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=float, default=1.5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--budget-gb", type=float, default=0.25)
    parser.add_argument("--dir", default=None, help="where the files go (a temp dir)")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--neighbours", type=int, default=200_000)
    parser.add_argument("--skip-pairwise", action="store_true")
    args = parser.parse_args()
    import psutil

    import xpkit

    total = psutil.virtual_memory().total
    times = 0.05 if args.quick else args.times
    n = math.ceil(math.sqrt(times * total / 8))
    out_bytes = n * n * 8
    budget = args.budget_gb * GIB
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="xpkit-ooc-"))
    free = shutil.disk_usage(base).free
    if free < out_bytes * 1.05:
        msg = f"{base} has {free / GIB:.1f} GiB free; the output needs {out_bytes / GIB:.1f}"
        raise SystemExit(msg)
    header = (
        f"Measured with `python benchmarks/bench_out_of_core.py"
        f"{' --quick' if args.quick else f' --times {times:g}'}` (xpkit "
        f"{xpkit.__version__}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, {os.cpu_count()} cores, "
        f"{total / GIB:.1f} GiB of memory, the files in "
        f"{'--dir' if args.dir else 'a temporary directory'}). The output: ({n:,}, {n:,}) "
        f"float64, {out_bytes / GIB:.1f} GiB, {out_bytes / total:.2f} x the "
        f"machine's memory; budget {args.budget_gb:g} GiB a batch."
    )
    lines = [
        header,
        "",
        "| variant | seconds | anon RSS growth (MiB) | target (MiB) | within | "
        "16 rows agree |",
        "|---|---:|---:|---:|---|---|",
    ]
    print(header, flush=True)
    for variant in () if args.skip_pairwise else VARIANTS:
        why = _available(variant)
        if why:
            lines.append(f"| {variant} | - | - | - | - | skipped: {why} |")
            continue
        where = base / (
            "out.npy" if variant in {"memmap", "scikit-learn"} else "out.zarr"
        )
        got = _run_child(variant, n, args.budget_gb, where)
        shutil.rmtree(where, ignore_errors=True)
        where.unlink(missing_ok=True)
        target = (budget if variant.endswith("workers") else 1.5 * budget) + 64 * MIB
        if "error" in got:
            row = f"| {variant} | - | - | {target / MIB:,.0f} | - | failed: {got['error']} |"
        else:
            growth = got["growth"]
            row = (
                f"| {variant} | {got['seconds']:,.1f} | {growth / MIB:,.1f} | "
                f"{target / MIB:,.0f} | {'yes' if growth <= target else 'no'} | "
                f"{'yes' if got['ok'] else 'NO'} |"
            )
        lines.append(row)
        print(row, flush=True)
    if args.neighbours:
        if args.quick:
            args.neighbours = min(args.neighbours, 20_000)
        lines += ["", *_neighbours(args.neighbours, args.budget_gb, base)]
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    table = "\n".join(lines)
    print()
    print(table)
    if args.write:
        RESULTS.write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n({time.perf_counter() - start:.0f} s)")
