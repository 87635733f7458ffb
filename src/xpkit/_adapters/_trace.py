"""One shape-only trace: the profile it impersonates, and the bytes it counts.

A trace runs ``fn`` on arrays that have a shape and a dtype but no values
(`xpkit._adapters._shapes.ShapeArray`). Every array an operation makes is
charged to the trace when it is made and released when Python frees it, as
the library's own array would be: the *eager* peak is the most bytes live at
once. Where the library runs graphs (`Profile.lazy`), every operation is
also written on a tape (its output and inputs), from
which the *lazy* peak is computed, as a library that runs a graph frees each
array after its last use (`Trace.lazy_peak`). The `Profile` says which
library and device the arrays stand in for, and how that library allocates.

Nothing here is shared between traces but immutable tables: a trace is a
plain object of one call, so traces in several threads never wait for each
other.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from collections.abc import Callable, Container, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypedDict

if TYPE_CHECKING:
    from .._typing import Array, DType, NativeDevice, UserFunction

__all__ = [
    "BlockGrowth",
    "CannotFollow",
    "DtypeRules",
    "GraphCost",
    "HeldGraph",
    "Profile",
    "Trace",
    "Tracer",
    "Traits",
    "WrappedArrays",
    "active_trace",
    "kept_from_trace",
    "missing_name",
    "public_names",
    "tracing",
]


class CannotFollow(Exception):
    """``fn`` did something a shape-only array cannot stand in for.

    Reading a value (``bool(x)``, ``float(x)``), a shape that depends on
    values (a boolean mask, ``nonzero``), a conversion to a host array, a
    function without a shape rule. The message says which; the next meter
    takes over.
    """


class Tracer(Protocol):
    """What ``fn`` would allocate at any row count, without running it for real.

    The shape-only trace (`xpkit._adapters._shapes.ShapeTracer`), or a
    compiler's own memory analysis (a jitted JAX ``fn``).
    """

    @property
    def name(self) -> str:
        """How the peak is found, for `BatchPlan.source`."""
        ...

    @property
    def output_row_bytes(self) -> int | None:
        """Bytes of one row of ``fn``'s outputs, once a peak was found (else None)."""
        ...

    @property
    def operations(self) -> int:
        """How much work the last peak was: the operations ``fn`` made (at least 1)."""
        ...

    def peak(self, rows: int) -> int:
        """The peak bytes of one call on ``rows`` rows (`CannotFollow` if unknown)."""
        ...


class WrappedArrays(NamedTuple):
    """A library whose arrays wrap another's, traced through its own code.

    array-api-strict's arrays wrap NumPy's, and its functions call NumPy's
    on them: ``fn`` runs on its arrays, each wrapping a shape-only array of
    ``profile`` (the inner library's), and the inner functions are traced
    (`Adapter.library_tracer`).

    Attributes
    ----------
    profile : Profile
        The inner library's, as the shape-only arrays inside impersonate it.
    wrap : callable
        A shape-only array -> the library's array wrapping it.
    unwrap : callable
        One value of ``fn``'s result (each in its tuples, lists and dicts)
        -> the shape-only array inside it.
    name : str
        How the peak is found, for `BatchPlan.source`.
    weight : float
        The work of one operation of the inner library's, in the shape-only
        trace's operations (`Tracer.operations`, which bounds a trace's
        work): Dask builds and schedules a task for each.
    """

    profile: Profile
    wrap: Callable[[object], object]
    unwrap: Callable[[object], object]
    name: str
    weight: float = 1.0


class DtypeRules(NamedTuple):
    """Where a library's dtypes leave the standard's tables (which leave them open).

    Each adapter says its own; the defaults are the standard's choices.

    Attributes
    ----------
    numpy_tables : bool
        Elementwise functions are typed by NumPy's own ufunc tables (NumPy,
        Dask, array-api-strict: ``sqrt(int8)`` is float16).
    int8_with_float16 : str or None
        The dtype of an 8-bit integer with float16 (ndonnx: float32), where
        it is not NumPy's.
    float_as_wide_as_int : bool
        A floating function of an integer is a float as wide as it, at least
        float32 (JAX), not the default float.
    bool_arithmetic : str or None
        What a bool operand of arithmetic makes (JAX: int32; torch keeps a
        bool: ``"bool"``); None: the default integer.
    uint_sum_widens : bool
        ``sum`` of an unsigned integer is uint64 (torch's: the default int).
    keeps_dtype : frozenset of str
        Functions whose result keeps their input's dtype (Dask's ``round``
        and ``positive``, ndonnx's ``sqrt`` of an integer).
    zero_d_as_scalar : bool
        A 0-d operand of an operator beside a dimensioned one is a scalar
        (torch).
    int_power_keeps_base : bool
        ``x ** <Python int>`` is in the base's dtype (JAX).
    int_dividend_float : bool
        An integer dividend makes the default float whatever the divisor
        (ndonnx).
    inverse_float64 : bool
        ``inv`` is float64 (Dask solves against a float64 identity).
    ints_advanced : bool
        An int beside an integer index array is an advanced index too
        (NumPy's rule: NumPy, CuPy, JAX); torch and Dask take it as basic.
    index_dtype : str or None
        The dtype of ``searchsorted``'s indices (JAX: int32); None: the
        default integer.
    cumulative_prod_keeps_int : bool
        ``cumulative_prod`` of an integer keeps its dtype (JAX).
    fft_single_copies : bool
        The standard's ``fft`` functions cast NumPy's transform of a
        float32 or complex64 array once more, a copy (array-api-strict).
    numpy_scalars : {"array", "python", "refused"}
        How a NumPy scalar operand is taken. ``"array"``: as an array of its
        dtype (``np.float64``, a Python float too, is float64), as NumPy 2
        and JAX take it. ``"python"``: as the Python number it is
        (``np.float64``, ``np.complex128``), else of its kind, a bool and
        the other floats and complex ones as a float (torch 2.13:
        ``np.bool_(True)`` with an int8 tensor makes float32). ``"refused"``:
        not modelled (ndonnx: ``np.float32(2) / int8`` is float64), the
        trace refuses.
    """

    numpy_tables: bool = False
    int8_with_float16: str | None = None
    float_as_wide_as_int: bool = False
    bool_arithmetic: str | None = None
    uint_sum_widens: bool = True
    keeps_dtype: frozenset[str] = frozenset()
    zero_d_as_scalar: bool = False
    int_power_keeps_base: bool = False
    int_dividend_float: bool = False
    inverse_float64: bool = False
    ints_advanced: bool = True
    index_dtype: str | None = None
    cumulative_prod_keeps_int: bool = False
    fft_single_copies: bool = False
    numpy_scalars: str = "array"


@dataclass(frozen=True)
class GraphCost:
    """What a graph-running library holds besides its arrays, for `Trace.lazy_peak`.

    A graph is built before it is computed, so what each operation adds to
    it is held through the whole compute. Measured, not derived: an
    adapter calibrates these against the library's own allocations
    (``benchmarks/bench_meter.py`` measures the true peak beside the
    estimate).

    Attributes
    ----------
    per_operation : int
        Bytes each operation's part of the graph holds until the graph is
        computed (its layer and task).
    first_operations : int
        How many of a graph's first array-making operations (not views)
        leave garbage of ``first_bytes`` each that the cyclic garbage
        collector frees only later (in a long graph it runs between
        operations, so only the first ones count).
    first_bytes : int
        Bytes of that garbage each.
    compute : int
        Bytes one compute holds besides the graph and its arrays (the
        scheduler's state).
    copies_result : bool
        Computing copies the result once more, while the graph's peak is
        still held: the result's bytes are added to the peak.
    per_block : int
        Bytes the compute holds for each block of the batch's inputs beyond
        the first (a chunked input's chunks), where the graph's growth with
        them is not known: the tasks that read and make it, and the
        scheduler's state for them (the library fuses a chain of operations
        into one task a block).
    per_task : int
        Where it is known (`BlockGrowth`): bytes each task the further
        blocks add holds (its part of the graph and the scheduler's state;
        the ordering's sets are `BlockGrowth`'s own bytes).
    per_input_task : int
        Bytes each task of the inputs' own graphs beyond their reads holds
        (`BlockGrowth.upstream`: a rechunk's slices and merges).
    per_source : int
        Bytes the compute holds, while it prunes the graph to the batch's
        tasks, for each slot of its table of the inputs' own tasks
        (`HeldGraph.sources`).
    growth : callable or None
        ``growth(fn, arrays, whole)``: how ``fn``'s graph grows with the
        blocks of the batched ``arrays`` (``whole``: the whole operands,
        positional and keyword), or None where it cannot say; asked once a
        plan, where a batch spans more than one block of an input
        (`xpkit._adapters._shapes._run.spans`). None: never known.
    held : callable or None
        ``held(fn, arrays, whole)``: what every batch's graph holds whatever
        its rows (`HeldGraph`), asked once a plan. None: nothing.
    """

    per_operation: int = 0
    first_operations: int = 0
    first_bytes: int = 0
    compute: int = 0
    copies_result: bool = False
    per_block: int = 0
    per_task: int = 0
    per_input_task: int = 0
    per_source: int = 0
    growth: Growth | None = None
    held: Held | None = None

    def bytes(
        self,
        arrays: int,
        views: int,
        blocks: int = 1,
        growth: BlockGrowth | None = None,
        held: HeldGraph | None = None,
    ) -> int:
        """The graph's bytes: ``arrays`` and ``views`` made, ``blocks`` read, one compute.

        ``growth``: how the graph grows with the blocks (None: by
        ``per_block`` each); ``held``: what it holds whatever the blocks.
        """
        first = min(arrays, self.first_operations) * self.first_bytes
        if growth is None:
            spread = max(blocks - 1, 0) * self.per_block
        else:
            tasks, ordering = growth.counts(blocks)
            # the first step's blocks beyond the first: per_block each, or
            # their share of its tasks where more (a diff along the rows
            # makes 13 tasks a block of a step 100 blocks across)
            beyond = max(min(blocks, growth.width) - 1, 0)
            share = growth.first * beyond / max(growth.width, 1)
            across = round(max(beyond * self.per_block, share * self.per_task))
            inputs = growth.upstream * growth.steps(blocks) * self.per_input_task
            spread = across + round(tasks * self.per_task + ordering + inputs)
        if held is not None:
            spread += held.tasks * self.per_task + held.sources * self.per_source
        return self.compute + first + (arrays + views) * self.per_operation + spread


class BlockGrowth(NamedTuple):
    """How ``fn``'s graph grows with the blocks of its inputs a batch spans.

    Counted on ``fn``'s graph built, not computed, over inputs of four
    counts of blocks along the rows (`GraphCost.growth`), and
    extrapolated: its tasks by a line, the bytes of its ordering by a
    quadratic. A scheduler that orders a graph before it runs it may hold,
    for each task, a set of the input blocks it depends on: where a block's
    result is carried to the next (a cumulative sum along the rows), the
    k-th block's set holds every block before it, and the sets grow with
    the square of the blocks; where every result reads a whole operand in
    many blocks (``x + w.sum()``), each result's set holds all of them.

    Attributes
    ----------
    width : float
        The blocks that one step along the rows spans (every input, times
        its blocks across the other axes), as `Adapter.row_blocks` counts
        them: a step is a chunk of the input of the fewest rows a chunk,
        and an input of more rows a chunk spans its share of one.
    tasks : float
        Tasks each further step along the rows adds to the graph.
    ordering, squared : float
        Bytes of the ordering's sets each further step adds, and each step
        squared.
    onset : float
        Tasks the first further step adds besides ``tasks`` (what a step
        carried from the one before needs once).
    first : float
        Tasks of the first step itself (0: not counted).
    upstream : float
        Tasks the inputs' own graphs run for a step's blocks beyond the
        reads that ``tasks`` counts (an input rechunked: the reads, slices
        and merges of the blocks each spans).
    """

    width: float
    tasks: float
    ordering: float
    squared: float
    onset: float = 0.0
    first: float = 0.0
    upstream: float = 0.0

    def steps(self, blocks: int) -> float:
        """The steps along the rows that ``blocks`` blocks make beyond the first."""
        return max(blocks / max(self.width, 1) - 1.0, 0.0)

    def counts(self, blocks: int) -> tuple[float, float]:
        """(tasks, bytes of the ordering) that ``blocks`` blocks add to one step's graph."""
        steps = self.steps(blocks)
        tasks = self.tasks * steps + self.onset * min(steps, 1.0)
        return tasks, self.ordering * steps + self.squared * steps**2


class HeldGraph(NamedTuple):
    """What every batch's graph holds, whatever the blocks of its rows.

    Attributes
    ----------
    tasks : int
        Tasks ``fn``'s graph holds for its whole operands' blocks beyond
        one each (``x + w.sum()``, ``w`` in many blocks: a task to read
        each and a tree of sums over them), counted as ``fn`` builds it.
    sources : int
        Slots of the table a compute builds over the tasks of the inputs'
        own graphs to prune the graph to the batch's (each slice of an input
        is a graph over all of the input's blocks, of which the batch reads
        a few).
    """

    tasks: int
    sources: int


#: How ``fn``'s graph grows with the blocks of its inputs (`GraphCost.growth`).
Growth = Callable[
    ["UserFunction", tuple["Array", ...], tuple[tuple[object, ...], dict[str, object]]],
    "BlockGrowth | None",
]
#: What every batch's graph holds (`GraphCost.held`).
Held = Callable[
    ["UserFunction", tuple["Array", ...], tuple[tuple[object, ...], dict[str, object]]],
    HeldGraph,
]
#: For a batch of some rows: the blocks its inputs span, how the graph grows
#: with them and what it holds whatever the blocks (`Trace.blocks`,
#: `Trace.growth`, `Trace.held`).
Span = tuple[int, "BlockGrowth | None", HeldGraph | None]


#: A kernel's workspace: ``(operation, inputs, outputs, options) -> bytes``,
#: each operand a ``(shape, dtype name)``, ``options`` its other arguments
#: by name (a sort's ``descending``).
Workspace = Callable[
    [
        str,
        tuple[tuple[tuple[int, ...], str], ...],
        tuple[tuple[tuple[int, ...], str], ...],
        Mapping[str, object],
    ],
    int,
]


class Traits(TypedDict, total=False):
    """How a library allocates: the `Profile` fields an adapter sets."""

    mixed_kinds: str
    views: bool
    flip_views: bool
    elides: bool
    lazy: bool
    numpy_internals: bool
    array_bytes: int
    dim_bytes: int
    view_bytes: int
    granule: int
    slices_copy: bool
    bounded_masks: bool
    sort_indices: bool
    argsort_values: bool
    sort_scratch: tuple[int, int]
    cumulative_block: int
    casts_whole: bool
    deferred_frees: int
    graph: GraphCost | None
    strided_matmul_copies: bool
    matmul_packing: int
    vecdot_copies: int
    dtype_rules: DtypeRules
    workspace: Workspace | None
    norms: str
    centred_spread: bool


@dataclass(frozen=True)
class Profile:
    """The library and device a trace's arrays impersonate, and how it allocates.

    Attributes
    ----------
    library : str
        The adapter key of the library (``"numpy"``, ``"torch"``, ...).
    device : str
        The device string the arrays live on.
    native_device : object
        The library's own device object (what ``x.device`` returns).
    dtypes : mapping of str to dtype
        Standard name -> the library's dtype object, for every dtype the
        device holds.
    default_float, default_int, default_complex : str
        The library's default dtypes (``__array_namespace_info__``).
    mixed_kinds : {"numpy", "float"}
        How an integer and a floating array promote: NumPy's table
        (``int64 + float32 -> float64``) or to the floating operand's dtype
        (torch, JAX).
    views : bool
        Basic slices, transposes, ``reshape`` of contiguous arrays,
        ``expand_dims`` and ``broadcast_to`` share memory (NumPy, torch,
        CuPy, array-api-strict); False: every operation copies (JAX).
    flip_views : bool
        ``flip`` is a view (NumPy, CuPy); torch copies.
    elides : bool
        NumPy's temporary elision: ``a * 2 + 1`` computes ``+ 1`` in the
        buffer of the temporary ``a * 2`` when it is large enough.
    lazy : bool
        The library runs a graph and frees each array after its last use
        (Dask, ndonnx): the trace reports `Trace.lazy_peak`.
    numpy_internals : bool
        The library computes with NumPy's own functions (NumPy,
        array-api-strict, Dask's chunks): a ufunc buffers an operand it
        broadcasts or casts (``min(8192, size)`` elements), ``var`` and
        ``std`` hold a centred copy, ``stack`` makes a view of each input.
    array_bytes : int
        Bytes an array costs beyond its data (the host object).
    dim_bytes : int
        Bytes each axis adds to an array's or a view's cost (its shape and
        strides).
    view_bytes : int
        Bytes a view costs (it has no data of its own).
    granule : int
        Allocations are rounded up to a multiple of this (torch's CUDA
        caching allocator: 512).
    slices_copy : bool
        A row slice of an input is a copy (JAX): the batch's input slices
        count as allocated.
    bounded_masks : bool
        ``x[mask]`` is followed at its largest, every element selected (its
        true size depends on the values): NumPy, array-api-strict, CuPy,
        JAX. False where the trace refuses it and a meter measures it
        (torch's operations; Dask, whose chunks it leaves unknown).
    sort_indices : bool
        Sorting allocates the indices alongside the values (``torch.sort``),
        and an argsort the values alongside the indices.
    argsort_values : bool
        An argsort allocates the sorted values alongside the indices
        (``jnp.argsort``: one sort of the values and their positions).
    sort_scratch : (int, int)
        A sort's scratch while it runs, whatever the rows: bytes an element
        of a row of each operand it sorts, and bytes more (XLA's CPU
        runtime); ``(0, 0)``: none.
    cumulative_block : int
        A cumulative sum or product along more than this many elements
        holds two times its result, its axis padded to a multiple of this,
        while it runs (XLA's CPU loop: 16); 0: none.
    casts_whole : bool
        An operation into another dtype first casts each operand whole
        (torch's ``sum`` of bools, ``x_int + 0.5``); else in buffers.
    deferred_frees : int
        A freed array's memory returns only once the operations dispatched
        before it are done (JAX's asynchronous dispatch): the trace counts
        a freed array through this many allocations after it; 0: none.
    graph : GraphCost or None
        What a lazy library's graph and compute hold besides the arrays
        (Dask); None: nothing counted.
    strided_matmul_copies : bool
        A matrix product first copies an operand without a unit stride
        along one of its last two axes (`xpkit._adapters._shapes._strides`:
        torch); NumPy's takes any strides.
    matmul_packing : int
        A matrix product packs its operands into blocks of its own while it
        runs, their bytes up to this many (Eigen's blocks, on JAX's CPU);
        0: none (a BLAS whose buffers are allocated once).
    vecdot_copies : int
        ``vecdot`` copies each operand, broadcast, this many times while it
        runs (``jnp.vecdot`` on JAX's CPU: 2); 0: none.
    dtype_rules : DtypeRules
        Where its dtypes leave the standard's tables.
    workspace : callable or None
        Bytes a kernel holds beside its result within one operation, by the
        standard's name of the operation (`_rules.hold_workspace`), its
        operands' shapes and dtypes and its options (torch's CPU ``abs``
        of a complex array computes a complex result first; JAX's CPU
        ``searchsorted`` holds its scan's bounds);
        None: none.
    norms : {"squares", "numpy", "fused", "eager"}
        How ``linalg.vector_norm`` and ``matrix_norm`` allocate
        (`xpkit._adapters._shapes._norms`): NumPy's Python over whole
        temporaries, one kernel (torch), one array an operation (JAX's
        eager ``vector_norm``); ``"squares"``: ``|x| ** ord`` whole, then
        its reduction.
    centred_spread : bool
        ``var`` and ``std`` hold a centred copy of their input while they
        run though the library is not NumPy (XLA's CPU program, at some
        sizes); NumPy's own do so anyway (`numpy_internals`).
    namespace_names : container of str
        The public names of the library's own namespace (`public_names`):
        one the shape-only namespace has no rule for is refused
        (`CannotFollow`), not missing, so that ``hasattr(xp, name)`` in
        ``fn`` answers as it would for the library's arrays and never sends
        the trace down another branch.
    """

    library: str
    device: str
    native_device: NativeDevice
    #: What tells this profile from another: the library, the device and the
    #: library's settings (`Adapter.config_token`); equal keys, equal profiles.
    key: Hashable
    dtypes: Mapping[str, DType]
    default_float: str = "float64"
    default_int: str = "int64"
    default_complex: str = "complex128"
    mixed_kinds: str = "numpy"
    views: bool = True
    flip_views: bool = True
    elides: bool = False
    lazy: bool = False
    numpy_internals: bool = False
    array_bytes: int = 0
    dim_bytes: int = 0
    view_bytes: int = 0
    granule: int = 1
    slices_copy: bool = False
    bounded_masks: bool = True
    sort_indices: bool = False
    argsort_values: bool = False
    sort_scratch: tuple[int, int] = (0, 0)
    cumulative_block: int = 0
    casts_whole: bool = False
    deferred_frees: int = 0
    graph: GraphCost | None = None
    strided_matmul_copies: bool = False
    matmul_packing: int = 0
    vecdot_copies: int = 0
    dtype_rules: DtypeRules = field(default_factory=DtypeRules)
    workspace: Workspace | None = None
    norms: str = "squares"
    centred_spread: bool = False
    namespace_names: Container[str] = frozenset()

    def dtype(self, name: str) -> DType:
        """The library's dtype object named ``name`` (CannotFollow if not held)."""
        try:
            return self.dtypes[name]
        except KeyError:
            msg = f"{self.library} on {self.device!r} has no dtype {name}"
            raise CannotFollow(msg) from None


@dataclass(eq=False)
class Trace:
    """The bytes one shape-only run of ``fn`` allocates.

    ``live`` and ``peak`` follow Python's lifetimes of the arrays (eager);
    ``tape`` holds ``(node, inputs, bytes)`` per allocation, in order, for
    `lazy_peak`. ``failure`` is the first `CannotFollow` raised, even if
    ``fn`` caught it.
    """

    profile: Profile
    live: int = 0
    peak: int = 0
    failure: str | None = None
    tape: list[tuple[int, tuple[int, ...], int]] = field(default_factory=list)
    nodes: int = 0
    views: int = 0
    #: Bytes freed but still held (`deferred_frees`): since each of the
    #: last allocations, the oldest first.
    pending: list[int] = field(default_factory=list)
    #: The rows ``fn`` is traced on while it runs (0: none), for `adopt`.
    rows: int = 0
    #: A library's arrays ``fn`` made while traced (`adopt`): id -> charged.
    adopted: dict[int, int] = field(default_factory=dict)
    #: Inside a library's own function (``torch.maximum``, not the standard's
    #: through array-api-compat): its own promotion rules apply.
    native: bool = False
    #: How many of the tape's chunks a graph-running library may compute at
    #: once (its scheduler's workers, at most the widest layer's chunks):
    #: `lazy_peak` counts that many times what the chunks hold one at a
    #: time, and never more than all the tape's arrays together.
    parallel: int = 1
    #: How many blocks of its storage the batch's inputs span together (a
    #: chunked library's chunks), for the graph's bytes in `lazy_peak`.
    blocks: int = 1
    #: How ``fn``'s graph grows with those blocks (None: not known).
    growth: BlockGrowth | None = None
    #: What the graph holds whatever the blocks (None: nothing known).
    held: HeldGraph | None = None
    #: How many of the tape's arrays are the batch's input rows copied (where
    #: a row slice copies), which are no operation of ``fn``'s graph.
    copied_inputs: int = 0
    #: The trace has ended: an array of it that ``fn`` kept is used later.
    closed: bool = False

    def charge(
        self, nbytes: int, ndim: int, inputs: tuple[int, ...]
    ) -> tuple[int, int]:
        """Charge an array of ``nbytes`` and ``ndim`` axes made from ``inputs``.

        ``inputs`` are tape nodes. Returns ``(charged bytes, node)``: the
        bytes rounded to the profile's granule plus the array's own cost, and
        the tape node of the array.
        """
        if self.closed:
            raise kept_from_trace()
        profile = self.profile
        granule = profile.granule
        charged = -(-nbytes // granule) * granule
        charged += profile.array_bytes + profile.dim_bytes * ndim
        self.live += charged
        self.peak = max(self.peak, self.live)
        if self.pending:
            self.live -= self.pending.pop(0)
            self.pending.append(0)
        self.nodes += 1
        node = self.nodes
        if profile.lazy:  # (only a graph's peak reads the tape)
            self.tape.append((node, inputs, charged))
        return charged, node

    def adopt(self, x: object) -> None:
        """Hold the bytes of an array ``fn`` made while traced, while it lives.

        ``x`` is a library's array met as an operand. Its owner (``x``, or
        the array it views: NumPy's and CuPy's ``base``) is one ``fn`` made
        where its first axis is the traced rows: made from a shape through a
        namespace ``fn`` captured (``np.zeros((x.shape[0], k))``,
        ``np.arange(x.shape[0])[:, None]``). Inputs are shape-only, and the
        other arrays ``fn`` reads (a closure's weights, a view of them) have
        other shapes. (The trace made it for real; it is counted from where
        it is first used.)
        """
        if self.rows < 2 or self.profile.lazy:  # (no traced fn runs, or a graph)
            return
        owner = x
        while getattr(owner, "base", None) is not None:
            owner = owner.base  # type: ignore[attr-defined]
        if id(owner) in self.adopted:
            return
        shape = getattr(owner, "shape", ())
        if not shape or shape[0] != self.rows or not hasattr(owner, "base"):
            return
        nbytes = int(getattr(owner, "nbytes", 0))
        charged, _ = self.charge(nbytes, len(shape), ())
        self.adopted[id(owner)] = charged
        with contextlib.suppress(TypeError):  # (no weak references: held to the end)
            weakref.finalize(owner, self._drop, id(owner))

    def _drop(self, key: int) -> None:
        self.release(self.adopted.pop(key, 0))

    def release(self, charged: int) -> None:
        """An array charged ``charged`` bytes was freed."""
        if self.profile.deferred_frees:
            if not self.pending:
                self.pending = [0] * self.profile.deferred_frees
            self.pending[-1] += charged
        else:
            self.live -= charged

    def hold(self, nbytes: int) -> int:
        """Charge ``nbytes`` the library holds outside any array (a view, a buffer).

        Returns them, for `release` (a buffer is released at once: it
        counts only in the peak).
        """
        if self.closed:
            raise kept_from_trace()
        self.views += 1
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        return nbytes

    def spike(self, nbytes: int) -> None:
        """Bytes held only while one operation runs: they count in the peak alone."""
        if self.closed:
            raise kept_from_trace()
        self.peak = max(self.peak, self.live + nbytes)

    def refuse(self, reason: str) -> Exception:
        """A `CannotFollow` for ``reason``, remembered as the trace's failure.

        Once the trace has ended, the TypeError of `kept_from_trace`.
        """
        if self.closed:
            return kept_from_trace()
        if self.failure is None:
            self.failure = reason
        return CannotFollow(reason)

    def lazy_peak(self, kept: tuple[int, ...]) -> int:
        """The peak when each array is freed after its last use on the tape.

        What a graph-running library holds: an array lives from the operation
        that makes it to the last one that reads it; the nodes in ``kept``
        (the result) live to the end. The profile's `GraphCost` adds what
        the graph itself holds (the trace's operations) and, where the
        compute copies the result, the result's bytes.
        """
        last: dict[int, int] = {}
        for step, (_, inputs, _) in enumerate(self.tape):
            for node in inputs:
                last[node] = step
        end = len(self.tape)
        for node in kept:
            last[node] = end
        frees: dict[int, int] = {}  # step -> bytes freed after it
        sizes = {node: size for node, _, size in self.tape}
        for step, (node, _, _) in enumerate(self.tape):
            after = last.get(node, step)
            frees[after] = frees.get(after, 0) + sizes[node]
        live = peak = 0
        for step, (_, _, size) in enumerate(self.tape):
            live += size
            peak = max(peak, live)
            live -= frees.get(step, 0)
        if self.parallel > 1:  # (never more than every array at once)
            peak = min(peak * self.parallel, sum(sizes.values()))
        graph = self.profile.graph
        if graph is None:
            return peak
        if graph.copies_result:
            peak += sum(sizes.get(node, 0) for node in set(kept))
        arrays = self.nodes - self.copied_inputs
        extra = graph.bytes(arrays, self.views, self.blocks, self.growth, self.held)
        return peak + extra


#: The trace the current context runs (None outside one).
_ACTIVE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar(
    "xpkit_shape_trace", default=None
)


#: The traces that run now, in any thread: for each, the threads alive as it
#: began (changed under `_OPEN_LOCK`).
_OPEN: dict[int, frozenset[int | None]] = {}
_OPEN_LOCK = threading.Lock()


def active_trace(*operands: object) -> Trace:
    """The trace the current context runs.

    Outside one: `CannotFollow` where the call belongs to a trace that runs
    in another thread (``fn`` hands work to a thread: the trace cannot
    follow it there), as an operand of it (``operands``: shape-only arrays
    of a running trace) or this thread begun while one runs tell; else
    `kept_from_trace`'s error (what ``fn`` kept is used after its trace,
    whatever other threads trace meanwhile).
    """
    trace = _ACTIVE.get()
    if trace is None:
        if _in_another_thread(operands):
            msg = "a shape-only array was made outside its trace (in another thread)"
            raise CannotFollow(msg)
        raise kept_from_trace()
    return trace


def _in_another_thread(operands: tuple[object, ...]) -> bool:
    """Whether a running trace's work is done in this thread (see `active_trace`)."""
    for operand in operands:
        trace = getattr(operand, "_trace", None)
        if isinstance(trace, Trace) and not trace.closed:
            return True
    ident = threading.get_ident()
    with _OPEN_LOCK:
        return any(ident not in alive for alive in _OPEN.values())


def kept_from_trace() -> TypeError:
    """The error where an array or namespace of an ended trace is used.

    ``fn`` kept it from the call that sized its batches (a weight it builds
    on a first call, a namespace it caches) and uses it on real arrays,
    or the caller does: it has no values. JAX's leaked tracers are refused
    alike.
    """
    msg = (
        "fn kept an array (or the namespace) of xpkit's shape-only trace and "
        "used it after the trace: xpkit sizes batches by calling fn once on "
        "arrays that have shapes but no values, and what fn keeps from that "
        "call (a weight built on a first call, a cached namespace) has no "
        "values. Build such state before the call (fn on one real row), or "
        "pass bytes_per_item so that fn is not traced"
    )
    return TypeError(msg)


def public_names(namespace: object) -> Container[str]:
    """The public names of a library's namespace, its extensions' as ``linalg.x``.

    Asked one name at a time (``name in``), where the shape-only namespace
    lacks it: a set of them all cost Dask's first probe about 46 kB.
    """
    return _PublicNames(namespace)


@dataclass(frozen=True)
class _PublicNames:
    """`public_names`: whether ``namespace`` has a public ``name`` (``"fft.x"`` too)."""

    namespace: object

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        extension, _, last = name.rpartition(".")
        space = (
            getattr(self.namespace, extension, None) if extension else self.namespace
        )
        return bool(last) and not last.startswith("_") and hasattr(space, last)


def missing_name(name: str, extension: str = "") -> Exception:
    """What the shape-only namespace (or its ``extension``) raises for a ``name`` it lacks.

    `CannotFollow` where the library's own namespace has it
    (`Profile.namespace_names`): ``hasattr(xp, name)`` would be False here
    and True for the library's arrays, and ``fn`` would run another branch.
    AttributeError where neither has it, or outside a trace.
    """
    name = f"{extension}.{name}" if extension else name
    trace = _ACTIVE.get()
    if trace is not None and name in trace.profile.namespace_names:
        msg = f"{name} of {trace.profile.library}'s namespace (no shape rule for it)"
        return trace.refuse(msg)
    return AttributeError(f"the shape-only namespace has no {name!r}")


def tracing(trace: Trace, run: Callable[[], object]) -> object:
    """``run()`` with ``trace`` active in the current context."""
    alive = frozenset(t.ident for t in threading.enumerate())
    token = _ACTIVE.set(trace)
    with _OPEN_LOCK:
        _OPEN[id(token)] = alive
    try:
        return run()
    finally:
        _ACTIVE.reset(token)
        trace.closed = True  # (what fn kept of it is refused where it is used)
        with _OPEN_LOCK:
            del _OPEN[id(token)]
