"""What a pool of workers does for `map_batches`, and the task it runs.

A pool ships the job (``fn`` with its whole operands) and the inputs to its
workers once, runs row ranges as tasks (`xpkit._rows.run_rows`) and hands
back NumPy results; `xpkit._executors._driver.each_task_on_pool` drives any pool.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._adapters._registry import adapter_for_array
from .._shown import said, shown
from .._typing import Array, TaskFuture, UserFunction

if TYPE_CHECKING:
    from .._rows import Job, Rows

__all__ = [
    "EXECUTORS",
    "Finished",
    "InputsLost",
    "Pool",
    "check_sendable",
    "travels_back",
]

#: The executor names `map_batches` accepts besides None and a dask Client.
EXECUTORS = ("dask", "joblib")


#: A task that ended: (its future, its rows or None, its error or None).
Finished = tuple[TaskFuture, "Rows | None", BaseException | None]


class InputsLost(Exception):
    """A task never ran: the inputs it needed went down with a worker."""


class Pool:
    """What `each_task_on_pool` needs from a pool of workers."""

    #: Words for messages ("the dask cluster at tcp://...").
    where: str = ""
    #: Worker threads: batches are sized so that each gets work.
    slots: int = 1
    #: Tasks in flight per worker thread: the next waits on its worker
    #: while one runs, so no thread idles through a scheduling round trip.
    per_slot: int = 2

    def task_budget_gb(self, input_bytes: int) -> float:
        """Measured memory one task may use (GB), headroom included."""
        raise NotImplementedError

    def check(self, job: Job, arrays: tuple[Array, ...] = ()) -> None:
        """Refuse, before anything runs, a job the workers cannot receive.

        ``fn``, and each whole operand that is not an array: pickled and
        unpickled, as a worker would receive it. One that unpickles nowhere
        killed the workers as they started, read as deaths for memory. Of
        each input and each whole operand that is an array, its first row
        alone makes the trip the pool sends it by (`ship_input`, pickle):
        torch's uint16, uint32, float8 and complex32 tensors unpickle
        nowhere, and Dask's serializer refuses bfloat16 and conj views.
        """
        check_sendable(job.fn, self.where)
        named: list[tuple[int | str, object]] = [*enumerate(job.args)]
        named += job.kwargs.items()
        for name, operand in named:
            if adapter_for_array(operand) is None:
                _check_operand_sendable(operand, name, self.where)
            else:
                _check_array_sendable(
                    _round_trip, operand, f"whole operand {name}", self.where
                )
        for i, x in enumerate(arrays):
            _check_array_sendable(self.ship_input, x, f"arrays[{i}]", self.where)

    def ship_input(self, x: Array) -> None:
        """Send ``x`` as the pool sends an input, and receive it as a worker would.

        By default as it pickles (`_round_trip`). Raises what either raises.
        """
        _round_trip(x)

    def start(self, job: Job, arrays: tuple[Array, ...]) -> None:
        """Ship the job (``fn`` and its whole operands) and the inputs (once)."""
        raise NotImplementedError

    def submit(self, start: int, stop: int, *, pad: bool = True) -> TaskFuture:
        """Run rows ``start:stop`` as one task; a future.

        ``pad``: whether a last batch may be padded (`xpkit._rows.Job.run`).
        """
        raise NotImplementedError

    def wait(self, futures: list[TaskFuture]) -> list[Finished]:
        """Block until some of ``futures`` finish: (future, result, error) each."""
        raise NotImplementedError

    def lost_worker(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the task's worker died (killed for memory)."""
        raise NotImplementedError

    def close(self) -> None:
        """The run is done: release what `start` shipped, stop what it started."""
        raise NotImplementedError

    def abandon(self, futures: list[TaskFuture]) -> None:
        """The run stops early (an error, a Ctrl-C): stop it now.

        Cancel ``futures``, stop what the pool started without waiting for
        its tasks, release what `start` shipped (or the part it got to).
        Bounded in time; safe to call whatever state the pool is in.
        """
        raise NotImplementedError


class _Discard:
    """A file that counts what is written to it and keeps none of it."""

    def write(self, data: bytes | memoryview) -> int:
        return memoryview(data).nbytes


def check_sendable(fn: UserFunction, where: str) -> None:
    """TypeError unless ``fn`` pickles as the executors ship it (cloudpickle).

    The pickle is streamed into nothing: a closure over a large array costs
    no copy of it here.
    """
    try:
        _pickler()(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(fn)
    except Exception as exc:  # noqa: BLE001 - any pickling failure
        msg = (
            f"fn={shown(fn)} cannot be sent to {where} ({type(exc).__name__}: {exc}); "
            "define it at module level, or install cloudpickle for lambdas "
            "and closures"
        )
        raise TypeError(msg) from None


def _check_array_sendable(
    trip: Callable[[Array], None], x: Array, label: str, where: str
) -> None:
    """TypeError unless the first row of array ``x`` survives ``trip`` to a worker."""
    piece = x[:1] if getattr(x, "ndim", 0) else x
    kind = f"{type(x).__module__}.{type(x).__qualname__} of dtype {x.dtype}"
    advice = "; convert it to a dtype that travels first"
    _check_travels(trip, piece, f"{label} ({kind})", where, advice)


def _check_operand_sendable(operand: object, name: int | str, where: str) -> None:
    """TypeError unless the whole operand ``name`` survives the trip to a worker.

    Its pickle is kept (and unpickled, as a worker would) up to
    `_UNPICKLED_BYTES`; a larger one is streamed into nothing (its copy
    would double it here), checked for pickling alone.
    """
    described = f"whole operand {name} ({type(operand).__qualname__})"
    _check_travels(_round_trip, operand, described, where)


def _check_travels(
    trip: Callable[[object], None],
    value: object,
    described: str,
    where: str,
    advice: str = "",
) -> None:
    """TypeError, naming ``described``, unless ``value`` survives ``trip``.

    The error's first line is quoted (Dask's serializer puts a traceback
    in its message).
    """
    try:
        trip(value)
    except Exception as exc:  # noqa: BLE001 - any failure: it cannot travel
        why = said(exc).partition("\n")[0][:200]
        msg = f"{described} cannot be sent to {where} ({type(exc).__name__}: {why}){advice}"
        raise TypeError(msg) from None


#: The largest pickle of a whole operand that is unpickled here to check it.
_UNPICKLED_BYTES = 64 * 2**20


class _Kept:
    """A file that keeps what is written to it up to ``most`` bytes, then nothing."""

    def __init__(self, most: int) -> None:
        self.buffer, self.most, self.whole = io.BytesIO(), most, True

    def write(self, data: bytes | memoryview) -> int:
        size = memoryview(data).nbytes
        if self.whole and self.buffer.tell() + size <= self.most:
            self.buffer.write(data)
        elif self.whole:
            self.whole = False
            self.buffer = io.BytesIO()  # (its bytes freed)
        return size


def travels_back(exc: BaseException) -> bool:
    """Whether ``exc`` survives the trip from a worker as the executors send it.

    loky and Dask pickle with cloudpickle, which sends a class defined in
    ``__main__`` or inside a function by value: such an exception arrives
    as itself (plain pickle refuses it).
    """
    try:
        _round_trip(exc)
    except Exception:  # noqa: BLE001 - any failure: it cannot travel
        return False
    return True


def _round_trip(value: object) -> None:
    """Pickle ``value`` as the executors send it, and unpickle it as a worker would.

    A pickle over `_UNPICKLED_BYTES` is streamed into nothing (its copy
    would double it here) and not unpickled. Raises what either raises.
    """
    kept = _Kept(_UNPICKLED_BYTES)
    _pickler()(kept, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    if kept.whole:
        pickle.loads(kept.buffer.getvalue())


def _pickler() -> type[pickle.Pickler]:
    """The pickler dask and loky send with: cloudpickle's where installed."""
    if importlib.util.find_spec("cloudpickle") is not None:
        pickler: type[pickle.Pickler] = importlib.import_module(
            "cloudpickle"
        ).CloudPickler
        return pickler
    return pickle.Pickler
