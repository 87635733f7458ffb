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
    n: Any = None
    for i, a in enumerate(arrays):
        shape = getattr(a, "shape", None)
        if not shape:
            msg = f"arrays[{i}] must be an array with at least one axis, got {a!r:.80}"
            raise TypeError(msg)
        if i == 0:
            n = shape[0]
        elif shape[0] is not n and shape[0] != n:  # (as a set: a NaN is itself)
            lengths = [a.shape[0] for a in arrays]
            msg = f"arrays must share their axis-0 length, got lengths {lengths}"
            raise ValueError(msg)
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


def pad_rows(rows: Any, size: int) -> Any:
    """``rows`` with its last row repeated up to ``size`` rows.

    Real values, so that ``fn`` meets no zeros it would divide by.
    """
    import array_api_compat

    xp = array_api_compat.array_namespace(rows)
    missing = size - rows.shape[0]
    tail = xp.broadcast_to(rows[-1:, ...], (missing, *rows.shape[1:]))
    return xp.concat([rows, tail], axis=0)


def trim_rows(result: Any, rows: int) -> Any:
    """The first ``rows`` rows of each array of ``fn``'s result."""
    if isinstance(result, Mapping):
        return {k: trim_rows(v, rows) for k, v in result.items()}
    if isinstance(result, (tuple, list)):
        return type(result)(trim_rows(v, rows) for v in result)
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
    """

    __slots__ = ("args", "backend", "fn", "kwargs", "pad_to")

    def __init__(
        self,
        fn: Callable[..., Any],
        whole: tuple[Any, ...] | Mapping[str, Any] = (),
        backend: Backend | None = None,
    ) -> None:
        self.fn = fn
        self.backend = backend
        self.pad_to = 0
        if isinstance(whole, (tuple, list)):  # (no ABC check on the common path)
            self.args: tuple[Any, ...] = (
                tuple(whole) if backend is None else tuple(self._move(v) for v in whole)
            )
            self.kwargs: dict[str, Any] = {}
        else:  # a mapping of keyword operands
            self.args = ()
            self.kwargs = {k: self._move(v) for k, v in whole.items()}

    def _move(self, x: Any) -> Any:
        if self.backend is None or adapter_for_array(x) is None:
            return x  # scalars and other objects go to fn as they are
        return self.backend.asarray(x)

    def run(
        self,
        arrays: tuple[Any, ...],
        start: int,
        stop: int,
        n: int,
        *,
        pad: bool = True,
    ) -> Any:
        """``fn`` on rows ``start:stop`` of ``arrays`` (of length ``n``).

        ``pad=False``: never padded (the halves of a batch split after an
        OOM, which padding would grow back to the size that failed).
        """
        rows = row_slices(arrays, start, stop, n)
        if self.backend is not None:
            rows = tuple(self.backend.asarray(r) for r in rows)
        size = stop - start
        if pad and stop == n and 0 < size < self.pad_to:
            rows = tuple(pad_rows(r, self.pad_to) for r in rows)
            return trim_rows(self.fn(*rows, *self.args, **self.kwargs), size)
        return self.fn(*rows, *self.args, **self.kwargs)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.fn, self.args, self.kwargs, self.backend, self.pad_to)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.fn, self.args, self.kwargs, self.backend, self.pad_to = state
