"""The ``xpkit`` command: ``info``, ``check`` and ``demo``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import numpy as np

from ._adapters import ADAPTERS, get_adapter
from ._backend import Backend
from ._batches import map_batches
from ._check import run_checks
from ._dtypes import PrecisionWarning
from ._executors import cluster_info
from ._host_memory import cgroup_available_bytes
from ._memory import (
    BATCH_WORKING_SET_CEILING_GB,
    BYTES_PER_GB,
    device_memory_budget,
    host_available_bytes,
)
from ._select import InventoryEntry, backend_inventory
from ._version import __version__

__all__ = ["main", "main_exit"]


# -- info --------------------------------------------------------------------
def collect_info(scheduler: str | None = None) -> dict[str, Any]:
    """What xpkit finds on this machine, as plain data (what ``--json`` prints).

    ``cluster`` describes the dask cluster at ``scheduler``, else the one of
    the client active in this process, else the one ``DASK_SCHEDULER_ADDRESS``
    names; None when there is none.
    """
    import psutil

    cgroup = cgroup_available_bytes("/")
    info: dict[str, Any] = {
        "xpkit": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": {a.key: a.version() for a in ADAPTERS.values()},
        "host": {
            "total_gb": psutil.virtual_memory().total / BYTES_PER_GB,
            "available_gb": host_available_bytes() / BYTES_PER_GB,
            "cgroup_available_gb": None if cgroup is None else cgroup / BYTES_PER_GB,
        },
        "batch_ceiling_gb": BATCH_WORKING_SET_CEILING_GB,
        "backends": [_backend_info(entry) for entry in backend_inventory()],
        "threadpools": _threadpools(),
        "cluster": _cluster(scheduler),
    }
    return info


def _cluster(address: str | None) -> dict[str, Any] | None:
    distributed = sys.modules.get("distributed")
    if address is None and distributed is not None:
        try:
            client = distributed.get_client()
        except ValueError:  # no client in this process
            client = None
        if client is not None:
            try:
                return cluster_info(client)
            except Exception as exc:  # noqa: BLE001 - report, don't crash
                return {"scheduler": None, "error": f"{type(exc).__name__}: {exc}"}
    address = address or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    if address is None:
        return None
    try:
        import importlib

        client_class: Any = importlib.import_module("distributed").Client
        with client_class(address, timeout=10, set_as_default=False) as client:
            return cluster_info(client)
    except Exception as exc:  # noqa: BLE001 - report, don't crash
        return {"scheduler": address, "error": f"{type(exc).__name__}: {exc}"}


def _backend_info(entry: InventoryEntry) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": entry.name,
        "library": entry.key,
        "device": entry.device,
    }
    if entry.reason:
        return {**row, "available": False, "reason": entry.reason}
    try:
        b = Backend(entry.key, device=entry.device)
        adapter = get_adapter(b.library)
        return {
            **row,
            "available": True,
            "devices": list(adapter.devices()),
            "device_name": adapter.device_name(b.device),
            "is_gpu": b.is_gpu,
            "float64": b.has_float64,
            "budget_gb": device_memory_budget(b),
            # map_batches' per-batch budget (the GPU and CPU ceilings applied)
            "budget_capped_gb": device_memory_budget(b, cap_for_batching=True),
        }
    except Exception as exc:  # noqa: BLE001 - report, don't crash
        return {**row, "available": False, "reason": f"{type(exc).__name__}: {exc}"}


def _threadpools() -> list[dict[str, Any]] | None:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    keys = ("user_api", "internal_api", "num_threads", "version", "prefix")
    return [{k: pool.get(k) for k in keys} for pool in threadpool_info()]


def print_info(info: dict[str, Any], out: TextIO) -> None:
    """The human-readable form of `collect_info`."""
    w = out.write
    w(f"xpkit {info['xpkit']} on Python {info['python']} ({info['platform']})\n\n")
    w("Array libraries\n")
    for key, version in info["libraries"].items():
        w(f"  {key:<18} {version or 'not installed'}\n")
    host = info["host"]
    cg = host["cgroup_available_gb"]
    w(
        f"\nHost memory: {host['total_gb']:.1f} GB total, {host['available_gb']:.1f} GB "
        f"available{'' if cg is None else f' (cgroup limit leaves {cg:.1f} GB)'}\n"
    )
    w(
        f"Batch working-set ceiling: {info['batch_ceiling_gb']:.1f} GB on GPUs; "
        "map_batches' per-batch budget on each device in the 'batches' column "
        "(device_memory_budget(b, cap_for_batching=True))\n\n"
    )
    w(
        f"{'backend':<20} {'device':<10} {'budget GB':>10} {'batches':>8}"
        "  float64  name\n"
    )
    for b in info["backends"]:
        if not b["available"]:
            w(f"{b['name']:<20} {'-':<10} {'':>10} {'':>8}  {'':7}  ({b['reason']})\n")
            continue
        w(
            f"{b['name']:<20} {b['device']:<10} {b['budget_gb']:>10.2f} "
            f"{b['budget_capped_gb']:>8.3f}  "
            f"{'yes' if b['float64'] else 'no':<7}  "
            f"{b['device_name']}\n"
        )
    pools = info["threadpools"]
    w("\nThread pools (threadpoolctl)\n")
    if pools is None:
        w("  threadpoolctl is not installed\n")
    for pool in pools or []:
        w(
            f"  {pool['user_api']:<8} {pool['internal_api']:<10} "
            f"{pool['num_threads']} threads  {pool['version'] or ''}\n"
        )
    cluster = info["cluster"]
    if cluster is None:
        return
    w(f"\nDask cluster at {cluster['scheduler']}\n")
    if "error" in cluster:
        w(f"  not reachable: {cluster['error']}\n")
        return
    w(f"  {'worker':<28} {'threads':>7} {'memory limit GB':>16} {'used GB':>8}\n")
    for worker in cluster["workers"]:
        limit, used = worker["memory_limit_bytes"], worker["memory_used_bytes"]
        w(
            f"  {worker['address']:<28} {worker['nthreads']:>7} "
            f"{'none' if limit is None else f'{limit / BYTES_PER_GB:.2f}':>16} "
            f"{'?' if used is None else f'{used / BYTES_PER_GB:.2f}':>8}\n"
        )


def _each_backend(
    only: list[str] | None = None,
) -> Iterator[tuple[InventoryEntry, Backend | None, str]]:
    """Every inventory entry (or those ``only`` names) with its Backend, or None and why.

    A library that is missing gives its reason; one whose Backend fails to
    start gives the error, and the others still run.
    """
    for entry in backend_inventory():
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


# -- check -------------------------------------------------------------------
def run_check_command(
    out: TextIO, only: list[str] | None = None, as_json: bool = False
) -> int:
    """Every check on every available backend (or ``only`` those); 1 if anything fails."""
    rows: list[dict[str, Any]] = []
    for entry, backend, problem in _each_backend(only):
        if backend is None:  # a broken backend fails; a missing one is skipped
            rows.append(
                {
                    "backend": entry.name,
                    "check": None,
                    "ok": None if entry.reason else False,
                    "detail": problem,
                }
            )
            continue
        with warnings.catch_warnings():  # narrowing on float32-only devices is expected
            warnings.simplefilter("ignore", PrecisionWarning)
            results = run_checks(backend)
        rows += [
            {"backend": r.backend, "check": r.check, "ok": r.ok, "detail": r.detail}
            for r in results
        ]
    failures = sum(row["ok"] is False for row in rows)
    if as_json:
        out.write(json.dumps({"checks": rows, "failures": failures}, indent=2) + "\n")
        return 1 if failures else 0
    out.write(f"{'backend':<20} {'check':<18} result\n")
    for row in rows:
        if row["check"] is None:
            verdict = "skipped:" if row["ok"] is None else "FAIL "
            out.write(f"{row['backend']:<20} {'-':<18} {verdict} {row['detail']}\n")
            continue
        status = "ok" if row["ok"] else f"FAIL  {row['detail']}"
        out.write(f"{row['backend']:<20} {row['check']:<18} {status}\n")
    out.write(
        f"\n{'all checks passed' if not failures else f'{failures} check(s) failed'}\n"
    )
    return 1 if failures else 0


# -- demo --------------------------------------------------------------------
def max_correlation_null(
    backend: Backend,
    X: Any,
    y: Any,
    perms: Any,
    *,
    budget_gb: float | None,
    progress: bool,
) -> tuple[np.ndarray[Any, Any], int]:
    """Max-statistic permutation null of |corr(X[:, j], y)|, namespace-agnostic.

    Each permutation (a row of ``perms``) is one item of `map_batches`;
    returns the null distribution and the number of batches run.
    """
    fn, per_perm = permutation_null_fn(backend, X, y)
    calls = [0]

    def batch(idx: Any) -> Any:
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
    backend: Backend, X: Any, y: Any
) -> tuple[Callable[[Any], Any], int]:
    """The demo's batch function and its bytes per permutation.

    The function maps rows of permutation indices to the max |r| of each
    permutation; `map_batches` maps it over all of them.
    """
    xp = backend.xp
    Xd, yd = backend.check_arrays(X, y)
    n = Xd.shape[0]
    Xs = (Xd - xp.mean(Xd, axis=0)) / xp.std(Xd, axis=0)
    ys = (yd - xp.mean(yd)) / xp.std(yd)

    def batch(idx: Any) -> Any:
        idx = backend.asarray(idx)
        yp = xp.reshape(xp.take(ys, xp.reshape(idx, (-1,))), (idx.shape[0], n))
        corr = backend.matmul(yp, Xs) / n
        return xp.max(xp.abs(corr), axis=1)

    return batch, (2 * n + 2 * Xd.shape[1]) * 8


def demo_data(
    n_perm: int, n_samples: int, n_features: int
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The demo's seeded data: X, y (correlated with X's first column), perms."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_samples, n_features))
    y = X[:, 0] * 0.3 + rng.standard_normal(n_samples)
    perms = np.argsort(rng.random((n_perm, n_samples)), axis=1)
    return X, y, perms


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
    """The permutation test on every available backend (or ``only`` those), against NumPy."""
    X, y, perms = demo_data(n_perm, n_samples, n_features)
    try:
        import tqdm  # noqa: F401

        progress = sys.stderr.isatty() and not as_json
    except ImportError:
        progress = False
    rows: list[dict[str, Any]] = []
    reference: np.ndarray[Any, Any] | None = None
    for entry, backend, problem in _each_backend(only):
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
    if as_json:
        summary = {"permutations": n_perm, "samples": n_samples, "features": n_features}
        result = {**summary, "backends": rows, "observed_max_r": observed}
        out.write(json.dumps({**result, "p": p}, indent=2) + "\n")
        return 0
    out.write(
        f"Max-statistic permutation test: {n_perm} permutations, {n_samples} samples x "
        f"{n_features} features, through map_batches\n\n"
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
    if p is not None:
        # p is at least 1 / (1 + n_perm): printed with 3 significant digits, never 0.
        out.write(f"\nobserved max |r| = {observed:.3f}, permutation p = {p:.3g}\n")
    return 0


# -- entry point ---------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xpkit",
        description="What xpkit finds on this machine, and proof that it works.",
    )
    parser.add_argument("--version", action="version", version=f"xpkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser(
        "info", help="libraries, devices, memory budgets, thread pools"
    )
    info.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        default=None,
        help="also describe the dask cluster at ADDRESS (default: the active "
        "client, else DASK_SCHEDULER_ADDRESS)",
    )
    info.set_defaults(func=_info_command)
    check = sub.add_parser(
        "check", help="every facade method on every backend against NumPy"
    )
    check.set_defaults(func=_check_command)
    demo = sub.add_parser("demo", help="a permutation test on every backend")
    demo.add_argument(
        "--permutations",
        type=_positive_int,
        default=5000,
        help="permutations to run (default: 5000)",
    )
    demo.add_argument(
        "--samples", type=_positive_int, default=400, help="samples (default: 400)"
    )
    demo.add_argument(
        "--features", type=_positive_int, default=500, help="features (default: 500)"
    )
    demo.add_argument(
        "--budget-gb",
        type=_positive_float,
        default=None,
        help="memory budget for the batches (default: measured on each device)",
    )
    demo.set_defaults(func=_demo_command)
    for command in (info, check, demo):
        command.add_argument(
            "--json", action="store_true", help="machine-readable output (JSON)"
        )
    for command in (check, demo):
        command.add_argument(
            "--backends",
            type=_names,
            default=None,
            metavar="NAMES",
            help="comma-separated library keys or backend names to run on "
            "(default: every backend here)",
        )
    return parser


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {e.key for e in backend_inventory()} | {e.name for e in backend_inventory()}
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        msg = f"names no backend known here: {unknown or text!r}; known: " + ", ".join(
            sorted(known)
        )
        raise argparse.ArgumentTypeError(msg)
    return names


def _info_command(args: argparse.Namespace, out: TextIO) -> int:
    info = collect_info(args.scheduler)
    if args.json:
        out.write(json.dumps(info, indent=2) + "\n")
    else:
        print_info(info, out)
    return 0


def _check_command(args: argparse.Namespace, out: TextIO) -> int:
    return run_check_command(out, args.backends, args.json)


def _demo_command(args: argparse.Namespace, out: TextIO) -> int:
    return run_demo(
        out,
        n_perm=args.permutations,
        n_samples=args.samples,
        n_features=args.features,
        budget_gb=args.budget_gb,
        only=args.backends,
        as_json=args.json,
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        msg = f"must be a finite positive number, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"must be a positive integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Run the ``xpkit`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace, TextIO], int] = args.func
    return func(args, sys.stdout if out is None else out)


def main_exit() -> None:
    """Console-script entry point."""
    raise SystemExit(main())
