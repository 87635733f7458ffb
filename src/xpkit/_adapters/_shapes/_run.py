"""Running ``fn`` on shape-only arrays: the peak bytes of a call at any row count.

`ShapeTracer` stands in for `map_batches`' batches: for a row count it makes
shape-only inputs (the batch's row slices; the whole operands as they are),
runs ``fn`` under a new `Trace` and returns the peak bytes the trace
counted: the eager peak (Python's lifetimes), or for a library that runs
graphs the lazy one (`Trace.lazy_peak`). Nothing is computed and nothing of
the size of the data is allocated, so a tracer can be asked at the planned
batch size itself. What ``fn`` does that a shape-only array cannot stand in
for raises `CannotFollow`, as does any exception ``fn`` raises here (the
real run raises it again, where it belongs).

The package ``xpkit._adapters._shapes`` registers the namespace and the
protocol handlers before any of its modules run (a package runs first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ..._current_rows import ROWS
from ..._shown import said
from .._registry import adapter_for_array
from .._trace import CannotFollow, Profile, Trace, tracing
from . import _rules as rules
from ._array import ShapeArray, given, made

if TYPE_CHECKING:
    from ..._typing import Array, UserFunction, Value
    from .._trace import BlockGrowth, GraphCost, HeldGraph, Span

__all__ = ["CannotFollow", "InputSpec", "ShapeTracer", "spans"]

#: One batched input: its row shape and the standard's name of its dtype.
InputSpec = tuple[tuple[int, ...], str]


class ShapeTracer:
    """``fn`` on shape-only inputs of any row count, impersonating ``profile``.

    Parameters
    ----------
    profile : Profile
        The library and device the batches run on.
    fn : callable
        ``fn(*rows, *args, **kwargs)``.
    inputs : tuple of (row shape, dtype name)
        The batched inputs.
    args, kwargs
        The whole operands (arrays of the library stand in as inputs; other
        values are passed as they are).
    charge_inputs : bool
        Whether a batch's row slices are copies (counted in the peak).
    wrap, unwrap : callable, optional
        For a library whose arrays wrap another's (array-api-strict's wrap
        NumPy's, whose functions it calls): each shape-only input and whole
        operand, of ``profile``'s library, wrapped in one of its own before
        ``fn`` sees it; each value of ``fn``'s result (in its tuples, lists
        and dicts) unwrapped.
    name : str
        How the peak is found, for `BatchPlan.source`.
    weight : float
        The work of one of ``fn``'s operations, in a plain trace's
        (`WrappedArrays.weight`).
    blocks : callable, optional
        ``blocks(rows)``: how many blocks of their storage the real inputs
        of a batch of ``rows`` rows span together (a chunked library's
        chunks; `Trace.blocks`), and how ``fn``'s graph grows with them
        (`Trace.growth`; None: not known), and what the graph holds whatever
        the blocks (`Trace.held`). One block where not given.
    """

    def __init__(
        self,
        profile: Profile,
        fn: UserFunction,
        inputs: tuple[InputSpec, ...],
        args: tuple[Value, ...] = (),
        kwargs: Mapping[str, Value] | None = None,
        *,
        charge_inputs: bool = False,
        wrap: Callable[[ShapeArray], Value] | None = None,
        unwrap: Callable[[Value], Value] | None = None,
        name: str = "shape-only arrays",
        weight: float = 1.0,
        blocks: Callable[[int], Span] | None = None,
    ) -> None:
        self.profile = profile
        self._blocks = blocks
        self.name = name
        self._weight = weight
        self._wrap = wrap or _itself
        self._unwrap = unwrap
        self.fn = fn
        self.inputs = inputs
        self.args = args
        self.kwargs = dict(kwargs or {})
        self.charge_inputs = charge_inputs
        #: Bytes of one row of ``fn``'s outputs, from the last trace.
        self.output_row_bytes: int | None = None
        #: The operations ``fn`` made in the last trace (arrays and views).
        self.operations = 1

    def peak(self, rows: int) -> int:
        """The peak bytes of ``fn`` on ``rows`` rows (CannotFollow if it cannot say)."""
        trace = Trace(self.profile)
        try:
            kept = tracing(trace, lambda: self._run(trace, rows))
        except CannotFollow as exc:
            raise CannotFollow(trace.failure or str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the real run raises it again
            reason = trace.failure or f"fn raised {type(exc).__name__}: {said(exc)}"
            raise CannotFollow(reason[:300]) from None
        self.operations = max(round((trace.nodes + trace.views) * self._weight), 1)
        if trace.failure is not None:  # refused, though fn caught it
            raise CannotFollow(trace.failure)
        if self.profile.lazy:
            if self._blocks is not None:
                trace.blocks, trace.growth, trace.held = self._blocks(rows)
            return trace.lazy_peak(kept)  # type: ignore[arg-type]
        return trace.peak

    def _run(self, trace: Trace, rows: int) -> tuple[int, ...]:
        make = made if self.charge_inputs else given
        wrap = self._wrap
        xs = tuple(wrap(make(trace, (rows, *row), name)) for row, name in self.inputs)
        trace.copied_inputs = trace.nodes  # (none where rows are views)
        args = tuple(_operand(trace, v, wrap) for v in self.args)
        kwargs = {k: _operand(trace, v, wrap) for k, v in self.kwargs.items()}
        token = ROWS.set((range(rows), None))  # what `current_rows` says while traced
        trace.rows = rows  # (an array fn makes of these rows is charged)
        try:
            result = self.fn(*xs, *args, **kwargs)
        finally:
            trace.rows = 0
            ROWS.reset(token)
        if self._unwrap is not None:
            result = _each_leaf(result, self._unwrap)
        leaves = _leaves(trace, result)
        for leaf in leaves:
            if not leaf.shape or leaf.shape[0] != rows:
                msg = f"fn's result has shape {leaf.shape} for {rows} rows"
                raise trace.refuse(msg)
        if rows:
            self.output_row_bytes = sum(leaf.nbytes for leaf in leaves) // rows
        return tuple(leaf._node for leaf in leaves)


def spans(
    fn: UserFunction,
    arrays: tuple[Array, ...],
    whole: tuple[tuple[object, ...], dict[str, object]],
    graph: GraphCost | None,
) -> Callable[[int], Span]:
    """``rows`` -> the blocks a batch of ``arrays`` spans, and how ``fn``'s graph grows with them.

    For `ShapeTracer`'s ``blocks``: each input's own library says how many
    blocks of its storage a batch of its rows spans (`Adapter.row_blocks`:
    a chunked library's chunks, one for an array in one piece); the
    library ``fn`` runs on says how its graph grows with them
    (`GraphCost.growth`, asked once, where a batch spans more than one
    block of an input; ``whole``: the whole operands, positional and
    keyword). The growth is None where each input is one block, or the
    library cannot say. What the graph holds whatever the blocks
    (`GraphCost.held`) is asked once, at the first batch.
    """
    owners = [(adapter_for_array(a), a) for a in arrays]
    asked: list[BlockGrowth | None] = []
    held: list[HeldGraph | None] = []
    # (the blocks one row spans: each input's blocks across its other axes)
    across = sum(1 if o is None else o.row_blocks(a, 1) for o, a in owners)

    def span(rows: int) -> Span:
        blocks = sum(1 if o is None else o.row_blocks(a, rows) for o, a in owners)
        if not held:
            ask = None if graph is None else graph.held
            held.append(None if ask is None else ask(fn, arrays, whole))
        if graph is None or graph.growth is None or blocks <= across:
            return blocks, None, held[0]  # (one block along the rows: per_block each)
        if not asked:
            asked.append(graph.growth(fn, arrays, whole))
        return blocks, asked[0], held[0]

    return span


def _each_leaf(result: Value, leaf: Callable[[Value], Value]) -> Value:
    """``result`` with ``leaf`` applied to each value in its tuples, lists and dicts."""
    if isinstance(result, tuple | list):
        return type(result)(_each_leaf(v, leaf) for v in result)
    if isinstance(result, dict):
        return {k: _each_leaf(v, leaf) for k, v in result.items()}
    return leaf(result)


def _itself(v: Value) -> Value:
    return v


def _operand(trace: Trace, v: Value, wrap: Callable[[ShapeArray], Value]) -> Value:
    """A whole operand: an array stands in as a shape-only input (``wrap``-ped)."""
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is None or dtype is None or isinstance(v, type | ShapeArray):
        return v
    try:
        name = rules.dtype_name_of(trace, dtype)
    except CannotFollow:
        return v
    return wrap(given(trace, tuple(int(d) for d in shape), name or ""))


def _leaves(trace: Trace, result: Array) -> list[ShapeArray]:
    if isinstance(result, ShapeArray):
        return [result]
    values = result.values() if isinstance(result, Mapping) else result
    if isinstance(values, tuple | list) or isinstance(result, Mapping):
        leaves = list(values)
        if leaves and all(isinstance(v, ShapeArray) for v in leaves):
            return leaves
    msg = f"fn returned {type(result).__qualname__}, not shape-only arrays"
    raise trace.refuse(msg)
