"""Rows of the inputs, the job that maps ``fn`` over them, and what it returns.

The one path of the data in `map_batches`, `compute_oom_safe` and the
executors: the inputs are cut into row slices (`row_slices`), each slice is
moved to the backend's device and handed to ``fn`` with the whole operands
(`Job.run`), and what ``fn`` returns, checked into `Rows` (`split_result`),
goes to `xpkit._outputs.Outputs` (or, from a worker, to the host first:
`host_rows`).
"""

from __future__ import annotations

import enum
import os
import pickle
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ._adapters._base import Adapter
from ._adapters._registry import (
    ADAPTERS,
    LostOnHost,
    adapter_for_array,
    refuse_lossy,
    to_host,
)
from ._current_rows import ROWS
from ._dtypes import dtype_label
from ._result_spec import rebuilt, sequence_spec
from ._shown import said, shown

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._backend import Backend
    from ._typing import Array, DType, HostArray, UserFunction, UserResult, Value


__all__ = [
    "ONE_ARRAY",
    "TRACING_ADAPTERS",
    "WRITTEN",
    "Job",
    "Marker",
    "ResultSpec",
    "Rows",
    "Widened",
    "common_rows",
    "describe_rows",
    "held_items",
    "host_rows",
    "hosted",
    "leaf_name",
    "leaf_on_host",
    "native_labels",
    "output_label",
    "refuse_traced",
    "row_shape",
    "row_slices",
    "rows_of",
    "rows_where",
    "run_rows",
    "split_result",
    "to_host",
]

#: The structure of ``fn``'s result: ``("array",)``, ``("tuple" | "list", k)``,
#: ``("namedtuple", k, NamedTupleKind)`` or ``("dict", keys)`` (compared as it is
#: between batches).
ResultSpec = tuple[Any, ...]


class Rows(NamedTuple):
    """What ``fn`` returned for one batch, as a structure and its arrays."""

    spec: ResultSpec
    leaves: list[Array]
    #: Already where the outputs live (`Outputs.convert` ran): `put` skips it.
    placed: bool = False
    #: Per leaf brought to the host by a task (`host_rows`), what ``fn``
    #: returned where the host widened its dtype (torch's bfloat16, 8-bit
    #: floats and complex32: float32, complex64), else None: given back.
    own: tuple[Widened | None, ...] = ()


class Widened(NamedTuple):
    """The dtype of an array of ``fn``'s that the host widened (`Rows.own`)."""

    label: str  # its name (`dtype_label`): what an ``out`` array's is compared with
    library: str  # the key of its library, whose arrays may take it back
    dtype: DType  # the library's dtype object


class Marker(enum.Enum):
    """What stands in a `Rows`' spec for rows that are not there (pickled by name)."""

    WRITTEN = "written"


#: What a task whose `Job.sink` wrote its rows returns instead of them
#: (``rows.spec[0] is Marker.WRITTEN``, back from a worker too).
WRITTEN = Rows((Marker.WRITTEN,), [], True)

#: The spec of a result that is one array.
ONE_ARRAY = ("array",)


def rows_of(result: UserResult) -> Rows | None:
    """``fn``'s result as `Rows`; None when it is not arrays (`split_result` says why).

    Arrays whose conversion would drop information (a masked array, a
    sparse tensor) are not taken either.
    """
    adapter = adapter_for_array(result)
    if adapter is not None:
        if adapter.lost_in_conversion(result) is not None:
            return None
        return Rows(ONE_ARRAY, [result])
    if isinstance(result, (tuple, list)) and result:
        leaves = list(result)
        spec = sequence_spec(result)
    elif isinstance(result, (dict, Mapping)) and result:  # (dict: no ABC check)
        leaves = list(result.values())
        spec = ("dict", tuple(result))
    else:
        return None
    for leaf in leaves:
        adapter = adapter_for_array(leaf)
        if adapter is None or adapter.lost_in_conversion(leaf) is not None:
            return None
    return Rows(spec, leaves)


def split_result(result: UserResult, fn: UserFunction, where: str) -> Rows:
    """``fn``'s result as `Rows`; TypeError naming ``fn`` and the batch otherwise."""
    rows = rows_of(result)
    if rows is not None:
        return rows
    adapter = adapter_for_array(result)
    if adapter is not None:  # (an array rows_of does not take)
        refuse_lossy(adapter, result, f"fn={shown(fn)}'s result for {where}")
    if isinstance(result, (tuple, list)) and result:
        named = [(f"[{i}]", v) for i, v in enumerate(result)]
    elif isinstance(result, Mapping) and result:
        named = [(f"[{shown(k)}]", v) for k, v in result.items()]
    else:
        msg = (
            f"fn={shown(fn)} must return an array, or a non-empty tuple, list or dict "
            f"of arrays; for {where} it returned {type(result).__qualname__}"
        )
        raise TypeError(msg)
    for label, leaf in named:
        adapter = adapter_for_array(leaf)
        if adapter is not None:
            refuse_lossy(adapter, leaf, f"fn={shown(fn)}'s result{label} for {where}")
    label, leaf = next((k, v) for k, v in named if adapter_for_array(v) is None)
    msg = (
        f"fn={shown(fn)} returned a non-array at {label} for {where}: "
        f"{type(leaf).__qualname__}"
    )
    raise TypeError(msg)


def host_rows(result: UserResult, fn: UserFunction, where: str) -> Rows:
    """`split_result` with every array brought to the host (what a task returns)."""
    rows = split_result(result, fn, where)
    leaves = [
        leaf_on_host(leaf, fn, rows.spec, i, where)
        for i, leaf in enumerate(rows.leaves)
    ]
    own = tuple(
        _widened(leaf, host) for leaf, host in zip(rows.leaves, leaves, strict=True)
    )
    return Rows(rows.spec, leaves, own=own if any(own) else ())


def _widened(leaf: Array, host: HostArray) -> Widened | None:
    """What ``leaf`` was, where ``host`` (it on the host) has a wider dtype."""
    label = dtype_label(leaf.dtype)
    if dtype_label(host.dtype) == label:
        return None
    adapter = adapter_for_array(leaf)
    return None if adapter is None else Widened(label, adapter.key, leaf.dtype)


def _moved(backend: Backend, x: Array, name: str) -> Array:
    """``backend.asarray(x)``; a host copy found to lose a mask names ``x`` ``name``."""
    try:
        return backend.asarray(x)
    except LostOnHost as exc:
        raise exc.named(name) from None


def leaf_on_host(
    leaf: Array, fn: UserFunction, spec: ResultSpec, i: int, where: str | range
) -> HostArray:
    """`to_host` of the ``i``-th array of ``fn``'s result; a loss names it (`leaf_name`).

    ``where``: the rows (a range) or what they are called.
    """
    try:
        return to_host(leaf)
    except LostOnHost as exc:  # (the name only then: a repr of fn costs microseconds)
        if where.__class__ is range:
            where = f"rows {where.start}:{where.stop}"
        raise exc.named(leaf_name(fn, spec, i, str(where))) from None
    except Exception as exc:
        adapter = adapter_for_array(leaf)
        mode = adapter.traced_by(leaf) if adapter in TRACING_ADAPTERS else None
        if mode is None:
            raise
        msg = (
            f"batches cannot be read inside {mode}: {leaf_name(fn, spec, i, 'a batch')} "
            "is traced (fn computed it from a traced value it closes over, or "
            "under the trace), and the batching loop reads each batch's result "
            "on the host. Call it outside the traced function (fn itself may "
            "be compiled), or run fn on all rows there"
        )
        raise RuntimeError(msg) from exc


def leaf_name(fn: UserFunction, spec: ResultSpec, i: int, where: str) -> str:
    """How an error names the ``i``-th array of ``fn``'s result for ``where``."""
    if spec[0] == "array":
        label = ""
    elif spec[0] == "dict":
        label = f"[{spec[1][i]!r}]"
    else:
        label = f"[{i}]"
    return f"fn={shown(fn)}'s result{label} for {where}"


def common_rows(arrays: tuple[Array, ...]) -> int:
    """The axis-0 length ``arrays`` share (TypeError/ValueError otherwise)."""
    if not arrays:
        msg = "arrays must hold at least one array"
        raise ValueError(msg)
    n: object = None
    for i, a in enumerate(arrays):
        shape = getattr(a, "shape", None)
        if not shape:
            msg = f"arrays[{i}] must be an array with at least one axis, got {shown(a):.80}"
            raise TypeError(msg)
        if i == 0:
            n = shape[0]
        elif shape[0] is not n and shape[0] != n:  # (as a set: a NaN is itself)
            lengths = [a.shape[0] for a in arrays]
            msg = f"arrays must share their axis-0 length, got lengths {lengths}"
            raise ValueError(msg)
    if not isinstance(n, int):
        owner = adapter_for_array(arrays[0])
        known = "give arrays whose length is known"
        advice = known if owner is None else owner.unknown_length_advice
        msg = f"arrays have an unknown axis-0 length ({shown(n)}); {advice}"
        raise ValueError(msg)  # noqa: TRY004 - a lazy library's length (NaN, None)
    return n


def refuse_compiled_rows() -> None:
    """RuntimeError where `current_rows` is read by a compiler that reuses it.

    (The guard in `ROWS`: ``jax.jit`` traces ``fn`` once and runs every batch of the
    same shape with what it read then.)
    """
    for adapter in TRACING_ADAPTERS:
        compiler = adapter.tracing_to_reuse() if adapter.is_imported() else None
        if compiler is not None:
            msg = (
                f"xpkit.current_rows() was read while {compiler} traced fn: "
                "the trace keeps this batch's rows and runs every batch of its "
                "shape with them; read it outside the traced part of fn and "
                "pass rows.start in, or pass positions as an input"
            )
            raise RuntimeError(msg)


def refuse_traced(arrays: tuple[Array, ...], whole: Value, caller: str) -> None:
    """Refuse inputs ``caller`` cannot take as they are.

    TypeError for an input whose conversion would drop information (a NumPy
    masked array's mask, a sparse tensor's layout:
    `Adapter.lost_in_conversion`), naming it; RuntimeError when a compiler
    traces an input (``caller`` needs values; only the libraries whose
    adapter can tell a traced array, JAX, are asked).
    """
    if isinstance(whole, (tuple, list)):
        named: list[tuple[str, Array]] = [
            (f"whole[{j}]", v) for j, v in enumerate(whole)
        ]
    else:
        named = [(f"whole[{shown(k)}]", v) for k, v in whole.items()]
    for i, a in enumerate(arrays):
        named.insert(i, (f"arrays[{i}]", a))
    for name, a in named:
        adapter = adapter_for_array(a)
        if adapter is None:
            continue
        refuse_lossy(adapter, a, name)
        if adapter not in TRACING_ADAPTERS:
            continue
        mode = adapter.traced_by(a)
        if mode is not None:
            msg = (
                f"{caller} cannot run inside {mode}: {name} is traced, and "
                f"{caller} is an eager loop on the host that sizes batches "
                "and reads each batch's result. Call it outside the traced "
                f"function (fn itself may be compiled), or run fn on all rows "
                "there"
            )
            raise RuntimeError(msg)


#: The adapters that can tell a traced array (`Adapter.traced_by` is theirs).
TRACING_ADAPTERS = frozenset(
    a for a in ADAPTERS.values() if type(a).traced_by is not Adapter.traced_by
)


def row_slices(
    arrays: tuple[Array, ...], start: int, stop: int, n: int
) -> tuple[Array, ...]:
    """Rows ``start:stop`` of every array (the arrays themselves for all rows)."""
    if start == 0 and stop == n:
        return arrays
    return tuple(a[start:stop, ...] for a in arrays)


def pad_rows(rows: Array, size: int) -> Array:
    """``rows`` with its last row repeated up to ``size`` rows.

    Real values, so that ``fn`` meets no zeros it would divide by.
    """
    import array_api_compat

    xp = array_api_compat.array_namespace(rows)
    missing = size - rows.shape[0]
    tail = xp.broadcast_to(rows[-1:, ...], (missing, *rows.shape[1:]))
    return xp.concat([rows, tail], axis=0)


def trim_rows(result: UserResult, rows: int) -> UserResult:
    """The first ``rows`` rows of each array of ``fn``'s result."""
    if isinstance(result, Mapping):
        return {k: trim_rows(v, rows) for k, v in result.items()}
    if isinstance(result, (tuple, list)):
        return rebuilt(result, [trim_rows(v, rows) for v in result])
    return result[:rows, ...]


class Job:
    """``fn`` with its whole operands, run on row ranges of the batched inputs.

    With a ``backend``, each batch's slices are moved to its device
    (`Backend.asarray`: zero-copy where the library allows, e.g. NumPy to
    torch CPU) before ``fn`` sees them, and the whole operands are moved
    there once, when the job is made. A job pickles (for executors) when
    ``fn`` and its operands do.

    With ``pad_to`` set, the last rows of the inputs, when fewer, are padded
    to ``pad_to`` rows (the last row repeated) and ``fn``'s result trimmed
    back: every call sees one shape, so a compiling library compiles once.

    With a ``sink``, an executor's task hands its rows to it (which writes
    them where they go, `xpkit._written`) and returns what it returns
    (`WRITTEN`) instead of the rows. ``home`` is the process that made the
    job: a task run there (`run_rows`) returns copies of ``fn``'s rows.
    """

    __slots__ = ("args", "backend", "fn", "home", "kwargs", "pad_to", "sink")

    def __init__(
        self,
        fn: UserFunction,
        whole: tuple[Array, ...] | Mapping[str, Array] = (),
        backend: Backend | None = None,
    ) -> None:
        self.fn = fn
        self.backend = backend
        self.home = os.getpid()  # (the caller's process: where tasks run unpickled)
        self.pad_to = 0
        self.sink: Callable[[int, int, Rows], Rows] | None = None
        if isinstance(whole, (tuple, list)):  # (no ABC check on the common path)
            self.args: tuple[Array, ...] = (
                tuple(whole)
                if backend is None
                else tuple(self._move(v, f"whole[{i}]") for i, v in enumerate(whole))
            )
            self.kwargs: dict[str, Array] = {}
        else:  # a mapping of keyword operands
            self.args = ()
            self.kwargs = {
                k: self._move(v, f"whole[{shown(k)}]") for k, v in whole.items()
            }

    def _move(self, x: Array, name: str) -> Array:
        if self.backend is None or adapter_for_array(x) is None:
            return x  # scalars and other objects go to fn as they are
        return _moved(self.backend, x, name)

    def run(
        self,
        arrays: tuple[Array, ...],
        start: int,
        stop: int,
        n: int,
        *,
        pad: bool = True,
    ) -> UserResult:
        """``fn`` on rows ``start:stop`` of ``arrays`` (of length ``n``).

        ``pad=False``: never padded (the halves of a batch split after an
        OOM, which padding would grow back to the size that failed).
        """
        rows = row_slices(arrays, start, stop, n)
        if self.backend is not None:
            backend = self.backend
            rows = tuple(_moved(backend, r, f"arrays[{i}]") for i, r in enumerate(rows))
        size = stop - start
        token = ROWS.set(
            (range(start, stop), refuse_compiled_rows)
        )  # what `current_rows` says
        try:
            if pad and stop == n and 0 < size < self.pad_to:
                rows = tuple(pad_rows(r, self.pad_to) for r in rows)
                return trim_rows(self.fn(*rows, *self.args, **self.kwargs), size)
            return self.fn(*rows, *self.args, **self.kwargs)
        finally:
            ROWS.reset(token)

    def __getstate__(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _JOB_STATE)

    def __setstate__(self, state: tuple[object, ...]) -> None:
        # (an older xpkit's job has no home: it runs nowhere as at home)
        state = (*state, -1) if len(state) == len(_JOB_STATE) - 1 else state
        for name, value in zip(_JOB_STATE, state, strict=True):
            setattr(self, name, value)


#: What a `Job` pickles, in order: ``fn``, its whole operands, the backend,
#: ``pad_to``, the sink, ``home``.
_JOB_STATE = ("fn", "args", "kwargs", "backend", "pad_to", "sink", "home")


def run_rows(
    job: Job,
    start: int,
    stop: int,
    *arrays: Array,
    pad: bool = True,
    travels: Callable[[BaseException], bool] | None = None,
    held: bool = False,
) -> Rows:
    """An executor's task: ``fn`` on rows ``start:stop``, its arrays on the host.

    ``pad``: as `Job.run`'s (False for a batch cut smaller after an OOM,
    which padding would grow back to the size that failed). An exception
    of ``fn`` that cannot travel back from a worker process (``travels``:
    the executor's own test of that; plain pickle's by default) would be
    lost there (joblib's workers then died, read as a memory death): it
    becomes a RuntimeError that names its type, its message and the rows.

    The rows come back as copies where nothing pickles them at once: in
    the process that made the job (``job.home``), and where the executor
    holds a task's result in its worker until the caller gathers it
    (``held``: Dask's workers), as ``fn``'s next task there may overwrite
    a buffer it reuses.
    """
    travels = travels or _travels
    lost: str | None = None
    try:
        result = job.run(arrays, start, stop, common_rows(arrays), pad=pad)
    except Exception as exc:
        if travels(exc) or _travels_alone(exc, travels):
            raise
        lost = (
            f"fn raised {type(exc).__module__}.{type(exc).__qualname__} on rows "
            f"{start}:{stop}, which cannot be pickled to travel back from the "
            f"worker: {said(exc)[:500]}"
        )
    if lost is not None:
        # (raised outside the except block: fn's exception is not its context,
        # which Dask pickles too, and failing, it sent a bare Exception)
        raise RuntimeError(lost)
    rows = host_rows(result, job.fn, f"rows {start}:{stop}")
    if job.sink is not None:
        return job.sink(start, stop, rows)
    if held or os.getpid() == job.home:
        # In the caller's process (a Dask worker's thread, joblib's threads)
        # nothing pickles the rows, and a Dask worker process keeps them until
        # they are gathered: a view of a buffer fn reuses would be overwritten
        # by its next task first (rows 0:20 of 47, on two worker processes).
        rows = rows._replace(leaves=[np.array(leaf, copy=True) for leaf in rows.leaves])
    return rows


def _travels_alone(
    exc: BaseException, travels: Callable[[BaseException], bool]
) -> bool:
    """Whether ``exc`` travels without its context (then its cause), dropped where it does.

    Dask pickles the chain with the exception (tblib's support, which it
    installs), and where a link cannot be pickled it sent a bare
    ``Exception`` holding the repr instead; joblib sends the exception
    alone. Either way ``exc`` arrives as itself: without the context it
    was raised in, and without the cause it was raised from only where
    that cannot travel either.
    """
    cause, context, suppress = exc.__cause__, exc.__context__, exc.__suppress_context__
    if cause is None and context is None:
        return False
    exc.__context__ = None
    if cause is not None and travels(exc):
        return True
    exc.__cause__ = None
    if travels(exc):
        return True
    exc.__cause__, exc.__context__ = cause, context
    exc.__suppress_context__ = suppress
    return False


def _travels(exc: BaseException) -> bool:
    """Whether ``exc`` survives pickling (how a worker sends it back)."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any failure: it cannot travel
        return False
    return True


def held_items(operands: tuple[Value, ...]) -> list[Value]:
    """``operands``, with the items of lists, tuples and dicts among them, at any depth."""
    found: list[Value] = []
    todo, seen, visited = list(operands), set[int](), 0
    while todo and visited < 100_000:  # (a bound on the items looked at)
        item = todo.pop()
        visited += 1
        if type(item) in _NOT_ARRAYS:  # (a list of numbers: at once)
            continue
        if isinstance(item, (list, tuple, dict)):
            if id(item) not in seen:  # (a list that holds itself: once)
                seen.add(id(item))
                todo.extend(item.values() if isinstance(item, dict) else item)
        elif adapter_for_array(item) is not None:
            found.append(item)
    return found


#: What `held_items` passes over at once: no array's memory is in them.
_NOT_ARRAYS = frozenset({int, float, complex, bool, str, bytes, type(None)})


def hosted(rows: Rows, fn: UserFunction, span: range) -> Rows:
    """``rows`` on the host, placed, with what the host widened (`Rows.own`)."""
    own: list[Widened | None] = list(rows.own) or [None] * len(rows.leaves)
    leaves = list(rows.leaves)
    for i, v in enumerate(leaves):
        if type(v) is not np.ndarray:
            leaves[i] = leaf_on_host(v, fn, rows.spec, i, span)
            own[i] = own[i] or _widened(v, leaves[i])
    return Rows(rows.spec, leaves, True, tuple(own) if any(own) else ())


def native_labels(rows: Rows) -> list[str]:
    """The dtype of each leaf as ``fn`` returned it (before the host widened it)."""
    own = rows.own or (None,) * len(rows.leaves)
    return [
        dtype_label(leaf.dtype) if w is None else w.label
        for leaf, w in zip(rows.leaves, own, strict=True)
    ]


def output_label(spec: ResultSpec, i: int) -> str:
    """How a message names output ``i`` of a result of structure ``spec``."""
    if spec[0] == "array":
        return "its result"
    if spec[0] == "dict":
        return f"output [{spec[1][i]!r}]"
    return f"output [{i}]"


def describe_rows(
    spec: ResultSpec, dtypes: list[str], rows: list[tuple[int, ...]]
) -> str:
    """The dtype and row shape of each output, for a message."""
    parts = [f"{dtype} {row}" for dtype, row in zip(dtypes, rows, strict=True)]
    return " and ".join(parts) if spec[0] != "array" else parts[0]


def row_shape(leaf: Array) -> tuple[int, ...]:
    """The shape of one row of ``leaf``, as ints."""
    shape = leaf.shape
    if type(shape) is tuple:  # NumPy's: ints already
        return shape[1:]
    return tuple(int(d) for d in shape[1:])


def rows_where(start: int, stop: int) -> str:
    """``rows start:stop``, as a message names them."""
    return f"rows {start}:{stop}"
