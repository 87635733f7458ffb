"""One `map_batches` / `plan_batches` call, checked once: the `BatchRequest`.

Every argument is validated here, once, into an immutable record that the
plan, the probe, the executors and the local loop all read; nothing below
takes the loose arguments again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ._adapters._registry import adapter_for_array, get_adapter
from ._args import (
    check_count,
    check_gb,
    check_overhead,
    check_positive,
    item_bytes,
)
from ._backend import Backend, coerce_backend
from ._executors import Pool, pool_for
from ._into import Out, check_out
from ._outputs import PLACES
from ._rows import Job, common_rows, held_items, refuse_traced
from ._shown import shown
from ._signatures import signature

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._plan_memory import Signature
    from ._typing import Array, UserFunction, Value

__all__ = ["BatchCall", "BatchRequest", "batch_request"]


class BatchCall(NamedTuple):
    """A call of `map_batches` or `plan_batches` as its caller wrote it, unchecked.

    The one record the call's arguments travel in: a repeated call's key is
    read from it (`xpkit._repeat`), and `batch_request` checks it into a
    `BatchRequest`. The fields are `map_batches`' parameters of the same
    names, in its order (``progress`` aside, which only the loop reads).
    """

    fn: Value
    arrays: tuple[Array, ...]
    backend: Value
    whole: Value
    bytes_per_item: Value
    overhead: Value
    budget_gb: Value
    min_batch: Value
    executor: Value
    result_on: Value
    pad: Value
    fallback_bytes_per_item: Value
    remember: Value
    out: Value = None


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
    adapter : Adapter
        The adapter of the library the batches run in.
    out : Out or None
        The caller's arrays the results are written into (`xpkit._into`);
        None: outputs allocated where ``result_on`` says.
    caller : str
        The public function called (``"map_batches"``, ``"iter_batches"``,
        ...), which messages name.
    """

    fn: UserFunction
    arrays: tuple[Array, ...]
    n: int
    owner: Backend
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
    adapter: Adapter
    out: Out | None = None
    caller: str = "map_batches"

    @property
    def shipped(self) -> tuple[Array, ...]:
        """The arrays each worker of a pool holds: the inputs and the whole operands."""
        return _shipped_arrays(self.arrays, self.job)

    @property
    def sources(self) -> tuple[Array, ...]:
        """Every array ``fn`` sees: the inputs and the whole operands.

        The arrays in a whole operand that is a list, tuple or dict too: a
        result that was one of them came back uncopied, sharing its memory.
        """
        job = self.job
        if not job.args and not job.kwargs:
            return self.arrays
        return (*self.arrays, *held_items((*job.args, *job.kwargs.values())))


def _shipped_arrays(arrays: tuple[Array, ...], job: Job) -> tuple[Array, ...]:
    """The arrays each worker of a pool receives: the inputs and the whole operands."""
    operands = (*job.args, *job.kwargs.values())
    return (*arrays, *[a for a in operands if adapter_for_array(a) is not None])


def batch_request(call: BatchCall, caller: str = "map_batches") -> BatchRequest:
    """Check the arguments of ``call`` (TypeError/ValueError naming the bad one).

    Every check runs on every call; each costs little for the defaults.
    ``caller`` names the public function in messages.
    """
    (
        fn,
        arrays,
        backend,
        whole,
        bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        executor,
        result_on,
        pad,
        fallback_bytes_per_item,
        remember,
        out,
    ) = call
    if not callable(fn):
        msg = f"fn must be callable, got {shown(fn)}"
        raise TypeError(msg)
    n = common_rows(arrays)
    if whole.__class__ is not tuple:
        _check_whole(whole)
    refuse_traced(arrays, whole, caller)
    if result_on not in PLACES:
        msg = f"result_on must be 'host' or 'device', got {shown(result_on)}"
        raise ValueError(msg) if isinstance(result_on, str) else TypeError(msg)
    if out is not None:
        if result_on != "host":
            msg = (
                "out and result_on='device' both say where the results go: give "
                "out (arrays on any device) or result_on, not both"
            )
            raise ValueError(msg)
        out = check_out(out, n, arrays, _named_operands(whole))
    if pad is not None and not isinstance(pad, bool):
        msg = f"pad must be a bool or None, got {shown(pad)}"
        raise TypeError(msg)
    if not isinstance(remember, bool):
        msg = f"remember must be a bool, got {shown(remember)}"
        raise TypeError(msg)
    if bytes_per_item is not None:
        bytes_per_item = check_positive("bytes_per_item", bytes_per_item)
    if fallback_bytes_per_item is not None:
        fallback_bytes_per_item = check_positive(
            "fallback_bytes_per_item", fallback_bytes_per_item
        )
    if budget_gb is not None:
        budget_gb = check_gb("budget_gb", budget_gb)
    if overhead.__class__ is not float or overhead != 1.0:  # (1.0: the default)
        overhead = check_overhead(overhead)
    for param, given in (
        ("bytes_per_item", bytes_per_item),
        ("fallback_bytes_per_item", fallback_bytes_per_item),
    ):
        if given is not None and overhead != 1.0:
            item_bytes(param, given, overhead)
    if min_batch.__class__ is not int or min_batch < 1:  # (an int >= 1 is one)
        min_batch = check_count("min_batch", min_batch)
    moved = None if backend is None else coerce_backend(backend, "backend")
    owner = Backend.from_arrays(*arrays) if moved is None else moved
    adapter = get_adapter(owner.library)
    job = Job(fn, whole, moved)
    pool = None
    if executor is not None:  # (every worker holds the inputs and the operands)
        pool = pool_for(executor, _shipped_arrays(arrays, job))
    if pool is not None:
        pool.check(job, arrays)
    key: Signature | None = None
    alive: tuple[Callable[[], object], ...] = ()
    if remember:  # (the target library's modes too: backend= moves the rows)
        mode = adapter.cost_mode() if adapter.has_cost_mode else None
        where = (adapter.key, owner.device, result_on, mode)
        key, alive = signature(fn, arrays, whole, where)
    return BatchRequest(  # (by position: a NamedTuple's fields, in order)
        fn,
        arrays,
        n,
        owner,
        job,
        pool,
        bytes_per_item,
        fallback_bytes_per_item,
        overhead,
        budget_gb,
        min_batch,
        result_on,
        adapter.pads_batches(fn) if pad is None else pad,
        key,
        alive,
        adapter,
        out,
        caller,
    )


def _named_operands(
    whole: tuple[Array, ...] | Mapping[str, Array],
) -> tuple[tuple[str, Array], ...]:
    """Each whole operand with its name in messages (``whole[0]``, ``whole['w']``)."""
    if isinstance(whole, Mapping):
        return tuple((f"whole[{shown(k)}]", v) for k, v in whole.items())
    return tuple((f"whole[{i}]", v) for i, v in enumerate(whole))


def _check_whole(whole: Value) -> None:
    if whole.__class__ is tuple:
        return
    if isinstance(whole, Mapping):
        bad = [k for k in whole if not isinstance(k, str)]
        if bad:
            msg = f"whole must map fn's keyword names (str) to operands, got key {shown(bad[0])}"
            raise TypeError(msg)
    elif not isinstance(whole, (tuple, list)):
        msg = (
            "whole must be a tuple of operands (passed after the batched rows) or a "
            f"dict of keyword operands, got {type(whole).__qualname__}"
        )
        raise TypeError(msg)
