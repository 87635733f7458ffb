"""The structure of what ``fn`` returned, or of what ``out`` is, in words too.

`xpkit._rows.ResultSpec` describes the structure of ``fn``'s result: a
tuple's or a list's is its type's name and its length, and a named tuple's
holds its class (`NamedTupleKind`), so that the outputs are given back as
one. Both ``fn``'s results (`xpkit._rows`) and ``out`` (`xpkit._into`)
are described here, and named in errors (`describe_spec`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ._rows import ResultSpec

__all__ = ["NamedTupleKind", "describe_spec", "rebuilt", "sequence_spec"]


class NamedTupleKind:
    """A named tuple's class in a spec, equal to any class of its name and fields.

    A ``fn`` that makes its class on each call returns a new class each
    batch: the same structure. ``make`` builds one from its fields in
    order (``_make``: a subclass's own ``__new__`` is not called).
    """

    __slots__ = ("cls",)

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def _identity(self) -> tuple[str, tuple[str, ...]]:
        return self.cls.__qualname__, tuple(getattr(self.cls, "_fields", ()))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, NamedTupleKind) and self._identity() == other._identity()
        )

    def __hash__(self) -> int:
        return hash(self._identity())

    def make(self, leaves: Sequence[object]) -> tuple[object, ...]:
        """A named tuple of this class holding ``leaves``."""
        made: tuple[object, ...] = self.cls._make(leaves)  # type: ignore[attr-defined]
        return made


def _is_named(result: object) -> bool:
    """A named tuple (``_fields`` and ``_make``, as ``collections.namedtuple`` makes)."""
    return hasattr(result, "_fields") and callable(getattr(result, "_make", None))


def sequence_spec(result: tuple[object, ...] | list[object]) -> ResultSpec:
    """The `ResultSpec` of a tuple or list (a named tuple's holds its class)."""
    if _is_named(result):
        return ("namedtuple", len(result), NamedTupleKind(type(result)))
    return (type(result).__name__, len(result))


def rebuilt(
    result: tuple[object, ...] | list[object], items: list[object]
) -> tuple[object, ...] | list[object]:
    """``items`` in a sequence of ``result``'s type (a named tuple's from its fields)."""
    if _is_named(result):
        return NamedTupleKind(type(result)).make(items)
    try:
        return type(result)(items)
    except TypeError:  # (a subclass whose constructor takes other arguments)
        pass
    if isinstance(result, tuple):  # (its type kept: the spec names it)
        made: tuple[object, ...] = tuple.__new__(type(result), items)
        return made
    kept: list[object] = list.__new__(type(result))
    kept.extend(items)
    return kept


def describe_spec(spec: ResultSpec) -> str:
    """``spec`` in words, for an error: "one array", "a tuple of 2 arrays", ..."""
    if spec[0] == "array":
        return "one array"
    if spec[0] == "dict":
        return f"a dict with keys {list(spec[1])}"
    if spec[0] == "namedtuple":
        cls = spec[2].cls
        return f"a named tuple {cls.__name__}{tuple(cls._fields)} of {spec[1]} arrays"
    return f"a {spec[0]} of {spec[1]} arrays"
