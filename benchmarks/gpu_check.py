"""Every CUDA path of xpkit on one real GPU, in one table, in under 5 minutes.

Run on a machine with an NVIDIA GPU and torch (CuPy, JAX and nvidia-ml-py
where installed)::

    python benchmarks/gpu_check.py [--rows 2000000]

Each row is a check with what it measured and ok/FAIL; the exit status is
non-zero when a check fails. Without a CUDA GPU it says so and exits 0.

1. budgets: ``device_memory_budget`` within free memory, and within the
   per-process fraction once one is set;
2. a real CUDA OOM (rows that need 4x the free memory) recovered by
   ``compute_oom_safe`` and ``map_batches``, with the exact result;
3. cache release: reserved bytes before and after ``empty_device_cache``;
4. moves torch CUDA <-> CuPy <-> JAX GPU by DLPack, values and device kept;
5. ``xpkit info --backends all`` creates no CUDA context where nvidia-ml-py is installed
   (a fresh process stays uninitialised: NVML reads memory without one);
6. ``map_batches`` throughput against a hand-written torch loop over the
   same work at the best of three fixed batch sizes (target: 95%).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import xpkit

ROWS: list[tuple[str, str, bool]] = []


def check(name: str, measured: str, ok: bool) -> None:
    ROWS.append((name, measured, ok))
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {measured}", flush=True)


def timed(fn: Callable[[], Any], sync: Callable[[], None]) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def budgets(torch: Any, b: xpkit.Backend) -> None:
    free, total = torch.cuda.mem_get_info()
    budget = xpkit.device_memory_budget(b) * 1024**3
    check(
        "budget within free memory",
        f"{budget / 2**30:.1f} of {free / 2**30:.1f} GiB free",
        0 < budget <= free,
    )
    torch.cuda.set_per_process_memory_fraction(0.25)
    try:
        capped = xpkit.device_memory_budget(b) * 1024**3
        held = torch.cuda.memory_reserved()
        check(
            "budget within a 0.25 per-process fraction",
            f"{capped / 2**30:.1f} GiB (cap {0.25 * total / 2**30:.1f} GiB, {held / 2**30:.2f} held)",
            0 < capped <= 0.25 * total - held + 2**20,
        )
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def oom_recovery(torch: Any, b: xpkit.Backend) -> None:
    free, _ = torch.cuda.mem_get_info()
    rows = 64
    cols = int(free / 16 / 4)  # float32: 64 rows need ~4x the free memory
    w = torch.arange(1, rows + 1, device=b.native_device, dtype=torch.float32)

    def fn(v: Any) -> Any:
        scratch = torch.ones((v.shape[0], cols), device=v.device) * v[:, None]
        return scratch.sum(dim=1)

    expected = np.arange(1, rows + 1, dtype=np.float64) * cols
    for name, run in (
        ("compute_oom_safe", lambda: xpkit.compute_oom_safe(fn, w)),
        ("map_batches", lambda: xpkit.map_batches(fn, w, backend=b, bytes_per_item=1)),
    ):
        try:
            got = b.to_numpy(run()).astype(np.float64)
            exact = bool(np.allclose(got, expected, rtol=1e-6))
            check(
                f"real CUDA OOM recovered by {name}",
                f"{rows} rows x {cols:,} cols, exact={exact}",
                exact,
            )
        except Exception as exc:  # noqa: BLE001 - reported as a failed check
            check(
                f"real CUDA OOM recovered by {name}",
                f"{type(exc).__name__}: {exc}"[:120],
                False,
            )
        torch.cuda.empty_cache()


def cache_release(torch: Any) -> None:
    block = torch.empty(2**28, dtype=torch.float32, device="cuda")  # 1 GiB
    del block
    before = torch.cuda.memory_reserved()
    xpkit.empty_device_cache()
    after = torch.cuda.memory_reserved()
    check(
        "cache released",
        f"reserved {before / 2**20:.0f} -> {after / 2**20:.0f} MiB",
        after < before,
    )


def moves() -> None:
    gpus = [
        xpkit.Backend(k, device=d)
        for k, d in (("torch", "cuda"), ("cupy", "cuda"), ("jax", "gpu"))
        if _usable(k, d)
    ]
    a = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    for src in gpus:
        for dst in gpus:
            if src.library == dst.library:
                continue
            start = time.perf_counter()
            moved = dst.move(src.asarray(a))
            ms = (time.perf_counter() - start) * 1e3
            same = bool(np.array_equal(dst.to_numpy(moved), a))
            check(
                f"move {src.name} -> {dst.name}",
                f"{ms:.2f} ms, values kept={same}",
                same,
            )
    if len(gpus) < 2:
        check(
            "moves between GPU libraries",
            f"only {[g.name for g in gpus]} installed",
            True,
        )


def _usable(key: str, device: str) -> bool:
    try:
        xpkit.Backend(key, device=device)
    except (ImportError, ValueError, RuntimeError):
        return False
    return True


def info_creates_no_context() -> None:
    import importlib.util

    if importlib.util.find_spec("pynvml") is None:
        check(
            "xpkit info creates no CUDA context",
            "not checked: without nvidia-ml-py (xpkit[nvml]) info asks the device "
            "in use, by design",
            True,
        )
        return
    code = (
        "import contextlib, io\n"
        "from xpkit._cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    main(['info', '--backends', 'all'])\n"
        "import torch\n"
        "print('initialised', torch.cuda.is_initialized())\n"
        "print(out.getvalue())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    fresh = "initialised False" in done.stdout
    check(
        "xpkit info creates no CUDA context",
        done.stdout.splitlines()[0] if done.stdout else done.stderr[-120:],
        fresh,
    )


def throughput(torch: Any, b: xpkit.Backend, rows: int) -> None:
    x = torch.randn(rows, 256, device=b.native_device)
    w = torch.randn(256, 256, device=b.native_device)

    def fn(v: Any, weights: Any) -> Any:
        return torch.tanh(v @ weights).sum(dim=1)

    def by_hand(size: int) -> Any:
        out = torch.empty(rows, device=b.native_device)
        for i in range(0, rows, size):
            out[i : i + size] = fn(x[i : i + size], w)
        return out

    sync = torch.cuda.synchronize
    by_hand(65_536)  # warm up kernels
    xpkit.map_batches(fn, x, backend=b, whole=(w,), result_on="device")
    hand = min(timed(lambda s=s: by_hand(s), sync) for s in (16_384, 65_536, 262_144))
    ours = min(
        timed(
            lambda: xpkit.map_batches(fn, x, backend=b, whole=(w,), result_on="device"),
            sync,
        )
        for _ in range(3)
    )
    ratio = hand / ours
    check(
        "map_batches throughput vs a torch loop",
        f"{ratio:.0%} ({ours:.3f} s vs {hand:.3f} s, {rows:,} rows)",
        ratio >= 0.95,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=int,
        default=2_000_000,
        help="rows of the throughput work (default 2,000,000)",
    )
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("no torch: pip install 'xpkit[torch]' (a CUDA build)")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to check")
        return 0
    started = time.perf_counter()
    info_creates_no_context()  # first, before this process touches CUDA
    b = xpkit.Backend("torch", device="cuda")
    budgets(torch, b)
    oom_recovery(torch, b)
    cache_release(torch)
    moves()
    throughput(torch, b, args.rows)
    print()
    print(
        f"| check | measured | result |  ({torch.cuda.get_device_name()}, {time.perf_counter() - started:.0f} s)"
    )
    print("|---|---|---|")
    for name, measured, ok in ROWS:
        print(f"| {name} | {measured} | {'ok' if ok else '**FAIL**'} |")
    return 0 if all(ok for _, _, ok in ROWS) else 1


if __name__ == "__main__":
    sys.exit(main())
