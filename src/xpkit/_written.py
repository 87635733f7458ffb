"""Rows an executor's workers write themselves into a store they all reach.

With ``out`` a store every worker reaches (`xpkit._into.Out.shared`: a
zarr array in a directory or an object store) and an executor, each task
writes its own rows into it and returns only `xpkit._rows.WRITTEN`:
nothing of the outputs travels back through the scheduler or to the
caller. The `WorkerWrites` sink, carried by the `xpkit._rows.Job` to the
workers, checks each task's rows against ``out`` as the caller's outputs
would (`xpkit._outputs.Outputs` with ``into``) and writes them.

Tasks cover whole chunks of the store (the first one starts on a chunk
boundary, the caller's process having written the rows from the probe's
end to it; an OOM splits a task on a chunk boundary), so that no two
processes ever write one chunk. A worker that dies while writing leaves
its chunks to the task's retry, which writes them again whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._outputs import Outputs
from ._rows import WRITTEN

if TYPE_CHECKING:
    from ._into import Out
    from ._rows import Rows
    from ._typing import UserFunction

__all__ = ["WorkerWrites"]


class WorkerWrites:
    """A `Job` sink: a task's rows written into ``out`` where the task runs.

    Parameters
    ----------
    out : Out
        The caller's store (`Out.shared`).
    n : int
        Rows of the call.
    fn : callable
        For error messages.
    """

    __slots__ = ("_outputs", "fn", "n", "out")

    def __init__(self, out: Out, n: int, fn: UserFunction) -> None:
        self.out, self.n, self.fn = out, n, fn
        self._outputs: Outputs | None = None

    def __call__(self, start: int, stop: int, rows: Rows) -> Rows:
        """Check rows ``start:stop`` against ``out``, write them, say so."""
        outputs = self._outputs
        if outputs is None:  # (one per worker: the first task it runs checks out)
            outputs = self._outputs = Outputs(self.n, self.fn, into=self.out)
        outputs.put(start, stop, rows)
        if outputs.waiting:  # pragma: no cover - the driver's tasks cover whole chunks
            msg = f"rows {start}:{stop} covered part of a chunk of out on a worker"
            raise AssertionError(msg)
        return WRITTEN

    def __getstate__(self) -> tuple[Out, int, UserFunction]:
        return (self.out, self.n, self.fn)

    def __setstate__(self, state: tuple[Out, int, UserFunction]) -> None:
        self.out, self.n, self.fn = state
        self._outputs = None
