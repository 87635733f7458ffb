"""How a Dask graph grows with the chunks of its inputs along the rows.

A batch of an input in chunks of a few rows spans many of them, and the
graph ``fn`` builds holds tasks for each: one fused task a chunk for an
elementwise chain, several for a scan along the rows (``da.cumsum(x,
axis=0)``: each chunk's own sums, the sum carried from the chunks before it,
and their sum), more for ``da.diff`` along the rows (its slices straddle the
chunks). The threaded scheduler orders the graph before it runs it, and its
ordering holds, for each task, the input chunks it depends on and the
results that depend on it (Dask 2026.8's ``dask.order``; a set is shared
where one of a task's inputs' sets holds the others'): along a scan, the
k-th chunk is linked to every chunk before it, and the links grow with the
square of the chunks.

`growth` builds ``fn``'s graph, without computing it, over stand-ins of the
inputs in 1, 4 and 16 chunks along the rows (each of the inputs' smallest
chunk along the rows, from `STEP_ROWS` to `STEP_MOST_ROWS`; their own
chunks across the other axes) and counts both; the plan's
`GraphCost` turns them into bytes. Its tasks at 64 chunks are Dask's own
graph's of a batch of a ``from_array`` input within 7% (a chain, ``cumsum``
and ``cumprod``, ``diff``, ``gradient``, ``x - x.mean(axis=0)``,
``concatenate``, ``stack``, ``topk``).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._current_rows import ROWS
from ._trace import BlockGrowth

if TYPE_CHECKING:
    from .._typing import Array, UserFunction

__all__ = ["growth"]

#: Each task's neighbours one way (its inputs, or the tasks that read it).
_Links = Mapping[Any, set[Any]]
#: The fewest rows of a stand-in's chunk (``da.gradient`` wants more than two),
#: and the most (a ``fn`` that loops over its rows builds a task for each:
#: over stand-ins in chunks of an input's 4,000 rows, minutes).
STEP_ROWS = 3
STEP_MOST_ROWS = 16
#: The chunks along the rows the graph is counted at.
STEPS = (1, 4, 16)
#: Most chunks of the stand-ins together (inputs in thousands of chunks
#: across their other axes are not counted: each chunk counts
#: ``per_block``; a ``diff`` over 256 chunks across took 3.6 s to count).
MOST_CHUNKS = 1024
#: Most chunks of the whole operands ``fn`` also reads, together: their
#: graphs are built and ordered with ``fn``'s three times (``x + w.sum()``,
#: ``w`` in 20,000 chunks: 7 s; in 8,000: 2 s; in 4,000, about 1 s).
MOST_WHOLE_CHUNKS = 4096


def growth(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
) -> BlockGrowth | None:
    """How ``fn``'s graph grows with the chunks of ``arrays`` along the rows.

    None where an input's chunks are not known, ``fn`` fails on the
    stand-ins or returns no Dask array (it computes, reads values, wants
    other row counts): each chunk then counts ``per_block``.
    """
    width, rows = 0, []
    for a in arrays:
        chunks = getattr(a, "chunks", None)
        if not chunks or any(math.isnan(c) for dim in chunks for c in dim):
            return None
        width += math.prod(len(c) for c in chunks[1:])
        rows += [c for c in chunks[0] if c > 0]
    held = sum(_chunks(v) for v in (*whole[0], *whole[1].values()))
    if width * STEPS[-1] > MOST_CHUNKS or held > MOST_WHOLE_CHUNKS:
        return None
    # (the inputs' own rows a chunk, where few: a whole operand chunked alike aligns)
    step = min(max(min(rows, default=STEP_ROWS), STEP_ROWS), STEP_MOST_ROWS)
    try:
        counted = [_counted(fn, arrays, whole, steps, step) for steps in STEPS]
    except Exception:  # noqa: BLE001 - fn is not this shape's: per_block each
        return None
    (t1, l1), (_, l4), (t16, l16) = counted
    # links l(s) - l(1) = links (s - 1) + squared (s - 1)^2 through s = 4, 16
    squared = max((l16 - l1 - 5 * (l4 - l1)) / 180, 0.0)
    links = max((l16 - l1 - 225 * squared) / 15, 0.0)
    return BlockGrowth(width, max((t16 - t1) / 15, 0.0), links, squared)


def _counted(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
    steps: int,
    step: int,
) -> tuple[int, int]:
    """(tasks, links) of ``fn``'s graph over stand-ins of ``steps`` chunks of ``step`` rows."""
    import dask.array as da
    from dask.core import get_deps

    args, kwargs = whole
    xs = tuple(_stand_in(a, steps, step) for a in arrays)
    token = ROWS.set((range(step * steps), None))  # (as a trace's rows)
    try:
        result = fn(*xs, *args, **kwargs)
    finally:
        ROWS.reset(token)
    graph: dict[Any, object] = {}  # (Dask's keys)
    for leaf in _leaves(result):
        if not isinstance(leaf, da.Array):
            msg = "fn returned something other than a Dask array"
            raise TypeError(msg)
        keys = leaf.__dask_keys__()
        graph.update(leaf.__dask_optimize__(leaf.__dask_graph__(), keys))
    if not graph:
        msg = "fn returned no Dask array"
        raise TypeError(msg)
    dependencies, dependents = get_deps(graph)
    links = _new_links(dependencies, dependents) + _new_links(dependents, dependencies)
    return len(graph), links


def _chunks(value: object) -> int:
    """How many chunks ``value`` holds, where it is a chunked array (else 0)."""
    chunks = getattr(value, "chunks", None)
    if not isinstance(chunks, tuple) or not all(isinstance(c, tuple) for c in chunks):
        return 0
    return math.prod(len(c) for c in chunks)


def _stand_in(a: Array, steps: int, step: int) -> Array:
    """A Dask array like ``a`` in ``steps`` chunks of ``step`` rows, never computed.

    Each chunk is read by a task of its own (``getitem`` of a placeholder),
    as a batch's slice of its input is: where several of ``fn``'s tasks
    read a chunk, Dask cannot fuse the read into them.
    """
    import dask.array as da

    array: Callable[..., Array] = da.Array  # (dask's is not annotated)
    chunks = ((step,) * steps, *a.chunks[1:])
    name = f"xpkit-rows-stand-in-{id(a):x}-{steps}"
    whole = (slice(None),) * len(chunks)
    graph: dict[tuple[object, ...], object] = {}
    for index in itertools.product(*(range(len(c)) for c in chunks)):
        graph[("placeholder-" + name, *index)] = None
        graph[(name, *index)] = (
            operator.getitem,
            ("placeholder-" + name, *index),
            whole,
        )
    return array(graph, name, chunks, meta=a._meta)


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


def _new_links(up: _Links, down: _Links) -> int:
    """The ends each task reaches through ``up``, counted where its set is new.

    A task with nothing ``up`` is an end itself; a task whose inputs' sets
    include one that holds all the others shares it; any other holds their
    union, a new set.
    """
    reached: dict[Any, frozenset[Any]] = {}
    waiting = {k: len(v) for k, v in up.items()}
    ready = [k for k, n in waiting.items() if n == 0]
    total = 0
    while ready:
        key = ready.pop()
        sets = [reached[k] for k in up[key]]
        widest = max(sets, key=len, default=frozenset((key,)))
        if all(s <= widest for s in sets):
            reached[key] = widest
        else:
            reached[key] = frozenset().union(*sets)
            total += len(reached[key])
        for k in down.get(key, ()):
            waiting[k] -= 1
            if waiting[k] == 0:
                ready.append(k)
    return total
