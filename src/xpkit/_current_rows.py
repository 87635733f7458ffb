"""Which input rows ``fn`` is computing: `current_rows`.

`map_batches`, `plan_batches`' probe and `compute_oom_safe` set it around
each call of ``fn`` (`ROWS`), on every executor: in this thread, in a worker
thread, in a worker process. A context variable: each thread, and each
asyncio task, sees its own call's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["ROWS", "current_rows"]

#: The call of ``fn`` running in this context: its rows, and what is
#: called before `current_rows` answers (None while a meter traces ``fn``,
#: whose reads are not kept; else it raises where the answer would be
#: compiled into ``fn`` and reused for other batches). None: none runs.
#: One variable for both: set and reset once around each call of ``fn``.
ROWS: ContextVar[tuple[range, Callable[[], None] | None] | None] = ContextVar(
    "xpkit_current_rows", default=None
)


def current_rows() -> range | None:
    """The input rows of the batch ``fn`` is computing: ``range(start, stop)``.

    Inside ``fn`` of `map_batches` (and `compute_oom_safe`), on every
    executor and every backend: the positions, in the whole input, of the
    rows ``fn`` was given, as ``fn`` itself cannot tell from a slice. While
    the probe measures or traces ``fn`` it is the rows it runs on
    (``range(0, m)``); after an OOM split, each half's own. Outside ``fn``
    (and in code ``fn`` hands to other threads) it is None.

    With ``pad=True`` the last batch's ``fn`` is given more rows than the
    range holds (the last row repeated, see `map_batches`): the range holds
    the real ones, ``len(current_rows())`` of them.

    Under ``jax.jit`` (and in a ``lax.scan``, ``lax.cond`` or checkpoint
    body, which JAX traces and caches alike) it is refused: the range would
    be read once, when JAX traces ``fn``, and compiled in, and every batch
    of the same shape would run with the first batch's rows. Read it outside the jitted part (a
    ``fn`` that calls a jitted function with the rows' start), or pass
    positions as an input. ``torch.compile`` reads it on every call.

    Returns
    -------
    range or None
        ``range(start, stop)`` of the rows being computed, or None.

    Raises
    ------
    RuntimeError
        Read while a compiler traces ``fn`` to reuse it (``jax.jit``).

    Examples
    --------
    >>> import numpy as np
    >>> import xpkit
    >>> seen = []
    >>> def own_index(x):
    ...     rows = xpkit.current_rows()
    ...     seen.append(rows)
    ...     return np.arange(rows.start, rows.stop)
    >>> xpkit.map_batches(
    ...     own_index, np.zeros((5, 2)), bytes_per_item=1000, budget_gb=2.5e-6
    ... ).tolist()
    [0, 1, 2, 3, 4]
    >>> seen
    [range(0, 2), range(2, 4), range(4, 5)]
    >>> print(xpkit.current_rows())
    None
    """
    running = ROWS.get()
    if running is None:
        return None
    rows, guard = running
    if guard is not None:
        guard()
    return rows
