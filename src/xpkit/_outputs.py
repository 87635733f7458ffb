"""Where ``fn``'s results go: outputs allocated once, written batch by batch.

``fn`` returns one array, or a tuple, list or dict of arrays, each with one
row per input row. The first batch to arrive gives each output's row shape
and dtype; each output is then allocated once, for all ``n`` rows (on the
host as NumPy, or on the backend's device), and every batch, including rows
recovered by an OOM split, is copied into its slot. Nothing returned aliases
an input or a buffer ``fn`` may reuse.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from ._adapters._registry import adapter_for_array, get_adapter
from ._dtypes import dtype_label, item_size
from ._into import (
    ChunkWriter,
    Out,
    check_structure,
    host_rows_for,
    on_target,
    slots_of,
    target_of,
    writers_for,
)
from ._memory import BYTES_PER_GB, array_nbytes, available_bytes
from ._oom import UnsplittableMemoryError, work_ran_out_of_memory
from ._result_memory import copied, in_write_order, kept_as_they_are, shares_nothing
from ._result_spec import describe_spec
from ._rows import (
    ONE_ARRAY,
    Marker,
    ResultSpec,
    Rows,
    Widened,
    describe_rows,
    hosted,
    leaf_on_host,
    native_labels,
    output_label,
    row_shape,
    rows_of,
    rows_where,
    split_result,
)
from ._shown import shown

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ._adapters._base import Adapter
    from ._backend import Backend
    from ._typing import Array, UserFunction, UserResult

__all__ = ["PLACES", "Outputs", "outputs_of_all_rows"]

#: Where results are assembled: on the host as NumPy, or on the backend's device.
PLACES = ("host", "device")


class Outputs:
    """The outputs of ``fn`` for ``n`` rows, allocated on the first batch.

    Parameters
    ----------
    n : int
        Rows of every output.
    fn : callable
        For error messages.
    backend : Backend, optional
        With ``place="device"``: where the outputs live.
    place : {"host", "device"}
        ``"host"``: NumPy arrays. ``"device"``: arrays of ``backend`` on its
        device, written in place where its arrays allow it
        (`Adapter.writable_rows`), else assembled on the host and moved
        there once at the end.
    keep : bool, default True
        False: check every batch as usual, but allocate and keep nothing
        (what `plan_batches` needs from its probe).
    sources : tuple of arrays, default ()
        The arrays ``fn`` reads. On the host, a result for all ``n`` rows
        at once that shares no memory with them (and can be written) is
        kept as it is, not copied.
    stream : bool, default False
        Keep nothing, but hand each batch's rows, once checked, to
        `pieces` (what `iter_batches` yields), in the order they came.
    into : Out, optional
        The caller's arrays (``out=``, `xpkit._into`): the rows are written
        into them, checked against them at the first batch, and nothing is
        allocated; an array of a library other than NumPy gets its rows on
        its device (``backend`` gives its Backend), any other on the host.
    """

    __slots__ = (
        "_device",
        "_dtypes",
        "_in_place",
        "_into",
        "_kept",
        "_lib",
        "_native",
        "_out",
        "_pending",
        "_rows",
        "_sizes",
        "_sources",
        "_spec",
        "_targets",
        "fn",
        "keep",
        "n",
    )

    def __init__(
        self,
        n: int,
        fn: UserFunction,
        backend: Backend | None = None,
        place: str = "host",
        *,
        keep: bool = True,
        sources: tuple[Array, ...] = (),
        into: Out | None = None,
        stream: bool = False,
    ) -> None:
        self.n = n
        self.fn = fn
        self.keep = keep and not stream
        self._pending: deque[tuple[int, int, list[Array]]] | None = (
            deque() if stream else None
        )
        self._sources = sources
        self._device = self._lib = None
        self._in_place = False
        if place == "device" and backend is not None:
            self._device = backend
            self._lib = get_adapter(backend.library)
            self._in_place = self._lib.writable_rows
        self._spec: ResultSpec | None = None
        self._out: list[Array] = []
        self._dtypes: list[str] = []
        self._native: list[str] = []  # (the dtypes fn returned: `native_labels`)
        self._rows: list[tuple[int, ...]] = []
        self._sizes: list[int] = []
        self._kept: list[Array] = []
        self._into = into
        #: Where the rows of each of out's arrays go: None (the host), else
        #: its Backend and that Backend's adapter (`target_of`).
        self._targets: list[tuple[Backend, Adapter] | None] = []
        if into is not None:
            self._targets = [target_of(leaf, backend) for leaf in into.leaves]

    def convert(self, rows: Rows, span: range = range(0)) -> Rows:
        """The arrays of ``rows`` (of ``span``) where the outputs live (once: then `placed`)."""
        if rows.placed:
            return rows
        spec, leaves = rows.spec, rows.leaves
        if self._in_place:  # (on the backend's device: each itself where it is)
            device, lib = self._device, self._lib
            assert device is not None
            own = rows.own or (None,) * len(leaves)  # (what a task's host widened)
            return Rows(
                spec,
                [
                    on_target(device, lib, v, d)
                    for v, d in zip(leaves, own, strict=True)
                ],
                True,
            )
        into = self._into
        if into is None:  # (at once: a planned call's common case)
            return hosted(rows, self.fn, span)
        slots = slots_of(into, spec, len(leaves))
        own = rows.own or (None,) * len(leaves)
        leaves = [
            self._leaf(v, k, spec, i, span, own[i])
            for i, (v, k) in enumerate(zip(leaves, slots, strict=True))
        ]
        return Rows(spec, leaves, True)

    def _leaf(
        self,
        v: Array,
        k: int,
        spec: ResultSpec,
        i: int,
        span: range,
        own: Widened | None = None,
    ) -> Array:
        """``fn``'s array ``v`` where the outputs live: for ``out``'s array ``k`` (-1: none).

        On that array's Backend (`on_target`, in ``own``: the dtype ``fn``
        returned where a task's host widened it), else on the host, checked
        against it by ``v``'s own dtype (`host_rows_for`).
        """
        target = self._targets[k] if k >= 0 else None
        if target is not None:
            return on_target(*target, v, own)
        if type(v) is np.ndarray and own is None:
            return v
        host = v if type(v) is np.ndarray else leaf_on_host(v, self.fn, spec, i, span)
        return host_rows_for(self._into, k, v, host, self.fn, own)

    def take(self, result: UserResult, start: int, stop: int) -> Rows:
        """``fn``'s raw result for rows ``start:stop``, checked and converted."""
        rows = rows_of(result)
        if rows is None:  # not arrays: the error names fn and the rows
            rows = split_result(result, self.fn, rows_where(start, stop))
        return self.convert(rows, range(start, stop))

    def put(self, start: int, stop: int, rows: Rows, *, more: bool = False) -> None:
        """Copy the rows of every output into their slots.

        The first call allocates the outputs; a `MemoryError` then says they
        do not fit (an out-of-memory error that the callers' split-and-retry
        recovers from, by trying again with fewer rows held meanwhile).
        ``more``: ``fn`` runs again before these rows are handed over (a
        probe's, a piece of an OOM split): with ``stream`` they are held as
        copies, since a ``fn`` that reuses a buffer would overwrite them.
        """
        if rows.spec[0] is Marker.WRITTEN:  # (a worker wrote them into the store)
            if self._spec is None and self._into is not None:
                self._spec = self._into.spec
            return
        rows = self.convert(rows, range(start, stop))
        for i, leaf in enumerate(rows.leaves):
            shape = tuple(leaf.shape)
            if not shape or shape[0] != stop - start:
                msg = (
                    f"fn={shown(self.fn)} must return one row per input row: for "
                    f"{rows_where(start, stop)} {output_label(rows.spec, i)} has shape "
                    f"{shape}, expected axis 0 of length {stop - start}"
                )
                raise ValueError(msg)
        if self._spec is None:
            self._native = native_labels(rows) if rows.own else []
            if self._first(rows, whole=start == 0 and stop == self.n):
                return  # kept as it is: nothing to copy
            rows = self._same_structure(rows, start, stop)  # (in the outputs' order)
            if self.keep:  # (the layout is these rows': nothing to compare)
                self._write_rows(start, stop, rows.leaves)
            elif self._pending is not None:
                self._hand_over(start, stop, rows.leaves, more)
            return
        rows = self._same_structure(rows, start, stop)
        dtypes, shapes = self._layout()
        # (bfloat16 and float32 are both float32 here: the dtypes fn returned)
        native = self._native or dtypes
        labels = native_labels(rows) if rows.own or self._native else native
        for i, leaf in enumerate(rows.leaves):
            name = dtype_label(leaf.dtype)
            if name != dtypes[i] or labels[i] != native[i]:
                before, now = (
                    (dtypes[i], name) if name != dtypes[i] else (native[i], labels[i])
                )
                msg = (
                    f"fn={shown(self.fn)} changed the dtype of {output_label(rows.spec, i)} "
                    f"between batches: {before} before, {now} for "
                    f"{rows_where(start, stop)}"
                )
                raise TypeError(msg)
            row = row_shape(leaf)
            if row != shapes[i]:
                msg = (
                    f"fn={shown(self.fn)} changed the row shape of {output_label(rows.spec, i)} "
                    f"between batches: {shapes[i]} before, {row} for "
                    f"{rows_where(start, stop)}"
                )
                raise ValueError(msg)
        if self.keep:
            self._write_rows(start, stop, rows.leaves)
        if self._pending is not None:
            self._hand_over(start, stop, rows.leaves, more)

    def _hand_over(
        self, start: int, stop: int, leaves: list[Array], more: bool
    ) -> None:
        """Rows for `pieces` (``stream``): copies where ``fn`` runs before they go."""
        assert self._pending is not None
        self._pending.append(
            (start, stop, [copied(a) for a in leaves] if more else leaves)
        )

    def pieces(self) -> Iterator[tuple[range, UserResult]]:
        """The rows handed over since the last call (``stream``), each once."""
        pending, device = self._pending, self._device
        while pending:
            start, stop, leaves = pending.popleft()
            if device is not None and not self._in_place:  # (kept on the host)
                leaves = [device.asarray(leaf) for leaf in leaves]
            yield range(start, stop), self._structured(leaves)

    def _write_rows(self, start: int, stop: int, leaves: list[Array]) -> None:
        """Copy each of ``leaves`` into rows ``start:stop`` of its output.

        Outputs that are inputs (in place) last (`in_write_order`).
        """
        in_place = () if self._into is None else self._into.in_place
        for i, leaf in (
            in_write_order(leaves, in_place) if in_place else enumerate(leaves)
        ):
            self._write(i, start, stop, leaf)

    def _write(self, i: int, start: int, stop: int, leaf: Array) -> None:
        """Copy ``leaf`` into rows ``start:stop`` of output ``i``."""
        out = self._out[i]
        if out.__class__ is ChunkWriter:
            out.write(start, stop, leaf)
        else:
            out[start:stop, ...] = leaf

    def _same_structure(self, rows: Rows, start: int, stop: int) -> Rows:
        assert self._spec is not None
        spec = rows.spec
        if spec[0] == "dict" == self._spec[0] and set(spec[1]) == set(self._spec[1]):
            by_key = dict(zip(spec[1], rows.leaves, strict=True))
            return Rows(self._spec, [by_key[k] for k in self._spec[1]], rows.placed)
        if spec != self._spec:
            msg = (
                f"fn={shown(self.fn)} returned {describe_spec(spec)} for {rows_where(start, stop)} but "
                f"{describe_spec(self._spec)} before"
            )
            raise ValueError(msg)
        return rows

    def _first(self, rows: Rows, *, whole: bool) -> bool:
        """Outputs for the first batch; True when its own arrays are kept as them.

        Kept arrays give the dtypes and row shapes only when they are asked
        for (`_layout`): a call whose one batch is all the rows never asks.
        """
        if self._into is not None:
            self._attach(rows, self._into)
            return False
        kept = (
            whole
            and self.keep
            and self._device is None
            and kept_as_they_are(rows.leaves, self._sources)
        )
        if kept:
            self._out = self._kept = list(rows.leaves)
        else:
            self._read_layout(rows.leaves)
            if self.keep:
                self._allocate(rows)
        self._spec = rows.spec
        return kept

    def _attach(self, rows: Rows, into: Out) -> None:
        """``into`` as the outputs, once ``fn``'s first rows match it."""
        check_structure(into, rows.spec, self.fn)
        leaves = rows.leaves
        if rows.spec[0] == "dict":  # (in out's order)
            by_key = dict(zip(rows.spec[1], leaves, strict=True))
            leaves = [by_key[k] for k in into.spec[1]]
        self._read_layout(leaves)
        self._out = writers_for(into, self._rows, self._dtypes, self.fn, self.n)
        self._spec = into.spec

    def _read_layout(self, leaves: list[Array]) -> None:
        self._dtypes = [dtype_label(leaf.dtype) for leaf in leaves]
        self._rows = [row_shape(leaf) for leaf in leaves]
        self._sizes = [
            item_size(leaf.dtype, label)
            for leaf, label in zip(leaves, self._dtypes, strict=True)
        ]

    def _layout(self) -> tuple[list[str], list[tuple[int, ...]]]:
        """The dtype and row shape of every output (once the first batch came)."""
        if not self._dtypes and self._kept:
            self._read_layout(self._kept)
        return self._dtypes, self._rows

    @property
    def row_bytes(self) -> int | None:
        """Bytes of one row of every output, once the first batch has arrived."""
        dtypes, shapes = self._layout()
        if not dtypes:  # (known from the first batch on)
            return None
        return sum(
            size * int(np.prod(row, dtype=np.int64))
            for size, row in zip(self._sizes, shapes, strict=True)
        )

    def _allocate(self, rows: Rows) -> None:
        self._check_room(rows)
        out: list[Array] = []
        handled = sys.exception()  # (the caller's, if any: not the allocation's)
        for i, leaf in enumerate(rows.leaves):
            shape = (self.n, *self._rows[i])
            try:
                if self._in_place:
                    assert self._device is not None
                    assert self._lib is not None
                    # (the library's own namespace: a Backend's may make
                    # read-only arrays, the plugin's numpy-readonly's)
                    out.append(
                        self._lib.namespace().empty(
                            shape,
                            dtype=leaf.dtype,
                            device=self._lib.device_of(leaf),
                        )
                    )
                else:
                    out.append(np.empty(shape, dtype=leaf.dtype))
            except Exception as exc:
                if not work_ran_out_of_memory(exc, handled):
                    raise
                gib = array_nbytes(leaf[:1]) * self.n / 2**30
                msg = (
                    f"the outputs of fn={shown(self.fn)} do not fit: {output_label(rows.spec, i)} "
                    f"needs shape {shape}, {self._dtypes[i]} ({gib:.3g} GiB)"
                )
                raise MemoryError(msg) from None
        self._out = out

    def _check_room(self, rows: Rows) -> None:
        """MemoryError, before allocating, when the outputs cannot fit where they go.

        Compared with the memory available there now (the host's, or the
        device's): a process that overcommits memory would otherwise
        allocate them and be killed while filling them.
        """
        total = self.row_bytes
        if total is None:
            return
        total *= self.n
        try:
            room = available_bytes(self._device)
        except Exception:  # noqa: BLE001 - nothing to compare with: allocate and see
            return
        if total > room:
            where = "the host" if self._device is None else self._device.name
            msg = (
                f"the outputs of fn={shown(self.fn)} do not fit: {self.n} rows of "
                f"{describe_rows(rows.spec, self._dtypes, self._rows)} need "
                f"{total / BYTES_PER_GB:.3g} GiB on {where}, which has "
                f"{room / BYTES_PER_GB:.3g} GiB available"
            )
            raise UnsplittableMemoryError(msg)

    @property
    def waiting(self) -> int:
        """Chunks of ``into`` with rows still to come (0 without one)."""
        return sum(o.waiting for o in self._out if o.__class__ is ChunkWriter)

    @property
    def allocated(self) -> bool:
        """Whether the first batch has arrived (and the outputs exist)."""
        return self._spec is not None

    def value(self) -> UserResult:
        """The outputs, in the structure ``fn`` returned them."""
        if self._spec is None or not self.keep:  # pragma: no cover - callers' bug
            msg = "no outputs were kept"
            raise RuntimeError(msg)
        if self._into is not None:
            if self.waiting:
                msg = "rows of out were never written"  # pragma: no cover - a bug
                raise RuntimeError(msg)
            self._out = []
            return self._into.value
        outs, self._out = self._out, []
        if self._device is not None and not self._in_place:
            moved = []
            while outs:  # each host copy goes as soon as its device copy exists
                moved.append(self._device.asarray(outs.pop(0)))
            outs = moved
        if self._spec[0] == "array":  # (the common case, without a call)
            return outs[0]
        return self._structured(outs)

    def _structured(self, leaves: list[Array]) -> UserResult:
        """``leaves`` in the structure ``fn`` returned."""
        assert self._spec is not None
        kind = self._spec[0]
        if kind == "array":
            return leaves[0]
        if kind == "dict":
            return dict(zip(self._spec[1], leaves, strict=True))
        if kind == "list":
            return list(leaves)
        if kind in ("namedtuple", "sequence"):
            made: UserResult = self._spec[2].make(leaves)
            return made
        return tuple(leaves)


def outputs_of_all_rows(
    result: UserResult, n: int, fn: UserFunction, sources: tuple[Array, ...]
) -> UserResult:
    """The outputs on the host, from ``fn``'s ``result`` for all ``n`` rows at once.

    One array that can be held as it is on the host (`kept_as_they_are`, after the
    conversion an `Outputs` makes: a CPU tensor's own memory) is returned
    at once: what an `Outputs` would keep. Anything else goes through one
    (checked, converted, copied where it must be).
    """
    if type(result) is not np.ndarray:
        adapter = adapter_for_array(result)
        if adapter is not None and adapter.lost_in_conversion(result) is None:
            result = leaf_on_host(result, fn, ONE_ARRAY, 0, range(n))
    if (
        type(result) is np.ndarray
        and result.ndim
        and result.shape[0] == n
        and result.flags.writeable
        and shares_nothing(result, sources)
    ):
        return result
    outputs = Outputs(n, fn, sources=sources)
    outputs.put(0, n, outputs.take(result, 0, n))
    return outputs.value()
