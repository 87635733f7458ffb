"""Functions the cluster tests run inside worker processes.

They live in their own module, pickled by value (see ``test_cluster.py``), so
a worker needs nothing from the test suite to run them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

W = np.linspace(-1.0, 1.0, 24).reshape(8, 3)


def work(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A row-wise computation with a per-row reduction: equal whatever the batches."""
    return np.tanh(x @ W) * y[:, None]


def log_attempt(log: Path, x: np.ndarray) -> None:
    """Append the rows of this attempt (``first:last+1``) to ``log``."""
    with log.open("a") as f:
        f.write(f"{int(x[0, 0])}:{int(x[-1, 0]) + 1} pid={os.getpid()}\n")


def memory_error_above(rows: int, log: Path):
    """``work``, but a MemoryError inside the task above ``rows`` rows."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        log_attempt(log, x)
        if x.shape[0] > rows:
            msg = f"fake: {x.shape[0]} rows do not fit"
            raise MemoryError(msg)
        return work(x, y)

    return fn


def hog_first_batch(marker: Path, log: Path, above: int):
    """``work``, but the first attempt at the batch holding row 0 (when it has
    more than ``above`` rows) grows its worker past any memory limit, so the
    nanny kills the worker."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        log_attempt(log, x)
        if int(x[0, 0]) == 0 and x.shape[0] > above and not marker.exists():
            marker.write_text("hogging\n")
            blocks = []
            for _ in range(80):  # up to 2 GiB, 25 MiB at a time
                blocks.append(np.ones(25 * 2**20 // 8))
                time.sleep(0.02)
            msg = "the nanny never killed this worker"
            raise RuntimeError(msg)
        return work(x, y)

    return fn


def fails_with(exc: BaseException):
    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        raise exc

    return fn


def exit_first_batch(marker: Path, above: int):
    """``work``, but the first attempt at the batch holding row 0 (above
    ``above`` rows) kills its own process, as the kernel's OOM killer would."""

    def fn(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if int(x[0, 0]) == 0 and x.shape[0] > above and not marker.exists():
            marker.write_text("killed\n")
            os.kill(os.getpid(), 9)
        return work(x, y)

    return fn
