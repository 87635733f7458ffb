"""`Backend.top_k` against the argsort path it replaces (issue #31).

Run: ``python benchmarks/bench_top_k.py`` (``--repeats N``; ``--quick``
for a small input). For each backend installed of NumPy and torch's CPU,
one process, the same (rows, cols) float32 input: the k largest along the
last axis by ``Backend.top_k`` and by the standard's own way without it
(``argsort(x, descending=True, stable=True)`` of the whole axis, its first
k taken, their values by ``take_along_axis``). The two are timed in turn in
each round; the table gives the median seconds of each and the median of
the per-round ratios (argsort / top_k). Both answers are checked equal in
values before timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import xpkit


def _argsort_path(b: xpkit.Backend, x: object, k: int) -> tuple[object, object]:
    xp = b.xp
    order = xp.argsort(x, axis=-1, descending=True, stable=True)[..., :k]
    return xp.take_along_axis(x, order, axis=-1), order


def _timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows, cols = (200, 2000) if args.quick else (2000, 20000)
    k = 10
    data = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    print(f"top_k of ({rows}, {cols}) float32, k={k}, {args.repeats} rounds")
    print()
    print("| backend | top_k s | argsort path s | argsort / top_k |")
    print("|---|---|---|---|")
    for name in ("numpy", "torch"):
        try:
            b = xpkit.Backend(name)
        except ImportError:
            print(f"| {name} | not installed | | |")
            continue
        x = b.asarray(data)
        fast, slow = b.top_k(x, k), _argsort_path(b, x, k)
        assert np.array_equal(b.to_numpy(fast[0]), b.to_numpy(slow[0]))
        times: dict[str, list[float]] = {"top_k": [], "argsort": []}
        ratios = []
        for _ in range(args.repeats):
            t_fast = _timed(lambda b=b, x=x: b.top_k(x, k))
            t_slow = _timed(lambda b=b, x=x: _argsort_path(b, x, k))
            times["top_k"].append(t_fast)
            times["argsort"].append(t_slow)
            ratios.append(t_slow / t_fast)
        print(
            f"| {b.name} | {statistics.median(times['top_k']):.4f} | "
            f"{statistics.median(times['argsort']):.4f} | "
            f"{statistics.median(ratios):.1f}x |"
        )


if __name__ == "__main__":
    main()
