"""One `map_batches` / `plan_batches` call, checked once: the `BatchRequest`.

Every argument is validated here, once, into an immutable record that the
plan, the probe, the executors and the local loop all read; nothing below
takes the loose arguments again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from ._adapters import adapter_for_array, get_adapter
from ._args import check_count, check_gb, check_positive
from ._backend import Backend
from ._executors import Pool, pool_for
from ._outputs import PLACES
from ._plan_memory import Signature, signature
from ._rows import Job, common_rows
from ._select import coerce_backend

if TYPE_CHECKING:
    from ._adapters import Adapter

__all__ = ["BatchRequest", "batch_request"]


class BatchRequest(NamedTuple):
    """The checked arguments of one call, and what follows from them.

    Attributes
    ----------
    fn : callable
        The function mapped over row batches.
    arrays : tuple
        The batched inputs (their axis 0 is the items).
    n : int
        Rows of the inputs.
    owner : Backend
        Where the batches run: the ``backend`` argument, else where the
        inputs live.
    job : Job
        ``fn`` with its ``whole`` operands (moved to ``owner`` once when a
        backend was given).
    pool : Pool or None
        The executor's pool; None runs here.
    bytes_per_item : float or None
        The caller's cost per item (authoritative); None: measure it.
    fallback_bytes_per_item : float or None
        The caller's estimate, used only where nothing can be measured.
    overhead : float
        Safety multiplier on every cost.
    budget_gb : float or None
        An explicit budget for one batch; None: the device's.
    min_batch : int
        Smallest batch, and the size below which an OOM is fatal.
    result_on : str
        ``"host"`` or ``"device"``.
    pad : bool
        Whether the last batch is padded to the batch size.
    key : tuple or None
        The call's signature in the plan memory (None: not remembered).
    alive : tuple of weak references
        To the objects ``key`` names by identity (the plan memory checks
        they still live).
    """

    fn: Callable[..., Any]
    arrays: tuple[Any, ...]
    n: int
    owner: Backend[Any]
    job: Job
    pool: Pool | None
    bytes_per_item: float | None
    fallback_bytes_per_item: float | None
    overhead: float
    budget_gb: float | None
    min_batch: int
    result_on: str
    pad: bool
    key: Signature | None
    alive: tuple[Callable[[], object], ...]

    @property
    def adapter(self) -> Adapter:
        """The adapter of the library the batches run in."""
        return get_adapter(self.owner.library)

    @property
    def sources(self) -> tuple[Any, ...]:
        """Every array ``fn`` sees: the inputs and the whole operands."""
        return (*self.arrays, *self.job.args, *self.job.kwargs.values())


def batch_request(
    fn: Any,
    arrays: tuple[Any, ...],
    *,
    backend: Any,
    whole: Any,
    bytes_per_item: Any,
    fallback_bytes_per_item: Any,
    overhead: Any,
    budget_gb: Any,
    min_batch: Any,
    executor: Any,
    result_on: Any,
    pad: Any,
    remember: Any,
) -> BatchRequest:
    """Check the arguments of a call (TypeError/ValueError naming the bad one)."""
    if not callable(fn):
        msg = f"fn must be callable, got {fn!r}"
        raise TypeError(msg)
    n = common_rows(arrays)
    _refuse_traced(arrays, whole)
    if result_on not in PLACES:
        msg = f"result_on must be 'host' or 'device', got {result_on!r}"
        raise ValueError(msg)
    if pad is not None and not isinstance(pad, bool):
        msg = f"pad must be a bool or None, got {pad!r}"
        raise TypeError(msg)
    if not isinstance(remember, bool):
        msg = f"remember must be a bool, got {remember!r}"
        raise TypeError(msg)
    per_item = (
        None
        if bytes_per_item is None
        else check_positive("bytes_per_item", bytes_per_item)
    )
    fallback = (
        None
        if fallback_bytes_per_item is None
        else check_positive("fallback_bytes_per_item", fallback_bytes_per_item)
    )
    floor = check_count("min_batch", min_batch)
    multiplier = check_positive("overhead", overhead)
    budget = None if budget_gb is None else check_gb("budget_gb", budget_gb)
    _check_whole(whole)
    moved = None if backend is None else coerce_backend(backend, "backend")
    owner = Backend.from_arrays(*arrays) if moved is None else moved
    pool = pool_for(executor, arrays)
    job = Job(fn, whole, moved)
    if pool is not None:
        pool.check(job)
    key: Signature | None = None
    alive: tuple[Callable[[], object], ...] = ()
    if remember:
        where: Hashable = (owner.library, owner.device, result_on)
        key, alive = signature(fn, arrays, whole, where)
    return BatchRequest(  # (a NamedTuple: cheap to make, immutable)
        fn=fn,
        arrays=arrays,
        n=n,
        owner=owner,
        job=job,
        pool=pool,
        bytes_per_item=per_item,
        fallback_bytes_per_item=fallback,
        overhead=multiplier,
        budget_gb=budget,
        min_batch=floor,
        result_on=result_on,
        pad=bool(pad)
        if pad is not None
        else get_adapter(owner.library).pads_batches(fn),
        key=key,
        alive=alive,
    )


def _refuse_traced(arrays: tuple[Any, ...], whole: Any) -> None:
    """RuntimeError when a compiler traces an input: map_batches needs values."""
    operands = list(whole.values()) if isinstance(whole, Mapping) else whole
    named = [(f"arrays[{i}]", a) for i, a in enumerate(arrays)]
    if isinstance(operands, (tuple, list)):
        named += [("a whole operand", a) for a in operands]
    for name, a in named:
        adapter = adapter_for_array(a)
        mode = None if adapter is None else adapter.traced_by(a)
        if mode is not None:
            msg = (
                f"map_batches cannot run inside {mode}: {name} is traced, and "
                "map_batches is an eager loop on the host that sizes batches "
                "and reads each batch's result. Call it outside the traced "
                f"function (fn itself may be compiled), or run fn on all rows "
                "there"
            )
            raise RuntimeError(msg)


def _check_whole(whole: Any) -> None:
    if isinstance(whole, Mapping):
        bad = [k for k in whole if not isinstance(k, str)]
        if bad:
            msg = f"whole must map fn's keyword names (str) to operands, got key {bad[0]!r}"
            raise TypeError(msg)
    elif not isinstance(whole, (tuple, list)):
        msg = (
            "whole must be a tuple of operands (passed after the batched rows) or a "
            f"dict of keyword operands, got {type(whole).__qualname__}"
        )
        raise TypeError(msg)
