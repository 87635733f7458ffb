"""Running Python in a fresh interpreter, for what one process cannot check.

A fresh process sees ``import xpkit`` from scratch (which modules load, what
JAX's first configuration is), and runs the command line as a user does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any


def _run(
    argv: list[str],
    *,
    timeout: float,
    check: bool,
    extra_env: Mapping[str, str] | None,
) -> subprocess.CompletedProcess[str]:
    env = None if extra_env is None else {**os.environ, **extra_env}
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        env=env,
    )


def run_python(
    code: str,
    *args: str,
    timeout: float = 120,
    check: bool = False,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -c code *args`` in this interpreter; stdout and stderr as text.

    ``check=True`` raises ``CalledProcessError`` on a non-zero exit;
    ``extra_env`` is added to this process's environment for the child.
    """
    return _run(["-c", code, *args], timeout=timeout, check=check, extra_env=extra_env)


def run_xpkit(
    *argv: str,
    timeout: float = 120,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python -m xpkit *argv`` in this interpreter, as :func:`run_python`."""
    return _run(["-m", "xpkit", *argv], timeout=timeout, check=check, extra_env=None)


def load_script(path: Path, name: str) -> ModuleType:
    """The script at ``path`` (an example) imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The benchmarks' folder, whose ``_true_peak.py`` holds the independent meters.
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def counting_malloc_env(directory: Path) -> dict[str, str]:
    """The environment of a child whose malloc is counted (`_true_peak.CounterMeter`).

    The counter is compiled into ``directory``; the test is skipped where it
    cannot be preloaded (not glibc's ``LD_PRELOAD``) or compiled (no C compiler).
    """
    import pytest

    if sys.platform != "linux":
        pytest.skip("the counting malloc is preloaded with glibc's LD_PRELOAD")
    true_peak = load_script(BENCHMARKS / "_true_peak.py", "_true_peak_counter")
    counter = true_peak.build_counter(str(directory))
    if counter is None:
        pytest.skip("no C compiler for the counting malloc")
    env: dict[str, str] = true_peak.preload_env("counter", {}, counter, None)
    return env


_TORCH_PEAKS_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
import _true_peak
exec(sys.argv[2])
meter = _true_peak.CounterMeter()
peaks = {}
for name, (make, op) in OPS.items():
    args = make()
    op(*args)  # (warm: torch's first call of an operation allocates its own)
    peaks[name] = min(meter.measure(lambda: op(*args))[1] for _ in range(2))
print(json.dumps(peaks))
"""


def torch_peaks(source: str, directory: Path) -> dict[str, int]:
    """The peak of each of ``source``'s ``OPS`` (name -> (make, op)), the least of two.

    torch on the CPU in one thread, by a counting malloc in a child (less
    the operands ``make`` returns, made before).
    """
    env = counting_malloc_env(directory)
    env["OMP_NUM_THREADS"] = "1"
    done = run_python(
        _TORCH_PEAKS_CHILD, str(BENCHMARKS), source, extra_env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    peaks: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return peaks


def ops_of(source: str) -> dict[str, object]:
    """The ``OPS`` table ``source`` defines, as the child runs it."""
    namespace: dict[str, object] = {}
    exec(source, namespace)  # noqa: S102 - the same table the child runs
    ops: dict[str, object] = namespace["OPS"]  # type: ignore[assignment]
    return ops


_JAX_PEAKS_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_enable_async_dispatch", sys.argv[6] == "ahead")
import jax.numpy as jnp
import _true_peak
exec(sys.argv[2])
rows, cols, dtype, runs = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[7])
x = jnp.asarray(np.random.default_rng(0).standard_normal((rows, cols)), dtype)
meter = _true_peak.CounterMeter()
peaks = {}
for name, fn in FNS.items():
    fn(x).block_until_ready()  # (warm: each operation compiles once)
    peaks[name] = max(meter.measure(lambda: fn(x).block_until_ready())[1] for _ in range(runs))
print(json.dumps(peaks))
"""


def jax_peaks(
    source: str,
    shape: tuple[int, int],
    dtype: str,
    dispatch: str,
    runs: int,
    directory: Path,
) -> dict[str, int]:
    """The most each of ``source``'s ``FNS`` held over ``runs`` on a ``shape`` input.

    JAX on the CPU with 64-bit types, by a counting malloc in a child (less
    the input, made before); ``dispatch``: ``"ahead"`` (JAX's default on
    the CPU) or ``"in turn"`` (asynchronous dispatch off).
    """
    env = counting_malloc_env(directory)
    args = (str(BENCHMARKS), source, *map(str, shape), dtype, dispatch, str(runs))
    done = run_python(_JAX_PEAKS_CHILD, *args, extra_env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    peaks: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return peaks


def written_marks(monkeypatch: Any) -> list[bool]:
    """For each piece of rows `map_batches` puts into its outputs from now on
    (``monkeypatch`` undoes it): whether it was only the mark that a worker
    wrote those rows into ``out`` itself (`xpkit._rows.Marker.WRITTEN`)."""
    from xpkit._outputs import Outputs
    from xpkit._rows import Marker

    came: list[bool] = []
    put = Outputs.put

    def recorded(self: Any, start: int, stop: int, rows: Any) -> None:
        came.append(rows.spec[0] is Marker.WRITTEN)
        put(self, start, stop, rows)

    monkeypatch.setattr(Outputs, "put", recorded)
    return came
