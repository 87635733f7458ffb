"""The spec of a tuple or list that ``fn`` returned, or that ``out`` is.

`xpkit._rows.ResultSpec` describes the structure of ``fn``'s result; a
tuple's or a list's is its type's name and its length, and a named tuple's
holds its class, so that the outputs are given back as one. Both ``fn``'s
results (`xpkit._rows`) and ``out`` (`xpkit._into`) are described here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._rows import ResultSpec

__all__ = ["sequence_spec"]


def sequence_spec(result: tuple[object, ...] | list[object]) -> ResultSpec:
    """The `ResultSpec` of a tuple or list (a named tuple's holds its class)."""
    if hasattr(result, "_fields"):  # (given back as one)
        return ("namedtuple", len(result), type(result))
    return (type(result).__name__, len(result))
