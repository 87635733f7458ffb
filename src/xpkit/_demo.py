"""The `xpkit demo` command: a max-statistic permutation test on every backend.

Also where the commands that run on every backend find them (`each_backend`).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

import numpy as np

from ._backend import Backend
from ._batches import map_batches
from ._dtypes import PrecisionWarning
from ._host_memory import host_available_bytes
from ._select import InventoryEntry, backend_inventory

if TYPE_CHECKING:
    from ._typing import Array, HostArray, JSONObject

__all__ = [
    "MIN_SAMPLES",
    "demo_data",
    "each_backend",
    "max_correlation_null",
    "nothing_ran_message",
    "permutation_null_fn",
    "run_demo",
]


def each_backend(
    only: list[str] | None = None,
) -> Iterator[tuple[InventoryEntry, Backend | None, str]]:
    """Every inventory entry (or those ``only`` names) with its Backend, or None and why.

    A library that is missing gives its reason; one whose Backend fails to
    start gives the error, and the others still run.
    """
    keys = None if only is None else {name.split("-", 1)[0] for name in only}
    for entry in backend_inventory(keys):  # (only the libraries named imported)
        if only is not None and entry.key not in only and entry.name not in only:
            continue
        if entry.reason:
            yield entry, None, entry.reason
            continue
        try:
            backend = Backend(entry.key, device=entry.device)
        except Exception as exc:  # noqa: BLE001 - one broken backend must not stop the rest
            yield entry, None, f"{type(exc).__name__}: {exc}"
            continue
        yield entry, backend, ""


def nothing_ran_message(
    command: str, skipped: list[tuple[str, str]], only: list[str] | None
) -> str:
    """Why ``command`` ran on no backend, naming each backend asked for and its reason.

    ``skipped`` holds (backend, why) for every backend left out.
    """
    asked = f"the backends asked for ({', '.join(only)})" if only else "the backends"
    why = "; ".join(f"{name}: {reason}" for name, reason in skipped)
    return f"nothing to {command}: none of {asked} can run here" + (
        f" ({why})" if why else ""
    )


def max_correlation_null(
    backend: Backend,
    X: Array,
    y: Array,
    perms: Array,
    *,
    budget_gb: float | None,
    progress: bool,
) -> tuple[HostArray, int]:
    """Max-statistic permutation null of |corr(X[:, j], y)|, namespace-agnostic.

    Each permutation (a row of ``perms``) is one item of `map_batches`;
    returns the null distribution and the number of batches run.
    """
    fn, per_perm = permutation_null_fn(backend, X, y)
    calls = [0]

    def batch(idx: Array) -> Array:
        calls[0] += 1
        return fn(idx)

    null = map_batches(
        batch,
        perms,
        backend=backend,
        bytes_per_item=per_perm,
        overhead=2.0,
        budget_gb=budget_gb,
        progress=progress,
    )
    return null, calls[0]


def permutation_null_fn(
    backend: Backend, X: Array, y: Array
) -> tuple[Callable[[Array], Array], int]:
    """The demo's batch function and its bytes per permutation.

    The function maps rows of permutation indices to the max |r| of each
    permutation; `map_batches` maps it over all of them.
    """
    xp = backend.xp
    Xd, yd = backend.check_arrays(X, y)
    n = Xd.shape[0]
    Xs = (Xd - xp.mean(Xd, axis=0)) / xp.std(Xd, axis=0)
    ys = (yd - xp.mean(yd)) / xp.std(yd)

    def batch(idx: Array) -> Array:
        idx = backend.asarray(idx)
        yp = xp.reshape(xp.take(ys, xp.reshape(idx, (-1,))), (idx.shape[0], n))
        corr = backend.matmul(yp, Xs) / n
        return xp.max(xp.abs(corr), axis=1)

    return batch, (2 * n + 2 * Xd.shape[1]) * 8


#: The fewest samples the demo's correlations can be computed from.
MIN_SAMPLES = 2


def demo_data(
    n_perm: int, n_samples: int, n_features: int
) -> tuple[HostArray, HostArray, HostArray]:
    """The demo's seeded data: X, y (correlated with X's first column), perms."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_samples, n_features))
    y = X[:, 0] * 0.3 + rng.standard_normal(n_samples)
    perms = np.argsort(rng.random((n_perm, n_samples)), axis=1)
    return X, y, perms


def demo_data_bytes(n_perm: int, n_samples: int, n_features: int) -> int:
    """The most host memory `demo_data` holds at once (float64 and int64 items).

    X and y; the permutations as they are made: the random keys, their
    argsort's indices and its scratch, each ``n_perm`` x ``n_samples``.
    """
    return 8 * (n_samples * n_features + 2 * n_samples + 3 * n_perm * n_samples)


def run_demo(
    out: TextIO,
    *,
    n_perm: int,
    n_samples: int,
    n_features: int,
    budget_gb: float | None,
    only: list[str] | None = None,
    as_json: bool = False,
) -> int:
    """The permutation test on every available backend (or ``only`` those), against NumPy.

    Raises ValueError where ``n_samples`` is under `MIN_SAMPLES` (a
    standardised sample of one is 0 / 0), or where the data would not fit in
    the host memory available now (`demo_data_bytes`).
    """
    if n_samples < MIN_SAMPLES:
        msg = f"n_samples must be at least {MIN_SAMPLES}, got {n_samples!r}"
        raise ValueError(msg)
    need = demo_data_bytes(n_perm, n_samples, n_features)
    available = host_available_bytes()
    if need > available:
        msg = (
            f"the demo's data (--permutations {n_perm} --samples {n_samples} "
            f"--features {n_features}) needs {need / 2**30:.3g} GiB of host memory, "
            f"more than the {available / 2**30:.3g} GiB available: ask for fewer"
        )
        raise ValueError(msg)
    X, y, perms = demo_data(n_perm, n_samples, n_features)
    # A progress bar where tqdm is installed and a person watches stderr.
    has_tqdm = importlib.util.find_spec("tqdm") is not None
    progress = has_tqdm and sys.stderr.isatty() and not as_json
    rows: list[JSONObject] = []
    reference: HostArray | None = None
    for entry, backend, problem in each_backend(only):
        if backend is None:
            rows.append({"backend": entry.name, "skipped": problem})
            continue
        start = time.perf_counter()
        with warnings.catch_warnings():  # the dtype column says it instead
            warnings.simplefilter("ignore", PrecisionWarning)
            null, n_batches = max_correlation_null(
                backend, X, y, perms, budget_gb=budget_gb, progress=progress
            )
        elapsed = time.perf_counter() - start
        if reference is None:  # NumPy, first in the inventory, unless left out
            reference = (
                null
                if backend.library == "numpy"
                else max_correlation_null(
                    Backend("numpy"), X, y, perms, budget_gb=budget_gb, progress=False
                )[0]
            )
        rows.append(
            {
                "backend": backend.name,
                "dtype": null.dtype.name,
                "seconds": elapsed,
                "batches": n_batches,
                "max_deviation_from_numpy": float(np.max(np.abs(null - reference))),
            }
        )
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    ys = (y - y.mean()) / y.std()
    observed = float(np.max(np.abs(ys @ Xs) / n_samples))
    p = (
        None
        if reference is None
        else (1 + np.sum(reference >= observed)) / (1 + n_perm)
    )
    nothing_ran = (
        None
        if reference is not None
        else nothing_ran_message(
            "demo", [(r["backend"], r["skipped"]) for r in rows], only
        )
    )
    status = 1 if nothing_ran else 0
    if as_json:
        summary = {"permutations": n_perm, "samples": n_samples, "features": n_features}
        result = {**summary, "backends": rows, "observed_max_r": observed}
        if nothing_ran:
            result["error"] = nothing_ran
        out.write(json.dumps({**result, "p": p}, indent=2) + "\n")
        return status
    out.write(
        f"Max-statistic permutation test: {n_perm} permutations, {n_samples} samples x "
        f"{n_features} features, through map_batches\n"
        "(seeded data with a planted signal: y depends on the first feature, so "
        "the test should find it)\n\n"
    )
    out.write(
        f"{'backend':<20} {'dtype':<8} {'seconds':>8} {'batches':>8} {'max |null - numpy|':>20}\n"
    )
    for row in rows:
        if "skipped" in row:
            out.write(f"{row['backend']:<20} skipped: {row['skipped']}\n")
            continue
        out.write(
            f"{row['backend']:<20} {row['dtype']:<8} {row['seconds']:8.3f} "
            f"{row['batches']:8d} {row['max_deviation_from_numpy']:20.2e}\n"
        )
    ran_numpy_alone = any("skipped" not in r for r in rows) and all(
        "skipped" in r or r["backend"] == "numpy" for r in rows
    )
    if ran_numpy_alone:  # (where nothing ran, the run's end says so)
        out.write(
            "\n(max |null - numpy|: each backend's null distribution against "
            "NumPy's; NumPy alone ran, so it is 0 by construction)\n"
        )
    if p is not None:
        # p is at least 1 / (1 + n_perm): printed with 3 significant digits, never 0.
        floor = " (the smallest p it can give: 1 / (1 + permutations))"
        least = p <= 1 / (1 + n_perm)
        out.write(
            f"\nobserved max |r| = {observed:.3f}, permutation p = {p:.3g}"
            f"{floor if least else ''}\n"
        )
    if nothing_ran:
        out.write(f"\n{nothing_ran}\n")
    return status
