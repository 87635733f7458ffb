"""Adapter for Dask arrays (lazy, host memory)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager
from types import ModuleType
from typing import TYPE_CHECKING

import array_api_compat
import numpy as np

from ._base import Adapter, FastOps
from ._dask_blocks import growth, held, source_slots
from ._host_loss import LostOnHost
from ._lazy_tags import LazyTags, Replace, Tagged, patched_by_array_api_extra
from ._top_k import along
from ._trace import DtypeRules, GraphCost, WrappedArrays, active_trace

if TYPE_CHECKING:
    import pytest

    from .._typing import (
        Array,
        DType,
        HostArray,
        Namespace,
        NativeDevice,
        UserFunction,
        Value,
    )
    from ._top_k import TopK
    from ._trace import Traits

__all__ = ["DaskAdapter"]


#: NumPy's tables, but ``round`` and ``positive`` claim their input's dtype,
#: ``inv`` solves against a float64 identity, and an int beside an index
#: array is a basic index.
#: What a Dask graph holds besides its chunks (measured with tracemalloc on
#: Dask 2026.8, batches of one chunk; ``benchmarks/bench_meter.py`` holds
#: the estimate against the true peak): about 6 kB of layer and task an
#: operation; garbage from the first operations (an elementwise operation
#: asks ``inspect.signature`` of its function, which copies ``sys.modules``:
#: about 38 kB in a reference cycle, freed when the cyclic collector next
#: runs, which at its default threshold of 700 objects is after about 16
#: operations); about 50 kB of scheduler state a compute; and the computed
#: chunk copied into the result. A batch that spans many of its input's
#: chunks holds about 6 kB more for each (its tasks and their state, the
#: same for one operation and six, which Dask fuses; 8.7 kB for a
#: ``cumsum``; chunks of 2 to 100 rows). Where ``fn``'s graph was counted
#: (`_dask_blocks.growth`), about 3.3 kB a task instead, and the bytes of
#: the sets the scheduler's ordering holds, counted as Dask builds them.
#: The 3.3 kB were fitted, beside 11 bytes a link of the ordering, to the
#: bytes a batch of 100 to 600 chunks of 5 and 20 rows holds beyond a
#: batch of one (an elementwise chain; ``cumsum``, ``nancumsum``,
#: ``cumsum(method="blelloch")``, ``diff`` and ``gradient`` along the
#: rows; ``x - x.mean(axis=0)``), the estimate 0.78-1.98 of the true bytes
#: (Python's dicts grow by doubling); a ``cumsum`` along the rows over
#: 1,200 and 2,000 chunks, 1.05 and 1.08 (45 and 105 MB, nearly all its
#: ordering's sets). The sets' own bytes replaced the 11 bytes a link, a
#: third of the 33 bytes a chunk of ``x + w.sum()``'s sets (``w`` in 2,000
#: chunks: planned at 1.55 times a 50 MB budget); the scans and reductions
#: of ``tests/batches/test_cost.py`` stay within 0.9-2.0 of their true
#: peaks. A task of an input's
#: own graph beyond its read (a rechunk's slices and merges), about 1.15 kB:
#: 650-1,200 bytes measured a task of a rechunk from 4 rows to 10 and 7 to 3.
_GRAPH = GraphCost(
    per_operation=6_000,
    first_operations=16,
    first_bytes=38_000,
    compute=50_000,
    copies_result=True,
    per_block=6_500,
    per_task=3_300,
    per_input_task=1_150,
    per_source=24,
    growth=growth,
    held=held,
)
#: The fewest slots of an input's table (`_dask_blocks.held`) that key a
#: remembered plan (24 bytes each: about 1.5 MB).
_KEYED_SLOTS = 2**16
#: A chunk operation traced through Dask (its task built, optimised and run
#: on the synchronous scheduler) costs about 40 times a plain shape-only
#: operation (0.65-1.06 ms against 15-27 us, a loop over 4,000 rows).
_TASK_WEIGHT = 40.0
_DTYPE_RULES = DtypeRules(
    numpy_tables=True,
    keeps_dtype=frozenset({"round", "positive"}),
    inverse_float64=True,
    ints_advanced=False,
)


@functools.lru_cache(maxsize=64)
def _most_spanned(along: tuple[float, ...], rows: int) -> int:
    """The most of the chunks ``along`` the rows that ``rows`` consecutive rows span.

    A window spans the most where it starts on a chunk's last row (or the
    first row): each such start, its last row found among the chunks' ends.
    """
    ends = np.cumsum(np.asarray(along, dtype=np.int64))
    starts = np.concatenate(([0], ends[:-1] - 1))  # the first row, each chunk's last
    first = np.searchsorted(ends, starts, side="right")
    last = np.searchsorted(
        ends, np.minimum(starts + rows - 1, ends[-1] - 1), side="right"
    )
    return int((last - first).max()) + 1


class DaskAdapter(Adapter):
    """Dask through ``array_api_compat.dask.array``.

    Everything stays lazy; `to_numpy` is the one place that computes.
    """

    key = "dask"
    module = "dask"
    extra = "dask"
    label = "Dask"
    dtype_prefixes = ("dask.array",)
    #: ``da.matmul(dask_array, tensor)`` wraps the tensor as a chunk.
    precheck_operands = True
    #: Its functions read ``.ndim``/``.dtype`` of what they get first.
    argument_errors = (TypeError, ValueError, IndexError, AttributeError)

    def svd_refusal(self, x: Array, full_matrices: bool) -> str | None:
        """``dask.array.linalg.svd``: a 2-D array chunked along one axis, reduced."""
        if full_matrices:
            return "full_matrices=True (Dask computes reduced factors only)"
        if x.ndim != 2:
            return f"X of {x.ndim} dimensions (Dask's svd takes a matrix, not a stack)"
        if len(x.chunks[0]) > 1 and len(x.chunks[1]) > 1:
            return (
                f"X chunked along both axes ({len(x.chunks[0])} x "
                f"{len(x.chunks[1])} chunks): rechunk it along one"
            )
        return None

    def namespace(self) -> ModuleType:
        """``array_api_compat.dask.array``."""
        import array_api_compat.dask.array as xp

        return xp

    def fast_ops(self, xp: Namespace) -> FastOps:
        """The namespace's, ``concat`` held to the shapes of arrays with no elements.

        Dask passes over an array of no elements whatever its shape
        (``(0, 3)`` beside ``(2, 2)`` made ``(2, 2)``); NumPy refuses it.
        """
        concat = xp.concat

        def checked_concat(arrays: Sequence[Array], /, *, axis: int = 0) -> Array:
            if any(0 in a.shape for a in arrays):
                ndim, first = arrays[0].ndim, arrays[0].shape
                at = axis % ndim if ndim else 0
                for a in arrays:
                    if a.ndim != ndim or any(
                        n != m
                        for i, (n, m) in enumerate(zip(a.shape, first, strict=True))
                        if i != at
                    ):
                        msg = "the shapes differ other than along axis"
                        raise ValueError(msg)
            return concat(arrays, axis=axis)

        return super().fast_ops(xp)._replace(concat=checked_concat)

    def owns(self, x: object) -> bool:
        """``dask.array.Array`` instances."""
        return bool(array_api_compat.is_dask_array(x))

    def lost_in_conversion(self, x: Array) -> str | None:
        """A Dask array of NumPy masked chunks: computing it to NumPy drops the masks."""
        ma = sys.modules.get("numpy.ma")
        meta = getattr(x, "_meta", None)
        if ma is not None and isinstance(meta, ma.MaskedArray):
            return (
                "a Dask array of NumPy masked chunks, whose masks the conversion "
                "would drop; pass x.map_blocks(np.ma.filled, value) instead"
            )
        return None

    def is_plain(self, x: Array) -> bool:
        """Not an array of NumPy masked chunks (`lost_in_conversion`)."""
        return self.lost_in_conversion(x) is None

    def refused_operand(self, x: Array) -> str | None:
        """A Dask array of NumPy masked chunks (`lost_in_conversion`).

        NumPy's functions in its tasks (``argpartition`` in ``top_k``)
        ignore the masks.
        """
        return self.lost_in_conversion(x)

    def device_key(self, x: Array) -> Hashable:
        """Dask arrays live on the (lazy) CPU."""
        return None

    def native_device_key(self, native: NativeDevice) -> Hashable:
        """Dask arrays all live on the (lazy) CPU."""
        return None

    def to_numpy(self, x: Array) -> HostArray:
        """Compute the graph and return the NumPy result.

        A TypeError where the chunks compute to masked arrays though the
        array's meta is plain (`lost_in_conversion` reads the meta only).
        """
        value = x.compute()
        ma = sys.modules.get("numpy.ma")
        if ma is not None and isinstance(value, ma.MaskedArray):
            reason = (
                "a Dask array whose chunks compute to NumPy masked arrays, "
                "whose masks the conversion would drop (its meta is not masked: "
                "pass meta=np.ma.array(...)); compute it with x.compute(), or "
                "pass x.map_blocks(np.ma.filled, value) instead"
            )
            raise LostOnHost(reason)
        return np.asarray(value)

    def operand_type(self) -> type:
        """``object``: every operand is checked in full (`refused_operand`).

        A Dask array of masked chunks has the class of any other; the
        check reads its meta (a few microseconds, beside a graph's
        building).
        """
        return object

    def values_at_hand(self, x: Array) -> bool:
        """Never: reading a Dask array's values computes its graph."""
        return False

    def from_host(
        self, xp: Namespace, host: HostArray, dtype: DType, device: NativeDevice
    ) -> Array:
        """``asarray``; an array of no elements as one chunk (`creation_options`)."""
        if host.size:
            return xp.asarray(host, dtype=dtype, device=device)
        import dask.array as da

        from_array: Callable[..., Array] = da.from_array
        return from_array(np.array(host, dtype=dtype), chunks=-1)

    def creation_options(self, shape: tuple[int, ...]) -> dict[str, object]:
        """One chunk where ``shape`` holds no elements.

        Dask's automatic chunking divides by zero there whenever another axis
        is long (``da.full((0, 5000), 1.0)``: ZeroDivisionError).
        """
        return {} if math.prod(shape) else {"chunks": -1}

    def extra_dtypes(self, device: str) -> frozenset[str]:
        """float16, as its NumPy chunks."""
        return frozenset({"float16"})

    def dtype_object(self, xp: Namespace, name: str) -> DType:
        """The namespace's dtype, or NumPy's (the namespace has no float16)."""
        found = getattr(xp, name, None)
        return np.dtype(name) if found is None else found

    #: Its arrays export no DLPack and its namespace imports none.
    dlpack_export = False
    dlpack_import = False
    ints_join_arrays = False
    sets_ints_beside_arrays = False
    sets_empty_values = False

    #: A lazy graph: a result is assembled on the host, then wrapped.
    writable_rows = False
    unknown_length_advice = "compute chunk sizes first (x.compute_chunk_sizes())"

    test_modes = ("lazy",)
    module_fixture = "da"
    module_fixture_mode = "lazy"

    def host_exits(self) -> tuple[tuple[object, str], ...]:
        """``Array.__array__``, ``Array.compute`` and ``dask.compute``."""
        import dask
        import dask.array as da

        return ((da.Array, "__array__"), (da.Array, "compute"), (dask, "compute"))

    def lazy_context(
        self,
        mode: str,
        request: pytest.FixtureRequest,
        xp: Namespace,
        tagged: Tagged,
        replace: Replace,
    ) -> AbstractContextManager[None]:
        """``lazy``: computes counted, and refused beyond each function's allowance.

        Through array-api-extra's ``patch_lazy_xp_functions``, which also
        materialises each result so that errors surface in the test.
        """
        if mode != "lazy":
            return super().lazy_context(mode, request, xp, tagged, replace)
        return _computes_counted(request, xp, tagged, replace)

    numpy_dtypes = True

    def shape_traits(self, device: str) -> Traits | None:
        """A graph of NumPy chunks, each freed after its last use."""
        return {
            "dtype_rules": _DTYPE_RULES,
            "lazy": True,
            "numpy_internals": True,
            "array_bytes": 112,
            "dim_bytes": 16,
            "graph": _GRAPH,
            # (a batch's slice of a chunk, at most half of it, is copied:
            # Dask's getitem; counted for every batch, on the safe side)
            "slices_copy": True,
            "bounded_masks": False,  # (a mask leaves its chunks unknown)
        }

    def top_k(
        self, xp: Namespace, x: Array, k: int, axis: int, *, largest: bool
    ) -> TopK:
        """``dask.array.topk`` and ``argtopk``: reductions chunk by chunk.

        Their negative ``k`` is the smallest, ascending. Both sort by value,
        so the values at the indices are the values (ties are equal).
        ``argtopk`` fails where ``k`` is the whole axis of several chunks:
        there the axis is one chunk first (all of it is wanted anyway). An
        axis of unknown size (chunks of NaN rows, after a boolean mask) is a
        ValueError naming ``x``: dask's own error there names no argument.
        """
        import dask.array as da

        size = x.shape[axis]
        if math.isnan(size):
            msg = (
                f"x has an unknown size along axis {axis} (Dask's unknown chunk "
                "sizes, as after a boolean mask): top_k needs it; call "
                "x.compute_chunk_sizes() first"
            )
            raise ValueError(msg)
        if k == 0:  # (no k there: none of either, int64 as argtopk's)
            empty = x[along(axis, slice(0, 0))]
            return empty, xp.astype(empty, xp.int64)
        if k == size and x.numblocks[axis] > 1:
            x = x.rechunk({axis: -1})
        signed = k if largest else -k
        topk: Callable[..., Array] = da.topk  # (dask's are not annotated)
        argtopk: Callable[..., Array] = da.argtopk
        return topk(x, signed, axis=axis), argtopk(x, signed, axis=axis)

    def layout_key(self, x: Array) -> Hashable:
        """Its chunks: the smallest and largest along the rows, those across; its graph.

        A batch's cost grows with the chunks it spans and with the tasks of
        the input's own graph a compute walks (`_dask_blocks.held`): a plan
        for one chunking is not another's. The row chunks by the largest and
        the smallest but the last (not the whole tuple, which has an entry a
        chunk, nor the last, which other row counts change); the graph by
        the slots of the table its walk builds, where they hold more than
        about 1.5 MB (a power of two: other row counts may change it).
        """
        chunks: tuple[tuple[float, ...], ...] = x.chunks
        along = [c for c in chunks[0] if c > 0] if chunks else []
        rows = (min(along[:-1] or along), max(along)) if along else ()
        slots = source_slots(x)
        return (rows, chunks[1:], slots if slots >= _KEYED_SLOTS else 0)

    def row_blocks(self, x: Array, rows: int) -> int:
        """The chunks that ``rows`` consecutive rows of ``x`` span at most.

        Along the rows, a window of them over the smallest chunk, plus one
        where it straddles a boundary; times the chunks across the other
        axes.
        """
        chunks: tuple[tuple[float, ...], ...] = x.chunks
        along = [c for c in chunks[0] if c > 0] if chunks else []
        if not along or rows < 1 or any(math.isnan(c) for c in along):
            return 1
        spanned = _most_spanned(tuple(along), rows)
        return int(spanned * math.prod(len(c) for c in chunks[1:]))

    def library_tracer(
        self,
        fn: UserFunction,
        inputs: tuple[tuple[tuple[int, ...], str], ...],
        whole: tuple[tuple[object, ...], dict[str, object]],
        device: str,
    ) -> WrappedArrays | None:
        """Its own functions, on its arrays of one shape-only NumPy chunk each.

        ``da.concatenate``, ``da.cumsum``, ``da.fft.fft``, ``x.chunks`` or
        ``map_blocks`` build a graph whatever the chunks are: each input is
        a Dask array whose one chunk is a shape-only NumPy array (its meta a
        real empty NumPy array, so that Dask's own dtype inference traces
        nothing), and ``fn``'s result is computed by `_computed`, its chunk
        functions (NumPy's) traced. A chunk lives from the task that makes
        it to its last reader, as the scheduler releases it, and where
        ``fn`` splits the batch into several chunks, as many at once as the
        scheduler has workers. Where the real batch spans several of the
        input's chunks, their tasks are counted apart (`GraphCost.growth`).
        """
        profile = self.shape_profile(device)
        if profile is None:
            return None
        inner = dataclasses.replace(profile, key=(profile.key, "NumPy chunks inside"))
        import dask.array as da

        array: Callable[..., object] = da.Array

        def wrap(x: Value) -> object:
            shape = tuple(x.shape)
            name = f"xpkit-shape-only-{id(x):x}"
            meta = np.empty((0,) * len(shape), dtype=x.dtype)
            chunks = tuple((d,) for d in shape)
            return array({(name, *(0,) * len(shape)): x}, name, chunks, meta=meta)

        def unwrap(leaf: object) -> object:  # (each computed, as to_numpy does)
            return _computed(leaf) if isinstance(leaf, da.Array) else leaf

        name = "Dask's own functions over shape-only NumPy chunks"
        return WrappedArrays(inner, wrap, unwrap, name, weight=_TASK_WEIGHT)

    def is_oom(self, exc: BaseException) -> bool:
        """A chunk's own host-memory error."""
        return isinstance(exc, MemoryError)


def _computed(graph: Value) -> Value:
    """``graph`` computed in this thread, its chunks assembled as ``compute`` does.

    Its chunks on the synchronous scheduler, then one array of the result's
    bytes made of all of them (NumPy's ``compute`` fills one array from
    several chunks, and copies a single one). Where a layer of the graph has
    several chunks (``fn`` rechunked), the threaded scheduler that computes
    the real batch runs up to its workers' number of them at once: the
    trace counts that many (`Trace.parallel`, read from Dask's
    ``num_workers`` setting, else its CPU count).
    """
    import dask
    from dask.core import flatten
    from dask.local import get_sync
    from dask.system import CPU_COUNT

    keys, layered = graph.__dask_keys__(), graph.__dask_graph__()
    workers = int(dask.config.get("num_workers", None) or CPU_COUNT)
    widest = max((_computations(layer) for layer in layered.layers.values()), default=1)
    trace = active_trace()
    trace.parallel = max(trace.parallel, min(workers, widest))
    chunks = get_sync(graph.__dask_optimize__(layered, keys), keys)
    nested: Callable[..., Iterator[Value]] = flatten  # (dask's is not annotated)
    flat = list(nested(chunks, container=(list, tuple)))
    xp = flat[0].__array_namespace__()
    whole = xp.concat([xp.reshape(c, (-1,)) for c in flat])
    return xp.reshape(whole, tuple(graph.shape))


def _computations(layer: Value) -> int:
    """The tasks of a graph layer that compute a chunk (not a key's alias or a view).

    A task is a ``Task``, or the tuple ``(function, *arguments)``; taking
    ``getitem`` of a chunk (``stack``'s new axis) makes a view.
    """
    from operator import getitem

    count = 0
    for task in layer.values():
        head = task[0] if type(task) is tuple and task else None
        if type(task).__name__ == "Task" or (callable(head) and head is not getitem):
            count += 1
    return count


#: How array-api-extra's counting scheduler begins its refusal.
_REFUSAL = "Called `dask.compute()` or `dask.persist()`"


@contextlib.contextmanager
def _computes_counted(
    request: pytest.FixtureRequest, xp: Namespace, tagged: Tagged, replace: Replace
) -> Iterator[None]:
    """array-api-extra's patch around each declared function, refusals reworded.

    array-api-extra's refusal tells the user to pass ``allow_dask_compute``,
    its own keyword; the declared function is first wrapped so that the
    refusal names xpkit's ``computes=`` instead. A method, ``(cls,
    "name")``, is declared to array-api-extra as such: it patches what is
    then on the class, the wrapped method.
    """
    wrapped: Tagged = []

    def wrap(func: UserFunction, tags: LazyTags) -> UserFunction | None:
        if tags.by_array_api_extra:  # (its refusal names its own keyword)
            return None
        named = _refusal_in_xpkit_terms(func, tags.computes)
        wrapped.append((named, tags))
        return named

    with replace(wrap):
        wrapped += [
            (d, tags)
            for d, tags in tagged
            if isinstance(d, tuple) and not tags.by_array_api_extra
        ]
        with patched_by_array_api_extra(
            request, xp, wrapped, lambda tags: {"allow_dask_compute": tags.computes}
        ):
            yield


def _refusal_in_xpkit_terms(func: UserFunction, allowed: int) -> UserFunction:
    name = getattr(func, "__name__", repr(func))

    @functools.wraps(func)
    def run(*args: object, **kwargs: object) -> object:
        try:
            return func(*args, **kwargs)
        except AssertionError as exc:
            if not str(exc).startswith(_REFUSAL):
                raise
            msg = (
                f"{name} computed its Dask graph (dask.compute() or persist()) more "
                f"than the {allowed} time(s) one call may; where that is intended, "
                f"declare it with lazy_xp_function({name}, computes={allowed + 1}) "
                f"or @capabilities(computes={allowed + 1})"
            )
            raise AssertionError(msg).with_traceback(exc.__traceback__) from None

    return run
