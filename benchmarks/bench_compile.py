"""map_batches on compiling backends: compiles and time, padded against unpadded.

Run: ``python benchmarks/bench_compile.py [--write]``. For JAX (a ``jax.jit``
function) and torch (a ``torch.compile`` function), ``map_batches`` runs the same 10-batch job (the last batch
shorter) with ``pad=True`` and ``pad=False``, each on a freshly compiled
function, side by side in one process. JAX compiles are counted where the
function's Python body runs (only while tracing); torch's by a compiler
backend that counts the graphs it is given (and runs them eagerly).
``--write`` puts the table in ``benchmarks/results/compile.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import xpkit

ROWS, BATCH, COLS = 9_997, 1_000, 64  # 10 batches, the last of 997 rows


W = np.random.default_rng(1).standard_normal((COLS, 8)).astype(np.float32)


def _jax_fn(traces: list[tuple[int, ...]]) -> Callable[[Any], Any]:
    import jax

    w = jax.numpy.asarray(W)

    @jax.jit
    def fn(x: Any) -> Any:
        traces.append(tuple(x.shape))  # runs only while tracing
        return jax.numpy.tanh(x @ w).sum(axis=1)

    return fn


def _torch_fn(traces: list[tuple[int, ...]]) -> Callable[[Any], Any]:
    import torch

    torch._dynamo.reset()  # a fresh cache per run
    w = torch.from_numpy(W)

    def counting(graph: Any, example_inputs: list[Any]) -> Any:
        traces.append(tuple(example_inputs[0].shape))  # one call per compiled graph
        return graph.forward

    def body(x: Any) -> Any:
        return torch.tanh(x @ w).sum(dim=1)

    compiled: Callable[[Any], Any] = torch.compile(
        body, backend=counting, dynamic=False
    )
    return compiled


def _run(
    make: Callable[[list[tuple[int, ...]]], Callable[[Any], Any]],
    b: xpkit.Backend,
    pad: bool,
) -> tuple[int, float, Any]:
    traces: list[tuple[int, ...]] = []
    fn = make(traces)
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)
    start = time.perf_counter()
    got = xpkit.map_batches(
        fn, x, backend=b, pad=pad, bytes_per_item=1e6, budget_gb=BATCH * 1e6 / 1e9
    )
    return len(traces), time.perf_counter() - start, got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help="write benchmarks/results/compile.md"
    )
    args = parser.parse_args()
    cases: list[
        tuple[str, str, Callable[[list[tuple[int, ...]]], Callable[[Any], Any]]]
    ] = []
    if importlib.util.find_spec("jax"):
        cases.append(("jax", "jax.jit", _jax_fn))
    if importlib.util.find_spec("torch"):
        cases.append(("torch", "torch.compile (graphs counted)", _torch_fn))
    lines = [
        f"{ROWS:,} rows x {COLS} (float32) in batches of {BATCH:,} (the last {ROWS % BATCH}); "
        "each run on a freshly compiled function.",
        "",
        "| function | pad | compiles | seconds | same result |",
        "|---|---|---:|---:|---|",
    ]
    for key, label, make in cases:
        b = xpkit.Backend(key, device="cpu")
        plain_n, plain_s, plain = _run(make, b, pad=False)
        pad_n, pad_s, padded = _run(make, b, pad=True)
        diff = float(np.max(np.abs(np.asarray(plain) - np.asarray(padded))))
        same = diff <= 1e-4  # float32 sums of 8 tanh values; shapes change the rounding
        lines.append(f"| {label} | no | {plain_n} | {plain_s:.2f} | |")
        lines.append(
            f"| {label} | yes | {pad_n} | {pad_s:.2f} | {'yes' if same else '**no**'} |"
        )
    text = "\n".join(
        [
            f"Measured {time.strftime('%Y-%m-%d')} with `python benchmarks/bench_compile.py` "
            f"(xpkit {xpkit.__version__}, Python {sys.version.split()[0]}).",
            "",
            *lines,
            "",
        ]
    )
    print(text)
    if args.write:
        out = Path("benchmarks/results/compile.md")
        out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
