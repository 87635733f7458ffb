"""k nearest neighbours: xpkit's example against scikit-learn's brute force.

Run: ``python benchmarks/bench_neighbours.py`` (``--sizes 20000x32,100000x64
--ks 5,10 --backends numpy,torch``). Each case runs in a fresh child process
of its own, so that its peak memory is its own: the seconds of one call
(after a warm call on 200 rows: imports and first plans aside) and how
far it raised the process's peak resident memory (VmHWM, or ``ru_maxrss``
off Linux, read in the child before and after the call: above the input,
the libraries and the warm call's own peak). xpkit's
version is ``examples/nearest_neighbours.py``'s ``nearest`` (``map_batches``
with ``top_k`` and ``current_rows``); scikit-learn's is
``NearestNeighbors(algorithm="brute")`` asked for k + 1 neighbours (each
row finds itself first). The ratio is xpkit's seconds over scikit-learn's,
in the same run. Prints a Markdown table for the docs' benchmarks page.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, resource, sys, time
from pathlib import Path
import numpy as np

def high_water():
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale

who, n, d, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
points = np.random.default_rng(0).standard_normal((n, d))
small = points[:200]
if who == "sklearn":
    from sklearn.neighbors import NearestNeighbors

    def run(p):
        fitted = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(p)
        return fitted.kneighbors(p, return_distance=False)[:, 1:]
else:
    sys.path.insert(0, {examples!r})
    import xpkit
    from nearest_neighbours import nearest

    backend = xpkit.Backend(who)

    def run(p):
        return backend.to_numpy(nearest(p, k, backend))

run(small)  # imports, first plans
before = high_water()
start = time.perf_counter()
got = run(points)
took = time.perf_counter() - start
grew = max(high_water() - before, 0)
print(json.dumps({{"seconds": took, "grew": grew, "shape": list(got.shape)}}))
"""


def measure(who: str, n: int, d: int, k: int) -> dict[str, float]:
    """One case in a fresh child: its seconds and peak growth in bytes."""
    code = _CHILD.format(examples=str(ROOT / "examples"))
    done = subprocess.run(
        [sys.executable, "-c", code, who, str(n), str(d), str(k)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        msg = f"{who} {n}x{d} k={k} failed:\n{done.stderr[-3000:]}"
        raise RuntimeError(msg)
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20000x32,100000x64")
    parser.add_argument("--ks", default="5,10")
    parser.add_argument("--backends", default="numpy,torch")
    args = parser.parse_args()
    if importlib.util.find_spec("sklearn") is None:
        sys.exit("scikit-learn is not installed: pip install scikit-learn")
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    ks = [int(k) for k in args.ks.split(",")]
    print(
        "| n x d | k | backend | xpkit s | scikit-learn s | xpkit / scikit-learn "
        "| xpkit peak growth MiB | scikit-learn peak growth MiB |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for n, d in sizes:
        for k in ks:
            theirs = measure("sklearn", n, d, k)
            for who in args.backends.split(","):
                ours = measure(who, n, d, k)
                print(
                    f"| {n:,} x {d} | {k} | {who} | {ours['seconds']:.2f} "
                    f"| {theirs['seconds']:.2f} "
                    f"| {ours['seconds'] / theirs['seconds']:.2f} "
                    f"| {ours['grew'] / 2**20:,.0f} | {theirs['grew'] / 2**20:,.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
