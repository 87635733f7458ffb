"""JAX's meters: XLA's analysis of a jitted ``fn``, JAX's trace, a GPU's statistics.

A ``fn`` that is itself ``jax.jit``-ed (it has ``lower``) is compiled for
the batch's shapes without data (``jax.ShapeDtypeStruct``), and XLA's
``memory_analysis()`` of the compiled program says what it allocates: its
temporaries and outputs, plus the batch's input slices (slices of JAX arrays
are copies). That is exact for the compiled program.

An eager ``fn`` runs operation by operation, each result a buffer of its
own that lives as long as Python holds it: its peak is at least the
compiled program's (XLA fuses temporaries away). Written against the
standard, it is traced on shape-only arrays, which follow Python's
lifetimes. Written with ``jax.numpy`` directly, JAX's own trace of it
(``jax.make_jaxpr``, no data) stands in (`JaxprTracer`): each operation's
outputs live from the operation until their last use, and through the
two operations after it (JAX dispatches ahead: an array a running
operation reads is freed once that is done, while Python dispatches the
next ones: `HELD_THROUGH`), and a jitted
function inside (many of ``jax.numpy``'s are) holds what its own trace
holds. Python keeps a named intermediate alive until ``fn`` returns, which
a jaxpr does not show: for ``fn`` that names its intermediates, the eager
peak can be higher than this (the first full batch is not checked on JAX).

On a GPU, ``memory_stats()`` keeps ``peak_bytes_in_use`` for the whole
process, which nothing may reset: a real run is measured by it only where
the run raised that peak (else the meter says it could not see the call).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from .._current_rows import ROWS
from .._shown import said
from ._kernel_scratch import cumulative_scratch, packed_operands, sort_scratch
from ._peak import PeakMeter, host_meter
from ._trace import CannotFollow, Workspace

if TYPE_CHECKING:
    from .._typing import NativeDevice, UserFunction, Value

__all__ = [
    "CUMULATIVE_BLOCK",
    "HELD_THROUGH",
    "EagerCosts",
    "JaxprTracer",
    "StatsPeak",
    "XlaTracer",
    "warmed_host_meter",
]

T = TypeVar("T")

_SIZES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
          "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8,
          "uint64": 8, "float64": 8, "complex64": 8, "complex128": 16}  # fmt: skip


class XlaTracer:
    """XLA's memory analysis of a jitted ``fn`` at any row count (it compiles)."""

    name = "XLA's memory analysis of the compiled fn"

    def __init__(
        self,
        fn: UserFunction,
        inputs: tuple[tuple[tuple[int, ...], str], ...],
        whole: tuple[tuple[Value, ...], dict[str, Value]],
        device: NativeDevice,
        costs: EagerCosts | None = None,
    ) -> None:
        self._fn: Value = fn  # (a jitted function: it has lower)
        self._inputs = inputs
        self._args, self._kwargs = whole
        self._device = device
        self._costs = NO_COSTS if costs is None else costs
        #: Bytes of one row of ``fn``'s outputs, from the last compilation.
        self.output_row_bytes: int | None = None
        #: One compilation, whatever the rows.
        self.operations = 1

    def peak(self, rows: int) -> int:
        """Temporaries and outputs of the program compiled for ``rows`` rows, and its inputs.

        With the call's own costs beside the program's (`EagerCosts`: on the
        CPU each input slice's and output's array, and the dispatch: a
        jitted ``x * 2`` held 7.4-7.9 kB beyond XLA's figure at 8 to 256
        rows of 256 to 2,048 float64, where these count 7.2 kB).
        """
        import jax

        sharding = jax.sharding.SingleDeviceSharding(self._device)
        struct: Callable[..., Value] = jax.ShapeDtypeStruct
        specs = [
            struct((rows, *row), name, sharding=sharding) for row, name in self._inputs
        ]
        try:
            lowered = self._fn.lower(*specs, *self._args, **self._kwargs)
            stats = lowered.compile().memory_analysis()
            outputs = jax.tree_util.tree_leaves(lowered.out_info)
        except Exception as exc:  # noqa: BLE001 - the real run raises it again
            msg = f"jax could not compile fn for {rows} rows ({type(exc).__name__}: {said(exc)})"
            raise CannotFollow(msg[:300]) from None
        if stats is None:
            msg = "XLA gave no memory analysis for this device"
            raise CannotFollow(msg)
        if rows:
            made_rows = sum(math.prod(o.shape) * o.dtype.itemsize for o in outputs)
            self.output_row_bytes = made_rows // rows
        slices = sum(rows * math.prod(row) * _SIZES[name] for row, name in self._inputs)
        made = int(stats.temp_size_in_bytes) + int(stats.output_size_in_bytes)
        made -= int(stats.alias_size_in_bytes)
        arrays = len(self._inputs) + len(outputs)
        call = self._costs.array_bytes * arrays + self._costs.dispatch_bytes
        product, sort = self._beyond_analysis(specs)
        return slices + call + max(made, product) + sort

    def _beyond_analysis(self, specs: list[Value]) -> tuple[int, int]:
        """The largest ``dot_general`` result and sort scratch in ``fn``'s jaxpr.

        On the CPU XLA fuses a product with what reads it into one operation
        whose analysis reports no temporary bytes, yet the product is held
        whole inside it: ``(x @ x.T).sum(1)`` held the (b, b) product and
        was planned at 6.5 times its budget. A product is never less than that.
        A sort's scratch in XLA's runtime is not in the analysis either
        (`_sort_scratch`): a jitted sort of 8 rows of 512 float64 held 13 kB
        beyond it (0.85 of the true peak counted).
        """
        import jax

        try:
            closed = jax.make_jaxpr(self._fn)(*specs, *self._args, **self._kwargs)
        except Exception:  # noqa: BLE001 - compiled above: XLA's figure stands
            return 0, 0
        sort = max(
            (_sort_scratch(e, self._costs) for e in _all_equations(closed.jaxpr)),
            default=0,
        )
        return _largest_product(closed.jaxpr), sort


class EagerCosts(NamedTuple):
    """What an eager operation holds beyond its arrays' data (none on a GPU).

    ``array_bytes``: each array's own (a CPU array's PjRt buffer and Python
    object); ``dispatch_bytes``: dispatching an operation, while it runs;
    ``matmul_packing``: the most bytes a matrix product packs its operands
    into while it runs (`_kernel_scratch.packed_operands`);
    ``sort_scratch``: a sort's scratch while it runs, whatever the rows
    (`_kernel_scratch.sort_scratch`, `_sort_scratch`); ``workspace``: what
    a reduction holds beside its result, by the standard's name of it
    (`_REDUCTIONS`; the shape-only trace's `Profile.workspace`).
    """

    array_bytes: int = 0
    dispatch_bytes: int = 0
    matmul_packing: int = 0
    sort_scratch: tuple[int, int] = (0, 0)
    workspace: Workspace | None = None


#: Nothing beyond the arrays' data (a GPU's arrays).
NO_COSTS = EagerCosts()


class JaxprTracer:
    """JAX's trace of an eager ``fn`` (``jax.make_jaxpr``), each output live to its last use."""

    name = "JAX's trace of fn (jax.make_jaxpr)"

    def __init__(
        self,
        fn: UserFunction,
        inputs: tuple[tuple[tuple[int, ...], str], ...],
        whole: tuple[tuple[Value, ...], dict[str, Value]],
        costs: EagerCosts | None = None,
    ) -> None:
        self._fn = fn
        self._inputs = inputs
        self._args, self._kwargs = whole
        self._costs = NO_COSTS if costs is None else costs
        #: Bytes of one row of ``fn``'s outputs, from the last trace.
        self.output_row_bytes: int | None = None
        #: The equations of the last trace.
        self.operations = 1

    def peak(self, rows: int) -> int:
        """The most bytes live at once in ``fn``'s jaxpr for ``rows`` rows, and its inputs."""
        import jax

        struct: Callable[..., Value] = jax.ShapeDtypeStruct
        specs = [struct((rows, *row), name) for row, name in self._inputs]
        kwargs = self._kwargs
        token = ROWS.set((range(rows), None))  # what `current_rows` says while traced
        try:
            closed = jax.make_jaxpr(lambda *a: self._fn(*a, **kwargs))(
                *specs, *self._args
            )
        except Exception as exc:  # noqa: BLE001 - the real run raises it again
            msg = f"jax could not trace fn for {rows} rows ({type(exc).__name__}: {said(exc)})"
            raise CannotFollow(msg[:300]) from None
        finally:
            ROWS.reset(token)
        jaxpr = closed.jaxpr
        self.operations = max(len(jaxpr.eqns), 1)
        if rows:
            self.output_row_bytes = sum(_bytes(v.aval) for v in jaxpr.outvars) // rows
        slices = sum(
            rows * math.prod(row) * _SIZES[name] + self._costs.array_bytes
            for row, name in self._inputs
        )
        return slices + self._costs.dispatch_bytes + _jaxpr_peak(jaxpr, self._costs)


def _bytes(aval: Value) -> int:
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
        return 0
    return int(math.prod(shape)) * int(dtype.itemsize)


#: A cumulative operation along more elements than this holds two times its
#: result, its axis padded to a multiple of this (`_scratch`: XLA's CPU loop).
CUMULATIVE_BLOCK = 16

#: A reduction primitive -> the standard's name of it, for `EagerCosts.workspace`.
_REDUCTIONS = {
    "reduce_sum": "sum",
    "reduce_prod": "prod",
    "reduce_max": "max",
    "reduce_min": "min",
    "argmax": "argmax",
    "argmin": "argmin",
    "reduce_or": "any",
    "reduce_and": "all",
}

#: The cumulative operations, whose XLA loop holds scratch (`_scratch`).
_CUMULATIVE = frozenset({"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"})


#: Host bytes XLA's CPU compiler holds while it compiles an eager control-flow
#: primitive, and more per equation of its body (`_scratch`).
_COMPILE = {"scan": 16_500_000, "while": 12_000_000, "cond": 10_000_000}
_COMPILE_PER_EQUATION = 70_000


def _equations(jaxpr: Value) -> int:
    """How many equations ``jaxpr`` runs, its inner jaxprs' and branches' too."""
    count = 0
    for eqn in jaxpr.eqns:
        count += 1 + sum(_equations(j) for j in _inner_jaxprs(eqn))
        for branch in eqn.params.get("branches", ()):
            count += _equations(getattr(branch, "jaxpr", branch))
    return count


def _scratch(eqn: Value, out: int, costs: EagerCosts) -> int:
    """The bytes an equation run eagerly on the CPU holds beyond its outputs.

    Measured with a counting malloc on JAX 0.10 (float32 and float64, 16 to
    1,024 points, 250 to 400,000 rows, XLA's CPU runtime): ``jnp.fft``'s
    wrapper copies its input and its result around the ``fft`` (a
    ``moveaxis`` that ``make_jaxpr`` does not show), two more arrays of
    about the result's size; a cumulative operation along more than 16
    elements holds 1.1 (a multiple of 16) to 2 times its result, its axis
    padded to a multiple of 16 (3.8 times along 17). The same operations
    jitted are XLA's analysis's to count.

    An eager ``scan``, ``while_loop`` (``fori_loop``) or ``cond`` compiles
    its body with XLA at a call whose body JAX has not seen (a step function
    defined inside ``fn`` is a new one at each call; any at a batch's new
    shape): 14 to 16 MB of the compiler's own for ``scan`` (a one-line
    body), 8 to 12 MB for ``while`` and ``cond``, and 65 kB more per
    equation of the body (29 MB for a 240-equation body), all freed before
    its results are made: the results take its place where they are larger.
    A reduction: what the shape-only trace counts for it (`_REDUCTIONS`,
    `EagerCosts.workspace`). ``lax.top_k``: `_top_k_scratch`;
    ``dot_general``: the blocks it packs its operands into
    (`EagerCosts.matmul_packing`); a convolution holds
    scratch of its result's size (two times its result at every run, 27 to
    2,789 rows, 2 to 32 filters of 3 to 9).
    """
    name = eqn.primitive.name
    if name == "conv_general_dilated":
        return out
    if name == "dot_general":
        lhs, rhs = (_bytes(v.aval) for v in eqn.invars[:2])
        return packed_operands(lhs, rhs, costs.matmul_packing)
    if name in _COMPILE:
        body = sum(_equations(j) for j in _inner_jaxprs(eqn))
        body += sum(
            _equations(getattr(b, "jaxpr", b)) for b in eqn.params.get("branches", ())
        )
        return max(_COMPILE[name] + _COMPILE_PER_EQUATION * body - out, 0)
    if name == "fft":
        return 2 * out
    if name == "top_k":
        return _top_k_scratch(eqn) + _sort_scratch(eqn, costs)
    if name == "sort":
        return _sort_scratch(eqn, costs)
    if name in _CUMULATIVE:
        shape = getattr(eqn.invars[0].aval, "shape", ())
        length = shape[eqn.params.get("axis", -1)] if shape else 0
        return cumulative_scratch(out, length, CUMULATIVE_BLOCK)
    if name in _REDUCTIONS and costs.workspace is not None:
        ins, outs = (_operands(e) for e in (eqn.invars, eqn.outvars))
        return costs.workspace(_REDUCTIONS[name], ins, outs, {})
    return 0


def _operands(variables: Value) -> tuple[tuple[tuple[int, ...], str], ...]:
    """Each variable's shape and dtype name, as a `Workspace` takes them."""
    found = []
    for v in variables:
        try:
            found.append((tuple(v.aval.shape), str(v.aval.dtype)))
        except AttributeError:  # (a literal's, a token's)
            continue
    return tuple(found)


def _sort_scratch(eqn: Value, costs: EagerCosts) -> int:
    """A ``sort``'s or ``top_k``'s scratch in XLA's CPU runtime, whatever the rows.

    Measured with a counting malloc on JAX 0.10 (float32, float64 and
    int32, rows of 512 and 2,048, 8 and 64 rows, eager and jitted): a sort
    of floats held 16 bytes an element of one row and 4.7-5.1 kB more (int32,
    4 bytes and 0.6 kB), two operands (``argsort``: the keys and their
    indices) twice the row; ``top_k`` as a sort of two (eager) or of one
    (jitted), counted as two, and float32's own kernel (4 bytes an element
    and 2.7 kB) as the call's bytes alone. Beside the rows' own bytes it is
    a constant: 0.75-0.88 of an 8-row sort's true peak, 0.95-0.98 of a
    64-row one's, went uncounted; now 1.00-1.03 of it for float sorts and
    0.93-1.3 for the rest (1.3-1.5 for an eager ``argsort``, as before).
    """
    name = eqn.primitive.name
    if name not in ("sort", "top_k"):
        return 0
    shape = getattr(eqn.invars[0].aval, "shape", ())
    if not shape:
        return 0
    axis = eqn.params.get("dimension" if name == "sort" else "axis", -1)
    length = int(shape[axis])
    # (top_k: a sort of two; float32's own kernel: the call's bytes alone)
    float32 = str(getattr(eqn.invars[0].aval, "dtype", "")) == "float32"
    top_k = 0 if float32 else 2
    operands = len(eqn.invars) if name == "sort" else top_k
    return sort_scratch(costs.sort_scratch, length, operands)


def _all_equations(jaxpr: Value) -> list[Value]:
    """``jaxpr``'s equations and its inner jaxprs' (not a ``cond``'s branches)."""
    found = []
    for eqn in jaxpr.eqns:
        found.append(eqn)
        for inner in _inner_jaxprs(eqn):
            found += _all_equations(inner)
    return found


def _top_k_scratch(eqn: Value) -> int:
    """``lax.top_k``'s sort of its whole input with int32 indices, but of float32.

    XLA's CPU runtime has a kernel of its own for float32 (none held);
    other dtypes are sorted whole beside their indices: 1.5 times a float64
    input (measured for k of 5 to 400 of 64 to 2,048; none where k is the
    axis' length): ``top_k`` of 400 was planned at 1.7-2.0 times the budget.
    """
    aval = eqn.invars[0].aval
    shape, dtype = getattr(aval, "shape", ()), getattr(aval, "dtype", None)
    axis = eqn.params.get("axis", -1)
    if not shape or dtype is None or str(dtype) == "float32":
        return 0
    if eqn.params.get("k", 0) >= shape[axis]:
        return 0
    return int(math.prod(shape)) * (int(dtype.itemsize) + 4)


#: How many equations after its last use an eager output is still held.
#: JAX dispatches ahead: Python runs on while an operation runs, and an
#: array it dropped is freed only once the operations reading it are done.
#: Measured with a counting malloc on JAX 0.10's CPU runtime: a chain of 4
#: to 300 elementwise operations (0.1 to 100 MB arrays) holds the array each
#: reads, its output and up to two arrays more; ``softmax + log_softmax *
#: gelu`` held 7 arrays of its input's size, where freeing at once counts 5
#: and holding one through the next equation 6 (1.17 times a 10 and a 100
#: MB budget).
HELD_THROUGH = 2


def _jaxpr_peak(jaxpr: Value, costs: EagerCosts = NO_COSTS) -> int:
    """The most bytes the equations' outputs hold at once, each freed after its last use.

    A freed output is held through the next `HELD_THROUGH` equations too
    (JAX's asynchronous dispatch: see there), and so is a kernel's scratch
    (`_scratch`; not the compiler's of a control-flow primitive, freed
    before its results are made): the next operations' results are made
    while it runs. With what ``costs`` adds.
    """
    array_bytes = costs.array_bytes

    def held(v: Value) -> int:
        return _bytes(v.aval) + array_bytes

    eqns = list(jaxpr.eqns)
    made = {id(v) for eqn in eqns for v in eqn.outvars}
    last: dict[int, int] = {}
    for step, eqn in enumerate(eqns):
        for v in eqn.invars:
            last[id(v)] = step
    for v in jaxpr.outvars:
        last[id(v)] = len(eqns)
    live = peak = 0
    pending = [0] * HELD_THROUGH  # what each of the last equations freed
    for step, eqn in enumerate(eqns):
        data = sum(_bytes(v.aval) for v in eqn.outvars)
        out = data + array_bytes * len(eqn.outvars)
        inner = max((_jaxpr_peak(j, costs) for j in _inner_jaxprs(eqn)), default=0)
        scratch = _scratch(eqn, data, costs)
        peak = max(peak, live + sum(pending) + max(out + scratch, inner))
        live += out
        freed = 0 if eqn.primitive.name in _COMPILE else scratch
        for v in (*eqn.invars, *eqn.outvars):
            if id(v) in made and last.get(id(v), step) == step:
                live -= held(v)
                freed += held(v)
                made.discard(id(v))
        pending = [*pending[1:], freed]
    return peak


def _largest_product(jaxpr: Value) -> int:
    """The bytes of the largest ``dot_general`` result in ``jaxpr`` and its inner ones."""
    products = (e for e in _all_equations(jaxpr) if e.primitive.name == "dot_general")
    return max((sum(_bytes(v.aval) for v in e.outvars) for e in products), default=0)


def _inner_jaxprs(eqn: Value) -> list[Value]:
    """The jaxprs an equation runs inside it (``jit``, ``custom_jvp_call``, ...)."""
    found = []
    for value in eqn.params.values():
        inner = getattr(value, "jaxpr", value)
        if hasattr(inner, "eqns") and hasattr(inner, "outvars"):
            found.append(inner)
    return found


class StatsPeak(PeakMeter):
    """A JAX GPU's ``peak_bytes_in_use``, where a run raised it (never reset)."""

    def __init__(self, device: Callable[[], NativeDevice]) -> None:
        self._device = device
        self.name = "memory_stats peak_bytes_in_use (where the run raised it)"

    def _measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        device = self._device()
        before = device.memory_stats() or {}
        result = run()
        after = device.memory_stats() or {}
        old, new = before.get("peak_bytes_in_use"), after.get("peak_bytes_in_use")
        if old is None or new is None or new <= old:
            return result, None  # the run stayed under an older peak: not seen
        return result, max(int(new) - int(before.get("bytes_in_use", 0)), 0)


class _Warmed(PeakMeter):
    """The host meter, for a library that compiles each new shape it meets.

    The probe runs each shape once unmeasured before it measures it
    (`PeakMeter.warm_up`), so that the compiler's memory is not counted.
    """

    warm_up = True

    def __init__(self, inner: PeakMeter) -> None:
        self._inner = inner
        self.name = f"{inner.name} (each shape run once first)"
        self.process_wide = inner.process_wide

    def _measure(self, run: Callable[[], T]) -> tuple[T, int | None]:
        return self._inner._measure(run)


_WARMED_HOST: list[PeakMeter | None] = []
if hasattr(os, "register_at_fork"):  # (a forked child's wraps its own host meter)
    os.register_at_fork(after_in_child=_WARMED_HOST.clear)


def warmed_host_meter() -> PeakMeter | None:
    """`host_meter`, each shape run once first (JAX on the CPU compiles per shape)."""
    if not _WARMED_HOST:
        inner = host_meter()
        _WARMED_HOST.append(None if inner is None else _Warmed(inner))
    return _WARMED_HOST[0]
