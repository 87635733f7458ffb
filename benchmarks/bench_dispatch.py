"""Per-call cost of facade methods vs the native call vs the compat namespace.

Run: ``python benchmarks/bench_dispatch.py``. Prints a markdown table of
medians (microseconds per call) measured side by side in one process, and the
facade's overhead as a ratio to the native call.
"""

from __future__ import annotations

import importlib.util
import statistics
import timeit
from collections.abc import Callable

import numpy as np

import xpkit


def per_call_us(fn: Callable[[], object], number: int = 2000, repeat: int = 7) -> float:
    runs = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(runs) / number * 1e6


def cases() -> list[
    tuple[str, str, Callable[[], object], Callable[[], object], Callable[[], object]]
]:
    rows = []
    libs = [("numpy", np)]
    if importlib.util.find_spec("torch") is not None:
        import torch

        libs.append(("torch", torch))
    for key, native in libs:
        b = xpkit.Backend(key, device="cpu")
        x = b.asarray(np.arange(3.0))
        m = b.asarray(np.eye(3))
        xp = b.xp
        rows += [
            (
                b.name,
                "matmul",
                lambda b=b, m=m: b.matmul(m, m),
                lambda native=native, m=m: native.matmul(m, m),
                lambda xp=xp, m=m: xp.matmul(m, m),
            ),
            (
                b.name,
                "sort",
                lambda b=b, x=x: b.sort(x),
                lambda native=native, x=x: native.sort(x),
                lambda xp=xp, x=x: xp.sort(x),
            ),
            (
                b.name,
                "expand_dims",
                lambda b=b, x=x: b.expand_dims(x, 0),
                lambda native=native, x=x: (
                    native.unsqueeze(x, 0)
                    if hasattr(native, "unsqueeze")
                    else native.expand_dims(x, 0)
                ),
                lambda xp=xp, x=x: xp.expand_dims(x, axis=0),
            ),
            (
                b.name,
                "from_arrays",
                lambda x=x: xpkit.Backend.from_arrays(x, x),
                lambda: None,
                lambda x=x: __import__("array_api_compat").array_namespace(x, x),
            ),
        ]
    return rows


def main() -> None:
    print(
        "| backend | method | xpkit (µs) | native (µs) | array_api_compat (µs) | xpkit - native (µs) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for name, method, facade, native, compat in cases():
        f, n, c = per_call_us(facade), per_call_us(native), per_call_us(compat)
        print(f"| {name} | {method} | {f:.2f} | {n:.2f} | {c:.2f} | {f - n:+.2f} |")


if __name__ == "__main__":
    main()
