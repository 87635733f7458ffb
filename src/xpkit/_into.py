"""Outputs the caller gave (``out=``): each batch's rows written into them.

`map_batches(fn, *arrays, out=...)` writes ``fn``'s result into arrays the
caller provides instead of allocating its own: one, or a tuple, list or
dict of them matching ``fn``'s result. Anything with ``shape``, ``dtype``
and slice assignment will do: a NumPy array or ``np.memmap``, an on-disk
store's array (zarr, h5py), or a writable array of an array library (torch),
which gets its rows on its own device. `check_out` refuses a wrong ``out``
before anything runs (its structure, its rows, a read-only array), and
`xpkit._outputs.Outputs` checks it against ``fn``'s first result
(`check_structure`, `check_layout`: structure, row shape, dtype) before any
other batch runs: a `ValueError` or `TypeError` naming ``out``.

A store that keeps its rows in chunks (a ``chunks`` attribute whose first
entry is the rows of a chunk; a sharded zarr array's shards,
`xpkit._adapters._stores.rows_per_write`) gets every chunk written once, whole
(`ChunkWriter`). Batches cover whole chunks where they hold one (the plan
rounds them down, `aligned_batch`; the first after the probe's rows ends on
a boundary, `stop_at_chunk`), and rows of a chunk that a batch covers only
in part (the probe's, an OOM half's) wait in a buffer of one chunk until the
rest of it arrives: no batch writes half of a chunk that another completes.
Nothing the size of the whole output is allocated. What writing a batch
holds in memory beside ``fn``'s result (`held_while_writing`: the store's
chunks being encoded, `xpkit._adapters._stores.bytes_held_while_writing`,
and the one chunk a `ChunkWriter` may buffer) is counted in the batch
budget (`xpkit._plan`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ._adapters._registry import adapter_for_array, get_adapter, over_read_only_memory
from ._adapters._stores import (
    bytes_held_while_writing,
    closed,
    itemsize_of,
    read_only,
    rows_per_write,
    written_by_workers,
)
from ._dtypes import dtype_label
from ._result_spec import describe_spec, sequence_spec
from ._shown import shown

if TYPE_CHECKING:
    from ._adapters._base import Adapter
    from ._adapters._layout import Extent
    from ._backend import Backend
    from ._rows import ResultSpec, Widened
    from ._typing import Array, HostArray, UserFunction, Value

__all__ = [
    "ChunkWriter",
    "Out",
    "aligned_batch",
    "check_layout",
    "check_out",
    "check_structure",
    "chunk_rows",
    "dtype_refused",
    "held_while_writing",
    "host_rows_for",
    "on_target",
    "slots_of",
    "stop_at_chunk",
    "target_of",
    "writers_for",
]


class Out(NamedTuple):
    """A checked ``out``: its structure, its arrays and how each is written.

    Attributes
    ----------
    value : object
        ``out`` as the caller gave it (what `map_batches` returns).
    spec : tuple
        Its structure, as `xpkit._rows.Rows` spells ``fn``'s result's.
    leaves : tuple
        Its arrays, in the order of ``spec``.
    chunk_rows : tuple of int
        Rows of one chunk of each array (1: written as they come).
    shared : bool
        Whether an executor's workers can write every array themselves (a
        store they all reach, `xpkit._adapters._stores`).
    in_place : tuple of int
        The positions of the arrays that are inputs themselves (written in
        place: `check_out`).
    """

    value: object
    spec: ResultSpec
    leaves: tuple[Value, ...]
    chunk_rows: tuple[int, ...]
    shared: bool = False
    in_place: tuple[int, ...] = ()


def check_out(
    out: Value,
    n: int,
    arrays: tuple[Array, ...] = (),
    whole: tuple[tuple[str, Array], ...] = (),
) -> Out:
    """``out`` checked for a call of ``n`` rows (TypeError/ValueError naming it).

    ``arrays`` (the inputs) and ``whole`` (the whole operands, each with its
    name) are what ``fn`` reads: an output that shares memory with one
    would overwrite what a later batch has yet to read. An output may be an
    input itself, the same elements in the same order (each batch writes
    the rows it read: in place); nothing else of either may overlap it.
    """
    if isinstance(out, (tuple, list)):
        if not out:
            msg = f"out must be an array or a non-empty tuple, list or dict, got {shown(out)}"
            raise ValueError(msg)
        spec: ResultSpec = sequence_spec(out)
        named = [(f"out[{i}]", leaf) for i, leaf in enumerate(out)]
    elif isinstance(out, Mapping):
        if not out:
            msg = "out must be an array or a non-empty tuple, list or dict, got {}"
            raise ValueError(msg)
        bad = [k for k in out if not isinstance(k, str)]
        if bad:
            msg = f"out must map fn's output names (str) to arrays, got key {shown(bad[0])}"
            raise TypeError(msg)
        spec = ("dict", tuple(out))
        named = [(f"out[{shown(k)}]", leaf) for k, leaf in out.items()]
    else:
        spec = ("array",)
        named = [("out", out)]
    chunks = tuple(_check_leaf(name, leaf, n) for name, leaf in named)
    leaves = tuple(leaf for _, leaf in named)
    in_place = _refuse_shared_memory(named, arrays, whole)
    shared = all(written_by_workers(leaf) for leaf in leaves)
    return Out(out, spec, leaves, chunks, shared, in_place)


def _refuse_shared_memory(
    named: list[tuple[str, Value]],
    arrays: tuple[Array, ...],
    whole: tuple[tuple[str, Array], ...],
) -> tuple[int, ...]:
    """ValueError where outputs share memory, or one shares an input's or a whole operand's.

    An output that is an input, element for element, is the one exception:
    the positions of such outputs come back.
    """
    extents = [_extent(leaf) for _, leaf in named]
    in_place: list[int] = []
    for i, (name, leaf) in enumerate(named):
        mine = extents[i]
        for (other, given), theirs in zip(
            named[i + 1 :], extents[i + 1 :], strict=True
        ):
            if leaf is given or (
                mine is not None and theirs is not None and mine.shares(theirs)
            ):
                msg = f"{name} and {other} share memory: each output needs its own"
                raise ValueError(msg)
        if mine is None:
            continue
        for k, source in enumerate(arrays):
            theirs = _extent(source)
            if theirs is not None and mine == theirs and i not in in_place:
                in_place.append(i)
            if theirs is not None and mine.shares(theirs) and mine != theirs:
                msg = (
                    f"{name} shares memory with the input arrays[{k}] without being "
                    "it: writing a batch's rows would change rows fn has yet to "
                    "read. Give out memory of its own (or the input itself, to "
                    "write in place)"
                )
                raise ValueError(msg)
        for operand, source in whole:
            theirs = _extent(source)
            if theirs is not None and mine.shares(theirs):
                msg = (
                    f"{name} shares memory with the whole operand {operand}, which "
                    "every batch reads: give out memory of its own"
                )
                raise ValueError(msg)
    return tuple(in_place)


def _over_pages_that_can_be_written(name: str, leaf: Value) -> None:
    """ValueError where ``leaf`` lies over read-only pages (a write would crash)."""
    if over_read_only_memory(leaf):  # (torch.from_numpy of a read-only memmap)
        msg = (
            f"{name} lies over read-only memory (a view of a tensor over a "
            "read-only memmap, say): writing rows into it would end the process"
        )
        raise ValueError(msg)


def _extent(leaf: Value) -> Extent | None:
    """Where ``leaf``'s elements lie, for an array of a library xpkit knows."""
    adapter = adapter_for_array(leaf)
    return None if adapter is None else adapter.memory_extent(leaf)


def _check_leaf(name: str, leaf: Value, n: int) -> int:
    """The rows of one chunk of ``leaf``, once it is checked as an output of n rows."""
    why = closed(leaf)
    if why is not None:
        msg = f"{name} cannot be written: it is {why}"
        raise ValueError(msg)
    if not all(hasattr(leaf, a) for a in ("shape", "dtype", "__setitem__")):
        msg = (
            f"{name} must be an array (shape, dtype and slice assignment: a NumPy "
            f"array or memmap, a zarr or h5py array, a writable tensor), got "
            f"{type(leaf).__qualname__}"
        )
        raise TypeError(msg)
    shape = tuple(leaf.shape)
    if not shape or shape[0] != n:
        msg = f"{name} must have {n} rows (axis 0), one per input row; it has shape {shape}"
        raise ValueError(msg)
    if isinstance(leaf, np.ndarray):
        if get_adapter("numpy").lost_in_conversion(leaf) is not None:
            msg = (
                f"{name} is a NumPy masked array: writing rows into it would "
                "wipe its mask; give a plain array (its .data, say) and mask "
                "the result after"
            )
            raise TypeError(msg)
        if not leaf.flags.writeable:
            msg = f"{name} is read-only (a NumPy array whose writeable flag is off)"
            raise ValueError(msg)

        why = get_adapter("numpy").unwritable(leaf)
        if why is not None:
            msg = f"{name} cannot be written: it is {why}"
            raise ValueError(msg)
        _over_pages_that_can_be_written(name, leaf)
        return 1
    adapter = adapter_for_array(leaf)
    if adapter is not None and not adapter.writable_rows:
        msg = (
            f"{name} is an array of {adapter.label}, whose arrays cannot be written "
            "in place; give an array that can (NumPy, a store's array), or let "
            "map_batches allocate the outputs (result_on='device')"
        )
        raise TypeError(msg)
    if adapter is not None:
        why = adapter.unwritable(leaf)
        if why is not None:
            msg = f"{name} cannot be written: it is {why}"
            raise ValueError(msg)
        _over_pages_that_can_be_written(name, leaf)
        return 1  # (rows of an array library: no chunks of a store)
    why = read_only(leaf)
    if why is not None:
        msg = f"{name} is {why}"
        raise ValueError(msg)
    chunks = rows_per_write(leaf)
    if chunks is None:
        return 1
    rows = chunks[0] if isinstance(chunks, tuple) and chunks else None
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 1:
        msg = (
            f"{name} has chunks {shown(chunks)}: its rows must be cut in chunks of one "
            "size (an int first in its chunks)"
        )
        raise ValueError(msg)
    return rows


def chunk_rows(out: Out | None) -> int:
    """Rows that batches align to: every output's chunks at once (1: none)."""
    if out is None:
        return 1
    return math.lcm(*out.chunk_rows)


def aligned_batch(batch: int, out: Out | None) -> int:
    """``batch`` rounded down to whole chunks of ``out`` (as it is under one chunk)."""
    chunk = chunk_rows(out)
    return batch if batch < chunk else batch // chunk * chunk


def held_while_writing(out: Out, batch: int) -> int:
    """Bytes held in memory while a batch of ``batch`` rows is written into ``out``.

    For each array: what its store holds while it writes those rows, and
    for one cut in chunks the chunk its `ChunkWriter` may buffer (rows of a
    chunk that a batch covers only in part). 0 for arrays without chunks.
    """
    held = 0
    for leaf, rows in zip(out.leaves, out.chunk_rows, strict=True):
        held += bytes_held_while_writing(leaf, batch)
        if rows > 1:
            row = math.prod(int(d) for d in leaf.shape[1:])
            held += rows * row * itemsize_of(leaf)
    return held


def stop_at_chunk(start: int, stop: int, n: int, chunk: int) -> int:
    """``stop``, moved back to the last multiple of ``chunk`` after ``start``.

    So that a batch after the probe's rows (or an OOM's halves), which starts
    inside a chunk, ends where a chunk does, and the next ones cover whole
    chunks; as it is where no multiple lies between them, or at ``n``.
    """
    if chunk == 1 or stop >= n:
        return stop
    boundary = stop // chunk * chunk
    return boundary if boundary > start else stop


def target_of(leaf: Value, owner: Backend | None) -> tuple[Backend, Adapter] | None:
    """Where rows for ``leaf`` go: None (the host), else its Backend and adapter."""
    if owner is None or isinstance(leaf, np.ndarray):
        return None
    adapter = adapter_for_array(leaf)
    if adapter is None or adapter is get_adapter("numpy"):
        return None
    return owner.from_arrays(leaf), adapter


def slots_of(out: Out, spec: ResultSpec, count: int) -> list[int]:
    """The index in ``out`` of each of ``count`` arrays of fn's result of structure ``spec``.

    Matched by key where both are dicts, else by position; all -1 (none)
    where their number differs (`check_structure` says so).
    """
    slots = list(range(len(out.leaves)))
    if spec[0] == "dict" == out.spec[0]:
        by_key = dict(zip(out.spec[1], slots, strict=True))
        slots = [by_key.get(k, -1) for k in spec[1]]  # (in fn's order)
    return slots if len(slots) == count else [-1] * count


def on_target(
    backend: Backend, lib: Adapter | None, leaf: Array, own: Widened | None = None
) -> Array:
    """``leaf`` on ``backend`` (of the adapter ``lib``): itself when it is there already.

    (Then in any dtype its library holds, float8 and complex32 too, untouched.)
    ``own``: what ``fn`` returned where a task's trip through the host
    widened its dtype (`xpkit._rows.Rows.own`): cast back, exactly, where
    ``backend`` is of that library.
    """
    if adapter_for_array(leaf) is lib:
        try:  # (the Backend of leaf, from the class of the one given)
            if backend.from_arrays(leaf) == backend:
                return leaf
        except (TypeError, ValueError):
            pass
    moved = backend.asarray(leaf)
    if own is None or own.library != backend.library:
        return moved
    return get_adapter(own.library).narrowed_back(moved, own.dtype)


def host_rows_for(
    out: Out | None,
    i: int,
    leaf: Array,
    host: HostArray,
    fn: UserFunction,
    widened: Widened | None = None,
) -> HostArray:
    """``host`` (``leaf`` of fn's result, on the host) as rows for ``out``'s array ``i``.

    As it is without ``out`` (or with ``i`` -1: no array of it).

    Compared by ``leaf``'s own dtype (``widened``'s, where a task brought
    ``leaf`` to the host: `xpkit._rows.Rows.own`): where NumPy widens it on
    the host (torch's bfloat16 and 8-bit floats to float32), an array of
    that very dtype (ml_dtypes') gets ``leaf``'s values back in it, exactly;
    one of another dtype is refused (`dtype_refused`, naming ``leaf``'s).
    """
    if out is None or i < 0:
        return host
    own = dtype_label(leaf.dtype) if widened is None else widened.label
    if dtype_label(host.dtype) == own:
        return host
    given = out.leaves[i].dtype
    label = dtype_label(given)
    if label != own:
        raise dtype_refused(out, i, label, own, fn)
    rows: HostArray = host.astype(given)  # (widened on the host: back, exactly)
    return rows


def check_structure(out: Out, spec: ResultSpec, fn: UserFunction) -> None:
    """ValueError where ``fn``'s first result (of structure ``spec``) is not ``out``'s."""
    if spec == out.spec or (
        spec[0] == "dict" == out.spec[0] and set(spec[1]) == set(out.spec[1])
    ):
        return
    msg = (
        f"out does not match fn={shown(fn)}'s result: fn returned "
        f"{describe_spec(spec)}, out is {describe_spec(out.spec)}"
    )
    raise ValueError(msg)


def check_layout(
    out: Out, i: int, row: tuple[int, ...], dtype: str, given: str, fn: UserFunction
) -> None:
    """Output ``i`` of ``out`` (of dtype ``given``) against ``fn``'s rows there."""
    name = _name(out.spec, i)
    shape = tuple(int(d) for d in out.leaves[i].shape[1:])
    if shape != row:
        msg = (
            f"{name} has rows of shape {shape}, but fn={shown(fn)} returns rows of "
            f"shape {row} there"
        )
        raise ValueError(msg)
    if given != dtype:
        raise dtype_refused(out, i, given, dtype, fn)


def writers_for(
    out: Out,
    rows: list[tuple[int, ...]],
    dtypes: list[str],
    fn: UserFunction,
    n: int,
) -> list[Value]:
    """``out``'s arrays as the outputs of ``n`` rows, once each matches ``fn``'s rows there.

    ``rows`` and ``dtypes``: the row shape and dtype of each array of
    ``fn``'s result, in ``out``'s order (`check_layout`). An array cut in
    chunks is written through a `ChunkWriter`; any other as it is.
    """
    for i, given in enumerate(out.leaves):
        check_layout(out, i, rows[i], dtypes[i], dtype_label(given.dtype), fn)
    return [
        leaf if size == 1 else ChunkWriter(leaf, size, n)
        for leaf, size in zip(out.leaves, out.chunk_rows, strict=True)
    ]


def dtype_refused(
    out: Out, i: int, given: str, dtype: str, fn: UserFunction
) -> TypeError:
    """The error for output ``i`` of ``out`` (of dtype ``given``) where fn returns ``dtype``."""
    msg = (
        f"{_name(out.spec, i)} has dtype {given}, but fn={shown(fn)} returns {dtype} "
        "there (nothing is cast: give out of that dtype)"
    )
    return TypeError(msg)


class ChunkWriter:
    """Rows into a store cut in chunks of ``size`` rows: each chunk written once, whole.

    Rows of a chunk that a piece covers only in part wait in a buffer of
    that one chunk until the rest of it arrives (pieces come in any order:
    the probe's rows, OOM halves, an executor's tasks).
    """

    __slots__ = ("_buffers", "_n", "_size", "_target")

    def __init__(self, target: Value, size: int, n: int) -> None:
        self._target, self._size, self._n = target, size, n
        #: chunk index -> (the chunk's rows, which of them came).
        self._buffers: dict[int, tuple[HostArray, HostArray]] = {}

    def write(self, start: int, stop: int, leaf: Array) -> None:
        """Rows ``start:stop``: the whole chunks among them at once, parts buffered."""
        size = self._size
        first = -(-start // size) * size  # the first chunk boundary in the rows
        last = max(first, stop if stop == self._n else stop // size * size)
        if first < last:
            self._target[first:last, ...] = leaf[first - start : last - start]
        for lo, hi in ((start, min(first, stop)), (max(last, start), stop)):
            if lo < hi:
                self._buffer(lo, hi, leaf[lo - start : hi - start])

    def _buffer(self, start: int, stop: int, part: Array) -> None:
        index = start // self._size
        lo = index * self._size
        hi = min(lo + self._size, self._n)
        if index not in self._buffers:
            rows = np.empty((hi - lo, *part.shape[1:]), dtype=part.dtype)
            self._buffers[index] = (rows, np.zeros(hi - lo, dtype=bool))
        rows, came = self._buffers[index]
        rows[start - lo : stop - lo] = part
        came[start - lo : stop - lo] = True
        if came.all():
            self._target[lo:hi, ...] = rows
            del self._buffers[index]

    @property
    def waiting(self) -> int:
        """Chunks with rows still to come."""
        return len(self._buffers)


def _name(spec: ResultSpec, i: int) -> str:
    """How the messages name output ``i`` of ``out``."""
    if spec[0] == "array":
        return "out"
    return f"out[{spec[1][i]!r}]" if spec[0] == "dict" else f"out[{i}]"
