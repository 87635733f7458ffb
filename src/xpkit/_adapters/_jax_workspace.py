"""What JAX's CPU programs hold within one standard function, beside its result.

Each ``jax.numpy`` function runs as one compiled XLA program, and some hold
more than their result while they run. The shape-only trace asks this
table for it (`Profile.workspace`) by the standard's name of the function,
its operands and results as ``(shape, dtype name)``, and its options.

Each rule was measured on JAX's CPU build with a counting malloc (the most
one call held, less its input, in a child process; 250 to 16,000 rows of
64, float32 and float64, 64-bit types on and off; the tests,
``tests/adapters/test_jax_workspace.py``, at 1,000 rows of float64 with
64-bit types on):

- ``searchsorted``: three index arrays (its scan's bounds) and two of the
  values it places, one in their dtype and one in the default float,
  beside the indices (it held 8 times its result, counted 1);
- ``count_nonzero``: the input cast whole to the default integer before its
  sum (8.3 bytes an element of the input with 64-bit integers, of a bool
  or a float input: the comparison with zero is fused into the cast);
- a descending ``sort``: the ascending sort, then reversed into a copy;
  an unstable descending ``argsort``: the indices reversed into a copy;
- ``repeat`` along an axis: the broadcast, then its reshape, a copy;
- ``argmax`` and ``argmin``: the extreme values beside their indices (one
  reduction of both); ``prod``: two arrays of its result; ``mean``: the
  sum beside the quotient;
- ``linalg.svdvals``: two copies of its input (LAPACK's, beside the
  working copy every decomposition holds; a full ``svd`` holds none more);
- every reduction (``count_nonzero`` too): `REDUCE_BYTES` of XLA's CPU
  runtime, whatever its size; ``take`` along an axis: `GATHER_BYTES`.

A GPU's programs are others: this table is the CPU's only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["GATHER_BYTES", "REDUCE_BYTES", "cpu_workspace"]

#: One operand: its shape and its dtype's standard name.
Operand = tuple[tuple[int, ...], str]
Rule = Callable[[tuple[Operand, ...], tuple[Operand, ...], Mapping[str, object]], int]

#: Bytes XLA's CPU runtime holds while a reduction runs, whatever its size
#: (along rows of 64: 8 kB at 250 rows, 10.9-11.1 kB from 1,000 to 16,000;
#: a sum of all 10-14 kB).
REDUCE_BYTES = 11_264
#: Bytes XLA's CPU runtime holds while ``take`` along an axis runs, whatever
#: its size (3.2 kB at 250 rows, 5.0 kB from 1,000 to 4,000).
GATHER_BYTES = 5_120


def _itemsize(name: str) -> int:
    try:
        return int(np.dtype(name).itemsize)
    except TypeError:  # bfloat16 where ml_dtypes has not registered it
        return 2


def _size(operand: Operand) -> int:
    return math.prod(operand[0])


def _nbytes(operand: Operand) -> int:
    return _size(operand) * _itemsize(operand[1])


def _searchsorted(
    inputs: tuple[Operand, ...],
    outputs: tuple[Operand, ...],
    options: Mapping[str, object],
) -> int:
    values, (indices,) = inputs[-1], outputs
    wide = _itemsize(str(options["default_float"]))
    return _size(values) * (3 * _itemsize(indices[1]) + _itemsize(values[1]) + wide)


def _count_nonzero(
    inputs: tuple[Operand, ...], outputs: tuple[Operand, ...], _: Mapping[str, object]
) -> int:
    return _size(inputs[0]) * _itemsize(outputs[0][1]) + REDUCE_BYTES


def _sort(
    _: tuple[Operand, ...], outputs: tuple[Operand, ...], options: Mapping[str, object]
) -> int:
    return _nbytes(outputs[0]) if options.get("descending") else 0


def _argsort(
    _: tuple[Operand, ...], outputs: tuple[Operand, ...], options: Mapping[str, object]
) -> int:
    unstable = options.get("stable") is False
    return _nbytes(outputs[0]) if options.get("descending") and unstable else 0


def _result_copies(copies: int, values: bool = False) -> Rule:
    """A reduction's rule: ``copies`` arrays of its result, and `REDUCE_BYTES`.

    ``values``: the copies are in the input's dtype (the extreme values
    beside their indices).
    """

    def rule(
        inputs: tuple[Operand, ...],
        outputs: tuple[Operand, ...],
        _: Mapping[str, object],
    ) -> int:
        (shape, name) = outputs[0]
        if values:
            name = inputs[0][1]
        return copies * math.prod(shape) * _itemsize(name) + REDUCE_BYTES

    return rule


def _fixed(nbytes: int) -> Rule:
    """A rule: ``nbytes``, whatever the operands."""

    def rule(
        _: tuple[Operand, ...], __: tuple[Operand, ...], ___: Mapping[str, object]
    ) -> int:
        return nbytes

    return rule


def _input_copies(copies: int) -> Rule:
    """A rule: ``copies`` arrays of the first input's bytes."""

    def rule(
        inputs: tuple[Operand, ...], _: tuple[Operand, ...], __: Mapping[str, object]
    ) -> int:
        return copies * _nbytes(inputs[0])

    return rule


def _repeat(
    _: tuple[Operand, ...], outputs: tuple[Operand, ...], __: Mapping[str, object]
) -> int:
    return _nbytes(outputs[0])


_RULES: dict[str, Rule] = {
    "searchsorted": _searchsorted,
    "count_nonzero": _count_nonzero,
    "sort": _sort,
    "argsort": _argsort,
    "repeat": _repeat,
    "take": _fixed(GATHER_BYTES),
    "svdvals": _input_copies(2),
    "argmax": _result_copies(1, values=True),
    "argmin": _result_copies(1, values=True),
    "prod": _result_copies(2),
    "mean": _result_copies(1),
    "sum": _result_copies(0),
    "max": _result_copies(0),
    "min": _result_copies(0),
    "any": _result_copies(0),
    "all": _result_copies(0),
}


def cpu_workspace(
    func: str,
    inputs: tuple[Operand, ...],
    outputs: tuple[Operand, ...],
    options: Mapping[str, object],
    *,
    default_float: str,
) -> int:
    """Bytes the standard function ``func`` holds beside its results on JAX's CPU.

    ``default_float``: JAX's (float64 with 64-bit types, else float32).
    """
    rule = _RULES.get(func)
    if rule is None or not inputs or not outputs:
        return 0
    return rule(inputs, outputs, {**options, "default_float": default_float})
