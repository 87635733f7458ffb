"""A real onnxruntime OOM recovered by compute_oom_safe, run several times.

Run: ``python benchmarks/ndonnx_oom.py [--runs 5]`` (Linux: RLIMIT_AS and
/proc). Each run is a fresh process limited to 512 MiB more address space
than it started with; ``fn`` needs 512 MiB of scratch for all 512 rows at
once. The table says, per run, whether the unsplit call ran out of memory,
whether ``compute_oom_safe`` then returned the exact result, or how the
process ended: onnxruntime can crash (SIGSEGV) when an allocation fails
while it initialises a session, which no caller can recover from.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import resource
    import numpy as np
    import ndonnx as ndx
    import xpkit

    def vm_size() -> int:
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
        raise SystemExit("no VmSize")

    limit = vm_size() + 512 * 1024**2          # 512 MiB more address space
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cols = 1024**2 // 8                         # 1 MiB of scratch per row

    def fn(w):
        wide = ndx.broadcast_to(w[:, None], (w.shape[0], cols))
        return ndx.sum(wide + 1.0, axis=1)

    b = xpkit.Backend("ndonnx")
    w = b.asarray(np.arange(512.0))             # 512 MiB of scratch at once
    try:
        b.to_numpy(fn(w))
    except Exception as exc:
        assert xpkit.is_oom_error(exc), repr(exc)
        print("unsplit call: OOM", type(exc).__name__)
    else:
        raise SystemExit("the unsplit call fitted: the limit did not bite")
    got = b.to_numpy(xpkit.compute_oom_safe(fn, w))
    assert np.array_equal(got, (np.arange(512.0) + 1.0) * cols), "wrong result"
    print("recovered", got.shape[0], "rows exactly")
    """
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=5, help="processes to run (default 5)"
    )
    args = parser.parse_args()
    print("| run | unsplit call | recovered | exit |")
    print("|---:|---|---|---:|")
    for run in range(1, args.runs + 1):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        oom = "OOM" if "unsplit call: OOM" in done.stdout else "-"
        exact = "exact" if "rows exactly" in done.stdout else "-"
        print(f"| {run} | {oom} | {exact} | {done.returncode} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
