"""Beyond the standard: what array-api-extra's functions and xpkit's top_k cost.

Run: ``python benchmarks/bench_beyond.py`` (``--repeats 5``). Each row is
one function on NumPy and on torch's CPU, written once against the
standard (``xp`` is the backend's namespace), timed in turn in one
process: the median milliseconds of ``--repeats`` rounds and the median of
each round's torch / NumPy ratio. The *torch path* column says how
array-api-extra (or xpkit) computes it on torch, read from their sources:
a function of torch's own, or the generic code written against the
standard (a sort where the standard has no better tool). Prints a Markdown
table for the docs' "Beyond the standard" page.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import xpkit

K = 10


def _cases(b: xpkit.Backend) -> list[tuple[str, str, Callable[[], object]]]:
    """``(label, torch path, call)`` on backend ``b``, its inputs made once."""
    import array_api_extra as xpx

    xp = b.xp
    rng = np.random.default_rng(0)
    wide = b.asarray(rng.standard_normal((2000, 20000)).astype(np.float32))
    samples = b.asarray(rng.standard_normal((64, 100_000)))
    flat = b.asarray(rng.standard_normal(4_000_000))
    square = b.asarray(rng.standard_normal((2000, 2000)))
    ints = b.asarray(rng.integers(0, 100_000, 1_000_000))
    other = b.asarray(rng.integers(0, 100_000, 100_000))
    labels = b.asarray(rng.integers(0, 10, 1_000_000))

    def by_argpartition() -> object:
        part = xpx.argpartition(wide, K - 1, axis=-1)[:, :K]
        values = xp.take_along_axis(wide, part, axis=-1)
        order = xp.argsort(values, axis=-1, stable=True)
        return xp.take_along_axis(part, order, axis=-1)

    return [
        (
            f"b.top_k (2000, 20000), k={K}",
            "torch.topk",
            lambda: b.top_k(wide, K, mode="smallest"),
        ),
        (
            f"xpx.argpartition + sort of the k, k={K}",
            "torch.kthvalue, then three masked copies",
            by_argpartition,
        ),
        (
            f"argsort of every row, first k={K}",
            "torch.sort (a full sort)",
            lambda: xp.argsort(wide, axis=-1)[:, :K],
        ),
        (
            "xpx.partition (2000, 20000)",
            "torch.kthvalue, then three masked copies",
            lambda: xpx.partition(wide, K - 1, axis=-1),
        ),
        ("xpx.cov (64, 100000)", "torch.cov", lambda: xpx.cov(samples)),
        (
            "xpx.isclose (4,000,000)",
            "the standard's elementwise functions",
            lambda: xpx.isclose(flat, flat + 1e-9),
        ),
        (
            "xpx.pad (2000, 2000) by 8",
            "torch.nn.functional.pad",
            lambda: xpx.pad(square, 8),
        ),
        (
            "xpx.nunique (1,000,000 ints)",
            "torch.unique",
            lambda: xpx.nunique(ints),
        ),
        (
            "xpx.setdiff1d (1,000,000 and 100,000 ints)",
            "generic: unique_values, then two stable argsorts (in1d)",
            lambda: xpx.setdiff1d(ints, other),
        ),
        (
            "xpx.one_hot (1,000,000, 10 classes)",
            "torch.nn.functional.one_hot",
            lambda: xpx.one_hot(labels, 10),
        ),
    ]


def _ms(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def table(repeats: int) -> str:
    """The Markdown table: NumPy and torch-cpu, each case timed in turn."""
    numpy_cases = _cases(xpkit.Backend("numpy"))
    torch_cases = _cases(xpkit.Backend("torch", device="cpu"))
    lines = [
        "| function | NumPy ms | torch-cpu ms | torch / NumPy | torch path |",
        "|---|---:|---:|---:|---|",
    ]
    for (label, path, on_numpy), (_, _, on_torch) in zip(
        numpy_cases, torch_cases, strict=True
    ):
        on_numpy()
        on_torch()  # (warm)
        first: list[float] = []
        second: list[float] = []
        for _ in range(repeats):
            first.append(_ms(on_numpy))
            second.append(_ms(on_torch))
        ratio = statistics.median(t / n for n, t in zip(first, second, strict=True))
        lines.append(
            f"| {label} | {statistics.median(first):,.1f} "
            f"| {statistics.median(second):,.1f} | {ratio:.2f} | {path} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(table(max(args.repeats, 1)))


if __name__ == "__main__":
    main()
