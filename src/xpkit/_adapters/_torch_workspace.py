"""The workspace torch's CPU kernels hold within one operation, beside its result.

Neither meter sees it by what an operation returns: ``kthvalue`` sorts a
copy of its input with int64 indices of its whole shape, ``logsumexp`` holds
``exp(x - max)``, LAPACK's ``inv``, ``svd``, ``qr`` and ``lstsq`` work on a
copy of the matrix, ``pinv`` holds the SVD it is made from, ``matrix_exp``
holds ten of its input in powers, ``det`` its diagonal and pivots' parity
beside its LU, ``count_nonzero`` a bool mask and its int64 cast,
``softmax`` a contiguous copy of a strided input, ``mm`` copies an operand
BLAS cannot read as it lies (``x[:, ::2] @ w``), a convolution packs its
channels into oneDNN's blocks (float32) or unfolds its patches (other
dtypes). `workspace_bytes`
gives it for an aten operation (its overload packet's name) from its
operands and results; the dispatch meter
adds it to the live bytes while the operation runs (`DispatchPeak`), and the
shape-only trace where it follows the same operation (``abs`` of a complex
array).

Each rule was measured on torch 2.13's CPU build, one thread, with a
counting malloc (every block torch allocates during the call, less what the
results hold); operations whose measured workspace was within a few percent
of their results (``sort``, ``topk``, ``median`` along a dim, ``softmax``
of a contiguous input,
``cumsum``, ``var``, ``eigh``, ``cholesky``, ``solve``, the FFTs) have none.
A CUDA kernel's workspace is another (cuSOLVER's, cuBLAS's): this table is
the CPU's only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from .._typing import Value

__all__ = [
    "Operand",
    "has_workspace",
    "shape_workspace",
    "tensor_operand",
    "workspace_bytes",
]


class Operand(NamedTuple):
    """What a workspace rule reads of a tensor: shape, item size, kind, layouts.

    ``kind``: ``"b"`` bool, ``"i"`` integer, ``"f"`` floating, ``"c"``
    complex. ``blas``: a matrix BLAS reads as it lies (one of its last two
    axes has unit stride, the other a stride at least its row's length);
    True for any other array. ``contiguous``: laid out in C order (a
    shape-only array's layout is not known here: True).
    """

    shape: tuple[int, ...]
    itemsize: int
    kind: str
    blas: bool = True
    contiguous: bool = True

    @property
    def numel(self) -> int:
        """How many elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of its elements."""
        return self.numel * self.itemsize

    def matrices(self) -> int:
        """How many matrices its last two axes hold."""
        return math.prod(self.shape[:-2])


Rule = Callable[[Sequence[Operand], Sequence[Operand], Mapping[str, object]], int]

#: Bytes of an int64 index, and of LAPACK's int32 pivots and infos.
_INDEX = 8
_PIVOT = 4


def _kthvalue(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """A copy of the input, partitioned, and int64 indices of its whole shape."""
    x = ins[0]
    return x.numel * (x.itemsize + _INDEX)


def _median_all(
    ins: Sequence[Operand], outs: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """``median(x)`` without a dim (one result) partitions a copy of ``x``."""
    return ins[0].nbytes if len(outs) == 1 else 0  # (along a dim: none)


def _logsumexp(
    ins: Sequence[Operand], outs: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """``exp(x - max)`` in the result's dtype (and ``x`` cast to it first), the max."""
    x, out = ins[0], outs[0]
    cast = (x.kind, x.itemsize) != (out.kind, out.itemsize)
    return x.numel * out.itemsize * (2 if cast else 1) + out.nbytes


def _inv(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """LU of a copy of ``A`` (the result starts as the identity), pivots, infos."""
    a = ins[0]
    k = a.shape[-1] if a.shape else 1
    return a.nbytes + a.matrices() * (k + 1) * _PIVOT


def _svd(
    ins: Sequence[Operand], _o: Sequence[Operand], kw: Mapping[str, object]
) -> int:
    """A copy of ``A`` that LAPACK's ``gesdd`` overwrites, where U and Vh are made."""
    return ins[0].nbytes if kw.get("compute_uv", True) else 0


def _qr(ins: Sequence[Operand], _o: Sequence[Operand], kw: Mapping[str, object]) -> int:
    """``tau``; a reduced tall Q's R made apart; mode "r": the factored copy too."""
    a = ins[0]
    m, n = a.shape[-2:]
    mode = kw.get("mode", "reduced")
    tau = a.matrices() * min(m, n) * a.itemsize
    r = a.matrices() * n * n * a.itemsize if m > n and mode != "complete" else 0
    return tau + r + (a.nbytes if mode == "r" else 0)


def _lstsq(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """A copy of ``A`` that LAPACK's least squares overwrites."""
    return ins[0].nbytes


def _matrix_exp(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """Its Taylor polynomial's powers and products, ten of the input's size.

    Measured 10.0-10.3 times the input beside the result (float32 to
    complex128, 4 x 4 to 32 x 32 matrices, norms 0.01 to 100): the batch's
    matrices all go through one degree; about 64 bytes a matrix besides.
    """
    a = ins[0]
    return 10 * a.nbytes + 64 * a.matrices()


def _euclidean_dist(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """``cdist``'s matmul path: each operand with its squared norms and ones beside."""
    return sum(t.numel // t.shape[-1] * (t.shape[-1] + 2) * t.itemsize for t in ins)


def _to_real(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """``abs``/``angle`` of a complex tensor compute a complex result, then its real part."""
    x = ins[0]
    return x.nbytes if x.kind == "c" else 0


def _unique(
    ins: Sequence[Operand], outs: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """A sorted copy, its int64 order and inverse; integers another copy.

    A float's inverse, where asked for, is made beside those. What the
    results hold is within it (counted apart): the rest.
    """
    x = ins[0]
    if x.kind == "b":
        return 0  # (bools are counted, not sorted)
    per = x.itemsize * (2 if x.kind == "i" else 1) + 2 * _INDEX
    if x.kind != "i" and len(outs) > 1 and outs[1].numel == x.numel:
        per += _INDEX
    return max(0, x.numel * per - sum(t.nbytes for t in outs))


def _count_nonzero(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """``x != 0`` (bool), then summed as int64: cast whole first (70x a budget uncounted)."""
    return ins[0].numel * (1 + _INDEX)


def _contiguous(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """A contiguous copy of a strided input (``softmax`` of ``x.mT``: 2x uncounted)."""
    return 0 if ins[0].contiguous else ins[0].nbytes


def _pinv(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """The reduced SVD ``linalg_pinv`` is made from, inside it: U, S, Vh, a copy.

    (The copy is what ``gesdd`` overwrites; uncounted, a batch of 4x3
    matrices held 4 times its result.)
    """
    a = ins[0]
    if len(a.shape) < 2:
        return 0
    m, n = a.shape[-2:]
    k = min(m, n)
    return a.matrices() * (m * k + k + k * n + m * n) * a.itemsize


def _det(
    ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
) -> int:
    """Beside the LU and pivots ``_linalg_det`` returns: 8 bytes an order, 24 a matrix.

    The diagonal, the pivots' parity, LAPACK's info; measured at orders
    2-16 (a batch of 2x2 determinants held 1.78 times its budget uncounted).
    """
    a = ins[0]
    return a.matrices() * (8 * (a.shape[-1] if a.shape else 1) + 24)


def _copies(first: int) -> Rule:
    """Each matrix operand from ``first`` on that BLAS cannot read is copied whole."""

    def rule(
        ins: Sequence[Operand], _o: Sequence[Operand], _kw: Mapping[str, object]
    ) -> int:
        return sum(t.nbytes for t in ins[first:] if len(t.shape) == 2 and not t.blas)

    return rule


@functools.cache
def _channel_block() -> int:
    """Channels oneDNN packs into a block on this CPU: 8 (AVX2), 16 (AVX-512)."""
    import torch  # (torch is imported: an aten operation ran)

    capability = str(torch.backends.cpu.get_cpu_capability())
    return 8 if capability in ("DEFAULT", "AVX2", "ZVECTOR", "VSX") else 16


def _ints(value: object, rank: int, default: int) -> tuple[int, ...]:
    """A convolution's ``stride``/``padding``/``dilation`` option, one per axis."""
    if isinstance(value, int):
        return (value,) * rank
    if isinstance(value, (list, tuple)) and value:
        return tuple(int(v) for v in value)
    return (default,) * rank


def _convolution(
    ins: Sequence[Operand], outs: Sequence[Operand], kw: Mapping[str, object]
) -> int:
    """The packed copies oneDNN makes (float32), else im2col's columns.

    float32 goes to oneDNN where torch sends it (a batch of more than one
    item, grouped, or large): it computes into a result of its own with the
    output channels padded to a block (8 on AVX2, 16 on AVX-512) and copies
    that into torch's, and packs the input into blocks of channels first
    where the kernel needs them (at least a block of input channels per
    group, a 1x1 kernel, depthwise); the packed input is freed before
    torch's result is made. Other dtypes unfold every item's patches at once
    (``(N, C/g * prod(kernel), prod(output))``; one item at a time where
    dilated; none for a 1x1 kernel of stride 1 and no padding), each group
    apart from a contiguous copy of its input channels. A transposed
    convolution (`_transposed`) takes other paths.
    """
    x, w, out = ins[0], ins[1], outs[0]
    rank = len(x.shape) - 2
    if rank < 1 or len(w.shape) != rank + 2:
        return 0
    groups = max(_ints(kw.get("groups"), 1, 1)[0], 1)
    transposed = bool(kw.get("transposed"))
    n, ci = x.shape[0], x.shape[1]
    co = w.shape[1] * groups if transposed else w.shape[0]
    kernel = w.shape[2:]
    space_in, space_out = math.prod(x.shape[2:]), math.prod(out.shape[2:])
    big_kernel = rank >= 2 and min(kernel[-2:]) > 3
    one_dnn = (x.kind, x.itemsize) == ("f", 4) and (
        groups > 1 or n > 1 or big_kernel or x.numel > 20480
    )
    depthwise = groups > 1 and groups == ci
    if transposed and not (one_dnn and depthwise):
        return _transposed(x, w, out, kw, one_dnn)
    if one_dnn:
        block = _channel_block()
        padded = -(-co // block) * block
        result = n * padded * space_out * x.itemsize
        # (a transposed convolution packs its input always: measured)
        packed = transposed or depthwise or ci // groups >= block
        packed = packed or all(k == 1 for k in kernel)
        src = n * -(-ci // block) * block * space_in * x.itemsize if packed else 0
        return result + max(src - out.nbytes, 0)
    per_group = ci // groups
    ones = all(k == 1 for k in kernel)
    plain = ones and set(_ints(kw.get("stride"), rank, 1)) == {1}
    plain = plain and set(_ints(kw.get("padding"), rank, 0)) == {0}
    columns = 0 if plain else per_group * math.prod(kernel) * space_out * x.itemsize
    if set(_ints(kw.get("dilation"), rank, 1)) == {1}:
        columns *= n  # (undilated: every item's at once)
    if groups == 1:
        return columns
    return max(n * per_group * space_in * x.itemsize + columns, out.nbytes)


def _transposed(
    x: Operand, w: Operand, out: Operand, kw: Mapping[str, object], one_dnn: bool
) -> int:
    """A transposed convolution's workspace, but oneDNN's depthwise one.

    float32 on oneDNN (measured on AVX2 and AVX-512, 1-3-d): with a stride
    above 1, the larger of the input packed (its size) and a result of its
    own held twice (once for one output channel), where ungrouped or with
    more than a block of input channels per group; else, and where dilated,
    one result of its own; at stride 1, ungrouped, the output channels
    padded to a block and the input packed into blocks, always.
    Other dtypes hold col2im's columns, ``(N, Co/g * prod(kernel),
    prod(input))`` (3-d: one item's at a time), grouped beside a copy of a
    group's input channels, or a result of its own where that is larger.
    """
    rank = len(x.shape) - 2
    groups = max(_ints(kw.get("groups"), 1, 1)[0], 1)
    n, space_in = x.shape[0], math.prod(x.shape[2:])
    ci = x.shape[1] // groups
    if one_dnn:
        strided = set(_ints(kw.get("stride"), rank, 1)) != {1}
        dilated = set(_ints(kw.get("dilation"), rank, 1)) != {1}
        block = _channel_block()
        if (dilated and strided) or (groups > 1 and not (strided and ci > block)):
            return out.nbytes
        if strided:
            return max(out.nbytes * (2 if out.shape[1] > 1 else 1), x.nbytes)
        result = n * -(-out.shape[1] // block) * block * math.prod(out.shape[2:])
        src = n * -(-x.shape[1] // block) * block * space_in
        return (result + max(src - out.numel, 0)) * x.itemsize
    columns = w.shape[1] * math.prod(w.shape[2:]) * space_in * x.itemsize
    columns *= 1 if rank >= 3 else n
    if groups == 1:
        return columns
    return max(x.nbytes // groups + columns, out.nbytes)


#: aten operation (overload packet) -> its workspace's bytes.
_RULES: dict[str, Rule] = {
    "kthvalue": _kthvalue,
    "median": _median_all,
    "nanmedian": _median_all,
    "logsumexp": _logsumexp,
    "linalg_inv_ex": _inv,
    "_linalg_det": _det,
    "linalg_pinv": _pinv,
    "_linalg_slogdet": _det,
    "_linalg_svd": _svd,
    "linalg_qr": _qr,
    "linalg_lstsq": _lstsq,
    "linalg_matrix_exp": _matrix_exp,
    "_euclidean_dist": _euclidean_dist,
    "abs": _to_real,
    "angle": _to_real,
    "_unique2": _unique,
    "count_nonzero": _count_nonzero,
    "_softmax": _contiguous,
    "_log_softmax": _contiguous,
    "mm": _copies(0),
    "mv": _copies(0),
    "addmm": _copies(1),
    "addmv": _copies(1),
    "convolution": _convolution,
}


def has_workspace(name: str) -> bool:
    """Whether aten operation ``name`` has a workspace rule."""
    return name in _RULES


def workspace_bytes(
    name: str,
    inputs: Sequence[Operand],
    outputs: Sequence[Operand],
    options: Mapping[str, object],
) -> int:
    """Bytes aten operation ``name`` holds beside its results while it runs (CPU).

    ``options``: its non-tensor arguments by name (``mode``, ``compute_uv``).
    """
    rule = _RULES.get(name)
    if rule is None or not inputs or not outputs:
        return 0
    return rule(inputs, outputs, options)


def _blas_ready(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a matrix of ``shape`` and ``strides`` is handed to BLAS uncopied."""
    if len(shape) != 2:
        return True
    (rows, cols), (down, across) = shape, strides
    row_major = (across == 1 or cols == 1) and down >= max(1, cols)
    column_major = (down == 1 or rows == 1) and across >= max(1, rows)
    return row_major or column_major


def tensor_operand(t: Value) -> Operand:
    """A tensor's `Operand`."""
    dtype = t.dtype
    kind = (
        "c"
        if dtype.is_complex
        else "f"
        if dtype.is_floating_point
        else "b"
        if str(dtype) == "torch.bool"
        else "i"
    )
    shape = tuple(t.shape)
    strides = t.stride()
    return Operand(
        shape, dtype.itemsize, kind, _blas_ready(shape, strides), t.is_contiguous()
    )


def _named(shape: tuple[int, ...], name: str) -> Operand:
    """The `Operand` of a shape-only array: its dtype by name, its layout unknown."""
    dtype = np.dtype(name)
    kind = {"u": "i", "b": "b", "c": "c"}.get(dtype.kind, dtype.kind)
    return Operand(shape, dtype.itemsize, kind)


def shape_workspace(
    name: str,
    inputs: tuple[tuple[tuple[int, ...], str], ...],
    outputs: tuple[tuple[tuple[int, ...], str], ...],
    options: Mapping[str, object],
) -> int:
    """`workspace_bytes` for the shape-only trace: operands by shape and dtype name."""
    if not has_workspace(name):
        return 0
    try:
        ins = [_named(*x) for x in inputs]
        outs = [_named(*x) for x in outputs]
    except TypeError:
        return 0  # (a dtype NumPy lacks, bfloat16: none measured)
    return workspace_bytes(name, ins, outs, options)
