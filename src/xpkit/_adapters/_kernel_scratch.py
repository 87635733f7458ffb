"""What a kernel holds while it runs beside its result: one rule each, for every trace.

The shape-only trace (`xpkit._adapters._shapes`) and JAX's own traces
(`xpkit._adapters._jax_memory`) count the same kernels; the figures are
the library's, given by its adapter (`Profile` traits, `EagerCosts`).
"""

from __future__ import annotations

__all__ = ["cumulative_scratch", "packed_operands", "sort_scratch"]


def packed_operands(lhs: int, rhs: int, cap: int) -> int:
    """The blocks a matrix product packs its operands into while it runs.

    The right-hand operand's bytes and as many of the left's, up to
    ``cap`` (Eigen's blocks on JAX's CPU; 0: none). ``x @ w`` of a (64, 8)
    ``w`` was counted at 7.3 times its true peak where both operands
    counted whole, ``x @ v`` of a vector at 32.
    """
    return min(rhs + min(lhs, rhs), cap)


def sort_scratch(scratch: tuple[int, int], length: int, operands: int) -> int:
    """A sort's scratch while it runs, whatever the rows.

    ``scratch``: bytes an element of a row of each operand it sorts, and
    bytes more (XLA's CPU runtime: 16 and 5,120; 0 and 0: none);
    ``length``: a row's elements.
    """
    per_element, per_call = scratch
    return per_element * length * operands + per_call if per_call else 0


def cumulative_scratch(result: int, length: int, block: int) -> int:
    """A cumulative sum's or product's scratch along ``length`` elements.

    Along more than ``block`` elements (XLA's CPU loop: 16; 0: none), two
    times its ``result`` bytes, the axis padded to a multiple of ``block``.
    """
    if not block or length <= block:
        return 0
    return 2 * result * (-(-length // block) * block) // length
