"""Rows of the inputs, and the job that maps ``fn`` over them.

The one path of the data in `map_batches`, `compute_oom_safe` and the
executors: the inputs are cut into row slices (`row_slices`), each slice is
moved to the backend's device and handed to ``fn`` with the whole operands
(`Job.run`), and what ``fn`` returns goes to `xpkit._outputs.Outputs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._adapters import adapter_for_array, to_host

if TYPE_CHECKING:
    from ._backend import Backend

__all__ = ["Job", "common_rows", "row_slices", "to_host"]


def common_rows(arrays: tuple[Any, ...]) -> int:
    """The axis-0 length ``arrays`` share (TypeError/ValueError otherwise)."""
    if not arrays:
        msg = "arrays must hold at least one array"
        raise ValueError(msg)
    lengths = []
    for i, a in enumerate(arrays):
        shape = getattr(a, "shape", None)
        if not shape:
            msg = f"arrays[{i}] must be an array with at least one axis, got {a!r:.80}"
            raise TypeError(msg)
        lengths.append(shape[0])
    if len(set(lengths)) != 1:
        msg = f"arrays must share their axis-0 length, got lengths {lengths}"
        raise ValueError(msg)
    n = lengths[0]
    if not isinstance(n, int):
        msg = f"arrays have an unknown axis-0 length ({n!r}); compute chunk sizes first"
        raise ValueError(msg)  # noqa: TRY004 - dask NaN length
    return n


def row_slices(
    arrays: tuple[Any, ...], start: int, stop: int, n: int
) -> tuple[Any, ...]:
    """Rows ``start:stop`` of every array (the arrays themselves for all rows)."""
    if start == 0 and stop == n:
        return arrays
    return tuple(a[start:stop, ...] for a in arrays)


class Job:
    """``fn`` with its whole operands, run on row ranges of the batched inputs.

    With a ``backend``, each batch's slices are moved to its device
    (`Backend.asarray`: zero-copy where the library allows, e.g. NumPy to
    torch CPU) before ``fn`` sees them, and the whole operands are moved
    there once, when the job is made. A job pickles (for executors) when
    ``fn`` and its operands do.
    """

    __slots__ = ("args", "backend", "fn", "kwargs")

    def __init__(
        self,
        fn: Callable[..., Any],
        whole: tuple[Any, ...] | Mapping[str, Any] = (),
        backend: Backend | None = None,
    ) -> None:
        self.fn = fn
        self.backend = backend
        if isinstance(whole, Mapping):
            self.args: tuple[Any, ...] = ()
            self.kwargs = {k: self._move(v) for k, v in whole.items()}
        else:
            self.args = tuple(self._move(v) for v in whole)
            self.kwargs = {}

    def _move(self, x: Any) -> Any:
        if self.backend is None or adapter_for_array(x) is None:
            return x  # scalars and other objects go to fn as they are
        return self.backend.asarray(x)

    def run(self, arrays: tuple[Any, ...], start: int, stop: int, n: int) -> Any:
        """``fn`` on rows ``start:stop`` of ``arrays`` (of length ``n``)."""
        rows = row_slices(arrays, start, stop, n)
        if self.backend is not None:
            rows = tuple(self.backend.asarray(r) for r in rows)
        return self.fn(*rows, *self.args, **self.kwargs)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.fn, self.args, self.kwargs, self.backend)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.fn, self.args, self.kwargs, self.backend = state
