"""The ``xpkit`` command: ``info``, ``check``, ``demo`` and ``capabilities``."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import json
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ._adapters._registry import ADAPTERS
from ._args import check_gb
from ._backend import Backend
from ._check import run_checks
from ._demo import MIN_SAMPLES, each_backend, nothing_ran_message, run_demo
from ._dtypes import PrecisionWarning
from ._info import collect_info, print_info, scheduler_problem
from ._memory import configured_budget_gb
from ._select import backend_inventory
from ._shown import said
from ._version import __version__
from .testing import capabilities_table, statements_of

if TYPE_CHECKING:
    from ._typing import JSONObject

# collect_info and print_info live in _info; imported here, where tests find them.
__all__ = ["collect_info", "main", "main_exit", "print_info"]


# -- check -------------------------------------------------------------------
def run_check_command(
    out: TextIO, only: list[str] | None = None, as_json: bool = False
) -> int:
    """Every check on every available backend (or ``only`` those).

    Returns 1 if a check failed, or if no backend could run (the last line
    says why: each backend asked for is missing or broken here); else 0.
    """
    rows: list[JSONObject] = []
    ran: list[str] = []
    for entry, backend, problem in each_backend(only):
        if backend is None:  # a broken backend fails; a missing one is skipped
            rows.append(
                {
                    "backend": entry.name,
                    "check": None,
                    "ok": None if entry.reason and not entry.broken else False,
                    "detail": problem,
                }
            )
            continue
        with warnings.catch_warnings():  # narrowing on float32-only devices is expected
            warnings.simplefilter("ignore", PrecisionWarning)
            results = run_checks(backend)
        ran.append(backend.name)
        rows += [
            {"backend": r.backend, "check": r.check, "ok": r.ok, "detail": r.detail}
            for r in results
        ]
    failures = sum(row["ok"] is False for row in rows)
    nothing_ran = None if ran else _nothing_ran("check", rows, only)
    status = 1 if failures or nothing_ran else 0
    if as_json:
        result = {"checks": rows, "failures": failures, "backends_run": ran}
        if nothing_ran:
            result["error"] = nothing_ran
        out.write(json.dumps(result, indent=2) + "\n")
        return status
    out.write(f"{'backend':<20} {'check':<18} result\n")
    for row in rows:
        if row["check"] is None:
            verdict = "skipped:" if row["ok"] is None else "FAIL "
            out.write(f"{row['backend']:<20} {'-':<18} {verdict} {row['detail']}\n")
            continue
        if row["ok"] is None:
            verdict = f"skipped: {row['detail']}"
        elif row["ok"]:
            verdict = f"ok: {row['detail']}" if row["detail"] else "ok"
        else:
            verdict = f"FAIL  {row['detail']}"
        out.write(f"{row['backend']:<20} {row['check']:<18} {verdict}\n")
    if nothing_ran:
        out.write(f"\n{nothing_ran}\n")
    elif failures:
        out.write(f"\n{failures} check(s) failed\n")
    else:
        out.write(f"\nall checks passed on {', '.join(ran)}\n")
    return status


def _nothing_ran(command: str, rows: list[JSONObject], only: list[str] | None) -> str:
    """The last line of a ``check`` that ran on no backend: what was asked, and why."""
    skipped = [(r["backend"], r["detail"]) for r in rows if r["check"] is None]
    return nothing_ran_message(command, skipped, only)


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
        type=_address,
        metavar="ADDRESS",
        default=None,
        help="also describe the dask cluster at ADDRESS (default: the active "
        "client, else DASK_SCHEDULER_ADDRESS)",
    )
    info.add_argument(
        "--backends",
        type=_names,
        action="extend",
        default=None,
        metavar="NAMES",
        help="comma-separated library keys or backend names to describe, "
        "'auto' (the backend Backend('auto') picks) or 'all'; repeated, each adds to the others (default: numpy and the "
        "libraries this process has imported; each library named is imported)",
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
        "--samples",
        type=_samples,
        default=400,
        help="samples, at least 2 (default: 400)",
    )
    demo.add_argument(
        "--features", type=_positive_int, default=500, help="features (default: 500)"
    )
    demo.add_argument(
        "--budget-gb",
        type=_budget_gb,
        default=None,
        help="memory budget for the batches (default: measured on each device)",
    )
    demo.set_defaults(func=_demo_command)
    capabilities = sub.add_parser(
        "capabilities",
        help="a module's @capabilities statements as a Markdown table",
    )
    capabilities.add_argument(
        "module",
        help="the module whose public functions (and public classes' methods) "
        "to list, e.g. mylib; xpkit lists the facade",
    )
    capabilities.set_defaults(func=_capabilities_command)
    for command in (info, check, demo, capabilities):
        command.add_argument(
            "--json", action="store_true", help="machine-readable output (JSON)"
        )
    for command in (check, demo):
        command.add_argument(
            "--backends",
            type=_names,
            action="extend",
            default=None,
            metavar="NAMES",
            help="comma-separated library keys or backend names to run on, "
            "'auto' (the backend Backend('auto') picks) or 'all'; repeated, each "
            "adds to the others (default: every backend here)",
        )
    return parser


def _names(text: str) -> list[str]:
    if text.strip() == "all":
        return [adapter.key for adapter in ADAPTERS.values()]
    names = [n.strip() for n in text.split(",") if n.strip()]
    names = [Backend("auto").name if n == "auto" else n for n in names]
    named = backend_inventory({n.split("-", 1)[0] for n in names})  # (those imported)
    unknown = [
        n for n in names if n not in {e.key for e in named} | {e.name for e in named}
    ]
    if not names or unknown:  # (libraries not named stay unimported: their keys only)
        known = {a.key for a in ADAPTERS.values()} | {e.name for e in named}
        msg = f"names no backend known here: {unknown or text!r}; known: " + ", ".join(
            sorted(known)
        )
        raise argparse.ArgumentTypeError(
            msg + " (or key-device, as `xpkit info` names them)"
        )
    return names


def _info_command(args: argparse.Namespace, out: TextIO) -> int:
    """Print what xpkit finds; 1 when the cluster's scheduler is not reachable.

    A ``--scheduler`` that cannot answer is told first, on stderr, and
    nothing else is gathered.
    """
    if args.scheduler is not None:
        why = scheduler_problem(args.scheduler)
        if why is not None:
            sys.stderr.write(
                f"xpkit info: the scheduler {args.scheduler} is not reachable: {why}\n"
            )
            return 1
    backends = args.backends
    if backends is None:  # (importing the others costs seconds)
        backends = [a.key for a in ADAPTERS.values() if a.is_imported()]
    info = collect_info(args.scheduler, backends)
    if args.json:
        out.write(json.dumps(info, indent=2) + "\n")
    else:
        print_info(info, out)
    cluster = info["cluster"]
    if cluster is not None and "error" in cluster:
        if not args.json:
            sys.stderr.write(
                f"xpkit info: exit status 1: the scheduler {cluster['scheduler']} "
                f"is not reachable ({cluster['error']})\n"
            )
        return 1
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


def _capabilities_command(args: argparse.Namespace, out: TextIO) -> int:
    try:
        found = statements_of(args.module)
    except (ImportError, ValueError) as exc:  # (not found, raised, or no name)
        sys.stderr.write(f"xpkit capabilities: cannot import {args.module!r}: {exc}\n")
        return 2
    if not found:
        sys.stderr.write(
            "xpkit capabilities: no function with a @capabilities statement in "
            f"{args.module!r}\n"
        )
        return 1
    if args.json:
        rows = {name: dataclasses.asdict(stated) for name, stated in found.items()}
        out.write(json.dumps(rows, indent=2, default=list) + "\n")
    else:
        out.write(capabilities_table(args.module))
    return 0


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        msg = f"must be a finite positive number, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _budget_gb(text: str) -> float:
    """A budget in GB, as the library takes one (`check_gb`: at most 2**63 bytes)."""
    value = _positive_float(text)
    try:
        return check_gb("budget_gb", value)
    except ValueError as exc:  # (told as the option's, with the usage line)
        msg = str(exc).removeprefix("budget_gb ").replace(repr(value), repr(text))
        raise argparse.ArgumentTypeError(msg) from None


def _address(text: str) -> str:
    """A scheduler's address: not blank (Dask's answer was "missing port number")."""
    if not text.strip():
        msg = f"must be a scheduler's address, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return text


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"must be a positive integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _samples(text: str) -> int:
    """A sample count the demo's correlations can be computed from (>= 2)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_SAMPLES:
        msg = (
            f"must be an integer of at least {MIN_SAMPLES} (a correlation "
            f"needs two samples), got {text!r}"
        )
        raise argparse.ArgumentTypeError(msg)
    return value


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    """Run the ``xpkit`` command; returns the exit status.

    What the command cannot do is said on stderr, not as a traceback: a
    setting or an argument it meets while running (``XPKIT_MEMORY_BUDGET_GB``
    that is not a number, a demo budget below one item): 2; an output it
    cannot write (a full disk, a closed stdout): 1; a reader that left
    (``xpkit info | head -1``): 1, quietly, as other command-line tools;
    memory the machine could not give (a demo sized past it): 1.
    """
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace, TextIO], int] = args.func
    stream = sys.stdout if out is None else out
    try:
        if stream is None:  # (started with stdout closed: ``xpkit info >&-``)
            raise OSError(errno.EBADF, "standard output is closed")
        if args.command in _READS_THE_BUDGET:  # (told before any work)
            configured_budget_gb()  # ValueError: a setting that is not a budget
        status = func(args, stream)
        stream.flush()  # (a write that fails, fails here, not at the exit)
    except BrokenPipeError:
        if out is None:  # (so that the exit's flush does not complain again)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        if exc.errno not in _OUTPUT_ERRNOS:
            raise
        _say(f"xpkit {args.command}: cannot write the output: {exc.strerror}")
        return 1
    except ValueError as exc:  # (a setting or argument met while running)
        _say(f"xpkit {args.command}: {exc}")
        return 2
    except MemoryError as exc:
        _say(f"xpkit {args.command}: out of memory: {said(exc) or 'MemoryError'}")
        return 1
    return status


#: The commands that run the memory layer, and so read ``XPKIT_MEMORY_BUDGET_GB``
#: (`check` passed and `info` exited 0 with one that is not a number).
_READS_THE_BUDGET = frozenset({"check", "info", "demo"})

#: The errors of writing the output, which the command names, not raises.
_OUTPUT_ERRNOS = frozenset({errno.EBADF, errno.ENOSPC, errno.EIO, errno.EDQUOT})


def _say(line: str) -> None:
    if sys.stderr is not None:
        sys.stderr.write(line + "\n")


def main_exit() -> None:
    """Console-script entry point.

    The working directory goes first on ``sys.path``, as ``python -m xpkit``
    has it, so that ``xpkit capabilities mylib`` finds ``mylib.py`` there
    (this is the command's own process; `main`, called in another's,
    changes nothing of it).
    """
    here = str(Path.cwd())
    if "" not in sys.path and here not in sys.path:
        sys.path.insert(0, here)
    raise SystemExit(main())
