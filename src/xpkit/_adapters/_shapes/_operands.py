"""Operands of NumPy's functions on shape-only arrays: their trace, and as arrays.

A NumPy function reached through ``__array_function__`` may get shape-only
arrays beside lists, numbers and host arrays: `trace_of` finds the trace
from the first shape-only one; `operand` and `lifted` make an operand an
array of it (a host array or a list is one that exists already).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._trace import active_trace
from ._array import ShapeArray, lift

if TYPE_CHECKING:
    from ..._typing import Value
    from .._trace import Trace

__all__ = ["lifted", "operand", "trace_of"]


def trace_of(*values: Value) -> Trace:
    """The trace of the first shape-only array among ``values`` (else the running one)."""
    for v in values:
        if isinstance(v, ShapeArray):
            return v._trace
    return active_trace(*values)


def operand(trace: Trace, v: Value) -> ShapeArray:
    """``v`` as NumPy's ``asanyarray`` takes it: a shape-only array, or a given one."""
    if isinstance(v, ShapeArray):
        return v
    return lift(trace, np.asanyarray(v))  # (a list or a host array: there already)


def lifted(*values: Value) -> ShapeArray:
    """The first of ``values`` as an array of the trace of the first shape-only one."""
    return lift(trace_of(*values), values[0])
