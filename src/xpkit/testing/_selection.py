"""What ``--xpkit-backends`` asks for: its names, checked once, and what they leave a test.

A name that selects nothing is a usage error naming what is here; so is a
selection none of whose variants can run here (a library not installed):
the session would skip everything and pass. Where some can, the others
are skipped with their reasons. A test that none
of the chosen variants runs is skipped with the reason.
"""

from __future__ import annotations

import os

import pytest

from ._capabilities import is_backend
from ._variants import (
    BackendParam,
    available_backend_params,
    libraries_named,
    selected,
    unmatched,
)

__all__ = ["ENV_VAR", "check_selection", "none_chosen", "selected_names"]

ENV_VAR = "XPKIT_BACKENDS"


def selected_names(config: pytest.Config) -> list[str] | None:
    """The names ``--xpkit-backends`` (or `ENV_VAR`) gives; None: every variant."""
    given = config.getoption("xpkit_backends")
    raw = given or os.environ.get(ENV_VAR, "")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names and raw.strip():  # (commas alone: a mistake, not "every variant")
        where = "--xpkit-backends" if given else ENV_VAR
        msg = f"{where} names no backend: {raw!r}"
        raise pytest.UsageError(msg)
    return names or None


def check_selection(wanted: list[str]) -> None:
    """UsageError where ``wanted`` names what is not here, or leaves nothing."""
    params = available_backend_params(libraries_named(wanted))
    missing = unmatched(params, wanted)
    if missing:
        everything = available_backend_params()  # what is here, to say so
        ids = frozenset(p.id for p in everything)
        # "torch-cuda" on a host without CUDA: a library xpkit knows, on a
        # device this machine lacks; anything else is not a backend at all.
        absent = [w for w in missing if is_backend(w.removeprefix("-"))]
        unknown = [w for w in missing if w not in absent]
        parts = []
        if absent:
            parts.append(f"backends not available on this machine {absent}")
        if unknown:
            parts.append(f"unknown backends {unknown}")
        known = sorted(ids | {p.key for p in everything})
        msg = (
            f"--xpkit-backends / {ENV_VAR} names {' and '.join(parts)}; "
            f"available here: {', '.join(known)}"
        )
        raise pytest.UsageError(msg)
    _refuse_skipped_only(params, wanted)
    if not selected(params, wanted) and not selected(
        available_backend_params(), wanted
    ):
        # ("numpy,-numpy": each name is known, and together they leave nothing)
        msg = (
            f"--xpkit-backends / {ENV_VAR} selects no variant: {','.join(wanted)} "
            "leaves out all it takes"
        )
        raise pytest.UsageError(msg)


def _refuse_skipped_only(params: tuple[BackendParam, ...], wanted: list[str]) -> None:
    """UsageError where no variant the names choose can run here (CuPy missing).

    A session of skips that exits 0 would read as a pass. Where some can,
    the others are skipped with their reasons (``numpy,cupy`` runs NumPy).
    """
    chosen = selected(params, wanted)
    if chosen and all(p.skip for p in chosen):
        reasons = sorted({p.skip for p in chosen})
        msg = (
            f"--xpkit-backends / {ENV_VAR} ({','.join(wanted)}) chooses no "
            f"variant that can run here: {'; '.join(reasons)}"
        )
        raise pytest.UsageError(msg)


def none_chosen(wanted: list[str] | None) -> BackendParam:
    """A skipped variant that says why none of those ``wanted`` runs this test."""
    reason = (
        f"--xpkit-backends / {ENV_VAR} ({','.join(wanted or ['all'])}) selects no "
        "variant for this test: a -jit, -lazy or -compile variant runs in test "
        "modules that declare functions with lazy_xp_function, a device "
        "without values tests marked xpkit_shapes_only"
    )
    return BackendParam("numpy", None, "none-selected", reason)
