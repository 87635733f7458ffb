"""Self-checks: every facade method and the memory layer against NumPy.

One list of checks serves ``xpkit check`` (a table a user can paste into a bug
report) and the conformance suite (which runs it on array-api-strict at its
strictest flags).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ._adapters._registry import to_host
from ._backend import Backend
from ._batches import compute_oom_safe, map_batches

if TYPE_CHECKING:
    from ._typing import Array, HostArray

__all__ = ["CHECKS", "Check", "CheckResult", "run_checks"]

A = np.arange(12.0).reshape(4, 3) - 5.0
B = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
NONZERO = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])


@dataclass(frozen=True)
class Check:
    """One facade call on a backend and NumPy's answer to compare it with."""

    name: str
    run: Callable[[Backend], Array]
    expected: Callable[[], HostArray]
    #: The capabilities it needs (`Adapter.capabilities`); skipped without them.
    needs: tuple[str, ...] = ()
    #: The result must be an array of the backend's library on its device.
    on_backend: bool = True
    rtol: float = 1e-6
    #: Why the check cannot mean anything on this backend (it is skipped), or None.
    skip: Callable[[Backend], str | None] | None = None
    #: What a passing check verified, where its name alone does not say it.
    verified: Callable[[Backend], str] | None = None

    @property
    def data_dependent(self) -> bool:
        """Needs data-dependent output shapes (refused by strictest array-api-strict)."""
        return "data_dependent_shapes" in self.needs


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check on one backend."""

    backend: str
    check: str
    #: None: skipped (the detail says why: a capability the library lacks, no GPU).
    ok: bool | None
    #: Why it failed or was skipped; for a pass, what it verified (or "").
    detail: str


def _double_rows_capacity_two(x: Array) -> Array:
    """Row-wise ``2 * x`` that 'runs out of memory' above two rows."""
    if x.shape[0] > 2:
        raise MemoryError
    return x * 2.0


def _without_gpu(b: Backend) -> str | None:
    """Why ``to_gpu`` has nothing to check on ``b``: its device is not a GPU."""
    if b.is_gpu:
        return None
    return (
        f"no GPU: {b.name} runs on {b.device}, where to_gpu leaves arrays as "
        "they are (a GPU backend checks it)"
    )


def _svd_rebuilt(b: Backend) -> Array:
    u, s, vt = b.svd(b.asarray(A))
    return b.matmul(u * s, vt)


CHECKS: tuple[Check, ...] = (
    Check("asarray", lambda b: b.asarray(A), lambda: A),
    Check(
        "asarray(dtype)",
        lambda b: b.asarray(A, dtype="float32"),
        lambda: A.astype("float32"),
    ),
    Check(
        "asarray_like",
        lambda b: b.asarray_like([1, 2], b.asarray(A)),
        lambda: np.array([1.0, 2.0]),
    ),
    Check(
        "check_arrays",
        lambda b: b.check_arrays(b.asarray(A), A.astype(np.int64))[1],
        lambda: A,
    ),
    Check(
        "concatenate",
        lambda b: b.concatenate([b.asarray(A), b.asarray(A)], axis=1),
        lambda: np.concatenate([A, A], axis=1),
    ),
    Check(
        "at",
        lambda b: b.at(b.asarray(A), (0, 1)).add(7.0, copy=True),
        lambda: A + np.where(np.arange(A.size).reshape(A.shape) == 1, 7.0, 0.0),
    ),
    Check("copy", lambda b: b.copy(b.asarray(A)), lambda: A),
    Check(
        "expand_dims", lambda b: b.expand_dims(b.asarray(A), 1), lambda: A[:, None, :]
    ),
    Check(
        "flatnonzero",
        lambda b: b.flatnonzero(b.asarray(NONZERO)),
        lambda: np.flatnonzero(NONZERO),
        needs=("data_dependent_shapes",),
    ),
    Check("full", lambda b: b.full((2, 2), 3.5), lambda: np.full((2, 2), 3.5)),
    Check(
        "full_like",
        lambda b: b.full_like(b.asarray(A), 1.5, shape=(2,)),
        lambda: np.full(2, 1.5),
    ),
    Check("matmul", lambda b: b.matmul(b.asarray(A), b.asarray(B)), lambda: A @ B),
    Check("move", lambda b: b.move(A), lambda: A),
    Check("ones_like", lambda b: b.ones_like(b.asarray(A)), lambda: np.ones_like(A)),
    Check("sort", lambda b: b.sort(b.asarray(-A), axis=0), lambda: np.sort(-A, axis=0)),
    Check(
        "svd (values)",
        lambda b: b.svd(b.asarray(A))[1],
        lambda: np.linalg.svd(A, compute_uv=False),
        needs=("linalg",),
    ),
    Check("svd (U s Vt)", _svd_rebuilt, lambda: A, needs=("linalg",)),
    Check(
        "top_k",
        lambda b: b.top_k(b.asarray(A), 2, axis=0)[0],
        lambda: np.sort(A, axis=0)[::-1][:2],
    ),
    Check(
        "top_k (indices)",
        lambda b: b.top_k(b.asarray(A), 2, mode="smallest")[1],
        lambda: np.argsort(A, axis=-1)[:, :2],
    ),
    Check("to_cpu", lambda b: b.to_cpu(b.asarray(A)), lambda: A, on_backend=False),
    Check("to_device", lambda b: b.to_device(A), lambda: A),
    Check(
        "to_gpu",
        lambda b: b.to_gpu(A),
        lambda: A,
        skip=_without_gpu,
        verified=lambda b: f"a NumPy array moved to {b.device}, values kept",
    ),
    Check("to_numpy", lambda b: b.to_numpy(b.asarray(A)), lambda: A, on_backend=False),
    Check(
        "zeros_like",
        lambda b: b.zeros_like(b.asarray(A), dtype="int32"),
        lambda: np.zeros_like(A, dtype=np.int32),
    ),
    Check(
        "compute_oom_safe",
        lambda b: compute_oom_safe(_double_rows_capacity_two, b.asarray(A)),
        lambda: A * 2.0,
        on_backend=False,
    ),
    Check(
        "map_batches",
        lambda b: map_batches(
            _double_rows_capacity_two,
            b.asarray(A),
            bytes_per_item=24.0,  # one row of A: batches of 3, the third row fails
            budget_gb=3 * 24 / 1024**3,
        ),
        lambda: A * 2.0,
        on_backend=False,
    ),
)


def run_check(backend: Backend, check: Check) -> CheckResult:
    """Run one check; a mismatch or an exception is a failure with a reason."""
    missing = [need for need in check.needs if need not in backend.capabilities]
    if missing:
        why = f"{backend.name} has no {' and no '.join(missing)}"
        return CheckResult(backend.name, check.name, None, why)
    why_not = None if check.skip is None else check.skip(backend)
    if why_not is not None:
        return CheckResult(backend.name, check.name, None, why_not)
    try:
        result = check.run(backend)
        if check.on_backend and Backend.from_arrays(result) != backend:
            where = Backend.from_arrays(result)
            return CheckResult(
                backend.name, check.name, False, f"result is on {where!r}"
            )
        got = to_host(result)
        want = check.expected()
        if got.shape != want.shape:
            return CheckResult(
                backend.name, check.name, False, f"shape {got.shape} != {want.shape}"
            )
        atol = 1e-5 if got.dtype.itemsize <= 4 else 1e-10
        if not np.allclose(got, want, rtol=check.rtol, atol=atol):
            worst = float(np.max(np.abs(got - want)))
            return CheckResult(
                backend.name, check.name, False, f"max |diff| {worst:.3g}"
            )
        verified = "" if check.verified is None else check.verified(backend)
        return CheckResult(backend.name, check.name, True, verified)
    except Exception as exc:  # noqa: BLE001 - a check reports, it never crashes
        last = traceback.format_exception_only(exc)[-1].strip()
        return CheckResult(backend.name, check.name, False, last[:200])


def run_checks(backend: Backend) -> list[CheckResult]:
    """Every check on one backend."""
    return [run_check(backend, check) for check in CHECKS]
