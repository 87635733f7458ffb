"""How a Dask graph grows with the chunks of its inputs along the rows.

A batch of an input in chunks of a few rows spans many of them, and the
graph ``fn`` builds holds tasks for each: one fused task a chunk for an
elementwise chain, several for a scan along the rows (``da.cumsum(x,
axis=0)``: each chunk's own sums, the sum carried from the chunks before it,
and their sum), more for ``da.diff`` along the rows (its slices straddle the
chunks). The threaded scheduler orders the graph before it runs it, and its
ordering holds, for each task, a set of the input chunks it depends on
(Dask 2026.8's ``dask.order``; a set is shared where one of a task's
inputs' sets holds the others', and equal sets are kept once): along a
scan, the k-th chunk's set holds every chunk before it, and the sets grow
with the square of the chunks; where each result also reads a whole
operand in many chunks (``x + w.sum()``, ``w`` in 2,000 chunks), each
result's set holds all of those (66 kB a result).

`held` counts what every batch's graph holds whatever its rows: the
tasks of whole operands in many chunks (``x + w.sum()``: a task to read
each chunk of ``w`` and a tree of sums over them), by building ``fn``'s
graph with them and with stand-ins of them in one chunk; and the tasks of
the inputs' own graphs, which the compute walks to prune each batch's graph
to its chunks (a slice of an input is a graph over all its chunks: an input
in a million chunks, about 50 MB a batch, whatever its rows).

`growth` builds ``fn``'s graph, without computing it, over stand-ins of the
inputs in 1, 4, 8 and 16 chunks along the rows (1, 2, 3 and 4 for inputs
of many chunks across; a chunk of the input of the fewest rows a chunk,
from `STEP_ROWS` to `STEP_MOST_ROWS`, each other input its own share of
rows, the last chunk a row longer; their own chunks across the other
axes) and counts both, adding the tasks each chunk of an input runs in
its own graph beyond the one that reads it (an input rechunked: the
reads, slices and merge of the chunks it spans); the plan's `GraphCost`
turns them into bytes (from 2, 4, 8 or 16 chunks on where ``fn`` fails on
fewer: ``da.map_overlap`` deeper than their rows). Its tasks at 64 chunks are Dask's own
graph's of a batch of a ``from_array`` input within 7% (a chain, ``cumsum``
and ``cumprod``, ``diff``, ``gradient``, ``x - x.mean(axis=0)``,
``concatenate``, ``stack``, ``topk``).
"""

from __future__ import annotations

import itertools
import math
import operator
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .._current_rows import ROWS
from ._trace import BlockGrowth, HeldGraph

if TYPE_CHECKING:
    from .._typing import Array, UserFunction

__all__ = ["growth", "held", "source_slots"]

_T = TypeVar("_T")

#: Each task's neighbours one way (its inputs, or the tasks that read it).
_Links = Mapping[Any, set[Any]]
#: The fewest rows of a stand-in's chunk (``da.gradient`` wants more than two),
#: and the most (a ``fn`` that loops over its rows builds a task for each:
#: over stand-ins in chunks of an input's 4,000 rows, minutes).
STEP_ROWS = 3
STEP_MOST_ROWS = 16
#: The chunks along the rows the graph is counted at: the first that
#: `MOST_CHUNKS` holds (inputs of many chunks across, at fewer). The
#: ordering's curve is taken from the last three: a reduction's sets grow
#: a little faster than its chunks (a tree over them) and from 1, 4 and 16
#: chunks looked like a square (``x - x.mean(axis=0)`` at 240 chunks: 338
#: kB counted, 55 kB held; now a line, 34 kB); a scan's are a square. At
#: 1, 2, 3 and 4 chunks the sets' tables, which double, read as a square
#: (``cumsum`` over 100 chunks across, 3.8 times its sets at 30 steps:
#: about a quarter more of the whole estimate, on the safe side).
STEPS = ((1, 4, 8, 16), (1, 2, 3, 4))
#: Most chunks of the stand-ins together (inputs in thousands of chunks
#: across their other axes are not counted: each chunk counts
#: ``per_block``; a ``diff`` over 256 chunks across took 3.6 s to count).
MOST_CHUNKS = 1024
#: Most chunks of the whole operands ``fn`` also reads, together, for
#: `growth`: their graphs are built and ordered with ``fn``'s four times
#: (``x + w.sum()``, ``w`` in 20,000 chunks: 7 s; in 8,000: 2 s; in 4,000,
#: about 1 s); beyond it, stand-ins of them in one chunk each (their own
#: tasks are `held`'s).
MOST_WHOLE_CHUNKS = 4096
#: The steps the first count is at, in turn, where ``fn`` fails on fewer
#: (`_first_built`).
FIRST_STEPS = (1, 2, 4, 8, 16)


def growth(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
) -> BlockGrowth | None:
    """How ``fn``'s graph grows with the chunks of ``arrays`` along the rows.

    Counted from the fewest steps whose stand-ins ``fn`` takes
    (`_first_built`). None where an input's chunks are not known, ``fn``
    fails on every stand-in or returns no Dask array (it computes, reads
    values, wants other row counts): each chunk then counts ``per_block``.
    """
    found = _step(arrays)
    if found is None:
        return None
    width, step = found
    steps = next((s for s in STEPS if width * s[-1] <= MOST_CHUNKS), None)
    if steps is None:
        return None
    if sum(_chunks(v) for v in (*whole[0], *whole[1].values())) > MOST_WHOLE_CHUNKS:
        whole = _in_one_chunk(whole)
    a, m, b = (n - 1 for n in steps[1:])  # (steps beyond the first)
    try:
        base, (t0, o0) = _first_built(
            lambda n: _counted(fn, arrays, whole, n, step), MOST_CHUNKS / width - b
        )
        (ta, oa), (tb, ob) = (
            _counted(fn, arrays, whole, base + n, step) for n in (a, b)
        )
        # (the middle count only where the ordering grows: else a line)
        om = oa + (ob - oa) * (m - a) / (b - a)
        if ob > o0:
            om = _counted(fn, arrays, whole, base + m, step)[1]
    except Exception:  # noqa: BLE001 - fn is not this shape's: per_block each
        return None
    upstream = sum(_upstream(x) * _across(x) for x in arrays)
    # ordering o(s) - o(1) = ordering (s - 1) + squared (s - 1)^2, its square
    # the curve through the last three, its line through the first and last;
    # tasks t(s) - t(1) = onset + tasks (s - 1) beyond the first step (a
    # scan's second chunk adds the carry's tasks once: 1,400 tasks, then
    # 800 a step, over 200 chunks across). Counted from ``base`` steps on
    # (``x0`` beyond the first), the first step's own tasks are the line's.
    x0 = base - 1
    squared = max(((ob - om) / (b - m) - (om - oa) / (m - a)) / (b - a), 0.0)
    ordering = max((ob - o0 - squared * ((x0 + b) ** 2 - x0**2)) / b, 0.0)
    tasks = max((tb - ta) / (b - a), 0.0)
    onset = max(ta - t0 - tasks * a, 0.0)
    # (the first step's own tasks, less the whole operands' (`held`'s))
    first = float(t0)
    if any(_chunks(v) > 1 for v in (*whole[0], *whole[1].values())):
        first = float(len(_optimized(fn, arrays, _in_one_chunk(whole), base, step)))
    if x0:  # (the line's at one step; what a carry adds once is in ``first``)
        first, onset = max(first - tasks * x0, 1.0), 0.0
    return BlockGrowth(width, tasks, ordering, squared, onset, first, upstream)


def _first_built(count: Callable[[int], _T], most: float) -> tuple[int, _T]:
    """(steps, ``count(steps)``) at the first of `FIRST_STEPS` (at most ``most``) where ``fn`` builds.

    A ``fn`` that wants more rows than a step's stand-ins hold fails on
    them (``da.map_overlap`` with a depth of 12 over chunks of 5 rows:
    "The overlapping depth 12 is larger than your array 6"); its graph is
    counted from the fewest steps whose stand-ins it takes. Raises the last
    failure where none does.
    """
    failure: Exception = LookupError("no steps to count")
    for steps in FIRST_STEPS:
        if steps > most:
            break
        try:
            return steps, count(steps)
        except Exception as exc:  # noqa: BLE001 - raised below where none builds
            failure = exc
    raise failure


def held(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
) -> HeldGraph:
    """What every batch's graph holds whatever its rows (`HeldGraph`).

    Where a whole operand is in more than one chunk, ``fn``'s graph is built
    over stand-ins of the inputs in one chunk, with the whole operands and
    with stand-ins of them in one chunk each: the tasks they add are the
    difference (``fn`` runs twice more). Where ``fn`` fails there, or an
    input's chunks are not known, each of their chunks beyond one counts a
    task.
    """
    values = (*whole[0], *whole[1].values())
    sources = _slots(sum(_source_tasks(v) for v in (*arrays, *values)))
    beyond = sum(max(_chunks(v) - 1, 0) for v in values)
    found = _step(arrays)
    if not beyond or found is None:
        return HeldGraph(beyond, sources)
    width, step = found
    try:
        base, with_them = _first_built(
            lambda n: len(_optimized(fn, arrays, whole, n, step)), MOST_CHUNKS / width
        )
        without = len(_optimized(fn, arrays, _in_one_chunk(whole), base, step))
    except Exception:  # noqa: BLE001 - fn is not this shape's: a task a chunk
        return HeldGraph(beyond, sources)
    return HeldGraph(max(with_them - without, 0), sources)


def _step(arrays: tuple[Array, ...]) -> tuple[float, int] | None:
    """(the chunks one step along the rows spans, the stand-ins' rows a step), None where unknown.

    A step is a chunk of the input of the fewest rows a chunk (its own,
    where few: a whole operand chunked alike then aligns), from `STEP_ROWS`
    to `STEP_MOST_ROWS` rows; an input of more rows a chunk spans its share
    of a chunk a step (`_own_rows`).
    """
    for a in arrays:
        chunks = getattr(a, "chunks", None)
        if not chunks or any(math.isnan(c) for dim in chunks for c in dim):
            return None
    least = min((_fewest_rows(a) for a in arrays), default=STEP_ROWS)
    width = sum(_across(a) * least / _fewest_rows(a) for a in arrays)
    return width, min(max(least, STEP_ROWS), STEP_MOST_ROWS)


def _fewest_rows(a: Array) -> int:
    """The rows of ``a``'s smallest chunk along the rows but its last (`STEP_ROWS`: none).

    A last chunk is what the rows leave over (20,000 rows in chunks of 7
    end in one of 1): it says nothing of how the chunks line up.
    """
    along = [c for c in a.chunks[0] if c > 0]
    return min(along[:-1] or along, default=STEP_ROWS)


def _own_rows(arrays: tuple[Array, ...], step: int) -> tuple[int, ...]:
    """Each input's stand-in's rows a chunk: ``step``, scaled by its chunks' rows.

    Inputs in chunks of 7 and 10 rows: their chunks do not line up, and
    Dask cuts both to their common chunks (``a * 2.0 + b``: planned at
    1.47 times a 5 MB budget while both stand-ins had chunks alike).
    """
    least = min(_fewest_rows(a) for a in arrays)
    return tuple(max(round(step * _fewest_rows(a) / least), 1) for a in arrays)


def _optimized(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
    steps: int,
    step: int,
) -> dict[Any, object]:
    """``fn``'s graph over stand-ins of ``steps`` chunks of ``step`` rows, as Dask runs it.

    Dask's optimised graph: pruned to the tasks the result needs (``b *
    w[0]`` reads one chunk of ``w``), a chain over a chunk fused into one.
    """
    graph: dict[Any, object] = {}  # (Dask's keys)
    for leaf in _built(fn, arrays, whole, steps, step):
        graph.update(_as_run(leaf))
    return graph


def _as_run(a: Array) -> Mapping[Any, object]:
    """``a``'s graph as a compute runs it: Dask's own optimisation of it."""
    optimize: Callable[..., Mapping[Any, object]] = a.__dask_optimize__
    return optimize(a.__dask_graph__(), a.__dask_keys__())


def _built(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
    steps: int,
    step: int,
) -> list[Any]:
    """The Dask arrays ``fn`` returns over stand-ins of ``steps`` chunks of ``step`` rows."""
    import dask.array as da

    args, kwargs = whole
    rows = steps * step + 1  # (the last chunk a row longer: `_stand_in`)
    owns = _own_rows(arrays, step)
    xs = tuple(_stand_in(a, rows, own) for a, own in zip(arrays, owns, strict=True))
    token = ROWS.set((range(rows), None))  # (as a trace's rows)
    try:
        result = fn(*xs, *args, **kwargs)
    finally:
        ROWS.reset(token)
    leaves = list(_leaves(result))
    if not leaves or not all(isinstance(leaf, da.Array) for leaf in leaves):
        msg = "fn returned something other than Dask arrays"
        raise TypeError(msg)
    return leaves


def _counted(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
    steps: int,
    step: int,
) -> tuple[int, int]:
    """(tasks, bytes of the ordering) of ``fn``'s graph over stand-ins of ``steps`` chunks of ``step`` rows."""
    from dask.core import get_deps

    graph = _optimized(fn, arrays, whole, steps, step)
    dependencies, dependents = get_deps(graph)
    return len(graph), _ordering_bytes(dependencies, dependents)


def _upstream(a: Array) -> float:
    """Tasks each chunk of ``a`` runs in its own graph beyond the stand-in's two.

    A stand-in's chunk is a placeholder and its read; a batch of an input
    rechunked from chunks of 4 rows to 10 reads, for each chunk, the chunks
    it spans, slices them and merges the slices (5.5 tasks a chunk). Counted
    on Dask's optimised graph of the input's first 4 and 12 chunks along the
    rows (pruned: an input sliced from a larger graph counts what a batch
    of it runs), where its graph has more than one layer that Dask does not
    fuse into one task a chunk (an input read by one layer, ``da.from_array``
    or ``da.random``, or that layer and elementwise operations over it,
    runs none).
    """
    from dask.blockwise import Blockwise

    layers = _layers(a)
    if sum(not isinstance(layer, Blockwise) for layer in layers.values()) <= 1:
        return 0.0
    rows = a.chunks[0]
    few, more = min(len(rows), 4), min(len(rows), 12)
    if more <= few:
        return 0.0
    tasks = [len(_as_run(a[: sum(rows[:k])])) for k in (few, more)]
    per_chunk = (tasks[1] - tasks[0]) / ((more - few) * _across(a))
    return max(per_chunk - 2.0, 0.0)


def _across(a: Array) -> int:
    """Chunks of ``a`` that one step along the rows spans (its chunks across)."""
    return math.prod(len(c) for c in a.chunks[1:])


def _chunks(value: object) -> int:
    """How many chunks ``value`` holds, where it is a chunked array (else 0)."""
    chunks = getattr(value, "chunks", None)
    if not isinstance(chunks, tuple) or not all(isinstance(c, tuple) for c in chunks):
        return 0
    return math.prod(len(c) for c in chunks)


def _source_tasks(value: object) -> int:
    """Tasks of ``value``'s own graph that a compute walks to prune it (0: none).

    A graph of layers that say how many blocks they make without building
    them (``da.ones``, elementwise operations over them) is pruned layer by
    layer; one that holds a built layer (``da.from_array`` of a NumPy
    array, ``da.random``) is walked task by task, every layer above it too.
    """
    layers = _layers(value)
    if not any(layer.is_materialized() for layer in layers.values()):
        return 0
    return sum(len(layer) for layer in layers.values())


def _layers(value: object) -> Mapping[str, Any]:
    """The layers of ``value``'s own Dask graph (none: not a Dask collection)."""
    graph = getattr(value, "__dask_graph__", None)
    layers = getattr(graph() if callable(graph) else None, "layers", None)
    return layers if isinstance(layers, Mapping) else {}


def source_slots(value: object) -> int:
    """Slots of the table a compute builds over ``value``'s own tasks (`HeldGraph.sources`)."""
    return _slots(_source_tasks(value))


def _slots(tasks: int) -> int:
    """Slots of the table a compute builds over ``tasks`` tasks to prune them.

    A Python set: it grows when three fifths full, to a power of two above
    four times its keys (twice, beyond 50,000), so the bytes step up at
    those sizes (an input in 800,000 chunks holds as much as one in
    1,000,000: about 50 MB a batch, measured with tracemalloc).
    """
    if tasks <= 0:
        return 0
    slots = 8
    while tasks * 5 >= slots * 3:
        keys = -(-slots * 3 // 5)  # (the keys at which it grows)
        slots = 1 << (keys * (2 if keys > 50_000 else 4)).bit_length()
    return slots


def _in_one_chunk(
    whole: tuple[tuple[object, ...], dict[str, object]],
) -> tuple[tuple[object, ...], dict[str, object]]:
    """``whole`` with each Dask array of known shape in more than one chunk a stand-in in one."""
    args, kwargs = whole
    return tuple(_one(v) for v in args), {k: _one(v) for k, v in kwargs.items()}


def _one(value: object) -> object:
    """A stand-in of ``value`` in one chunk, never computed (itself where not needed)."""
    import dask.array as da

    shape = getattr(value, "shape", None)
    if not isinstance(value, da.Array) or _chunks(value) <= 1:
        return value
    if shape is None or any(math.isnan(n) for n in shape):
        return value
    array: Callable[..., Array] = da.Array  # (dask's is not annotated)
    name = f"xpkit-whole-stand-in-{id(value):x}"
    index = (0,) * len(shape)
    whole = (slice(None),) * len(shape)
    graph = {
        ("placeholder-" + name, *index): None,
        (name, *index): (operator.getitem, ("placeholder-" + name, *index), whole),
    }
    return array(graph, name, tuple((n,) for n in shape), meta=value._meta)


def _stand_in(a: Array, rows: int, own: int) -> Array:
    """A Dask array like ``a`` of ``rows`` rows in chunks of ``own``, never computed.

    Its last chunk holds what the others leave (`_built` gives a row more
    than its steps fill): a batch ends within a chunk where its rows are
    not a multiple of the chunks', and ``fn`` may pay for that (``b +
    b[::-1]``: the reversed rows' chunks do not line up with the rows',
    and Dask cuts both to their common chunks, three times the tasks).
    """
    whole = max(rows // own, 1) - 1  # (chunks before the last)
    chunks = ((own,) * whole + (rows - own * whole,), *a.chunks[1:])
    return _placeholder(f"xpkit-rows-stand-in-{id(a):x}-{rows}", chunks, a._meta)


def _placeholder(name: str, chunks: tuple[tuple[int, ...], ...], meta: object) -> Array:
    """A Dask array of these ``chunks``, never computed.

    Each chunk is read by a task of its own (``getitem`` of a placeholder),
    as a batch's slice of its input is: where several of ``fn``'s tasks
    read a chunk, Dask cannot fuse the read into them.
    """
    import dask.array as da

    array: Callable[..., Array] = da.Array  # (dask's is not annotated)
    whole = (slice(None),) * len(chunks)
    graph: dict[tuple[object, ...], object] = {}
    for index in itertools.product(*(range(len(c)) for c in chunks)):
        graph[("placeholder-" + name, *index)] = None
        graph[(name, *index)] = (
            operator.getitem,
            ("placeholder-" + name, *index),
            whole,
        )
    return array(graph, name, chunks, meta=meta)


def _leaves(result: object) -> Iterator[object]:
    """Each value of ``result``, in its tuples, lists and dicts."""
    if isinstance(result, tuple | list):
        for v in result:
            yield from _leaves(v)
    elif isinstance(result, Mapping):
        for v in result.values():
            yield from _leaves(v)
    else:
        yield result


def _ordering_bytes(dependencies: _Links, dependents: _Links) -> int:
    """Bytes of the sets Dask's ordering holds: each task's input chunks.

    As ``dask.order`` builds them (Dask 2026.8): a task with no inputs is
    an end of its own; a task whose inputs' sets include one that holds all
    the others shares it; any other holds their union, a new frozenset
    unless an equal one was made before (Dask keeps one of each), of the
    bytes `_frozenset_bytes` gives. Only this way round: a compute's graph
    ends in one task that takes every result, so the sets of the results
    each task feeds are that task's, shared. The sets are counted as bits
    of an integer, one a chunk (``x + w.sum()``, ``w`` in 4,000 chunks:
    500 bytes a set, where Dask's take 131 kB).
    """
    reached: dict[Any, int] = {}
    made: dict[int, int] = {}  # (each set's first integer, shared as Dask shares it)
    waiting = {k: len(v) for k, v in dependencies.items()}
    ready = [k for k, n in waiting.items() if n == 0]
    ends = total = 0
    while ready:
        key = ready.pop()
        if not dependencies[key]:
            reached[key], ends = 1 << ends, ends + 1
        else:
            sets = [reached[k] for k in dependencies[key]]
            widest = max(sets, key=int.bit_count)
            union = widest
            for bits in sets:
                union |= bits
            if union != widest and union not in made:
                total += _frozenset_bytes(union.bit_count())
            reached[key] = made.setdefault(union, union)
        for k in dependents.get(key, ()):
            waiting[k] -= 1
            if waiting[k] == 0:
                ready.append(k)
    return total


#: An empty frozenset's bytes (its eight slots within it).
_SET_BYTES = sys.getsizeof(frozenset())


def _frozenset_bytes(n: int) -> int:
    """Bytes of a frozenset of ``n`` keys made from a set, as CPython sizes it.

    Its table is the first power of two above twice its keys, 16 bytes a
    slot, unless they fill under three fifths of the eight slots it holds
    within itself (``frozenset(s)`` of a set ``s``: CPython's set_merge).
    """
    if n * 5 < 21:
        return _SET_BYTES
    return _SET_BYTES + 16 * (1 << (2 * n).bit_length())
